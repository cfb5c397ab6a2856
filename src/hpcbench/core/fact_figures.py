"""A job's fact figures (issue 73): what a node's two reads of its health facts
(hpcbench.core.node_facts), before a job's first step and after its last, say as figures a
contract judges, keyed as the suite's figures are: the node's, each GPU's (`n1:gpu3`, its
place in nvidia-smi's list) and each RDMA port's (`n1:nic:mlx5_0/1`); and which figure a
contract's fact names (fact_figure).

Standard library only: it runs on compute nodes too."""
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import device_keys, nic_health
from hpcbench.core.node_facts import (AFTER, BEFORE, NODE_PATTERN, NodeFactsError, changes,
                                      load)


# The figures a pair of reads gives, by name: (unit, what it is). A node's; each GPU's
# (keyed n1:gpuI: hpcbench.core.device_keys) and each port's (n1:nic:mlx5_0/1). Counts and
# states as numbers (1: yes, 0: no), so that a contract commits to them as to any figure;
# a fact not read is no figure, never a 0.
NODE_FIGURES = {
    'online_cpus': ('CPUs', 'CPUs online'),
    'memory_gib': ('GiB', 'memory the kernel has'),
    'dimm_ranks': ('ranks', 'DIMM ranks EDAC sees'),
    'max_mhz': ('MHz', 'the most a CPU may run at'),
    'cpu_boost': ('yes', 'the CPUs may boost above their base clock (turbo)'),
    'edac_corrected': ('errors', 'memory errors corrected since boot'),
    'edac_uncorrected': ('errors', 'memory errors not corrected since boot'),
    'edac_corrected_increase': ('errors', 'memory errors corrected during the job'),
    'edac_uncorrected_increase': ('errors', 'memory errors not corrected during the job'),
    'ras_uncorrected': ('errors', 'memory errors not corrected that rasdaemon recorded '
                        '(across reboots)'),
    'ras_uncorrected_increase': ('errors', 'memory errors not corrected that rasdaemon '
                                 'recorded during the job'),
    'gpus': ('GPUs', 'GPUs nvidia-smi lists'),
    'pci_gpus': ('GPUs', 'GPUs on the PCI bus, every maker\'s'),
    'rdma_ports': ('ports', 'RDMA ports'),
    'xid_increase': ('events', 'XID events the kernel log gained during the job'),
}
GPU_FIGURES = {
    'pcie_generation': ('gen', 'PCIe generation now'),
    'pcie_width': ('lanes', 'PCIe width now'),
    'pcie_max_generation': ('gen', 'the PCIe generation it can train at'),
    'pcie_max_width': ('lanes', 'the PCIe width it can train at'),
    'pcie_degraded': ('yes', 'PCIe link below what it can train at'),
    'ecc_uncorrected_volatile': ('errors', 'uncorrected ECC errors since the driver loaded'),
    'ecc_uncorrected_aggregate': ('errors', 'uncorrected ECC errors over its life'),
    'retirement_pending': ('yes', 'pages waiting for a reset to be retired'),
    'row_remap_pending': ('yes', 'rows waiting for a reset to be remapped'),
    'row_remap_failed': ('yes', 'a row remap that failed'),
    'persistence': ('yes', 'persistence mode on'),
    'nvlinks': ('links', 'NVLinks nvidia-smi lists'),
    'nvlinks_inactive': ('links', 'NVLinks down (`<inactive>`)'),
    'xid_increase': ('events', 'XID events of this GPU during the job'),
}
# Each clock event reason's share of the job's window: clock_<reason>_percent.
CLOCK_FIGURE = 'clock_{}_percent'
PORT_FIGURES = {
    'rate_gbps': ('Gb/s', 'the port\'s rate'),
    'width': ('lanes', 'the port\'s width'),
    'active': ('yes', 'the port is ACTIVE'),
    'link_up': ('yes', 'its physical state is LinkUp'),
}
# A port's physical states as the kernel names them (ib_core's phys_state_to_str; "Phy
# Test Mode" read as its first word). Another word is no physical state: the ConnectX-4 of
# prometheus/procfs's fixture reads "4: ACTIVE" there, and is not judged up or down by it.
PHYSICAL_STATES = ('Sleep', 'Polling', 'Disabled', 'PortConfigurationTraining', 'LinkUp',
                   'LinkErrorRecovery', 'Phy')
# Each error counter's increase over the job: <counter>_increase.
INCREASE_FIGURE = '{}_increase'


# The facts that are words, not numbers: what a node, GPU or port says it runs, judged
# equal to the text most of a partition's read (a contract's `expect: {equal: "..."}`).
NODE_TEXTS = {'kernel': 'the kernel\'s release', 'bios': 'the BIOS version',
              'governor': 'the CPU frequency governor',
              'transparent_hugepages': 'transparent huge pages (always, madvise, never)'}
GPU_TEXTS = {'driver': 'the NVIDIA driver\'s version', 'vbios': 'the VBIOS version',
             'cuda': 'the CUDA version the driver supports'}
PORT_TEXTS = {'firmware': 'the adapter\'s firmware version'}
TEXT_UNIT = 'text'
# The longest text a fact keeps, and what it may hold (a version, a setting's word).
MAX_TEXT = 200
# Its grammar, once: where a job keeps it, where a record is read back, where a contract
# expects it.
TEXT_PATTERN = rf'[\x20-\x7e]{{1,{MAX_TEXT}}}'
_TEXT = re.compile(TEXT_PATTERN)

# A scope's facts (hpcbench.acceptance.scopes' names): their figures' table, and the
# figures named by a pattern (a clock reason's share, a counter's increase).
_SCOPE_FIGURES = {'node': NODE_FIGURES, 'gpu': GPU_FIGURES, 'nic': PORT_FIGURES}
_SCOPE_TEXTS = {'node': NODE_TEXTS, 'gpu': GPU_TEXTS, 'nic': PORT_TEXTS}


class UnknownFact(ValueError):
    pass


def fact_figure(scope, fact, increase=False):
    """(the figure a contract's fact names, its unit) for a unit of `scope`: `fact` itself,
    or with `increase` its increase over the job (`symbol_error` -> `symbol_error_increase`);
    UnknownFact saying which facts the scope has."""
    table = _SCOPE_FIGURES.get(str(scope))
    if table is None:
        raise UnknownFact(f'a {scope} has no facts: the facts are a node\'s, a GPU\'s and a '
                          'network port\'s (scopes node, gpu, nic)')
    name = INCREASE_FIGURE.format(fact) if increase else fact
    if name in table:
        return name, table[name][0]
    if not increase and fact in _SCOPE_TEXTS[str(scope)]:
        return fact, TEXT_UNIT
    if str(scope) == 'gpu' and re.fullmatch(CLOCK_FIGURE.format('[a-z_]{1,64}'), name):
        return name, '%'
    if str(scope) == 'nic' and increase and fact in nic_health.ERROR_COUNTERS:
        return name, 'errors'
    increases = sorted(n[:-len('_increase')] for n in table if n.endswith('_increase'))
    if str(scope) == 'nic':
        increases = list(nic_health.ERROR_COUNTERS)
    states = sorted(n for n in table if not n.endswith('_increase'))
    states = sorted([*states, *_SCOPE_TEXTS[str(scope)]])
    raise UnknownFact(
        f'a {scope} has no fact {fact!r}' + (' that increases' if increase else '') +
        f' (its facts: {", ".join(states)}' +
        (', clock_<reason>_percent' if str(scope) == 'gpu' else '') +
        (f'; that increase over a job: {", ".join(increases)}' if increases else '') + ')')


def bus_of(text):
    """A PCI address as the kernel log names a GPU (`0000:9b:00`), from nvidia-smi's
    (`00000000:9B:00.0`) or the log's own; '' where it is none."""
    parts = str(text).lower().split(':')
    if len(parts) != 3:
        return ''
    return f'{parts[0][-4:]}:{parts[1]}:{parts[2].split(".")[0]}'


def _yes(value):
    return None if value is None else float(bool(value))


def _number(value):
    return None if value is None else float(value)


def is_text(value):
    """Whether a fact's value is a text one (a version), not a figure."""
    return isinstance(value, str)


def is_fact_text(value):
    """Whether `value` is a text a fact may hold (TEXT_PATTERN)."""
    return isinstance(value, str) and _TEXT.fullmatch(value) is not None


def shown(value, unit=''):
    """A fact's value in words: a figure as `%g` with its `unit`, a text as it is."""
    return value if is_text(value) else f'{value:g}' + (f' {unit}' if unit else '')


def _text(value):
    """A text fact as read: kept where it is a short printable line, else not read."""
    value = '' if value is None else str(value).strip()
    return value if is_fact_text(value) else None


@dataclass(frozen=True)
class FactFigures:
    """The figures of a job's two reads of node `node_name`: the node's {name: value}, and
    {device key: {name: value}} of its GPUs and ports; and its text facts, the node's
    {name: text} and its devices' {device key: {name: text}}; only what was read."""
    node_name: str
    node: dict
    devices: dict
    texts: dict = None
    device_texts: dict = None


def figures(before, after):
    """The FactFigures of a node's facts `before` a job and `after` it: states as they were
    after, counts gained over the window between."""
    gained = changes(before, after)
    node = _node_figures(before, after, gained)
    devices = {}
    window_us = max(after.read_at - before.read_at, 0) * 1e6
    # A GPU's key is its place in nvidia-smi's list (its index there and CUDA's, by PCI
    # bus), not its minor number, which may differ.
    links = None if _unread(after, 'nvidia-smi nvlink -s') else \
        {g.index: g for g in after.nvlinks}
    for place, gpu in enumerate(after.gpus):
        devices[device_keys.gpu_key(after.node, place)] = values = _gpu_figures(
            gpu, gained, node['xid_increase'], window_us)
        # nvidia-smi numbers a GPU by its place in its list in both outputs.
        own = None if links is None else links.get(place)
        if own is not None:
            values.update(nvlinks=float(len(own.links)),
                          nvlinks_inactive=float(len(own.inactive)))
    if not after.gpus:
        # No NVIDIA driver's word (an AMD or Intel node): the kernel's, of the links. The
        # place by PCI address is the one rocm-smi and CUDA's PCI_BUS_ID order give.
        for place, gpu in enumerate(after.pci_gpus):
            devices[device_keys.gpu_key(after.node, place)] = _link_figures(gpu.link, True)
    for port in after.ports:
        values = {'rate_gbps': port.rate_gbps, 'width': _number(port.width),
                  'active': None if port.state is None else float(port.state == 'ACTIVE'),
                  'link_up': None if port.physical_state not in PHYSICAL_STATES else
                  float(port.physical_state == 'LinkUp')}
        for increase in gained.ports.get(port.name, ()):
            values[INCREASE_FIGURE.format(increase.counter)] = _number(increase.increase)
        devices[device_keys.nic_key(after.node, port.device, port.port)] = values
    health = after.health
    texts = {'kernel': health.kernel, 'bios': health.bios, 'governor': health.governor,
             'transparent_hugepages': health.transparent_hugepages}
    device_texts = {}
    for place, gpu in enumerate(after.gpus):
        device_texts[device_keys.gpu_key(after.node, place)] = {
            'driver': gpu.driver, 'vbios': gpu.vbios, 'cuda': gpu.cuda}
    for port in after.ports:
        device_texts[device_keys.nic_key(after.node, port.device, port.port)] = {
            'firmware': port.firmware}
    return FactFigures(after.node, {k: v for k, v in node.items() if v is not None},
                       {key: {k: v for k, v in values.items() if v is not None}
                        for key, values in devices.items()},
                       _kept_texts(texts),
                       {key: _kept_texts(values) for key, values in device_texts.items()})


def _kept_texts(texts):
    return {name: _text(value) for name, value in texts.items() if _text(value) is not None}


def _node_figures(before, after, gained):
    health = after.health
    ranks = None if health.controllers is None else sum(c.ranks for c in health.controllers)
    return {
        'online_cpus': _number(health.online_cpus),
        'memory_gib': None if health.memory_kib is None else health.memory_kib / (1 << 20),
        'dimm_ranks': _number(ranks),
        'max_mhz': None if health.max_khz is None else health.max_khz / 1000,
        'cpu_boost': None if health.boost is None else float(health.boost),
        'edac_corrected': _number(health.corrected),
        'edac_uncorrected': _number(health.uncorrected),
        'edac_corrected_increase': _number(gained.corrected),
        'edac_uncorrected_increase': _number(gained.uncorrected),
        'ras_uncorrected': _number(after.ras_uncorrected),
        'ras_uncorrected_increase': _number(gained.ras_uncorrected),
        'gpus': None if _unread(after, 'nvidia-smi -q -x') else float(len(after.gpus)),
        'pci_gpus': None if _unread(after, 'PCI bus') else float(len(after.pci_gpus)),
        'rdma_ports': None if _unread(after, 'RDMA ports') else float(len(after.ports)),
        'xid_increase': None if _unread(before, 'dmesg') or _unread(after, 'dmesg')
        else float(len(gained.xids)),
    }


def _gpu_figures(gpu, gained, xids_read, window_us):
    """One GPU's figures; `xids_read`: None where the log was not read around the job."""
    bus = bus_of(gpu.bus_id)
    values = {
        **_link_figures(gpu.link, 'gpu_idle' in gpu.clock_events),
        'ecc_uncorrected_volatile': _number(gpu.uncorrected_volatile),
        'ecc_uncorrected_aggregate': _number(gpu.uncorrected_aggregate),
        'retirement_pending': _yes(gpu.retirement_pending),
        'row_remap_pending': _yes(gpu.row_remap_pending),
        'row_remap_failed': _yes(gpu.row_remap_failed),
        'persistence': _yes(gpu.persistence),
        'xid_increase': None if xids_read is None else
        float(sum(1 for x in gained.xids if x.bus == bus)),
    }
    for reason, us in gained.clock_event_us.get(gpu.uuid or gpu.bus_id, {}).items():
        values[CLOCK_FIGURE.format(reason)] = (
            None if us is None or not window_us else min(100.0, 100 * us / window_us))
    return values


def _link_figures(link, may_be_idle):
    """A link's figures. An idle GPU drops its link's generation to save power (an idle
    8 x L40S node reads Gen1 of Gen4 on every GPU, MLPerf's Wiwynn submission), so a
    generation below the most it can train at, read while the GPU may be idle (NVIDIA's
    gpu_idle reason holding its clocks; any maker's link read from the kernel, which does
    not say), is no evidence: not read. Its width stays trained when idle."""
    generation = link.generation
    if may_be_idle and None not in (generation, link.max_generation) and \
            generation < link.max_generation:
        generation = None
    narrow = None if None in (link.width, link.max_width) else link.width < link.max_width
    degraded = True if narrow else link.degraded if generation is not None else None
    return {'pcie_generation': _number(generation), 'pcie_width': _number(link.width),
            'pcie_max_generation': _number(link.max_generation),
            'pcie_max_width': _number(link.max_width), 'pcie_degraded': _yes(degraded)}


def _unread(facts, what):
    return any(name == what for name, _ in facts.unread)



def job_figures(directory):
    """({node: FactFigures} of a job's reads in `directory`, each node's two reads, before
    and after; what was not read, as lines)."""
    directory = Path(directory)
    found, unread = {}, []
    head, tail = BEFORE.split(NODE_PATTERN)
    names = sorted(p.name[len(head):-len(tail)] for p in directory.glob(
        BEFORE.replace(NODE_PATTERN, '*')))
    if not names:
        return found, ['facts before the job: none read (no ' + BEFORE + ')']
    for name in names:
        reads = []
        for pattern, when in ((BEFORE, 'before the job'), (AFTER, 'after the job')):
            try:
                facts = load(directory / pattern.replace(NODE_PATTERN, name))
            except NodeFactsError as err:
                unread.append(f'facts of {name} {when}: {err}')
                continue
            reads.append(facts)
            unread += [f'{what} of {facts.node} {when}: {why}' for what, why in facts.unread]
        if len(reads) < 2:
            continue
        try:
            figured = figures(*reads)
        except NodeFactsError as err:
            unread.append(str(err))
            continue
        if figured.node_name != name:
            unread.append(f'facts of {figured.node_name} in the file of {name}: not kept')
            continue
        found[name] = figured
    return found, unread


# What of a job's facts explains a figure that failed or is slow (evidence()): a clock
# event reason holding the GPU's clocks this share of the job or more, and any of these.
NOTED_CLOCK_PERCENT = 10.0


def evidence(node_figures, device_figures):
    """What the hardware said of itself around a job that explains a slow or failed figure,
    in words: a PCIe link below what it can train at, clocks held by a reason for
    NOTED_CLOCK_PERCENT of the job or more, XID events, uncorrected ECC and pending
    retirements or remaps, a port not ACTIVE or not up and its error counters rising,
    memory errors during the job. `node_figures`: the node's ({name: value}); of its
    devices, {device key: {name: value}}. [] where nothing is amiss."""
    said = []
    node = node_figures
    if node.get('edac_uncorrected_increase'):
        said.append(f'{node["edac_uncorrected_increase"]:g} uncorrected memory error(s) '
                    'during the job')
    if node.get('edac_corrected_increase'):
        said.append(f'{node["edac_corrected_increase"]:g} corrected memory error(s) during '
                    'the job')
    if node.get('ras_uncorrected_increase') and not node.get('edac_uncorrected_increase'):
        said.append(f'{node["ras_uncorrected_increase"]:g} uncorrected memory error(s) '
                    'rasdaemon recorded during the job')
    elif node.get('ras_uncorrected') and not node.get('ras_uncorrected_increase'):
        said.append(f'{node["ras_uncorrected"]:g} uncorrected memory error(s) in '
                    'rasdaemon\'s record')
    for key, values in sorted(device_figures.items()):
        try:
            named = device_keys.parse(key)
        except device_keys.DeviceKeyError:
            continue
        who = named.words() if isinstance(named, device_keys.Nic) else \
            f'GPU {named.gpu} of {named.node}' if isinstance(named, device_keys.Gpu) else key
        said += [f'{who}: {words}' for words in _device_evidence(values)]
    return said


def _device_evidence(values):
    found = []
    if values.get('pcie_degraded'):
        now = f'x{values.get("pcie_width", 0):g}'
        if 'pcie_generation' in values:
            now = f'Gen{values["pcie_generation"]:g} {now}'
        found.append(f'PCIe {now} of Gen{values.get("pcie_max_generation", 0):g} '
                     f'x{values.get("pcie_max_width", 0):g}')
    for name, value in sorted(values.items()):
        reason = re.fullmatch(CLOCK_FIGURE.format('([a-z_]+)'), name)
        if reason and value >= NOTED_CLOCK_PERCENT:
            found.append(f'clocks held by {reason.group(1)} {value:.0f} % of the job')
    if values.get('xid_increase'):
        found.append(f'{values["xid_increase"]:g} XID event(s) during the job')
    if values.get('nvlinks_inactive'):
        found.append(f'{values["nvlinks_inactive"]:g} of {values.get("nvlinks", 0):g} NVLinks '
                     'inactive')
    if values.get('ecc_uncorrected_volatile'):
        found.append(f'{values["ecc_uncorrected_volatile"]:g} uncorrected ECC error(s) since '
                     'the driver loaded')
    for flag, words in (('retirement_pending', 'pages pending retirement'),
                        ('row_remap_pending', 'a row remap pending'),
                        ('row_remap_failed', 'a row remap failed')):
        if values.get(flag):
            found.append(words)
    if values.get('active') == 0:
        found.append('not ACTIVE')
    if values.get('link_up') == 0:
        found.append('physical link not up')
    for counter in nic_health.ERROR_COUNTERS:
        rise = values.get(INCREASE_FIGURE.format(counter))
        if rise:
            found.append(f'{counter} +{rise:g} during the job')
    return found
