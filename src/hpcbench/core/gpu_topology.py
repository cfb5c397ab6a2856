"""The GPU topology of a node, from `nvidia-smi topo -m`: how each pair of GPUs is linked
(a bonded set of NVLinks, `NV18`, or a PCIe path: `PIX`, `PXB`, `PHB`, `NODE`, `SYS`), the
CPUs and NUMA node next to each GPU, and the network cards (NICs) next to each GPU.

- `parse(text)` reads the matrix as nvidia-smi prints it (tab-separated, its header
  underlined by terminal escapes) or as it is usually published (columns aligned with
  spaces); `detect()` asks the node's nvidia-smi and finds none where there is no such tool.
- `Topology.to_description()` is what a partition's description keeps (`accelerators.
  topology`), `from_description` reads it back.
- `pair_bandwidth` is the rate a link carries each way, from the GPU's datasheet
  (hpcbench.core.accelerators.Datasheet: its NVLink generation and links, its host link).
- `misplaced` names a rank that runs on CPUs not next to its GPU.

Standard library only: the rank wrapper's placement runs on compute nodes too.
"""
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from hpcbench.core.accelerators import TOOL_TIMEOUT_SECONDS

# What nvidia-smi's legend says of each path between two devices, best first. `SOC` is what
# drivers before 384 called `SYS`.
PCIE_PATHS = {
    'PIX': 'at most a single PCIe bridge',
    'PXB': 'multiple PCIe bridges, without the PCIe host bridge',
    'PHB': 'PCIe and a PCIe host bridge (the CPU)',
    'NODE': 'PCIe and the interconnect between PCIe host bridges within a NUMA node',
    'SYS': 'PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, xGMI)',
    'SOC': 'PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, xGMI)',
}
_NVLINK = re.compile(r'NV([0-9]{1,3})$')
_ESCAPE = re.compile(r'\x1b\[[0-9;]*m')
# A list of CPUs as Linux and nvidia-smi print it: ASCII numbers and ranges, comma-separated
# (Python's \d and int() take other scripts' digits too). It reaches every GPU job (the
# ranks' placement, exported unquoted): nothing else is one.
CPU_LIST = r'^[0-9]{1,5}(?:-[0-9]{1,5})?(?:,[0-9]{1,5}(?:-[0-9]{1,5})?)*$'
_CPUS = re.compile(CPU_LIST)
# The bounds a description's topology is held to (a node's GPUs and CPUs; Slurm's GRES and
# node counts are held to the same: hpcbench.machine.slurm_query).
MAX_GPUS = 64
MAX_CPUS = 65536
# A CPU list's and a matrix line's length: a 512-CPU node listed one CPU at a time is 2 KB;
# thousands of ranges on one line cost seconds to minutes (issue 70).
MAX_CPU_LIST = 4096
MAX_LINE = 65536
MAX_NICS = 64
# The columns after the devices' (nvidia-smi 450 and later print the last two).
_AFFINITY = ('CPU Affinity', 'NUMA Affinity', 'GPU NUMA ID')


class TopologyError(ValueError):
    pass


@dataclass(frozen=True)
class GpuPlace:
    """A GPU and what is next to it."""
    index: int
    cpus: str = ''              # as nvidia-smi prints them: '0-55,112-167'; '' not known
    numa: int = None            # its NUMA node; None not known

    def cpu_set(self):
        return cpu_set(self.cpus)


@dataclass(frozen=True)
class Topology:
    gpus: tuple                 # GpuPlace, in index order
    links: tuple                # links[i][j]: the path between GPU i and GPU j ('X' on i == j)
    nics: dict = field(default_factory=dict)   # {NIC name: (its path to GPU 0, 1, ...)}

    def link(self, first, second):
        return self.links[first][second]

    def link_rates(self, sheet, pairs=None):
        """{(i, j): (bytes/s each way, what)} of the links between the GPUs of `pairs`
        (default: every pair, i < j) from their datasheet (pair_bandwidth)."""
        if pairs is None:
            pairs = [(i, j) for i in range(len(self.links)) for j in range(i + 1,
                                                                            len(self.links))]
        return {(i, j): pair_bandwidth(self.link(i, j), sheet) for i, j in pairs if i != j}

    def to_description(self):
        return {'gpus': [{'index': g.index, 'cpus': g.cpus, 'numa': g.numa}
                         for g in self.gpus],
                'links': [list(row) for row in self.links],
                **({'nics': {name: list(paths) for name, paths in self.nics.items()}}
                   if self.nics else {})}


def from_description(described):
    """The Topology a description kept (to_description); None for none."""
    if not described:
        return None
    return Topology(tuple(GpuPlace(g['index'], g.get('cpus') or '', g.get('numa'))
                          for g in described['gpus']),
                    tuple(tuple(row) for row in described['links']),
                    {name: tuple(paths) for name, paths in described.get('nics', {}).items()})


# What the description's schema accepts (hpcbench.machine.description).
SCHEMA = {
    'type': 'object', 'required': ['gpus', 'links'],
    'properties': {
        'gpus': {'type': 'array', 'minItems': 1, 'maxItems': MAX_GPUS, 'items': {
            'type': 'object', 'required': ['index'],
            'properties': {'index': {'type': 'integer', 'minimum': 0,
                                     'maximum': MAX_GPUS - 1},
                           # '' where nvidia-smi did not say
                           'cpus': {'type': 'string', 'maxLength': 4096,
                                    'pattern': f'{CPU_LIST}|^$'},
                           'numa': {'type': ['integer', 'null'], 'minimum': 0,
                                    'maximum': MAX_CPUS - 1}},
            'additionalProperties': False}},
        'links': {'type': 'array', 'maxItems': MAX_GPUS, 'items': {
            'type': 'array', 'maxItems': MAX_GPUS, 'items': {
                'type': 'string', 'pattern': r'^(X|NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$'}}},
        'nics': {'type': 'object', 'maxProperties': MAX_NICS, 'additionalProperties': {
            'type': 'array', 'maxItems': MAX_GPUS, 'items': {
                'type': 'string', 'pattern': r'^(NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$'}}},
    },
    'additionalProperties': False,
}


def cpu_set(cpus):
    """The CPUs of a list as Linux and nvidia-smi print them ('0-3,8'), as a set;
    TopologyError for one that is none or names a CPU beyond MAX_CPUS."""
    if cpus and (len(cpus) > MAX_CPU_LIST or not _CPUS.fullmatch(cpus)):
        raise TopologyError(f'{cpus[:80]!r} is no list of CPUs' + (
            f' ({len(cpus)} characters, more than {MAX_CPU_LIST})'
            if len(cpus) > MAX_CPU_LIST else ''))
    found, listed = set(), 0
    for part in filter(None, (cpus or '').split(',')):
        first, _, last = part.partition('-')
        if int(last or first) >= MAX_CPUS:
            raise TopologyError(f'{cpus[:80]!r} names CPUs beyond {MAX_CPUS}')
        listed += max(0, int(last or first) - int(first) + 1)
        if listed > MAX_CPUS:
            raise TopologyError(f'{cpus[:80]!r} lists more than {MAX_CPUS} CPUs')
        found.update(range(int(first), int(last or first) + 1))
    return found


def _path(cell, where):
    value = cell.strip()
    if value == 'X' or value in PCIE_PATHS or _NVLINK.fullmatch(value):
        return value
    raise TopologyError(f'nvidia-smi topo -m: {where}: {value!r} is no path nvidia-smi names '
                        f'(X, NV#, {", ".join(PCIE_PATHS)})')


def _cells(line, tabs):
    if tabs:
        return [cell.strip() for cell in line.split('\t')]
    return line.split()


def parse(text):
    """The Topology of `nvidia-smi topo -m`'s output; TopologyError naming what is wrong:
    no matrix, a row missing or short, a path nvidia-smi does not name, a matrix that is
    not symmetric, a CPU list that is none."""
    long = next((n for n, line in enumerate((text or '').splitlines(), 1)
                 if len(line) > MAX_LINE), None)
    if long:
        raise TopologyError(f'nvidia-smi topo -m: line {long} is more than {MAX_LINE} '
                            'characters: no matrix nvidia-smi prints')
    lines = [_ESCAPE.sub('', line).rstrip('\n') for line in (text or '').splitlines()]
    header_at = next((n for n, line in enumerate(lines)
                      if re.match(r'\s*GPU0\b', line) and not re.match(r'GPU0\s', line)), None)
    if header_at is None:
        raise TopologyError('nvidia-smi topo -m: no matrix (no header line naming GPU0)')
    header = lines[header_at]
    tabs = '\t' in header
    if tabs:
        columns = [c.strip() for c in header.split('\t') if c.strip()]
    else:
        columns = re.split(r'\s{2,}', header.strip())
    devices = [c for c in columns if c not in _AFFINITY]
    affinity = [c for c in columns if c in _AFFINITY]
    if len(devices) > MAX_GPUS + MAX_NICS:
        raise TopologyError(f'nvidia-smi topo -m: {len(devices)} devices, more than a node has '
                            f'({MAX_GPUS} GPUs and {MAX_NICS} NICs at most)')
    rows = {}
    for line in lines[header_at + 1:]:
        if not line.strip() or line.startswith('Legend'):
            break
        cells = _cells(line, tabs)
        name = cells[0]
        if name not in devices:
            raise TopologyError(f'nvidia-smi topo -m: a row {name!r} of no column of the '
                                f'header ({", ".join(devices)})')
        if len(cells) < 1 + len(devices):
            raise TopologyError(f'nvidia-smi topo -m: {name} has {len(cells) - 1} paths, the '
                                f'header {len(devices)} devices')
        paths = [_path(cell, f'{name} to {other}')
                 for cell, other in zip(cells[1:1 + len(devices)], devices)]
        rest = [c for c in cells[1 + len(devices):]]
        rows[name] = (paths, rest)
    gpus = [d for d in devices if re.fullmatch(r'GPU\d+', d)]
    if len(gpus) > MAX_GPUS:
        raise TopologyError(f'nvidia-smi topo -m: {len(gpus)} GPUs, more than {MAX_GPUS}')
    missing = [d for d in devices if d not in rows]
    if missing:
        raise TopologyError(f'nvidia-smi topo -m: no row of {", ".join(missing)}')
    if [int(g[3:]) for g in gpus] != list(range(len(gpus))):
        raise TopologyError(f'nvidia-smi topo -m: GPUs {", ".join(gpus)} are not 0 to '
                            f'{len(gpus) - 1}')
    nics = [d for d in devices if d not in gpus]
    places, links = [], []
    for index, gpu in enumerate(gpus):
        paths, rest = rows[gpu]
        if paths[devices.index(gpu)] != 'X':
            raise TopologyError(f'nvidia-smi topo -m: {gpu} to itself is '
                                f'{paths[devices.index(gpu)]!r}, not X')
        links.append(tuple(paths[devices.index(g)] for g in gpus))
        places.append(_place(index, gpu, rest, affinity))
    for i, j, path in [(i, j, links[i][j]) for i in range(len(gpus))
                       for j in range(len(gpus))]:
        if links[j][i] != path:
            raise TopologyError(f'nvidia-smi topo -m: GPU{i} to GPU{j} is {path} but GPU{j} '
                                f'to GPU{i} {links[j][i]}: not one node\'s matrix')
    legend = dict(re.findall(r'^\s*(NIC\d+):\s*(\S+)\s*$', '\n'.join(lines), re.M))
    nic_paths = {}
    for nic in nics:
        paths = tuple(rows[nic][0][devices.index(g)] for g in gpus)
        if 'X' in paths:
            raise TopologyError(f'nvidia-smi topo -m: {nic} to a GPU is X')
        nic_paths[legend.get(nic, nic)] = paths
    return Topology(tuple(places), tuple(links), nic_paths)


def _place(index, gpu, rest, affinity):
    """GPU `index`'s CPUs and NUMA node from the cells after its paths. Tab-separated,
    nvidia-smi prints an empty cell before `GPU NUMA ID`; aligned with spaces, an empty
    CPU list cannot be told from a missing one: the columns are taken in order."""
    values = dict(zip(affinity, rest))
    cpus = values.get('CPU Affinity', '').strip()
    numa = values.get('NUMA Affinity', '').strip()
    if cpus in ('', 'N/A'):
        cpus = ''
    else:
        try:
            cpu_set(cpus)
        except TopologyError as err:
            raise TopologyError(f'nvidia-smi topo -m: {gpu}: CPU affinity {err}') from None
    if numa in ('', 'N/A'):
        numa = None
    elif re.fullmatch(r'[0-9]{1,5}', numa):
        numa = int(numa)
    else:
        raise TopologyError(f'nvidia-smi topo -m: {gpu}: NUMA affinity {numa!r} is no NUMA '
                            'node')
    return GpuPlace(index, cpus, numa)


def detect(nvidia_smi=None, timeout=TOOL_TIMEOUT_SECONDS):
    """This node's topology from its nvidia-smi (`topo -m`); None where there is no tool. A
    tool that fails, hangs or prints no matrix is a TopologyError saying so."""
    tool = nvidia_smi or shutil.which('nvidia-smi')
    if not tool:
        return None
    try:
        done = subprocess.run([tool, 'topo', '-m'], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TopologyError(f'{tool} topo -m did not answer within {timeout} s') from None
    out = done.stdout.decode(errors='replace')
    if done.returncode != 0:
        said = ' '.join((out + done.stderr.decode(errors='replace')).split())[:300]
        raise TopologyError(f'{tool} topo -m exited with {done.returncode}: {said}')
    return parse(out)


def nvlinks(path):
    """The NVLinks a path bonds ('NV18' -> 18); 0 for a PCIe path."""
    match = _NVLINK.fullmatch(path or '')
    return int(match.group(1)) if match else 0


def pair_bandwidth(path, sheet):
    """(bytes/s each way, what) a link between two GPUs carries, from their datasheet
    (hpcbench.core.accelerators.Datasheet, or its dict): NVLinks at the datasheet's rate per
    link (its NVLink bandwidth over its links), a PCIe path at the GPU's host link (two GPUs
    on PCIe meet at most at one slot's rate). (None, why) where the datasheet lacks it."""
    sheet = sheet if isinstance(sheet, dict) else (sheet and sheet.__dict__) or {}
    links = nvlinks(path)
    if links:
        total, count = sheet.get('nvlink_bandwidth'), sheet.get('nvlink_links')
        if not (total and count):
            return None, f'{path}: the datasheet gives no NVLink rate'
        per_link = total / count
        return links * per_link, (f'{links} x {sheet.get("nvlink") or "NVLink"} at '
                                  f'{per_link / 1e9:g} GB/s each way')
    if path in PCIE_PATHS:
        rate = sheet.get('host_link_bandwidth')
        if not rate:
            return None, f'{path}: the datasheet gives no host link rate'
        return rate, f'{path} over {sheet.get("host_link") or "PCIe"}'
    return None, f'{path!r} is no link between two GPUs'


def misplaced(topology, gpu, allowed_cpus):
    """Why a rank on CPUs `allowed_cpus` (a list as Linux prints it) is not next to GPU
    `gpu`, or None when it is (or the topology does not say which CPUs are)."""
    if topology is None or gpu >= len(topology.gpus):
        return None
    place = topology.gpus[gpu]
    near = place.cpu_set()
    try:
        given = cpu_set(allowed_cpus)
    except TopologyError as err:
        return f'its CPUs are not what Linux lists: {err}'

    if not near or not given or given <= near:
        return None
    where = f' (NUMA node {place.numa})' if place.numa is not None else ''
    return (f'its CPUs {allowed_cpus} are not all next to GPU {gpu}, whose CPUs are '
            f'{place.cpus}{where}')
