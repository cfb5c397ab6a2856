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

from hpcbench.core import accelerators

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


@dataclass(frozen=True)
class Sample:
    time: datetime.datetime
    power_w: float
    sm_clock_hz: float
    memory_clock_hz: float
    temperature_c: float
    reasons: int


def sampler_command(output, interval_ms=200, nvidia_smi='nvidia-smi'):
    """The shell words of the sampler a job starts in the background before its calls."""
    return [nvidia_smi, f'--query-gpu={",".join(QUERY_FIELDS)}', '--format=csv',
            '-lms', str(int(interval_ms)), '-f', output]


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
        def number(field, what):
            return accelerators.smi_number(cell[field], f'line {line}: {what}', TraceError)

        samples.append(Sample(time, number('power.draw', 'power'),
                              number('clocks.sm', 'SM clock') * 1e6,
                              number('clocks.mem', 'memory clock') * 1e6,
                              number('temperature.gpu', 'temperature'), reasons))
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


def during_calls(samples, start, end):
    """The samples of the calls: from `start` to `end` (the calls' window) and the GPU not
    idle (NVML's gpu_idle reason: the program at work on the host, making its matrices or
    checking the result)."""
    idle = next(bit for bit, name in EVENT_REASONS.items() if name == 'gpu_idle')
    return [s for s in samples if start <= s.time <= end and not s.reasons & idle]


def parse_stamp(text):
    """A time as nvidia-smi stamps its samples (and the rank wrapper the calls)."""
    try:
        return datetime.datetime.strptime(text.strip(), '%Y/%m/%d %H:%M:%S.%f')
    except ValueError:
        raise TraceError(f'{text.strip()!r} is no time') from None


def gflops_per_watt(flops_per_s, power_w):
    return flops_per_s / 1e9 / power_w
