"""The node's achievable ceilings, measured with likwid-bench (Debian's `likwid`): the flop
rate its cores sustain and the memory bandwidth they reach, each over all cores of the node.

- Sustained peak: a peakflops kernel (vector FMAs on data that stays in L1): what the cores
  do when nothing but the arithmetic limits them. HPL is compared with it, with nominal
  Rpeak (cores x clock x flop/cycle) and with the best DGEMM (hpcbench.benchmarks.dgemm).
- Bandwidth ceiling: STREAM's own triad, a(i) = b(i) * s + c(i), done at its best
  (vectorised, non-temporal stores, so that no write-allocate traffic is counted or spent),
  on STREAM's arrays (each 4 times the last-level caches). A read-only kernel (`load`) is
  measured beside it: how much of the bandwidth is reads alone.
- Ordinary-store triad: the same triad with the stores a compiled STREAM makes (GCC emits
  no non-temporal stores): each store first reads its cache line (write allocate), traffic
  STREAM does not count, so a compiled STREAM reaches at most about 3/4 of the bandwidth
  ceiling.

STREAM's all-core run is judged against both in its own job (reframe-checks/stream.py),
round by round (round_robin_script, parse_rounds, percent_of_fastest): each ceiling there
is the faster of likwid-bench's kernel and STREAM's own program of the same triad, as both
run in the same round, and rates are means over their iterations on both sides.

In NodeCeilings' job each kernel runs `repeats` times, round robin; the figure is the best,
and the runs' values are its sample: on a VM whose clock varies, their spread is that
variation (the clock likwid-bench prints is the time-stamp counter's, which does not vary
with it).
"""
import re
import shlex
from dataclasses import dataclass

from hpcbench.benchmarks import stream

REPEATS = 3
# Bytes per thread of the peakflops kernel's vector: a third of the smallest L1 data cache
# of any x86 core it runs on (32 KiB), so that no load misses L1.
PEAK_BYTES_PER_THREAD = 10 * 1024
# Iterations per run, given rather than calibrated by likwid-bench (its calibration takes
# longer than the run): about a second each on a current node (0.8 s of peakflops at 185
# GFLOP/s; 20 sweeps of 2 GiB at 37 GB/s).
ITERATIONS = {'peak': 2000000, 'memory': 20}

# The kernels of an instruction set, widest first; a node uses the widest its cores have
# (as flop per cycle tell: 32 = two AVX-512 FMA units, 16 = AVX2 FMA, 8 = AVX, else SSE).
KERNELS = (
    # (least flop/cycle per core, peak, bandwidth ceiling, read-only bandwidth,
    #  ordinary-store triad)
    (32, 'peakflops_avx512_fma', 'stream_mem_avx512', 'load_avx512', 'stream_avx512_fma'),
    (16, 'peakflops_avx_fma', 'stream_mem_avx_fma', 'load_avx', 'stream_avx_fma'),
    (8, 'peakflops_avx', 'stream_mem_avx', 'load_avx', 'stream_avx'),
    (0, 'peakflops_sse', 'stream_mem_sse', 'load_sse', 'stream_sse'),
)
MARKER = 'hpcbench-kernel'


class CeilingOutputError(ValueError):
    pass


@dataclass(frozen=True)
class Kernels:
    peak: str
    bandwidth: str
    read: str
    cached_store: str

    def __iter__(self):
        return iter((self.peak, self.bandwidth, self.read, self.cached_store))


def kernels(flops_per_cycle):
    """The likwid-bench kernels of a core that does `flops_per_cycle` DP flops per cycle."""
    for least, *names in KERNELS:
        if flops_per_cycle >= least:
            return Kernels(*names)

    raise ValueError(f'flops_per_cycle={flops_per_cycle}: not a number of flops')


def working_sets(kernels_, cores, llc_bytes, memory_bytes):
    """{kernel: likwid-bench's -W size} : the peak kernel's vector in L1; the bandwidth
    kernels' (all their arrays together) STREAM's three arrays, each 4 times the last-level
    caches (STREAM's rule), at most a quarter of the memory. (With a third of that, each
    array 4/3 of the caches, a VM whose host has more cache than it shows measured 80 GB/s
    from two cores, against 46-50.)"""
    memory_kib = min(3 * stream.LLC_FACTOR * llc_bytes, memory_bytes // 4) // 1024
    return {kernels_.peak: f'{cores * PEAK_BYTES_PER_THREAD // 1024}kB',
            **{kernel: f'{memory_kib}kB' for kernel in (kernels_.bandwidth, kernels_.read,
                                                         kernels_.cached_store)}}


SCRIPT = 'ceilings.sh'
_PEAK_KERNELS = {peak for _, peak, *_ in KERNELS}


def likwid_command(kernel, size, cores):
    """likwid-bench running `kernel` on `size` (a working_sets() value) over `cores` cores."""
    iterations = ITERATIONS['peak' if kernel in _PEAK_KERNELS else 'memory']
    return f'likwid-bench -t {kernel} -W {shlex.quote(f"N:{size}:{cores}")} -i {iterations}'


def round_robin_script(runs, repeats):
    """A job script that runs each of `runs` ((name, shell command) pairs) `repeats` times,
    round robin (so that a slow phase of the node touches every run), each after a marker
    line the parsers split on; it stops at the first run that fails."""
    lines = ['#!/bin/sh', 'set -e']
    lines += [f'echo {MARKER} {name} {run}\n{command}'
              for run in range(1, repeats + 1) for name, command in runs]
    return '\n'.join(lines) + '\n'


def script(kernels_, cores, sizes, repeats=REPEATS):
    """NodeCeilings' script: each kernel `repeats` times, round robin, over all cores
    (likwid-bench pins its threads). `sizes`: working_sets()."""
    return round_robin_script([(kernel, likwid_command(kernel, sizes[kernel], cores))
                               for kernel in kernels_], repeats)


@dataclass(frozen=True)
class KernelRun:
    kernel: str
    mflops: float
    mbytes: float


@dataclass(frozen=True)
class Ceilings:
    kernels: Kernels
    runs: tuple

    def values(self, kernel, field):
        return [getattr(r, field) for r in self.runs if r.kernel == kernel]

    @property
    def peak_gflops(self):
        return [v / 1e3 for v in self.values(self.kernels.peak, 'mflops')]

    @property
    def bandwidth_mbps(self):
        return self.values(self.kernels.bandwidth, 'mbytes')

    @property
    def read_mbps(self):
        return self.values(self.kernels.read, 'mbytes')

    @property
    def cached_store_mbps(self):
        return self.values(self.kernels.cached_store, 'mbytes')


_FIELD = {'mflops': r'^MFlops/s:\s+([\d.]+)', 'mbytes': r'^MByte/s:\s+([\d.]+)'}


def sections(output):
    """[(name, round, text)]: what ran after each marker of a round_robin_script job."""
    parts = re.split(rf'^{MARKER} (\S+) (\d+)$', output, flags=re.M)
    return list(zip(parts[1::3], map(int, parts[2::3]), parts[3::3]))


def likwid_run(kernel, text):
    """One likwid-bench run's rates; CeilingOutputError when it printed none (a kernel the
    CPU or likwid-bench refused, a run cut short)."""
    values = {}
    for field, pattern in _FIELD.items():
        match = re.search(pattern, text, re.M)
        if not match:
            first = next((ln for ln in text.splitlines() if ln.strip()), 'no output')
            raise CeilingOutputError(f'likwid-bench {kernel}: no {pattern[1:].split(":")[0]}'
                                     f' in its output ({first.strip()[:120]})')
        values[field] = float(match.group(1))
    return KernelRun(kernel, **values)


def _check_counts(done, names, repeats, what=''):
    for name in names:
        if done.count(name) != repeats:
            raise CeilingOutputError(f'{what}{name}: {done.count(name)} of {repeats} runs '
                                     'in the output')


def parse(output, kernels_, repeats):
    """The runs in a job's output; CeilingOutputError when a run is missing or incomplete."""
    runs = [likwid_run(kernel, text) for kernel, _, text in sections(output)]
    _check_counts([r.kernel for r in runs], kernels_, repeats, 'likwid-bench ')
    return Ceilings(kernels_, tuple(runs))


@dataclass(frozen=True)
class Round:
    """One round of STREAM beside its ceiling kernels (one job, hpcbench.benchmarks.stream's
    check): each run's mean rate in MB/s, by what ran (a likwid-bench kernel, or a STREAM
    program and then its triad's rate over its average time), and each STREAM program's
    result."""
    mean_mbps: dict
    streams: dict


def parse_rounds(output, kernel_names, programs, threads, rounds):
    """The `rounds` rounds of a job that ran the likwid-bench kernels `kernel_names` and the
    STREAM programs `programs` (file names, as the markers name them) round robin, in
    order; CeilingOutputError or stream.StreamOutputError when a run is missing, broken or
    not in its round."""
    found = sections(output)
    _check_counts([name for name, _, _ in found], [*kernel_names, *programs], rounds)
    by_round = [Round({}, {}) for _ in range(rounds)]
    for name, number, text in found:
        if not 1 <= number <= rounds or name in by_round[number - 1].mean_mbps:
            raise CeilingOutputError(f'{name} ran twice in round {number} or out of '
                                     f'rounds 1-{rounds}')
        this = by_round[number - 1]
        if name in programs:
            this.streams[name] = stream.parse(text, threads)
            this.mean_mbps[name] = this.streams[name].mean_rate_mbps['Triad']
        elif name in kernel_names:
            this.mean_mbps[name] = likwid_run(name, text).mbytes
        else:
            raise CeilingOutputError(f'{name} ran, which the job was not to run')
    return by_round


def percent_of_fastest(rounds, measured, ceiling_runs):
    """Per round: 100 x the mean rate of `measured` / that of the fastest of `ceiling_runs`
    in the same round (a ceiling measured minutes away, on a node whose memory's rate swings
    by half within seconds, made the ratio a measure of the swing)."""
    # (measured / fastest first: a run that is its own ceiling is exactly 100 %)
    return [100 * (r.mean_mbps[measured] / max(r.mean_mbps[c] for c in ceiling_runs))
            for r in rounds]
