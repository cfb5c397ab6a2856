"""The DGEMM ceiling: what one node's BLAS attains, HPL's practical upper bound.

Nominal Rpeak (cores x clock x flop/cycle) assumes the nominal clock; a node whose clock
drops under a full AVX-512 load (or a VM whose host varies) never reaches it. HPL's
efficiency is therefore also reported against the DGEMM rate measured on the node with the
same BLAS (the role of HPCC's StarDGEMM), by our `dgemm-rate` program
(packages/spack_repo/hpcbench/packages/dgemm_rate).
"""
import math
import re
import statistics
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

# One call should take about a second at nominal peak, long enough to hide start-up
# effects and short enough for every run; 256 keeps the order a multiple of BLAS blocks.
SECONDS_PER_CALL = 1.0
ORDER_GRANULE = 256
# Three matrices of order n must stay a small part of the node's memory.
MAX_MEMORY_FRACTION = 0.05
REPEATS = 5
# In quick mode: a library's 3 calls against the default's 3 per MPI stack still separate
# them (one-sided Mann-Whitney U: smallest p 1/455 against four stacks' 12).
QUICK_REPEATS = 3


# The GPU's program, dgemm-rate-cuda (dgemm-rate +cuda): cuBLAS on one GPU, the same output.
CUDA_PROGRAM = 'dgemm-rate-cuda'


# Accelerators driven through their vendor's BLAS, by vendor: the CPU's dgemm-rate linked with
# it (TSUBAME's ClearSpeed boards ran DGEMM calls through ClearSpeed's CSXL).
BLAS_OF_ACCELERATOR = {'clearspeed': 'clearspeed-csxl'}


def accelerator_blas_spec(vendor):
    """The root spec of dgemm-rate through an accelerator's BLAS (BLAS_OF_ACCELERATOR)."""
    return f'dgemm-rate ~cuda ^{BLAS_OF_ACCELERATOR[vendor]}'


def cuda_spack_spec(cuda_arch):
    """The root spec of the GPU's DGEMM program for Spack's `cuda_arch` (90 for sm_90)."""
    return f'dgemm-rate +cuda cuda_arch={cuda_arch}'


# What the GPU DGEMM check reports: the median call (the sustained rate: a GPU at its power
# limit slows after its first calls; on the H200 the first three ran at 1980 MHz and 63.0
# TFLOP/s, the rest at the 700 W cap and 1470-1980 MHz, median 59.6-60.2), its share of the
# FP64 peak with tensor cores, the power drawn during the calls, and the rate per watt.
GPU_VARIABLES = ('tflops', 'fp64_peak_efficiency', 'power', 'gflops_per_watt')
# A GPU's calls last at least this long in all: its power and clocks settle in seconds (the
# H200 reached its 700 W cap within 2 s), and the sampler (every 200 ms) sees them there.
GPU_MIN_SECONDS = 20.0


def gpu_plan(peak_flops, memory_bytes):
    """(order, repeats) of the GPU's DGEMM: the order as the CPU's (matrix_order: a call of
    about a second at peak, three matrices within a small share of the device's memory),
    and enough calls to last GPU_MIN_SECONDS at peak."""
    order = matrix_order(peak_flops, memory_bytes)
    seconds_per_call = 2 * order ** 3 / peak_flops
    return order, max(REPEATS, math.ceil(GPU_MIN_SECONDS / seconds_per_call))


class DgemmOutputError(ValueError):
    pass


def matrix_order(peak_flops, memory_bytes):
    """Order n whose 2 n^3 flop take SECONDS_PER_CALL at peak, within the memory bound."""
    by_time = (peak_flops * SECONDS_PER_CALL / 2) ** (1 / 3)
    by_memory = math.sqrt(MAX_MEMORY_FRACTION * memory_bytes / (3 * 8))
    n = int(min(by_time, by_memory)) // ORDER_GRANULE * ORDER_GRANULE
    return max(n, ORDER_GRANULE)


@dataclass(frozen=True)
class DgemmResult:
    order: int
    rates: tuple        # GFLOP/s of each timed repeat

    @property
    def best(self):
        return max(self.rates)

    @property
    def mean(self):
        return sum(self.rates) / len(self.rates)

    @property
    def median(self):
        return statistics.median(self.rates)


@any_newlines
def parse(output, expected_repeats=None):
    """The repeats of a dgemm-rate output; raises DgemmOutputError unless the run completed
    and its result verified."""
    header = re.search(r'^dgemm-rate: N=(\d+) repeats=(\d+)$', output, re.M)
    if not header:
        raise DgemmOutputError('no "dgemm-rate: N=... repeats=..." header in the output')

    rates = []
    for match in re.finditer(r'^repeat \d+: \S+ s (\S+) GFLOP/s$', output, re.M):
        try:
            rate = float(match.group(1))
        except ValueError:
            rate = math.nan

        if not math.isfinite(rate) or rate <= 0:
            raise DgemmOutputError(f'not a positive rate: {match.group(0)}')

        rates.append(rate)

    repeats = int(header.group(2))
    if len(rates) != repeats or (expected_repeats and repeats != expected_repeats):
        raise DgemmOutputError(f'{len(rates)} timed repeats in the output, '
                               f'{expected_repeats or repeats} expected (run cut short?)')

    if not re.search(r': Result verified$', output, re.M):
        raise DgemmOutputError('the product was not verified ("Result verified" missing)')

    return DgemmResult(int(header.group(1)), tuple(rates))

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'GpuDgemmCheck': Reports('GPU DGEMM', GPU_VARIABLES, {
    'tflops': 'TFLOP/s', 'fp64_peak_efficiency': '%', 'power': 'W',
    'gflops_per_watt': 'GFLOP/s/W'})}
