"""NVIDIA's XID events in a node's kernel log (`dmesg`, `dmesg -T`, `journalctl -k`): the
GPU (its PCI bus), the XID code, the process and the driver's words; and which of them a run
saw, as the lines of the log read after it that were not there before it (issue 73).

An XID is the driver's own report of a GPU fault (79: fallen off the bus; 48: a double-bit
ECC error; 119: its GSP firmware stopped answering; 94/95: a contained or uncontained ECC
error); a GPU that "fell off the bus" may say so on three lines without an XID (newer
drivers: NVIDIA/NVSentinel issue 155), read as XID 79. Lines of any other kind are left as
they are; a log that is no text (not UTF-8, larger than a kernel's ring) is refused.

Standard library only: it runs on compute nodes too."""
import re
from collections import Counter
from dataclasses import dataclass

# A kernel's ring buffer is at most 32 MiB (CONFIG_LOG_BUF_SHIFT 25); a journal asked for
# one boot's kernel lines is of that order.
MAX_LOG_BYTES = 64 << 20
FALLEN_OFF_THE_BUS = 79

_BUS = r'[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?'
# `NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...`;
# drivers before 418 wrote `NVRM: Xid (0000:03:00): 13, 0003 00000000 ...`.
_XID = re.compile(rf'NVRM: Xid \((?:PCI:)?(?P<bus>{_BUS})\): (?P<code>\d{{1,4}}),\s*'
                  r'(?:pid=(?P<pid>[^,]*),\s*)?(?:name=(?P<name>[^,]*),\s*)?(?P<said>.*)')
_THE_GPU = re.compile(rf'NVRM: The NVIDIA GPU (?P<bus>{_BUS})\b')
_FALLEN = re.compile(r'NVRM: .*fallen off the bus')
# The lines after `The NVIDIA GPU ...` within which the driver says it fell off.
_FALLEN_WITHIN = 3
# A stamp the line begins with: `[Sun Feb 23 16:24:18 2025]`, `[ 1843.308145]`,
# `Feb 14 05:03:41 host kernel:`, `2025-02-23T16:24:18,123456+00:00 host kernel:`.
_STAMP = re.compile(r'\s*(\[[^\]]{1,40}\]|\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:|'
                    r'\d{4}-\d\d-\d\dT[\d:.,]+[+-]\d\d:?\d\d \S+ kernel:)')


class KernelLogError(ValueError):
    pass


@dataclass(frozen=True)
class Xid:
    """One XID event: the GPU's PCI bus as the driver names it (`0000:9b:00`), the code,
    the process (where said) and the rest of the driver's line; `stamp` as the log has it."""
    bus: str
    code: int
    said: str
    pid: str = ''
    process: str = ''
    stamp: str = ''
    inferred: bool = False      # read from "fallen off the bus" lines without an XID

    def words(self):
        return (f'XID {self.code} on the GPU at PCI {self.bus}'
                + (f' ({self.process})' if self.process else '') + f': {self.said}')[:300]


def text_of(log):
    """The log as text (str, or bytes in UTF-8); KernelLogError where it is no log."""
    if len(log) > MAX_LOG_BYTES:
        raise KernelLogError(f'kernel log of {len(log)} bytes: more than the {MAX_LOG_BYTES} '
                             'of any kernel\'s log: not one')
    if isinstance(log, (bytes, bytearray)):
        try:
            return log.decode('utf-8')
        except UnicodeDecodeError as err:
            raise KernelLogError(f'kernel log: not UTF-8 ({err.reason} at byte {err.start})'
                                 ) from None
    return log


def xids(log):
    """Every Xid of the log, in its order."""
    found = []
    lines = text_of(log).splitlines()
    for number, line in enumerate(lines):
        stamp = _STAMP.match(line)
        match = _XID.search(line)
        if match:
            found.append(Xid(bus=match['bus'].lower(), code=int(match['code']),
                             said=match['said'].strip(), pid=(match['pid'] or '').strip(),
                             process=(match['name'] or '').strip(),
                             stamp=stamp.group(1) if stamp else ''))
            continue
        gpu = _THE_GPU.search(line)
        if gpu and any(_FALLEN.search(later)
                       for later in lines[number + 1:number + 1 + _FALLEN_WITHIN]):
            bus = gpu['bus'].lower()
            found.append(Xid(bus=bus[:-2] if bus[-2] == '.' else bus,
                             code=FALLEN_OFF_THE_BUS, said='GPU has fallen off the bus',
                             stamp=stamp.group(1) if stamp else '', inferred=True))
    # A driver that printed the XID as well said it once.
    told = {x.bus for x in found if x.code == FALLEN_OFF_THE_BUS and not x.inferred}
    return [x for x in found if not (x.inferred and x.bus in told)]


def new_lines(before, after):
    """The lines of the log read `after` a run that its read `before` lacked (each line
    counted: a line the driver printed again is new): what the run saw, whatever the
    log's stamps. The ring may have dropped old lines since; new ones are never lost."""
    seen = Counter(text_of(before).splitlines())
    fresh = []
    for line in text_of(after).splitlines():
        if seen[line]:
            seen[line] -= 1
        else:
            fresh.append(line)
    return '\n'.join(fresh)


def xids_during(before, after):
    """The Xids the log gained between the read `before` a run and the one `after` it."""
    return xids(new_lines(before, after))
