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
import statistics
from dataclasses import dataclass

from hpcbench.benchmarks.reports import Reports
from hpcbench.core.parsing import doubling, measured_value

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
# The header line; what a launcher put before it (Open MPI's --tag-output `[1,0]<stdout>:`,
# srun --label's `0: `, a cloud tool's own) is before every line of rank 0.
_HEADER = re.compile(r'^(.*?)# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)(.*)$',
                     re.M)
_DEVICE = re.compile(r'^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device\s+(\d+) '
                     r'\[([0-9a-fA-F:.]+)\] (.+?)\s*$', re.M)
_ROW = re.compile(r'^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\S+)\s+(-?\d+)\s+(.+)$', re.M)
_FAILURE = re.compile(r'^.*(?:Cuda failure|NCCL failure|Test NCCL failure|Test CUDA failure|'
                      r'NCCL WARN).*$', re.M)
_OUT_OF_BOUNDS = re.compile(r'^# Out of bounds values : (\d+) (OK|FAILED)', re.M)
_AVERAGE = re.compile(r'^# Avg bus bandwidth\s*: (\S+)', re.M)
# The network NCCL chose between nodes, as it says at NCCL_DEBUG=INFO (INIT): `IB`, `Socket`,
# a plugin's (`AWS Libfabric`, `GPUDirectTCPX`).
_NETWORK = re.compile(r'NCCL INFO Using network (.+?)\s*$', re.M)
# How far below the size asked a collective may round it: nccl-tests gives each rank whole
# elements, aligned (all_gather over two ranks printed 0 bytes for 8 and 16 asked; over 16
# ranks, 0 up to 128).
ROUNDING_PER_RANK = 64


class NcclTestsError(ValueError):
    pass


def command_options(min_bytes=MIN_BYTES, max_bytes=MAX_BYTES, iterations=ITERATIONS,
                    warmup=WARMUP):
    """nccl-tests' arguments: sizes min_bytes .. max_bytes doubling, one GPU per rank, each
    size `iterations` timed calls after `warmup`, data verified."""
    return ['-b', str(int(min_bytes)), '-e', str(int(max_bytes)), '-f', '2', '-g', '1',
            '-n', str(int(iterations)), '-w', str(int(warmup)), '-c', '1']


def sizes(min_bytes=MIN_BYTES, max_bytes=MAX_BYTES):
    return doubling(min_bytes, max_bytes)


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


def _half_unit(cell):
    """Half the last printed digit of a number as nccl-tests printed it ('47535': 0.5)."""
    decimals = len(cell.partition('.')[2]) if '.' in cell else 0
    return 0.5 * 10 ** -decimals


def _measure(cells, where):
    if len(cells) != 4:
        raise NcclTestsError(f'{where}: {len(cells)} values, expected time, algbw, busbw, '
                             '#wrong')
    time_us, algbw, busbw = (measured_value(c, NcclTestsError, where) for c in cells[:3])
    wrong = None if cells[3] == 'N/A' else int(measured_value(cells[3], NcclTestsError, where,
                                                                int))
    return Measure(time_us, algbw, busbw, wrong)


def _check_rates(size, cells, factor, where):
    """The algorithm bandwidth nccl-tests printed is `size` bytes over the time it printed,
    and the bus bandwidth that times the collective's factor, each within the rounding of
    what was printed; NcclTestsError naming `where` otherwise (a figure nccl-tests did not
    compute: a tenfold busbw passed)."""
    time_us, algbw, busbw = (float(c) for c in cells[:3])
    slowest = time_us + _half_unit(cells[0])
    fastest = max(time_us - _half_unit(cells[0]), 1e-9)
    low, high = size / slowest / 1e3, size / fastest / 1e3
    low, high = max(low, algbw - _half_unit(cells[1])), min(high, algbw + _half_unit(cells[1]))
    slack = 1e-9 * max(1.0, algbw)
    if low > high + slack:
        raise NcclTestsError(f'{where}: algbw {cells[1]} GB/s is not {size} bytes in '
                             f'{cells[0]} us ({size / time_us / 1e3:.2f} GB/s): not what '
                             'nccl-tests computes')
    busbw_half = _half_unit(cells[2])
    if not low * factor - busbw_half - slack <= busbw <= high * factor + busbw_half + slack:
        raise NcclTestsError(f'{where}: busbw {cells[2]} GB/s is not algbw {cells[1]} x '
                             f'{factor:g} ({algbw * factor:.2f} GB/s): not what nccl-tests '
                             'computes')


def _rank_lines(text):
    """rank 0's lines as nccl-tests printed them, without what a launcher put before each
    (the header's prefix, kept by every line of rank 0); None where there is no header."""
    header = _HEADER.search(text)
    if header is None:
        return None
    tag = header.group(1)
    if not tag:
        return text
    return '\n'.join(line[len(tag):] for line in text.splitlines() if line.startswith(tag))


def network(text):
    """The network NCCL said it used (`Using network IB`), None where it said none; two
    different ones in one run are both named, comma-separated."""
    found = list(dict.fromkeys(m.group(1) for m in _NETWORK.finditer(text or '')))
    return ', '.join(found) or None


def parse(text, ranks, min_bytes=MIN_BYTES, max_bytes=MAX_BYTES, *, collective):
    """The Run of one nccl-tests program's output of `collective` over `ranks` ranks (as the
    program printed it, or with a launcher's tag before each line); NcclTestsError where a
    CUDA or NCCL call failed, a rank or a size is missing, two ranks drove one GPU, a value
    is none or not what nccl-tests computes from the size and time, data was not verified or
    verified wrong, or values fell out of bounds."""
    failures = _FAILURE.findall(text or '')
    if failures:
        raise NcclTestsError('nccl-tests failed: ' + '; '.join(
            ' '.join(f.split()) for f in dict.fromkeys(failures)))
    text = _rank_lines(text or '')
    if text is None:
        raise NcclTestsError('no nccl-tests header (# nThread ... nGpus ...): it did not start')
    header = _HEADER.search(text)
    if (int(header.group(2)), int(header.group(3))) != (1, 1):
        raise NcclTestsError(f'{header.group(2)} threads and {header.group(3)} GPUs per rank, '
                             'one of each asked')
    if re.search(r'\bvalidation: 0\b', header.group(6)):
        raise NcclTestsError('nccl-tests ran with validation: 0: no data was verified (-c 1 '
                             'was asked)')
    devices = tuple((int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), m.group(5))
                    for m in _DEVICE.finditer(text))
    if sorted(d[0] for d in devices) != list(range(ranks)):
        raise NcclTestsError(f'ranks {", ".join(str(d[0]) for d in devices) or "none"} used '
                             f'devices, {ranks} were launched')
    by_gpu = {}
    for rank, host, _device, bus, _model in devices:
        by_gpu.setdefault((host, bus), []).append(rank)
    shared = [(host, bus, ranks_) for (host, bus), ranks_ in by_gpu.items() if len(ranks_) > 1]
    if shared:
        raise NcclTestsError('; '.join(
            f'ranks {", ".join(map(str, r))} drove one GPU ({bus}) on {host}'
            for host, bus, r in shared) + ': one rank per GPU was asked')
    factor = BUS_FACTORS[collective](ranks)
    rows = []
    for match in _ROW.finditer(text):
        where = f'size {match.group(1)}'
        cells = match.group(6).split()
        if len(cells) != 8:
            raise NcclTestsError(f'{where}: {len(cells)} values after the root, expected 8')
        rows.append(Row(int(match.group(1)), int(match.group(2)), match.group(3),
                        _measure(cells[:4], f'{where} out of place'),
                        _measure(cells[4:], f'{where} in place')))
        for part, kind in ((cells[:4], 'out of place'), (cells[4:], 'in place')):
            _check_rates(int(match.group(1)), part, factor, f'{where} {kind}')
    wanted = sizes(min_bytes, max_bytes)
    for row, asked in zip(rows, wanted):
        if not asked - ranks * ROUNDING_PER_RANK <= row.size <= asked:
            raise NcclTestsError(f'size {row.size} where {asked} bytes were asked (sizes '
                                 f'{min_bytes} to {max_bytes}, doubling)')
    if len(rows) != len(wanted):
        missing = wanted[len(rows):]
        raise NcclTestsError(f'sizes {", ".join(map(str, missing))} missing of {min_bytes} to '
                             f'{max_bytes} (the run ended early)' if missing else
                             f'{len(rows)} sizes, {len(wanted)} asked ({min_bytes} to '
                             f'{max_bytes}, doubling)')
    unverified = [r.size for r in rows if r.out_of_place.wrong is None or
                  r.in_place.wrong is None]
    if unverified:
        raise NcclTestsError(f'#wrong N/A at {len(unverified)} of {len(rows)} sizes (first '
                             f'{unverified[0]} bytes): not verified, -c 1 was asked')
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
    said = measured_value(average.group(1), NcclTestsError, 'average bus bandwidth')
    # nccl-tests averages the bus bandwidth of every row, out of place and in place; the
    # figure it prints is checked against the rows it printed (10 times their average was
    # reported), within what rounding the rows and the average leaves.
    cells = [c for m in _ROW.finditer(text) for c in m.group(6).split()[2::4]]
    computed = statistics.fmean(float(c) for c in cells)
    allowed = max(_half_unit(c) for c in cells) + _half_unit(average.group(1)) + \
        1e-6 * computed
    if abs(said - computed) > allowed:
        raise NcclTestsError(f'average bus bandwidth {average.group(1)} GB/s, where the '
                             f'{len(cells)} bus bandwidths of its rows (out of place and in '
                             f'place) average {computed:.6g}: not what nccl-tests computes '
                             'from them')
    return Run(devices, tuple(rows), said)


def check_network(said, nodes, expected=None):
    """Why a run of `nodes` nodes over the network NCCL `said` it used (network()) is not
    what was measured for: between nodes, NCCL's socket transport (a fall-back from
    InfiniBand or the site's plugin: merely slow, never an error of its own) unless
    `expected` is it, another network than `expected`, or no word of which; None when it
    is."""
    if nodes < 2:
        return None
    if said is None:
        return ('NCCL did not say which network it used between the nodes (NCCL_DEBUG=INFO '
                'prints `Using network ...`)')
    if expected:
        return None if said == expected else (f'NCCL used network {said} between the nodes, '
                                              f'{expected} was expected')
    if 'Socket' in said.split(', '):
        return ('NCCL fell back to its socket transport (NET/Socket) between the nodes: no '
                'InfiniBand or network plugin was used (set expected_network=Socket where '
                'sockets are the network)')
    return None


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
# NCCL says which network it chose between nodes (INIT) and why (NET).
RANK_ENV = {'NCCL_TESTS_DEVICE': '0', 'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET'}

# What this module's check reports (hpcbench.benchmarks.reports).
REPORTS = {'NcclTestsCheck': Reports('nccl-tests', VARIABLES, {
    'busbw': 'GB/s', 'algbw': 'GB/s', 'latency': 'us', 'average_busbw': 'GB/s',
    'published_busbw_ratio': '%'})}
