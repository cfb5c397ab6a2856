"""A node's InfiniBand and RoCE ports as the kernel shows them under
/sys/class/infiniband/<device>/ports/<port>/ (what `ibstat` reads): the port's state and
physical state, the rate, width and speed it trained at, its firmware, and its error
counters (symbol errors, link downed, receive errors, buffer overruns) as they stand, so
that two reads, before and after a run, say what the run saw (`increase`): the counters
are never reset here, another tool's reset is said (issue 73).

A port at half its width (`2X` of `4X`) or with symbol errors rising passes a short
benchmark and costs a job on it "5 to 30 % of NCCL throughput" (facebookresearch/gcm PR
119). A file the kernel cannot give (a counter a driver does not have, EINVAL) is None:
not read, never a zero. What is no value of the kind (a rate that reads no rate, text that
is not UTF-8, a file larger than any sysfs attribute) is refused, naming the file.

`root` is the directory that stands for /sys: the testbed points each emulated node at a
tree of its own, so that its faults are injected for real. `ibstat`'s text, where that is
what a site kept, reads into the same records (parse_ibstat: state, rate, firmware; no
counters, no lanes: it prints none).

Standard library only: it runs on compute nodes too."""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import kernel_files

INFINIBAND = Path('class') / 'infiniband'
# A sysfs attribute is one page at most.
MAX_ATTRIBUTE_BYTES = 4096
# The most ports and devices a node has (8 HCAs of 2 ports today); more is no node's.
MAX_PORTS = 256
# The error counters of the InfiniBand port counters every driver has (the PortCounters
# attribute of the InfiniBand specification, as the kernel names them).
ERROR_COUNTERS = ('symbol_error', 'link_error_recovery', 'link_downed', 'port_rcv_errors',
                  'port_rcv_remote_physical_errors', 'port_rcv_switch_relay_errors',
                  'port_xmit_discards', 'port_xmit_constraint_errors',
                  'port_rcv_constraint_errors', 'local_link_integrity_errors',
                  'excessive_buffer_overrun_errors', 'VL15_dropped')


class NicHealthError(ValueError):
    pass


@dataclass(frozen=True)
class PortHealth:
    """One port of one RDMA device at one moment."""
    device: str                 # 'mlx5_0'
    port: int
    link_layer: str = None      # 'InfiniBand', 'Ethernet' (RoCE)
    state: str = None           # 'ACTIVE', 'DOWN', 'INIT', 'ARMED'
    physical_state: str = None  # 'LinkUp', 'Polling', 'Disabled'
    rate_gbps: float = None     # 400.0
    width: int = None           # lanes: 4 for 4X
    speed: str = None           # 'NDR', 'HDR', 'EDR', 'QDR'
    counters: tuple = ()        # ((name, value or None), ...) in ERROR_COUNTERS' order
    firmware: str = ''
    model: str = ''             # the HCA type: 'MT4123'

    @property
    def name(self):
        return f'{self.device}/{self.port}'

    def counter(self, name):
        return dict(self.counters).get(name)

    def rate_words(self):
        """`400 Gb/s (4X NDR)`."""
        if self.rate_gbps is None:
            return 'rate not read'
        lanes = '' if self.width is None else f'{self.width}X'
        said = ' '.join(part for part in (lanes, self.speed or '') if part)
        return f'{self.rate_gbps:g} Gb/s' + (f' ({said})' if said else '')


def read_ports(root='/sys'):
    """The PortHealth of every port of every RDMA device under `root`/class/infiniband,
    sorted by device and port; () where the node has none (no such directory)."""
    base = Path(root) / INFINIBAND
    if not base.is_dir():
        return ()
    ports = []
    for device in sorted(os.listdir(base)):
        port_dir = base / device / 'ports'
        if not port_dir.is_dir():
            continue
        for port in sorted(os.listdir(port_dir), key=lambda p: (len(p), p)):
            if not port.isdigit():
                continue
            ports.append(_port(base / device, device, int(port)))
            if len(ports) > MAX_PORTS:
                raise NicHealthError(f'{base}: more than {MAX_PORTS} RDMA ports: no node '
                                     'has so many')
    return tuple(ports)


def _port(device_dir, device, number):
    here = device_dir / 'ports' / str(number)
    rate = _attribute(here / 'rate')
    gbps, width, speed = parse_rate(rate, here / 'rate') if rate is not None else (None,) * 3
    counters = tuple((name, _count(here / 'counters' / name)) for name in ERROR_COUNTERS)
    return PortHealth(
        device=device, port=number, link_layer=_attribute(here / 'link_layer'),
        state=_state(here / 'state'), physical_state=_state(here / 'phys_state'),
        rate_gbps=gbps, width=width, speed=speed, counters=counters,
        firmware=_attribute(device_dir / 'fw_ver') or '',
        model=_attribute(device_dir / 'hca_type') or '')


def _attribute(path):
    """The text of a sysfs attribute, stripped; None where it is absent or the kernel will
    not give it (a counter the driver lacks answers EINVAL)."""
    return kernel_files.text(path, MAX_ATTRIBUTE_BYTES, NicHealthError)


# `4: ACTIVE`, `5: LinkUp`: the number the specification gives and its name.
_STATE = re.compile(r'(\d+):\s*(\w+)')


def _state(path):
    text = _attribute(path)
    if text is None:
        return None
    match = _STATE.fullmatch(text)
    if not match:
        raise NicHealthError(f'{path}: {text[:60]!r} is no port state (e.g. "4: ACTIVE")')
    return match.group(2)


# `400 Gb/sec (4X NDR)`, `25 Gb/sec (1X EDR)`, `40 Gb/sec (4X FDR10)`, `2.5 Gb/sec (1X SDR)`;
# a RoCE port of some drivers: `100 Gb/sec (2X HDR)`; a speed the kernel does not name:
# `10 Gb/sec (4X)`.
_RATE = re.compile(r'(\d+(?:\.\d+)?) Gb/sec(?: \((\d+)X(?: (\w+))?\))?')


def parse_rate(text, where='rate'):
    """(Gb/s, lanes, speed name) of a port's `rate` attribute; NicHealthError where it
    reads no rate."""
    match = _RATE.fullmatch(text.strip())
    if not match or not 0 < float(match.group(1)) <= 10_000:
        raise NicHealthError(f'{where}: {text.strip()[:60]!r} is no port rate (e.g. '
                             '"400 Gb/sec (4X NDR)")')
    lanes = int(match.group(2)) if match.group(2) else None
    if lanes is not None and not 1 <= lanes <= 32:
        raise NicHealthError(f'{where}: {text.strip()[:60]!r}: {lanes} lanes is no port '
                             'width')
    return float(match.group(1)), lanes, match.group(3)


def _count(path):
    return kernel_files.count(path, MAX_ATTRIBUTE_BYTES, NicHealthError)


@dataclass(frozen=True)
class Increase:
    """What a counter did between two reads of a port: its increase, or None with why."""
    counter: str
    increase: int = None
    why: str = ''


def increase(before, after):
    """The Increase of each error counter of a port from `before` to `after` (PortHealth
    of the same port), in ERROR_COUNTERS' order: None where either read lacks it, or where
    it went down (reset by another tool: the run's increase is unknown, never a zero)."""
    if (before.device, before.port) != (after.device, after.port):
        raise NicHealthError(f'port {before.name} read before the run, {after.name} after: '
                             'not the same port')
    first, last = dict(before.counters), dict(after.counters)
    changes = []
    for name in ERROR_COUNTERS:
        old, new = first.get(name), last.get(name)
        if old is None or new is None:
            changes.append(Increase(name, None, 'not read ' + (
                'before the run' if old is None else 'after the run')))
        elif new < old:
            changes.append(Increase(name, None, f'went down from {old} to {new}: reset '
                                                'during the run by another tool'))
        else:
            changes.append(Increase(name, new - old))
    return tuple(changes)


# ibstat's words for a port's logical state, as the kernel's sysfs names them.
_IBSTAT_STATES = {'Active': 'ACTIVE', 'Down': 'DOWN', 'Initializing': 'INIT', 'Armed': 'ARMED',
                  'Active deferred': 'ACTIVE_DEFER'}
_IBSTAT_CA = re.compile(r"CA '([^']{1,64})'")
_IBSTAT_PORT = re.compile(r'Port (\d{1,3}):')
_IBSTAT_FIELD = re.compile(r'([A-Za-z ]+?):\s*(.*)')
# What `ibstat` prints is a few kB a port; more is no output of it.
MAX_IBSTAT_BYTES = 1 << 20


def parse_ibstat(text):
    """The PortHealth of every port `ibstat` printed (no counters: it prints none; no lanes:
    it prints the rate alone); NicHealthError where it is no ibstat output. A CA whose lines
    ended early (ibstat stopped, or a line was cut) keeps what it said: a field not printed is
    None, not read."""
    if len(text) > MAX_IBSTAT_BYTES:
        raise NicHealthError(f'ibstat: {len(text)} characters, more than any node prints')
    ports, device, firmware, model, port = [], None, '', '', None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        ca = _IBSTAT_CA.fullmatch(stripped)
        if ca:
            device, firmware, model, port = ca[1], '', '', None
            continue
        if device is None:
            raise NicHealthError(f'ibstat line {number}: {stripped[:60]!r} before any "CA" '
                                 'line: not ibstat\'s output')
        opened = _IBSTAT_PORT.fullmatch(stripped)
        if opened:
            port = {'device': device, 'port': int(opened[1]), 'firmware': firmware,
                    'model': model}
            ports.append(port)
            continue
        field = _IBSTAT_FIELD.fullmatch(stripped)
        if not field:
            raise NicHealthError(f'ibstat line {number}: {stripped[:60]!r} is no "name: value"')
        name, value = field[1], field[2].strip()
        if port is None:
            firmware = value if name == 'Firmware version' else firmware
            model = value if name == 'CA type' else model
        elif name == 'State':
            port['state'] = _IBSTAT_STATES.get(value, value.upper() or None)
        elif name == 'Physical state':
            port['physical_state'] = value or None
        elif name == 'Link layer':
            port['link_layer'] = value or None
        elif name == 'Rate' and value:
            port['rate_gbps'] = parse_rate(f'{value} Gb/sec', f'ibstat line {number} rate')[0]
    return tuple(PortHealth(**p) for p in ports)
