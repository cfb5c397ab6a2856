"""A GPU's power, clocks and throttle reasons sampled while it is measured: the sampler a GPU
job runs beside its benchmark (`nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv -lms N`),
its trace parsed, and what the samples during the calls say.

A DGEMM ceiling is only a ceiling at the clocks and power it ran at: on the H200 node
(2026-11-26) cuBLAS DGEMM on zero-filled matrices ran 65.4 TFLOP/s at 457 W and 1980 MHz,
on random data 52 to 54 TFLOP/s at the 700 W power limit, the SM clock held at 1575 to 1665
MHz by the software power cap. A figure without its power and its clocks' reasons cannot
tell a slow GPU from a capped one.

Throttle reasons are NVML's clocks event reasons (NVML API Reference, "Clocks Event
Reasons"), a bit mask per sample.

Standard library only: the parser runs where the trace is.
"""
import datetime
import statistics
from dataclasses import dataclass

from hpcbench.core import accelerators, gpu_ranks

QUERY_FIELDS = ('timestamp', 'power.draw', 'clocks.sm', 'clocks.mem', 'temperature.gpu',
                'clocks_event_reasons.active')
# NVML's clocks event reasons, by bit.
EVENT_REASONS = {
    0x1: 'gpu_idle', 0x2: 'applications_clocks_setting', 0x4: 'sw_power_cap',
    0x8: 'hw_slowdown', 0x10: 'sync_boost', 0x20: 'sw_thermal_slowdown',
    0x40: 'hw_thermal_slowdown', 0x80: 'hw_power_brake_slowdown',
    0x100: 'display_clock_setting',
}
# Reasons that mean the GPU ran below its clocks because of power or heat: a figure measured
# under them is the capped GPU's, and says so.
LIMITING = ('sw_power_cap', 'hw_slowdown', 'sw_thermal_slowdown', 'hw_thermal_slowdown',
            'hw_power_brake_slowdown')


class TraceError(ValueError):
    pass


# The sampler's interval (seconds): the rank wrapper's `nvidia-smi -lms`.
SAMPLE_INTERVAL = gpu_ranks.SAMPLE_MS / 1000
# A trace covers the calls with no gap of more than this many intervals (a second; the H200
# node's largest was 0.226 s of 0.2) and at least this share of the samples the calls'
# length holds (its three jobs had 100 % of them).
GAP_INTERVALS = 5
COVERED = 0.8


@dataclass(frozen=True)
class Sample:
    time: datetime.datetime
    power_w: float
    sm_clock_hz: float
    memory_clock_hz: float
    temperature_c: float
    reasons: int


def parse_trace(text):
    """The samples of a trace (its header line first, as nvidia-smi writes it with
    --format=csv), in time order. A line whose values are no numbers ([N/A] where a GPU
    does not report one) is refused, naming it."""
    samples = []
    for line, cell in accelerators.smi_csv(text, QUERY_FIELDS, TraceError,
                                           empty='the trace is empty: the sampler did not run'):
        try:
            time = parse_stamp(cell['timestamp'])
        except TraceError as err:
            raise TraceError(f'line {line}: {err}') from None
        try:
            reasons = int(cell['clocks_event_reasons.active'], 16)
        except ValueError:
            raise TraceError(f'line {line}: clocks event reasons '
                             f'{cell["clocks_event_reasons.active"]!r} is no bit mask') from None
        def number(field, what, unit):
            return accelerators.smi_number(cell[field], f'line {line}: {what}', TraceError,
                                           unit)

        samples.append(Sample(time, number('power.draw', 'power', 'W'),
                              number('clocks.sm', 'SM clock', 'MHz') * 1e6,
                              number('clocks.mem', 'memory clock', 'MHz') * 1e6,
                              number('temperature.gpu', 'temperature', 'C'), reasons))
    return sorted(samples, key=lambda s: s.time)


def reasons_of(mask):
    """The names of the reasons a mask holds, in bit order (an unknown bit by its value)."""
    names = [name for bit, name in EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(EVENT_REASONS)
    return names + ([f'0x{unknown:x}'] if unknown else [])


@dataclass(frozen=True)
class Summary:
    samples: int
    power_median_w: float
    power_max_w: float
    sm_clock_min_hz: float
    sm_clock_max_hz: float
    temperature_max_c: float
    reasons: tuple              # every reason seen in the window, in bit order

    @property
    def limited_by(self):
        """The reasons of the window that held the clocks down (power or heat)."""
        return tuple(r for r in self.reasons if r in LIMITING)


def window(samples, start=None, end=None):
    """A summary of the samples from `start` to `end` (datetimes; None: the trace's ends)."""
    chosen = [s for s in samples if (start is None or s.time >= start)
              and (end is None or s.time <= end)]
    if not chosen:
        raise TraceError(f'no sample from {start} to {end}: the calls ran between two '
                         'samples (sample more often)')
    mask = 0
    for s in chosen:
        mask |= s.reasons
    return Summary(len(chosen), statistics.median(s.power_w for s in chosen),
                   max(s.power_w for s in chosen), min(s.sm_clock_hz for s in chosen),
                   max(s.sm_clock_hz for s in chosen),
                   max(s.temperature_c for s in chosen), tuple(reasons_of(mask)))


def during_calls(samples, start, end, interval=SAMPLE_INTERVAL):
    """The samples of the calls: from `start` to `end` (the calls' window) and the GPU not
    idle (NVML's gpu_idle reason: the program at work on the host, making its matrices or
    checking the result). A trace that does not cover the window is no record of the calls'
    power (a sampler killed, crashed or starved: a quarter of the calls' samples gave 332 W
    where the whole trace gives 698 W): TraceError, saying how. It covers the window when it
    has a sample at most one `interval` (seconds, the sampler's) after the window's start
    and one at most one interval before its end (the sampler runs a second beyond both), no
    gap longer than GAP_INTERVALS intervals between them, and a sample in at least COVERED
    of the intervals the window's length holds (whole intervals: a window shorter than an
    interval needs none of its own). Samples are counted once per time (distinct), and
    intervals once however many samples they hold."""
    samples = distinct(samples)
    step = datetime.timedelta(seconds=interval)
    seconds = (end - start).total_seconds()
    if not samples or samples[0].time > start + step:
        raise TraceError(f'the trace starts {_after(samples, start)} the calls began '
                         f'({_clock(start)}): the sampler started late, no power figure')
    if samples[-1].time < end - step:
        raise TraceError(f'the trace ends {(end - samples[-1].time).total_seconds():.1f} s '
                         f'before the calls did (at {_clock(samples[-1].time)}, the calls '
                         f'{_clock(start)} to {_clock(end)}): the sampler stopped early, no '
                         'power figure')
    within = [s for s in samples if start - step <= s.time <= end + step]
    gap = max(((b.time - a.time).total_seconds() for a, b in zip(within, within[1:])),
              default=0.0)
    if gap > GAP_INTERVALS * interval:
        raise TraceError(f'no sample for {gap:.1f} s during the calls (one every {interval:g} '
                         's was asked): the sampler stalled, no power figure')
    # Intervals with a sample, not samples: rows doubled a millisecond after themselves
    # (distinct stamps) made a trace of 40 % of the calls pass as covering them.
    count = len({int((s.time - start).total_seconds() // interval) for s in samples
                 if start <= s.time <= end})
    if count < int(COVERED * seconds / interval):
        raise TraceError(f'{count} samples over the calls\' {seconds:.1f} s, one every '
                         f'{interval:g} s gives {seconds / interval:.0f}: the sampler missed '
                         f'more than {100 * (1 - COVERED):.0f} % of them, no power figure')
    idle = next(bit for bit, name in EVENT_REASONS.items() if name == 'gpu_idle')
    return [s for s in samples if start <= s.time <= end and not s.reasons & idle]


def distinct(samples):
    """The samples, one per time: nvidia-smi stamps each of its samples of one GPU at a time
    of its own (to the millisecond), so a row repeated with its time counts once (a trace of
    40 % of the calls, its rows doubled, passed as covering them); two rows of one time that
    differ are no one GPU's trace (TraceError)."""
    kept = {}
    for sample in samples:
        seen = kept.setdefault(sample.time, sample)
        if seen != sample:
            raise TraceError(f'two samples stamped {_clock(sample.time)} that differ: the '
                             'trace is not one GPU\'s, no power figure')
    return sorted(kept.values(), key=lambda s: s.time)


def _clock(time):
    return f'{time:%H:%M:%S}.{time.microsecond // 1000:03d}'


def _after(samples, start):
    if not samples:
        return 'with no sample, after'
    return f'{(samples[0].time - start).total_seconds():.1f} s after'


def parse_stamp(text):
    """A time as nvidia-smi stamps its samples (and the rank wrapper the calls)."""
    try:
        return datetime.datetime.strptime(text.strip(), '%Y/%m/%d %H:%M:%S.%f')
    except ValueError:
        raise TraceError(f'{text.strip()!r} is no time') from None


def gflops_per_watt(flops_per_s, power_w):
    """The rate per watt; a GPU that drew no power at work is a trace that is not its."""
    if not power_w > 0:
        raise TraceError(f'a power of {power_w:g} W during the calls: no GPU computes on no '
                         'power, the trace is not the calls\'')
    return flops_per_s / 1e9 / power_w
