"""A node's GPUs as its PCI bus shows them, whoever made them (issue 73): each display-class
function of a GPU maker under /sys/bus/pci/devices, with the PCIe link it trained at
(`current_link_speed`, `current_link_width`) beside the one it can train at (`max_link_*`),
as the kernel reads them from the device's link registers. What nvidia-smi says of an
NVIDIA GPU, the kernel says of every GPU: an AMD or Intel GPU's link is read here, and a
GPU the driver lost is still counted here while it stays on the bus.

The BMC's VGA (ASPEED, Matrox) is a display function on every server and no GPU: only the
makers in GPU_VENDORS count. A link the kernel cannot read (a virtual function, a device
behind no PCIe port) is None, never a default; a value that is no link (a speed that is
not one of PCIe's, a width no slot has) is refused, naming the file.

`root` stands for /sys, as in hpcbench.core.nic_health. `lspci -vv`'s text, where that is
what a site kept, reads into the same links (parse_lspci: its LnkCap and LnkSta lines), as do
nvidia-smi's CSV query of its pcie.link fields (parse_nvidia_query) and AMD's `amd-smi static
--bus` (parse_amd_smi_bus: the most a link can train at, which is all it states).
Standard library only: it runs on compute nodes too."""
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import kernel_files
from hpcbench.core.gpu_health import PcieLink

DEVICES = Path('bus') / 'pci' / 'devices'
MAX_ATTRIBUTE_BYTES = 4096
# The most PCI functions a node has (a large one: a few thousand, SR-IOV included).
MAX_FUNCTIONS = 65536
# PCI class codes of display controllers (class 0x03: VGA 0x0300, 3D 0x0302, other 0x0380:
# an NVIDIA data-centre GPU is a 3D controller, an AMD Instinct an "other").
DISPLAY_CLASS = 0x03
GPU_VENDORS = {0x10de: 'NVIDIA', 0x1002: 'AMD', 0x8086: 'Intel'}
# A link's transfer rate per lane, as the kernel prints it (`8.0 GT/s PCIe`; before Linux
# 5.4 `8 GT/s`), by PCIe generation.
GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
WIDTHS = (0, 1, 2, 4, 8, 12, 16, 32)
_SPEED = re.compile(r'(\d+(?:\.\d+)?) GT/s(?: PCIe)?')
_ADDRESS = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]')


class PciLinkError(ValueError):
    pass


@dataclass(frozen=True)
class PciGpu:
    """A GPU on the PCI bus: its address (`0000:09:00.0`), maker and device ID, and its
    link."""
    address: str
    vendor: str
    device: str
    link: PcieLink


def read_gpus(root='/sys'):
    """The PciGpu of every GPU on the bus under `root`, by address (the order nvidia-smi,
    CUDA with PCI_BUS_ID and rocm-smi number them in); None where the node shows no PCI
    bus (`root`/bus/pci/devices absent)."""
    base = Path(root) / DEVICES
    if not base.is_dir():
        return None
    names = os.listdir(base)
    if len(names) > MAX_FUNCTIONS:
        raise PciLinkError(f'{base}: {len(names)} PCI functions: no node has so many')
    gpus = []
    for name in sorted(names):
        if not _ADDRESS.fullmatch(name):
            continue
        here = base / name
        kind, vendor = _hex(here / 'class'), _hex(here / 'vendor')
        if kind is None or vendor is None or kind >> 16 != DISPLAY_CLASS \
                or vendor not in GPU_VENDORS:
            continue
        device = _hex(here / 'device')
        gpus.append(PciGpu(name, GPU_VENDORS[vendor], '' if device is None else f'{device:04x}',
                           PcieLink(_generation(here / 'current_link_speed'),
                                    _width(here / 'current_link_width'),
                                    _generation(here / 'max_link_speed'),
                                    _width(here / 'max_link_width'))))
    return tuple(gpus)


def _text(path):
    return kernel_files.text(path, MAX_ATTRIBUTE_BYTES, PciLinkError)


def _hex(path):
    text = _text(path)
    if text is None:
        return None
    if not re.fullmatch(r'0x[0-9a-fA-F]{1,8}', text):
        raise PciLinkError(f'{path}: {text[:60]!r} is no PCI ID or class (e.g. 0x10de)')
    return int(text, 16)


def _generation(path):
    text = _text(path)
    if text is None or text.startswith('Unknown'):
        return None         # `Unknown speed`: the kernel could not read the link
    match = _SPEED.fullmatch(text)
    if not match or float(match.group(1)) not in GENERATIONS:
        raise PciLinkError(f'{path}: {text[:60]!r} is no PCIe link speed (e.g. "16.0 GT/s '
                           'PCIe")')
    return GENERATIONS[float(match.group(1))]


def _width(path):
    text = _text(path)
    if text is None:
        return None
    if not text.isdigit() or int(text) not in WIDTHS:
        raise PciLinkError(f'{path}: {text[:60]!r} is no PCIe link width (one of '
                           f'{", ".join(map(str, WIDTHS))})')
    return int(text)


# `lspci -vv`, where that is what a site kept: each function's header line (`da:00.0 3D
# controller ...`, with or without its domain), its `LnkCap:` (the most it can train at)
# and `LnkSta:` (what it trained at; `(downgraded)` where below its capability).
_LSPCI_FUNCTION = re.compile(r'((?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) \S')
_LSPCI_LINK = re.compile(r'\s*(LnkCap|LnkSta):\s+(?:Port #\d+, )?Speed (?:(\d+(?:\.\d+)?)GT/s|'
                         r'unknown)(?: \((?:ok|downgraded)\))?, Width x(\d+)')
MAX_LSPCI_BYTES = 16 << 20


def parse_lspci(text):
    """((address or '' where its header was not kept, PcieLink), ...) of each function whose
    link `lspci -vv` printed, in its order; PciLinkError where a link line reads no link."""
    if len(text) > MAX_LSPCI_BYTES:
        raise PciLinkError(f'lspci -vv: {len(text)} characters, more than any node prints')
    found, address, link = [], '', {}

    def close():
        if link:
            found.append((address, PcieLink(link.get('LnkSta', (None, None))[0],
                                            link.get('LnkSta', (None, None))[1],
                                            link.get('LnkCap', (None, None))[0],
                                            link.get('LnkCap', (None, None))[1])))
    for number, line in enumerate(text.splitlines(), 1):
        header = _LSPCI_FUNCTION.match(line)
        if header:
            close()
            address, link = header.group(1), {}
            continue
        if not re.match(r'\s*(LnkCap|LnkSta):', line):
            continue
        match = _LSPCI_LINK.match(line)
        if not match:
            raise PciLinkError(f'lspci -vv: line {number} ({line.strip()[:60]!r}) reads no '
                               'link (e.g. "LnkSta: Speed 16GT/s, Width x16")')
        kind, rate, width = match.groups()
        if rate is not None and float(rate) not in GENERATIONS:
            raise PciLinkError(f'lspci -vv: line {number}: {rate}GT/s is no PCIe speed')
        if int(width) not in WIDTHS:
            raise PciLinkError(f'lspci -vv: line {number}: x{width} is no PCIe width')
        link[kind] = (None if rate is None else GENERATIONS[float(rate)], int(width))
    close()
    return tuple(found)


# `nvidia-smi --query-gpu=...pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,
# pcie.link.width.max --format=csv`, where that is what a site logs (most GPU health scripts
# do): a header naming the fields (with units in brackets unless `nounits`), then a line a
# GPU, fields split by ", ", unquoted. `max` is the most the GPU and its slot can train at
# together (NVIDIA's --help-query-gpu); `current` drops while the GPU idles.
QUERY_LINK_FIELDS = {'pcie.link.gen.current': 'generation', 'pcie.link.width.current': 'width',
                     'pcie.link.gen.max': 'max_generation', 'pcie.link.width.max': 'max_width'}
# The fields that name a GPU, best first: its PCI address, its UUID, its index.
QUERY_KEY_FIELDS = ('pci.bus_id', 'gpu_bus_id', 'uuid', 'gpu_uuid', 'index')
# What nvidia-smi prints where it has no value.
_QUERY_NONE = {'[N/A]', 'N/A', '[Not Supported]', '[Unknown Error]', '[Insufficient Permissions]'}
MAX_QUERY_BYTES = 1 << 20


def parse_nvidia_query(text):
    """((GPU, PcieLink), ...) of nvidia-smi's CSV query output, in its order: GPU its PCI
    address (`0000:01:00.0`) where the query asked for pci.bus_id, else its UUID, else its
    index; PciLinkError where the text is no such output (no header, no link field, a line
    of other fields or a value that is no link)."""
    if len(text) > MAX_QUERY_BYTES:
        raise PciLinkError(f'nvidia-smi --query-gpu: {len(text)} characters, more than any '
                           'node prints')
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise PciLinkError('nvidia-smi --query-gpu: no line')
    names = [re.sub(r'\s*\[.*\]$', '', name.strip()) for name in lines[0].split(',')]
    if not set(QUERY_LINK_FIELDS) & set(names):
        raise PciLinkError(f'nvidia-smi --query-gpu: its first line ({lines[0][:80]!r}) names '
                           f'no link field ({", ".join(QUERY_LINK_FIELDS)}): a query printed '
                           'with its header (--format=csv, not noheader) is read')
    key = next((names.index(k) for k in QUERY_KEY_FIELDS if k in names), None)
    found = []
    for number, line in enumerate(lines[1:], 2):
        values = [v.strip() for v in line.split(', ')]
        if len(values) != len(names):
            raise PciLinkError(f'nvidia-smi --query-gpu: line {number} has {len(values)} '
                               f'fields, its header {len(names)}')
        link = {}
        for name, value in zip(names, values):
            if name in QUERY_LINK_FIELDS:
                link[QUERY_LINK_FIELDS[name]] = _query_value(name, value, number)
        gpu = str(number - 2) if key is None else values[key]
        if key is not None and names[key] in ('pci.bus_id', 'gpu_bus_id'):
            gpu = _bus_address(gpu, number)
        found.append((gpu, PcieLink(**link)))
    return tuple(found)


def _query_value(name, value, number):
    if value in _QUERY_NONE:
        return None
    if not value.isdigit():
        raise PciLinkError(f'nvidia-smi --query-gpu: line {number}: {name} {value[:40]!r} is '
                           'no number')
    number_read = int(value)
    if 'gen' in name and number_read not in GENERATIONS.values() or \
            'width' in name and number_read not in WIDTHS:
        raise PciLinkError(f'nvidia-smi --query-gpu: line {number}: {name} {number_read} is '
                           f'no PCIe {"generation" if "gen" in name else "width"}')
    return number_read


def _bus_address(text, number):
    """nvidia-smi's PCI address (`00000000:01:00.0`: an 8-digit domain) as the kernel's."""
    match = re.fullmatch(r'([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])', text)
    if not match:
        raise PciLinkError(f'nvidia-smi --query-gpu: line {number}: {text[:40]!r} is no PCI '
                           'address')
    domain, bus, device, function = match.groups()
    return f'{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}'


# `amd-smi static --bus` (ROCm's successor of rocm-smi, whose `--showbus` prints the address
# alone): a `GPU: N` line, then under `BUS:` the GPU's address (BDF), the most its link can
# train at (MAX_PCIE_WIDTH, MAX_PCIE_SPEED in GT/s) and PCIE_INTERFACE_VERSION (`Gen 5`);
# with --json the same as {"gpu": N, "bus": {"bdf", "max_pcie_width", "max_pcie_speed":
# {"value", "unit"}, "pcie_interface_version"}}. It states no link trained now (the kernel's
# current_link_* does): only the maxima are read.
_AMD_GPU = re.compile(r'GPU: (\d+)$')
_AMD_FIELD = re.compile(r'(BDF|MAX_PCIE_WIDTH|MAX_PCIE_SPEED|PCIE_INTERFACE_VERSION): (.*)$')
MAX_AMD_SMI_BYTES = 4 << 20


def parse_amd_smi_bus(text):
    """((PCI address, PcieLink of its maxima), ...) of `amd-smi static --bus` (its text or
    its --json), by GPU in its order; PciLinkError where it is neither or a value is no
    link."""
    if len(text) > MAX_AMD_SMI_BYTES:
        raise PciLinkError(f'amd-smi static: {len(text)} characters, more than any node prints')
    if text.lstrip().startswith(('[', '{')):
        return _amd_smi_json(text)
    gpus, fields = [], None
    for line in text.splitlines():
        line = line.strip()
        if _AMD_GPU.match(line):
            fields = {}
            gpus.append(fields)
        match = _AMD_FIELD.match(line)
        if match and fields is not None:
            fields[match.group(1)] = match.group(2).strip()
    if not gpus:
        raise PciLinkError('amd-smi static --bus: no "GPU: N" line: no output of it')
    return tuple(_amd_link(f.get('BDF'), f.get('MAX_PCIE_WIDTH'), f.get('MAX_PCIE_SPEED'),
                           f.get('PCIE_INTERFACE_VERSION'), n) for n, f in enumerate(gpus))


def _amd_smi_json(text):
    try:
        data = json.loads(text)
    except ValueError as err:
        raise PciLinkError(f'amd-smi static --json: {err}') from None
    gpus = data if isinstance(data, list) else data.get('gpu_data', [data]) \
        if isinstance(data, dict) else None
    if not isinstance(gpus, list) or not all(isinstance(g, dict) and isinstance(
            g.get('bus'), dict) for g in gpus):
        raise PciLinkError('amd-smi static --json: no list of GPUs, each with its "bus"')
    found = []
    for number, gpu in enumerate(gpus):
        bus = gpu['bus']
        speed = bus.get('max_pcie_speed')
        if isinstance(speed, dict):
            speed = f'{speed.get("value")} {speed.get("unit")}'
        found.append(_amd_link(bus.get('bdf'), bus.get('max_pcie_width'), speed,
                               bus.get('pcie_interface_version'), number))
    return tuple(found)


def _amd_link(bdf, width, speed, version, number):
    """(address, PcieLink) of one GPU's fields as amd-smi printed them (`N/A`: not read)."""
    where = f'amd-smi static: GPU {number}'
    if not isinstance(bdf, str) or not _ADDRESS.fullmatch(bdf.lower()):
        raise PciLinkError(f'{where}: {str(bdf)[:40]!r} is no PCI address (BDF)')

    def known(value):
        return value is not None and str(value).strip() not in ('N/A', '')
    max_width = generation = None
    if known(width):
        if not str(width).isdigit() or int(width) not in WIDTHS:
            raise PciLinkError(f'{where}: MAX_PCIE_WIDTH {str(width)[:40]!r} is no PCIe width')
        max_width = int(width)
    if known(speed):
        match = re.fullmatch(r'(\d+(?:\.\d+)?) GT/s', str(speed).strip())
        if not match or float(match.group(1)) not in GENERATIONS:
            raise PciLinkError(f'{where}: MAX_PCIE_SPEED {str(speed)[:40]!r} is no PCIe speed '
                               '(e.g. "32 GT/s")')
        generation = GENERATIONS[float(match.group(1))]
    if known(version):
        match = re.fullmatch(r'Gen ?(\d)', str(version).strip())
        if not match or (generation is not None and int(match.group(1)) != generation):
            raise PciLinkError(f'{where}: PCIE_INTERFACE_VERSION {str(version)[:40]!r} is no '
                               'PCIe generation of its MAX_PCIE_SPEED')
        generation = int(match.group(1))
    return bdf.lower(), PcieLink(max_generation=generation, max_width=max_width)
