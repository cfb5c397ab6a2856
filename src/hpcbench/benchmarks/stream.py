"""STREAM: inputs derived from the node, output parsing, machine balance (CHiC 2007)."""
import math
import re
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

KERNELS = ('Copy', 'Scale', 'Add', 'Triad')
# StreamCheck's performance variables (the two ratios where it measures the node's
# bandwidth ceilings).
CHECK_VARIABLES = ('copy', 'scale', 'add', 'triad', 'balance', 'triad_ceiling_efficiency',
                   'triad_cached_store_efficiency')

# STREAM's rule: each array at least 4x the total last-level cache, so no kernel runs from
# cache. (The CHiC paper's 2 M elements were enough in 2007; 16 MiB per array is not today.)
LLC_FACTOR = 4
# Round the array up to whole MiElements: fewer distinct builds across similar nodes.
GRANULE = 2**20
# Never let the three arrays take more than this share of node memory.
MAX_MEMORY_FRACTION = 0.5
NTIMES = 20
# STREAM's programs in the recipe's prefix, by the stores of their kernels: those the
# compiler makes, and streaming (non-temporal) stores, which skip write-allocate reads.
PROGRAMS = {'compiled': 'stream_c.exe', 'nontemporal': 'stream_nontemporal_c.exe'}
BYTES_PER_ELEMENT = 8
# Arrays each kernel reads and writes per element: the bytes STREAM counts (no
# write-allocate reads).
ARRAYS_MOVED = {'Copy': 2, 'Scale': 2, 'Add': 3, 'Triad': 3}


class StreamInputError(ValueError):
    pass


class StreamOutputError(ValueError):
    pass


def array_size(llc_bytes_total, memory_bytes):
    """Elements per array for a node with this much last-level cache and memory."""
    elements = math.ceil(LLC_FACTOR * llc_bytes_total / BYTES_PER_ELEMENT / GRANULE) * GRANULE
    needed = 3 * elements * BYTES_PER_ELEMENT
    if needed > MAX_MEMORY_FRACTION * memory_bytes:
        raise StreamInputError(
            f'STREAM needs 3 arrays of {elements} elements ({needed / 2**30:.1f} GiB) but the '
            f'node has {memory_bytes / 2**30:.1f} GiB; at most {MAX_MEMORY_FRACTION:.0%} '
            f'may be used')

    return elements


def spack_spec(elements, ntimes=NTIMES):
    """The root spec of STREAM in a Spack environment: the same string the env lists."""
    return f'stream stream_array_size={elements} ntimes={ntimes}'


def thread_sweep(num_cores):
    """1, 2, 4, ... up to the node's cores, always ending with all cores."""
    counts = [2**k for k in range(int(math.log2(num_cores)) + 1) if 2**k < num_cores]
    return counts + [num_cores]


def openmp_environment(num_threads):
    """Explicit placement: one thread per core, spread over sockets and NUMA domains."""
    return {
        'OMP_NUM_THREADS': str(num_threads),
        'OMP_PLACES': 'cores',
        'OMP_PROC_BIND': 'spread',
    }


@dataclass(frozen=True)
class StreamResult:
    array_size: int
    ntimes: int
    threads: int
    best_rate_mbps: dict     # kernel -> best rate in MB/s (10^6 bytes/s)
    # kernel -> the rate of its average time over the timed iterations, in MB/s: a mean, as
    # likwid-bench's rates are (the best of 19 short iterations is the fastest moment of a
    # node whose rate swings)
    mean_rate_mbps: dict


_ROW = re.compile(r'^(Copy|Scale|Add|Triad):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$', re.M)


def _field(pattern, text, what):
    match = re.search(pattern, text, re.M)
    if not match:
        raise StreamOutputError(f'no {what} in the output')

    return int(match.group(1))


_BANNER = re.compile(r'^STREAM version ', re.M)


@any_newlines
def parse(text, expected_threads=None):
    """Parse a complete STREAM output of one run; anything short of a validated run raises,
    and so does a file holding several runs (its header would be one run's, its rates
    another's)."""
    runs = len(_BANNER.findall(text))
    if runs > 1:
        raise StreamOutputError(f'the output holds {runs} STREAM runs: one run per output')

    if 'Failed Validation' in text:
        line = next(ln for ln in text.splitlines() if 'Failed Validation' in ln)
        raise StreamOutputError(f'STREAM failed its validation: {line.strip()}')

    rates, average_times = {}, {}
    for kernel, rate, *times in _ROW.findall(text):
        try:
            values = [float(v) for v in (rate, *times)]
        except ValueError:
            raise StreamOutputError(f'{kernel}: unreadable figures {rate} {times}') from None

        if not all(math.isfinite(v) and v > 0 for v in values):
            raise StreamOutputError(f'{kernel}: non-positive or non-finite figures {values}')

        rates[kernel] = values[0]
        average_times[kernel] = values[1]

    missing = [k for k in KERNELS if k not in rates]
    if missing:
        raise StreamOutputError(f'no result for {", ".join(missing)}')

    if not re.search(r'^Solution Validates', text, re.M):
        raise StreamOutputError('the output does not say "Solution Validates"')

    threads = _field(r'^Number of Threads counted = (\d+)', text, 'thread count')
    if expected_threads is not None and threads != expected_threads:
        raise StreamOutputError(f'{threads} OpenMP threads ran, {expected_threads} expected')

    elements = _field(r'^Array size = (\d+)', text, 'array size')
    return StreamResult(
        array_size=elements,
        ntimes=_field(r'^Each kernel will be executed (\d+) times', text, 'NTIMES'),
        threads=threads,
        best_rate_mbps=rates,
        mean_rate_mbps={kernel: ARRAYS_MOVED[kernel] * elements * BYTES_PER_ELEMENT / 1e6 / time
                        for kernel, time in average_times.items()},
    )


def machine_balance(core_peak_flops, threads, triad_mbps):
    """Flop per memory word, as the CHiC paper defines it (section 4, Table 1).

    balance = peak flop/s of the cores in use / (triad bytes/s / 8 bytes per double).
    """
    words_per_second = triad_mbps * 1e6 / BYTES_PER_ELEMENT
    return threads * core_peak_flops / words_per_second

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'StreamCheck': Reports('STREAM', CHECK_VARIABLES, {
    v: '%' if v.endswith('efficiency') else 'flop/word' if v == 'balance' else 'MB/s'
    for v in CHECK_VARIABLES})}
