"""NCCL's collectives with nccl-tests (NVIDIA/nccl-tests 2.16.3, built by Spack against NCCL,
hpcbench.stack.nccl): one MPI rank per GPU, each driving one GPU (`-g 1`), data verified
(`-c 1`). Inputs, parsing and math; the check is reframe-checks/nccl_tests.py.

nccl-tests prints, per size, the time, the algorithm bandwidth (`algbw`: bytes over time) and
the bus bandwidth (`busbw`: algbw times the collective's factor, 2(n-1)/n for an all-reduce,
(n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for send/receive: nccl-tests
doc/PERFORMANCE.md), out of place and in place, each with `#wrong`: the elements that
verified wrong (`N/A` without verification). Figures are the in-place bus bandwidth at the
largest size (the figure vendors publish: Azure's ND H200 v5, 479.98 GB/s for all_reduce at
8 GB over 8 GPUs, NVLS) and the time of the smallest.
"""
import re
from dataclasses import dataclass

from hpcbench.benchmarks.reports import Reports
from hpcbench.core.parsing import measured_value

# The collectives, by the name the check gives them, and their programs.
PROGRAMS = {'all_reduce': 'all_reduce_perf', 'all_gather': 'all_gather_perf',
            'reduce_scatter': 'reduce_scatter_perf', 'alltoall': 'alltoall_perf',
            'sendrecv': 'sendrecv_perf'}
# Sizes from 8 B to 8 GiB by doubling, as vendors publish them; each size 20 timed calls
# after 5 warm-up calls (nccl-tests' defaults), verified.
MIN_BYTES, MAX_BYTES = 8, 8 << 30
ITERATIONS, WARMUP = 20, 5
# The bus bandwidth factor of each collective over n ranks.
BUS_FACTORS = {'all_reduce': lambda n: 2 * (n - 1) / n, 'all_gather': lambda n: (n - 1) / n,
               'reduce_scatter': lambda n: (n - 1) / n, 'alltoall': lambda n: (n - 1) / n,
               'sendrecv': lambda n: 1.0}
_HEADER = re.compile(r'^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)', re.M)
_DEVICE = re.compile(r'^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device\s+(\d+) '
                     r'\[([0-9a-fA-F:.]+)\] (.+?)\s*$', re.M)
_ROW = re.compile(r'^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\S+)\s+(-?\d+)\s+(.+)$', re.M)
_FAILURE = re.compile(r'^.*(?:Cuda failure|NCCL failure|Test NCCL failure|Test CUDA failure|'
                      r'NCCL WARN).*$', re.M)
_OUT_OF_BOUNDS = re.compile(r'^# Out of bounds values : (\d+) (OK|FAILED)', re.M)
_AVERAGE = re.compile(r'^# Avg bus bandwidth\s*: (\S+)', re.M)


class NcclTestsError(ValueError):
    pass


def command_options(min_bytes=MIN_BYTES, max_bytes=MAX_BYTES, iterations=ITERATIONS,
                    warmup=WARMUP):
    """nccl-tests' arguments: sizes min_bytes .. max_bytes doubling, one GPU per rank, each
    size `iterations` timed calls after `warmup`, data verified."""
    return ['-b', str(int(min_bytes)), '-e', str(int(max_bytes)), '-f', '2', '-g', '1',
            '-n', str(int(iterations)), '-w', str(int(warmup)), '-c', '1']


def sizes(min_bytes=MIN_BYTES, max_bytes=MAX_BYTES):
    found, size = [], int(min_bytes)
    while size <= max_bytes:
        found.append(size)
        size *= 2
    return found


@dataclass(frozen=True)
class Measure:
    time_us: float
    algbw: float            # GB/s, as nccl-tests prints it (10^9 bytes/s)
    busbw: float
    wrong: int              # None: not verified (`N/A`)


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    type: str
    out_of_place: Measure
    in_place: Measure


@dataclass(frozen=True)
class Run:
    ranks: tuple            # ((rank, host, device, PCI bus id, model), ...)
    rows: tuple
    average_busbw: float

    def largest(self):
        return self.rows[-1]


def _measure(cells, where):
    if len(cells) != 4:
        raise NcclTestsError(f'{where}: {len(cells)} values, expected time, algbw, busbw, '
                             '#wrong')
    time_us, algbw, busbw = (measured_value(c, NcclTestsError, where) for c in cells[:3])
    wrong = None if cells[3] == 'N/A' else int(measured_value(cells[3], NcclTestsError, where,
                                                                int))
    return Measure(time_us, algbw, busbw, wrong)


def parse(text, ranks, min_bytes=MIN_BYTES, max_bytes=MAX_BYTES):
    """The Run of one nccl-tests program's output over `ranks` ranks; NcclTestsError where a
    CUDA or NCCL call failed, a rank or a size is missing, a value is none, an element verified
    wrong, or values fell out of bounds."""
    failures = _FAILURE.findall(text or '')
    if failures:
        raise NcclTestsError('nccl-tests failed: ' + '; '.join(
            ' '.join(f.split()) for f in dict.fromkeys(failures)))
    header = _HEADER.search(text or '')
    if not header:
        raise NcclTestsError('no nccl-tests header (# nThread ... nGpus ...): it did not start')
    if (int(header.group(1)), int(header.group(2))) != (1, 1):
        raise NcclTestsError(f'{header.group(1)} threads and {header.group(2)} GPUs per rank, '
                             'one of each asked')
    devices = tuple((int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), m.group(5))
                    for m in _DEVICE.finditer(text))
    if sorted(d[0] for d in devices) != list(range(ranks)):
        raise NcclTestsError(f'ranks {", ".join(str(d[0]) for d in devices) or "none"} used '
                             f'devices, {ranks} were launched')
    rows = []
    for match in _ROW.finditer(text):
        where = f'size {match.group(1)}'
        cells = match.group(6).split()
        if len(cells) != 8:
            raise NcclTestsError(f'{where}: {len(cells)} values after the root, expected 8')
        rows.append(Row(int(match.group(1)), int(match.group(2)), match.group(3),
                        _measure(cells[:4], f'{where} out of place'),
                        _measure(cells[4:], f'{where} in place')))
    wanted = sizes(min_bytes, max_bytes)
    measured = [r.size for r in rows]
    if measured != wanted:
        missing = [s for s in wanted if s not in measured]
        raise NcclTestsError(f'sizes {", ".join(map(str, missing)) or "in another order"} '
                             f'missing of {min_bytes} to {max_bytes} (the run ended early)'
                             if missing else f'sizes {measured} are not {wanted}')
    wrong = [(r.size, kind, m.wrong) for r in rows
             for kind, m in (('out of place', r.out_of_place), ('in place', r.in_place))
             if m.wrong]
    if wrong:
        raise NcclTestsError('elements verified wrong: ' + ', '.join(
            f'{n} at {size} bytes {kind}' for size, kind, n in wrong))
    bounds = _OUT_OF_BOUNDS.search(text)
    if not bounds or bounds.group(2) != 'OK':
        raise NcclTestsError(f'out of bounds values: {bounds.group(1) if bounds else "not said"}'
                             ' (nccl-tests prints `# Out of bounds values : 0 OK` when done)')
    average = _AVERAGE.search(text)
    if not average:
        raise NcclTestsError('no average bus bandwidth: the run did not finish')
    return Run(devices, tuple(rows), measured_value(average.group(1), NcclTestsError,
                                                    'average bus bandwidth'))


def bus_bandwidth(collective, ranks, size, time_us):
    """(algbw, busbw) in GB/s of `size` bytes in `time_us`, as nccl-tests computes them."""
    algbw = size / (time_us * 1e-6) / 1e9
    return algbw, algbw * BUS_FACTORS[collective](ranks)


def figures(run):
    """The check's figures of a run: the in-place bus and algorithm bandwidth at the largest
    size (GB/s), the smallest size's in-place time (us), nccl-tests' own average."""
    largest = run.largest()
    return {'busbw': largest.in_place.busbw, 'algbw': largest.in_place.algbw,
            'latency': run.rows[0].in_place.time_us, 'average_busbw': run.average_busbw}


# What one node of eight GPUs is published to reach: all_reduce's in-place bus bandwidth at
# 8 GB with NCCL's NVLS algorithm (NVLink SHARP), GB/s, by the model as the datasheet table
# names it (hpcbench.core.accelerators); a run within PUBLISHED_GOAL_PERCENT of it meets it.
_AZURE = ('Azure AI benchmarking guide (github.com/Azure/AI-benchmarking-guide), {}, '
          '"NCCL Bandwidth", 8G, commit {}')
PUBLISHED_ALL_REDUCE = {
    ('H200 SXM', 8): (479.98, _AZURE.format('Azure_Results/ND_H200_v5_results.md',
                                           '7f20e5fa3b2f')),
    ('H100 SXM', 8): (478.87, _AZURE.format('Azure Results/ND_H100_v5_results.md',
                                           'f350e7e65b82')),
    ('A100 80GB SXM', 8): (231.58, _AZURE.format('Azure_Results/ND_A100_v4_results.md',
                                                '3bb66cacc256')),
}
PUBLISHED_GOAL_PERCENT = 85.0


def published(collective, model, gpus, nodes):
    """(GB/s, source) published for `collective` on one node of `gpus` GPUs of `model`; None
    where nothing is."""
    if collective != 'all_reduce' or nodes != 1:
        return None
    return PUBLISHED_ALL_REDUCE.get((model, gpus))


VARIABLES = ('busbw', 'algbw', 'latency', 'average_busbw', 'published_busbw_ratio')


VERSION = '2.16.3'


def spack_spec(cuda_arch):
    """nccl-tests for Spack's `cuda_arch`, MPI-launched (the MPI the environment adds)."""
    return f'nccl-tests@{VERSION} +mpi cuda_arch={cuda_arch}'


# Each rank sees its one GPU (the rank wrapper): nccl-tests is told to use device 0, not
# its local rank's (its default: local rank x GPUs per rank).
RANK_ENV = {'NCCL_TESTS_DEVICE': '0'}

# What this module's check reports (hpcbench.benchmarks.reports).
REPORTS = {'NcclTestsCheck': Reports('nccl-tests', VARIABLES)}
