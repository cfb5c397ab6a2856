"""The node's achievable ceilings, measured with likwid-bench (Debian's `likwid`): the flop
rate its cores sustain and the memory bandwidth they reach, each over all cores of the node.

- Sustained peak: a peakflops kernel (vector FMAs on data that stays in L1): what the cores
  do when nothing but the arithmetic limits them. HPL is compared with it, with nominal
  Rpeak (cores x clock x flop/cycle) and with the best DGEMM (hpcbench.dgemm).
- Bandwidth ceiling: STREAM's own triad, a(i) = b(i) * s + c(i), done at its best
  (vectorised, non-temporal stores, so that no write-allocate traffic is counted or spent),
  on STREAM's arrays (each 4 times the last-level caches): STREAM's triad is compared
  with it, both as compiled and with streaming stores (StreamCheck's `stores`). STREAM's
  own triad with streaming stores is measured as a second such kernel (StreamingStoreCeiling
  in reframe-checks/stream.py) and the faster is the ceiling: here likwid-bench's, the same
  instructions, ran 6 % slower (median of paired rounds; 8 % with one thread). A read-only
  kernel (`load`) is measured beside it: how much of the bandwidth is reads alone.
- Ordinary-store triad: the same triad with the stores a compiled STREAM makes (GCC emits
  no non-temporal stores): each store first reads its cache line (write allocate), traffic
  STREAM does not count, so a compiled STREAM reaches at most about 3/4 of the bandwidth
  ceiling. STREAM's triad is also compared with it: how well the build and the thread
  placement do what the hardware allows that code (here 29.7-32.3 GB/s against 27.3-32.6 for
  this kernel and 38.8-43.4 for the ceiling, three rounds).

Each kernel runs `repeats` times in the job, round robin; the figure is the best, and the
runs' values are its sample: on a VM whose clock varies, their spread is that variation (the
clock likwid-bench prints is the time-stamp counter's, which does not vary with it).
"""
import re
import shlex
from dataclasses import dataclass

from hpcbench import stream

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


def script(kernels_, cores, sizes, repeats=REPEATS):
    """The job's script: each kernel `repeats` times, round robin (so that a slow phase of
    the node touches every kernel), over all cores (likwid-bench pins its threads), each run
    after a marker line the parser splits on; it stops at the first run that fails.
    `sizes`: working_sets()."""
    lines = ['#!/bin/sh', 'set -e']
    iterations = {kernel: ITERATIONS['peak' if kernel == kernels_.peak else 'memory']
                  for kernel in kernels_}
    lines += [f'echo {MARKER} {kernel} {run}\n'
              f'likwid-bench -t {kernel} -W {shlex.quote(f"N:{sizes[kernel]}:{cores}")} '
              f'-i {iterations[kernel]}'
              for run in range(1, repeats + 1) for kernel in kernels_]
    return '\n'.join(lines) + '\n'


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


def parse(output, kernels_, repeats):
    """The runs in a job's output; CeilingOutputError when a run is missing or incomplete
    (a kernel the CPU or likwid-bench refused, a job cut short)."""
    sections = re.split(rf'^{MARKER} (\S+) (\d+)$', output, flags=re.M)
    runs = []
    for kernel, _run, text in zip(sections[1::3], sections[2::3], sections[3::3]):
        values = {}
        for field, pattern in _FIELD.items():
            match = re.search(pattern, text, re.M)
            if not match:
                first = next((ln for ln in text.splitlines() if ln.strip()), 'no output')
                raise CeilingOutputError(f'likwid-bench {kernel}: no {pattern[1:].split(":")[0]}'
                                         f' in its output ({first.strip()[:120]})')
            values[field] = float(match.group(1))
        runs.append(KernelRun(kernel, **values))

    for kernel in kernels_:
        done = sum(r.kernel == kernel for r in runs)
        if done != repeats:
            raise CeilingOutputError(f'likwid-bench {kernel}: {done} of {repeats} runs '
                                     'in the output')
    return Ceilings(kernels_, tuple(runs))
