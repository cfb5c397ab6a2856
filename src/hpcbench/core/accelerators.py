"""A node's accelerators as the checks see them: what the vendor's tool reports of each
device (model, architecture, memory, clocks, power limit, ECC), and the figures a check
needs that no tool reports, from the vendor's datasheet (a `Datasheet` record, read from
cited data by hpcbench.machine.datasheets).

- Read from `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv` (`from_query_csv`) or
  `nvidia-smi -q -x` (`from_smi_xml`); `detect()` asks the node's nvidia-smi and finds none
  where there is no such tool: then nothing changes and nothing is said.
- A partition describes them as ReFrame's `devices` entry (`devices_entry`: type, arch,
  model, num_devices) and its description's `accelerators` (`partition_facts`: the
  datasheet's figures the caller found and the tool's limits), so that a check reads them
  from the partition and never from the node it is submitted from.
- A node's Slurm GRES is read as Slurm prints it (`gres_gpus`, `from_gres`): typed or
  untyped GPUs, several models, bindings, other resources left out.
- The model is not NVIDIA's alone: `vendor` and `arch` are strings (`sm_90` for NVIDIA's
  compute capability 9.0; AMD's would be `gfx90a`), and a datasheet names what it covers.

Standard library only: it runs on compute nodes too.
"""
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

MIB = 1 << 20

# What the node's nvidia-smi is asked, in this order (its CSV header names them with units).
QUERY_FIELDS = ('index', 'name', 'uuid', 'pci.bus_id', 'compute_cap', 'memory.total',
                'clocks.max.sm', 'clocks.max.memory', 'power.limit', 'ecc.mode.current',
                'driver_version')


class AcceleratorError(ValueError):
    pass


@dataclass(frozen=True)
class Accelerator:
    vendor: str                 # 'nvidia', 'amd', 'clearspeed'
    kind: str                   # ReFrame's device type: 'gpu', or another accelerator's
    model: str                  # as the vendor's tool names it: 'NVIDIA H200'
    arch: str                   # 'sm_90'
    memory_bytes: int
    index: int = 0
    uuid: str = ''
    pci_bus_id: str = ''
    max_sm_clock_hz: float = 0.0
    max_memory_clock_hz: float = 0.0
    power_limit_w: float = 0.0
    ecc_enabled: bool = None    # None: not reported
    driver_version: str = ''


@dataclass(frozen=True)
class Datasheet:
    """A device's figures as its vendor publishes them, per device."""
    model: str                  # the product, as the datasheet names it
    fp64_flops: float           # FP64 peak, vector units
    fp64_tensor_flops: float    # FP64 peak with tensor cores (= fp64_flops where none)
    memory_bandwidth: float     # bytes/s (None where the vendor gives none)
    host_link: str              # 'PCIe 5.0 x16'
    host_link_bandwidth: float  # bytes/s, each direction (or None)
    power_w: float              # the datasheet's maximum board power (or None)
    source: str                 # document and table
    # GPU-to-GPU links: the generation, the links of one GPU and their bandwidth, each
    # direction, all links together (the datasheets' NVLink figure counts both directions:
    # "900GB/s" is 450 GB/s each way over 18 links, 25 GB/s per link; hpcbench.core.
    # gpu_topology.pair_bandwidth). None where the GPU has none.
    nvlink: str = None
    nvlink_links: int = None
    nvlink_bandwidth: float = None
    # What the datasheet says the device is (hpcbench.machine.datasheets).
    vendor: str = None
    kind: str = 'gpu'
    arch: str = None
    memory_bytes: float = None
    devices_per_package: int = 1


# The units nvidia-smi gives its numbers in, each with those of its kind it may also be
# given in (a header's [kW], a value's mW: converted), and the range a GPU's value can be
# in: a value outside is a broken tool or a wrong unit, never a figure (issue 51: a
# power of -697.6 W, 99,999,999 W or a memory of 1e30 MiB was taken as given).
UNITS = {'W': {'mW': 1e-3, 'W': 1, 'kW': 1e3},
         'MHz': {'kHz': 1e-3, 'MHz': 1, 'GHz': 1e3},
         'MiB': {'KiB': 1 / 1024, 'MiB': 1, 'GiB': 1024, 'TiB': 1024 ** 2},
         'C': {'C': 1}, '': {'': 1}}
# (least, most) of a value in its unit: a board draws at most a few kW (the largest today
# about 1.2 kW); clocks are below 10 GHz; memory from 1 MiB to 16 TiB; a die between -40 C
# and 150 C; an index or a count of GPUs below 4096.
RANGES = {'W': (0, 5000), 'MHz': (0, 10000), 'MiB': (1, 16 * 1024 ** 2), 'C': (-40, 150),
          '': (0, 4096)}
_SMI_VALUE = re.compile(r'\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*')


def smi_number(text, what, error=AcceleratorError, unit=''):
    """The number of an nvidia-smi value ('143771 MiB', '1980 MHz', '700.00 W', '6.98e+02 W')
    in `unit` (a key of UNITS: the value's own unit, or none, taken as `unit`), else `error`
    saying that `what` is no number ('[N/A]' where a GPU does not report it, '1.2.3'), is in
    a unit of another kind, or is outside the range a GPU's can be in (RANGES)."""
    match = _SMI_VALUE.fullmatch(text or '')
    if not match:
        raise error(f'{what} {(text or "").strip()!r} is no number')
    given = match.group(2) or unit
    if given not in UNITS[unit]:
        raise error(f'{what} {text.strip()!r} is not in {unit or "a plain number"}'
                    + (f' (or {", ".join(u for u in UNITS[unit] if u != unit)})'
                       if len(UNITS[unit]) > 1 else ''))
    value = float(match.group(1)) * UNITS[unit][given]
    least, most = RANGES[unit]
    if not least <= value <= most:
        raise error(f'{what} {text.strip()!r} is no value a GPU has (from {least:g} to '
                    f'{most:g}{" " + unit if unit else ""})')
    return value


# Fields nvidia-smi's CSV header names by their long names.
LONG_NAMES = {'clocks.current.sm': 'clocks.sm', 'clocks.current.memory': 'clocks.mem'}


def smi_csv(text, fields, error=AcceleratorError, empty='nvidia-smi printed nothing'):
    """[(line number, {field: value})] of an nvidia-smi `--format=csv` output: the header
    line first, its long names taken as `fields` name them; each of `fields` present and
    every line as long as the header, else `error`. A header's unit in brackets (`power.draw
    [W]`) is the unit of its column's values: given to a value printed without one
    (`--format=csv,nounits`), and a value printed in another unit is refused."""
    rows = [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text))
            if any(cell.strip() for cell in row)]
    if not rows:
        raise error(empty)
    header, units = [], []
    for cell in rows[0]:
        unit = re.search(r'\s*\[(.*)\]$', cell)
        name = cell[:unit.start()] if unit else cell
        header.append(LONG_NAMES.get(name, name))
        units.append(unit.group(1).strip() if unit else '')
    missing = [f for f in fields if f not in header]
    if missing:
        raise error(f'nvidia-smi: no {", ".join(missing)} in its header {", ".join(rows[0])}')
    found = []
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise error(f'nvidia-smi: line {number} has {len(row)} fields, the header '
                        f'{len(header)}')
        values = {}
        for name, unit, value in zip(header, units, row):
            own = _SMI_VALUE.fullmatch(value)
            if unit and own and own.group(2) and own.group(2) != unit:
                raise error(f'nvidia-smi: line {number}: {name} {value!r} is not in its '
                            f'header\'s unit, {unit}')
            values[name] = f'{value} {unit}' if unit and own and not own.group(2) else value
        found.append((number, values))
    return found


def _arch(compute_capability, what):
    match = re.fullmatch(r'\s*(\d+)\.(\d+)\s*', compute_capability or '')
    if not match:
        raise AcceleratorError(f'nvidia-smi: {what}: compute capability '
                               f'{compute_capability!r} is not MAJOR.MINOR')
    return f'sm_{match.group(1)}{match.group(2)}'


def _number_of(text, what, unit=''):
    return smi_number(text, f'nvidia-smi: {what}', unit=unit)


def _index(text):
    index = _number_of(text, 'index')
    if index != int(index):
        raise AcceleratorError(f'nvidia-smi: index {text!r} is no GPU index')
    return int(index)


def _ecc(text):
    value = (text or '').strip().lower()
    return {'enabled': True, 'disabled': False}.get(value)


def from_query_csv(text):
    """The GPUs of `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv` (the header line
    first, each field's unit in brackets), in the tool's order."""
    gpus = []
    for _line, value in smi_csv(text, QUERY_FIELDS):
        where = f'GPU {value["index"]}'
        gpus.append(Accelerator(
            vendor='nvidia', kind='gpu', model=value['name'],
            arch=_arch(value['compute_cap'], where),
            memory_bytes=int(_number_of(value['memory.total'], f'{where} memory', 'MiB') * MIB),
            index=_index(value['index']), uuid=value['uuid'],
            pci_bus_id=value['pci.bus_id'],
            max_sm_clock_hz=_number_of(value['clocks.max.sm'], f'{where} SM clock',
                                       'MHz') * 1e6,
            max_memory_clock_hz=_number_of(value['clocks.max.memory'],
                                           f'{where} memory clock', 'MHz') * 1e6,
            power_limit_w=_number_of(value['power.limit'], f'{where} power limit', 'W'),
            ecc_enabled=_ecc(value['ecc.mode.current']),
            driver_version=value['driver_version']))
    return gpus


# The compute capability of an architecture the XML names, where it has one only (Ampere's
# A100 is 8.0, its A10 8.6; Blackwell's B200 10.0, its consumer parts 12.0).
ARCHITECTURE_CAPABILITY = {'Volta': '7.0', 'Hopper': '9.0'}


def from_smi_xml(text):
    """The GPUs of `nvidia-smi -q -x`, as from_query_csv gives them. The XML names no compute
    capability (driver 580): it is its architecture's where that has one only, else
    AcceleratorError asks for the CSV query."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as err:
        raise AcceleratorError(f'nvidia-smi -q -x: not XML: {err}') from None

    driver = root.findtext('driver_version', '')
    gpus = []
    for index, gpu in enumerate(root.iter('gpu')):
        where = f'GPU {index}'
        architecture = gpu.findtext('product_architecture', '').strip()
        capability = ARCHITECTURE_CAPABILITY.get(architecture)
        if not capability:
            raise AcceleratorError(f'nvidia-smi -q -x: {where} is a {architecture or "GPU"} '
                                   'of more than one compute capability: read it from '
                                   f'nvidia-smi --query-gpu={",".join(QUERY_FIELDS)} '
                                   '--format=csv')
        gpus.append(Accelerator(
            vendor='nvidia', kind='gpu', model=gpu.findtext('product_name', '').strip(),
            arch=_arch(capability, where),
            memory_bytes=int(_number_of(gpu.findtext('fb_memory_usage/total'),
                                        f'{where} memory', 'MiB') * MIB),
            index=_index(gpu.findtext('minor_number') or str(index)),
            uuid=gpu.findtext('uuid', ''),
            pci_bus_id=gpu.get('id', ''),
            max_sm_clock_hz=_number_of(gpu.findtext('max_clocks/sm_clock'),
                                       f'{where} SM clock', 'MHz') * 1e6,
            max_memory_clock_hz=_number_of(gpu.findtext('max_clocks/mem_clock'),
                                           f'{where} memory clock', 'MHz') * 1e6,
            power_limit_w=_number_of(gpu.findtext('gpu_power_readings/current_power_limit')
                                     or gpu.findtext('power_readings/power_limit'),
                                     f'{where} power limit', 'W'),
            ecc_enabled=_ecc(gpu.findtext('ecc_mode/current_ecc')),
            driver_version=driver))
    return gpus


# The most accelerators a node has (8 to 16 today; a GRES beyond this is a broken count).
MAX_DEVICES = 64


# A GPU whose vendor no tool said: no vendor's programming model is assumed for it.
UNKNOWN_VENDOR = 'unknown'


def _ask(tool, args, timeout):
    """What `tool args` printed on its standard output; AcceleratorError where it fails,
    hangs past `timeout` seconds, or prints what is not text."""
    try:
        done = subprocess.run([tool, *args], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AcceleratorError(f'{tool} did not answer within {timeout} s (a hung driver?)') \
            from None
    stdout, stderr = (out.decode(errors='replace') for out in (done.stdout, done.stderr))
    if done.returncode != 0:
        said = ' '.join((stdout + stderr).split())[:300]
        raise AcceleratorError(f'{tool} exited with {done.returncode}: {said}')
    if '\ufffd' in stdout:
        raise AcceleratorError(f'{tool} printed what is not UTF-8 text: '
                               f'{" ".join(stdout.split())[:200]!r}')
    return stdout


# How long a GPU tool may take to answer, in seconds, unless the site says
# (HPCBENCH_GPU_TOOL_TIMEOUT: tool_timeout): nvidia-smi answers in well under a second where
# the persistence daemon keeps the driver loaded, and takes seconds a GPU where nothing does
# (a node of 8 or 16 GPUs may need more). Past an hour it is no longer a hung driver's bound.
TOOL_TIMEOUT_SECONDS = 20
TOOL_TIMEOUT_VARIABLE = 'HPCBENCH_GPU_TOOL_TIMEOUT'
MAX_TOOL_TIMEOUT_SECONDS = 3600


class ToolTimeoutError(ValueError):
    """A site's HPCBENCH_GPU_TOOL_TIMEOUT that is no bound."""


def tool_timeout():
    """The seconds a GPU tool may take: TOOL_TIMEOUT_SECONDS, or what HPCBENCH_GPU_TOOL_TIMEOUT
    says; ToolTimeoutError where that is not a number of seconds above 0 and at most an hour
    (taken as given, '0' or 'nan' would describe every node without its GPUs)."""
    given = os.environ.get(TOOL_TIMEOUT_VARIABLE, '').strip()
    if not given:
        return TOOL_TIMEOUT_SECONDS
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TOOL_TIMEOUT_SECONDS:    # nan fails too
        raise ToolTimeoutError(f'{TOOL_TIMEOUT_VARIABLE}={given[:40]!r} is not a number of '
                               f'seconds above 0 and at most {MAX_TOOL_TIMEOUT_SECONDS}')
    return int(seconds) if seconds.is_integer() else seconds


def detect(nvidia_smi=None, timeout=TOOL_TIMEOUT_SECONDS):
    """The GPUs of this node, from its nvidia-smi; [] where there is none. A tool that is
    there and fails (a driver not loaded), prints what is not text, or does not answer
    within `timeout` seconds (a hung driver: it answers in well under a second otherwise)
    is an AcceleratorError saying so."""
    tool = nvidia_smi or shutil.which('nvidia-smi')
    if not tool:
        return []
    return from_query_csv(_ask(tool, [f'--query-gpu={",".join(QUERY_FIELDS)}',
                                      '--format=csv'], timeout))


# What AMD's and Intel's tools are asked (their JSON forms): rocm-smi's every field of each
# card, xpu-smi's list of devices.
ROCM_SMI_ARGS = ('-a', '--json')
XPU_SMI_ARGS = ('discovery', '-j')


def _json(text, tool):
    try:
        data = json.loads(text)
    except RecursionError:
        # 100,000 nested `[` ran Python out of stack in every ReFrame command.
        raise AcceleratorError(f'{tool}: not JSON a tool prints (nested past Python\'s '
                               f'stack): {" ".join(text.split())[:80]!r}') from None
    except ValueError as err:
        raise AcceleratorError(f'{tool}: not JSON ({err}): {" ".join(text.split())[:200]!r}') \
            from None
    if not isinstance(data, dict):
        raise AcceleratorError(f'{tool}: {type(data).__name__} where it prints an object')
    return data


def _field(card, *names):
    """A card's field under any of `names` (rocm-smi's spellings change between releases:
    `Card series`, `Card Series`), stripped, or ''."""
    for name in names:
        value = card.get(name)
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()
    return ''


def _bytes(text, what):
    """A count of bytes as a tool prints it (ASCII digits), at most 16 TiB."""
    if not re.fullmatch(r'[0-9]{1,15}', text) or not 0 < int(text) <= 16 << 40:
        raise AcceleratorError(f'{what} {text[:40]!r} is no memory a GPU has')
    return int(text)


def from_rocm_smi_json(text):
    """The GPUs of `rocm-smi -a --json` (one object per `cardN`; `system` and the others are
    no card), in card order: the model its `Card series` names, `GFX Version` (gfx90a) where
    printed, VRAM in bytes where printed (0: not known), PCI bus, unique ID and its maximum
    package power."""
    data = _json(text, 'rocm-smi')
    cards = sorted(((int(key[4:]), value) for key, value in data.items()
                    if re.fullmatch(r'card[0-9]{1,4}', key) and isinstance(value, dict)),
                   key=lambda pair: pair[0])
    gpus = []
    for index, card in cards:
        where = f'rocm-smi: card{index}'
        model = _field(card, 'Card series', 'Card Series', 'Card SKU', 'Card model',
                       'Card Model')
        if not model:
            raise AcceleratorError(f'{where}: no Card series (its product name)')
        memory = _field(card, 'VRAM Total Memory (B)')
        power = _field(card, 'Max Graphics Package Power (W)')
        gpus.append(Accelerator(
            vendor='amd', kind='gpu', model=model,
            arch=_field(card, 'GFX Version').split(':')[0],
            memory_bytes=_bytes(memory, f'{where} VRAM Total Memory (B)') if memory else 0,
            index=index, uuid=_field(card, 'Unique ID'), pci_bus_id=_field(card, 'PCI Bus'),
            power_limit_w=smi_number(power, f'{where} power', unit='W') if power else 0.0))
    return gpus


def from_xpu_smi_json(text):
    """The GPUs of `xpu-smi discovery -j` (its `device_list`), in device order: the model
    its `device_name` names, PCI address and UUID; memory is not in the list (0: not
    known)."""
    data = _json(text, 'xpu-smi')
    devices = data.get('device_list')
    if not isinstance(devices, list):
        raise AcceleratorError('xpu-smi: no device_list in its discovery')
    gpus = []
    for number, device in enumerate(devices):
        if not isinstance(device, dict) or not _field(device, 'device_name'):
            raise AcceleratorError(f'xpu-smi: device {number} has no device_name')
        index = device.get('device_id', number)
        if not isinstance(index, int) or not 0 <= index < 4096:
            raise AcceleratorError(f'xpu-smi: device_id {index!r} is no device index')
        gpus.append(Accelerator(
            vendor='intel', kind='gpu', model=_field(device, 'device_name'), arch='',
            memory_bytes=0, index=index, uuid=_field(device, 'uuid'),
            pci_bus_id=_field(device, 'pci_bdf_address')))
    return gpus


def detect_any(tools=None, timeout=TOOL_TIMEOUT_SECONDS):
    """This node's GPUs from the first vendor tool it has: nvidia-smi, rocm-smi, xpu-smi
    (`tools`: {'nvidia-smi': path, ...}, a node's recorded ones in tests); [] where it has
    none. A tool that fails, or lists what is no node's GPUs, is an AcceleratorError saying
    so (one_node)."""
    tools = tools or {}
    nvidia = tools.get('nvidia-smi') or shutil.which('nvidia-smi')
    if nvidia:
        return one_node(detect(nvidia, timeout), 'nvidia-smi')
    rocm = tools.get('rocm-smi') or shutil.which('rocm-smi')
    if rocm:
        return one_node(from_rocm_smi_json(_ask(rocm, ROCM_SMI_ARGS, timeout)), 'rocm-smi')
    xpu = tools.get('xpu-smi') or shutil.which('xpu-smi')
    if xpu:
        return one_node(from_xpu_smi_json(_ask(xpu, XPU_SMI_ARGS, timeout)), 'xpu-smi')
    return []


def one_node(gpus, tool):
    """`gpus` as a tool listed them, where they can be one node's: at most MAX_DEVICES, each
    index once (1,000 GPUs, or one index four times, wrote `mpirun -np 1000`);
    AcceleratorError otherwise."""
    if len(gpus) > MAX_DEVICES:
        raise AcceleratorError(f'{tool}: {len(gpus)} GPUs, more than a node has (1 to '
                               f'{MAX_DEVICES})')
    seen = set()
    for gpu in gpus:
        if gpu.index in seen:
            raise AcceleratorError(f'{tool}: GPU index {gpu.index} listed twice: no node\'s '
                                   'list of its GPUs')
        seen.add(gpu.index)
    return gpus


def cuda_arch(vendor, arch):
    """Spack's cuda_arch of an NVIDIA architecture (sm_90 -> '90'); None for another
    vendor's."""
    if vendor != 'nvidia' or not arch.startswith('sm_'):
        return None
    return arch[len('sm_'):]


