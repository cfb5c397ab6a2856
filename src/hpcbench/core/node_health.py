"""A node's own health as its kernel shows it (issue 73): memory errors its memory
controllers corrected and could not correct (EDAC, /sys/devices/system/edac/mc), the DIMM
ranks they see, the CPUs online, the frequency governor and the most a CPU may run at,
transparent huge pages, the kernel and the BIOS, and the memory the kernel has.

What the node cannot say is None, never a default: a node without an EDAC driver reads no
memory errors (None), not "no memory errors ever", and a virtual machine has no governor.
Files are read from `root` (standing for /) so that the testbed points each emulated node at
a tree of its own and its faults are injected for real; a file out of shape (a count that is
no count, text not UTF-8, larger than any such file) is refused, naming it.

rasdaemon's record, where that is what a site kept (`ras-mc-ctl --error-count`, `--summary`:
kept across reboots, which EDAC's counters are not), reads into each DIMM label's counts and
the kinds of error it has none of (parse_ras_error_count, parse_ras_summary).

Standard library only: it runs on compute nodes too."""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import kernel_files

EDAC = Path('sys/devices/system/edac/mc')
CPU = Path('sys/devices/system/cpu')
# sysfs attributes are a page; /proc/meminfo is a few kB.
MAX_FILE_BYTES = 65536
# The most memory controllers or CPUs a node has; more is no node's.
MAX_CONTROLLERS = 1024
MAX_CPUS = 65536


class NodeHealthError(ValueError):
    pass


@dataclass(frozen=True)
class MemoryController:
    """One EDAC memory controller: errors it corrected and could not, since boot, and the
    DIMM ranks (or chip-select rows, on older drivers) it reports."""
    name: str                   # 'mc0'
    corrected: int = None
    uncorrected: int = None
    ranks: int = 0


@dataclass(frozen=True)
class NodeHealth:
    """What one node's kernel says of its health at one moment."""
    controllers: tuple = None   # MemoryController, ...; None: no EDAC driver loaded
    online_cpus: int = None
    governor: str = None        # cpu0's scaling governor: 'performance', 'powersave'
    max_khz: int = None         # cpu0's cpuinfo_max_freq
    transparent_hugepages: str = None       # 'always', 'madvise', 'never'
    kernel: str = None
    bios: str = None
    memory_kib: int = None
    boost: bool = None          # the CPUs may run above their base clock (turbo, boost)

    @property
    def corrected(self):
        """Memory errors corrected since boot, over every controller; None where not read."""
        return _total(self.controllers, 'corrected')

    @property
    def uncorrected(self):
        return _total(self.controllers, 'uncorrected')


def _total(controllers, field):
    if not controllers:
        return None
    counts = [getattr(c, field) for c in controllers]
    return None if any(c is None for c in counts) else sum(counts)


def read_node(root='/'):
    """The NodeHealth of the node whose / is `root`."""
    root = Path(root)
    return NodeHealth(
        controllers=_controllers(root / EDAC), online_cpus=_online(root / CPU / 'online'),
        governor=_text(root / CPU / 'cpu0' / 'cpufreq' / 'scaling_governor'),
        max_khz=_count(root / CPU / 'cpu0' / 'cpufreq' / 'cpuinfo_max_freq'),
        transparent_hugepages=_chosen(root / 'sys/kernel/mm/transparent_hugepage/enabled'),
        kernel=_text(root / 'proc/sys/kernel/osrelease'),
        bios=_text(root / 'sys/class/dmi/id/bios_version'),
        memory_kib=_meminfo_total(root / 'proc/meminfo'), boost=_boost(root / CPU))


def _boost(cpu):
    """Whether the CPUs may boost: cpufreq's global `boost` (acpi-cpufreq, amd-pstate:
    1 allowed), else intel_pstate's `no_turbo` (1 forbidden), as the kernel's cpufreq and
    intel_pstate documents define them; None where neither is there (a VM)."""
    for path, allowed in ((cpu / 'cpufreq' / 'boost', '1'),
                          (cpu / 'intel_pstate' / 'no_turbo', '0')):
        text = _text(path)
        if text is None:
            continue
        if text not in ('0', '1'):
            raise NodeHealthError(f'{path}: {text[:60]!r} is neither 0 nor 1')
        return text == allowed
    return None


def _text(path):
    return kernel_files.text(path, MAX_FILE_BYTES, NodeHealthError)


def _count(path):
    return kernel_files.count(path, MAX_FILE_BYTES, NodeHealthError)


def _controllers(base):
    """The MemoryControllers under EDAC's `base`; None where there is no EDAC driver."""
    if not base.is_dir():
        return None
    names = sorted((n for n in os.listdir(base) if re.fullmatch(r'mc\d+', n)),
                   key=lambda n: int(n[2:]))
    if len(names) > MAX_CONTROLLERS:
        raise NodeHealthError(f'{base}: {len(names)} memory controllers: no node has so many')
    found = []
    for name in names:
        here = base / name
        ranks = sorted(n for n in os.listdir(here)
                       if re.fullmatch(r'(dimm|rank|csrow)\d+', n))
        # Per rank where the driver counts there (the controller's own count is then the
        # rows it could not place, ce_noinfo_count); else the controller's.
        corrected, uncorrected = _count(here / 'ce_count'), _count(here / 'ue_count')
        if corrected is None:
            counts = [_count(here / r / 'dimm_ce_count') for r in ranks]
            noinfo = _count(here / 'ce_noinfo_count')
            if counts and None not in counts:
                corrected = sum(counts) + (noinfo or 0)
        if uncorrected is None:
            counts = [_count(here / r / 'dimm_ue_count') for r in ranks]
            noinfo = _count(here / 'ue_noinfo_count')
            if counts and None not in counts:
                uncorrected = sum(counts) + (noinfo or 0)
        found.append(MemoryController(name, corrected, uncorrected, len(ranks)))
    return tuple(found)


_RANGE = re.compile(r'(\d+)(?:-(\d+))?')


def _online(path):
    """The CPUs of a kernel CPU list (`0-63,128-191`) counted."""
    text = _text(path)
    if text is None:
        return None
    total = 0
    for part in text.split(','):
        match = _RANGE.fullmatch(part.strip())
        if not match or (match[2] and int(match[2]) < int(match[1])):
            raise NodeHealthError(f'{path}: {text[:60]!r} is no CPU list (e.g. "0-63")')
        total += int(match[2] or match[1]) - int(match[1]) + 1
        if total > MAX_CPUS:
            raise NodeHealthError(f'{path}: {text[:60]!r}: more CPUs than any node has')
    return total


def _chosen(path):
    """The bracketed choice of a kernel setting: `always [madvise] never` -> 'madvise'."""
    text = _text(path)
    if text is None:
        return None
    chosen = re.findall(r'\[(\w+)\]', text)
    if len(chosen) != 1:
        raise NodeHealthError(f'{path}: {text[:60]!r} names no one choice in brackets')
    return chosen[0]


def _meminfo_total(path):
    text = _text(path)
    if text is None:
        return None
    match = re.search(r'^MemTotal:\s+(\d+) kB$', text, re.M)
    if not match:
        raise NodeHealthError(f'{path}: no "MemTotal: N kB" line: not /proc/meminfo')
    return int(match[1])


MAX_RAS_BYTES = 16 << 20
_RAS_COUNT = re.compile(r'(\S+)\s+(\d{1,20})\s+(\d{1,20})')


def parse_ras_error_count(text):
    """((DIMM label, corrected, uncorrected), ...) of `ras-mc-ctl --error-count`, in its
    order; NodeHealthError where a line is none of its."""
    if len(text) > MAX_RAS_BYTES:
        raise NodeHealthError(f'ras-mc-ctl --error-count: {len(text)} characters: not its '
                              'output')
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0].split() != ['Label', 'CE', 'UE']:
        raise NodeHealthError('ras-mc-ctl --error-count: no "Label CE UE" heading: not its '
                              'output')
    found = []
    for number, line in enumerate(lines[1:], 2):
        match = _RAS_COUNT.fullmatch(line.strip())
        if not match:
            raise NodeHealthError(f'ras-mc-ctl --error-count: line {number} '
                                  f'({line.strip()[:60]!r}) is no DIMM\'s counts')
        found.append((match.group(1), int(match.group(2)), int(match.group(3))))
    return tuple(found)


@dataclass(frozen=True)
class RasSummary:
    """`ras-mc-ctl --summary`: the kinds of error rasdaemon recorded none of ('Memory',
    'PCIe AER', ...), the machine-check records it counts ((count, what), ...), its memory
    controller events ((type, DIMM label, location, count), ...: type 'Corrected',
    'Uncorrected', 'Fatal' as the kernel's mc_event names them) and the counts of its other
    sections ((section, count, what), ...: a PCIe AER kind, an ARM CPU, a disk)."""
    none_of: tuple = ()
    machine_checks: tuple = ()
    memory_events: tuple = ()
    other_events: tuple = ()

    def memory(self, *types):
        """The memory errors of `types` rasdaemon recorded (lowercase: 'uncorrected',
        'fatal'); 0 where it recorded none ('No Memory errors.'), None where the summary
        has no word on memory at all."""
        if not self.memory_events and 'Memory' not in self.none_of:
            return None
        return sum(count for kind, _, _, count in self.memory_events
                   if kind.lower() in types)


# Each section's count lines, by its heading (rasdaemon's ras-mc-ctl), each naming its
# count and what it counts, wherever the count stands in the line.
_MEMORY_EVENT = re.compile(r"\s+(\w[\w ]{0,30}) on DIMM Label\(s\): '(.{0,200})' location: "
                           r'(-?\d{1,9}(?::-?\d{1,9}){0,5}) errors: (\d{1,20})')
_COUNT_FIRST = re.compile(r'\s+(?P<count>\d{1,20}) (?P<what>.{1,200}) errors')
_HAS_COUNT = re.compile(r'\s+(?P<what>.{1,200}) has (?P<count>\d{1,20}) errors')
_SECTIONS = {
    'MCE records summary:': _COUNT_FIRST,
    'PCIe AER events summary:': re.compile(
        r'\s+(?P<count>\d{1,20}) (?P<what>.{1,200} errors: .{1,200})'),
    'ARM processor events summary:': _HAS_COUNT,
    'Disk errors summary:': _HAS_COUNT,
    'Memory failure events summary:': re.compile(r'\s+(?P<what>.{1,200}): (?P<count>\d{1,20})'),
    'Extlog records summary:': _COUNT_FIRST,
    'Devlink records summary:': _HAS_COUNT,
}
_MEMORY_HEADING = 'Memory controller events summary:'


def parse_ras_summary(text):
    """The RasSummary of `ras-mc-ctl --summary`; NodeHealthError where a line is none of
    it. A section it reads nothing of (another summary's lines) is refused rather than
    taken for no errors."""
    if len(text) > MAX_RAS_BYTES:
        raise NodeHealthError(f'ras-mc-ctl --summary: {len(text)} characters: not its output')
    none_of, checks, memory, other, section = [], [], [], [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        empty = re.fullmatch(r'No (.{1,60}) errors\.', line.strip())
        event = _MEMORY_EVENT.fullmatch(line) if section == _MEMORY_HEADING else None
        counted = _SECTIONS[section].fullmatch(line) if section in _SECTIONS else None
        if empty:
            none_of.append(empty.group(1))
            section = None
        elif line.strip() in _SECTIONS or line.strip() == _MEMORY_HEADING:
            section = line.strip()
        elif event:
            kind, label, location, count = event.groups()
            memory.append((kind, label, location, int(count)))
        elif counted and section == 'MCE records summary:':
            checks.append((int(counted['count']), counted['what']))
        elif counted:
            other.append((section[:-len(' summary:')], int(counted['count']),
                          counted['what']))
        else:
            raise NodeHealthError(f'ras-mc-ctl --summary: line {number} '
                                  f'({line.strip()[:60]!r}) is none this reader knows')
    if not (none_of or checks or memory or other):
        raise NodeHealthError('ras-mc-ctl --summary: no line of it')
    return RasSummary(tuple(none_of), tuple(checks), tuple(memory), tuple(other))
