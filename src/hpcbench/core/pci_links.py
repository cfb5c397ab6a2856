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
what a site kept, reads into the same links (parse_lspci: its LnkCap and LnkSta lines).
Standard library only: it runs on compute nodes too."""
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
