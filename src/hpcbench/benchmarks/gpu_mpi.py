"""MPI between GPUs, buffers in device memory: IMB-MPI1-GPU (Intel MPI Benchmarks 2021.10, as
Intel MPI's PyPI wheel ships it built; `-mem_alloc_type device`), one rank per GPU. Inputs,
the job's pair loop, parsing and math; the checks are reframe-checks/gpu_mpi.py.

- Pairs: PingPong (one way: its bandwidth is judged against the link between the two GPUs,
  hpcbench.core.gpu_topology.pair_bandwidth) and Biband (both ways at once) between every
  pair of GPUs of a node, one launch of two ranks per pair; a node of one GPU runs its pair
  on that GPU (two ranks, one device: the device path through the MPI's IPC), and two nodes
  one rank each on their first GPU (the network, GPUDirect RDMA or staged through the host).
- Collectives: Allreduce and Alltoall over every GPU of the job, their bus bandwidth as
  nccl-tests defines it (`busbw`: the algorithm bandwidth times 2(n-1)/n for an all-reduce,
  (n-1)/n for an all-to-all; nccl-tests doc/PERFORMANCE.md), so that MPI's and NCCL's
  figures compare.

IMB-MPI1-GPU goes on after a CUDA call fails (no driver, or one older than its runtime):
it prints `ERROR: 0x23 returned from cuda_proxy.cudaMalloc(...)`, times null buffers, then
MPI aborts (tests/fixtures/gpu/device-buffers/imb-mpi1-gpu-no-driver.out, run here without
a GPU): any such line fails the run, naming the call and the error.
"""
import re
import shlex
from dataclasses import dataclass

from hpcbench.benchmarks import imb
from hpcbench.benchmarks.reports import Reports
from hpcbench.core import gpu_ranks

PROGRAM = 'IMB-MPI1-GPU'
PAIR_BENCHMARKS = ('PingPong', 'Biband')
COLLECTIVES = ('Allreduce', 'Alltoall')
# Up to 64 MiB: NVLink and GPUDirect reach their rate only at tens of MiB (IMB-MPI1's 4 MiB
# is far below it).
MAX_MSGLOG = 26
DEVICE_BUFFERS = ('-mem_alloc_type', 'device')
# A pair below this share of its link's rate is named (the acceptance goal: intra-node device
# bandwidth at least 80 % of the NVLink link the topology names).
LINK_GOAL_PERCENT = 80.0
# What starts a pair's part of the job's output.
PAIR_LINE = re.compile(r'^== pair GPU (\d+) GPU (\d+)$', re.M)
_CUDA_ERROR = re.compile(r'^ERROR: (0x[0-9a-fA-F]+) returned from cuda_proxy\.(\w+)', re.M)
# CUDA runtime error codes (cudaError_t, CUDA Runtime API "Data types used by CUDA Runtime")
# a device-buffer run meets, by value.
CUDA_ERRORS = {
    0x1: 'cudaErrorInvalidValue',
    0x2: 'cudaErrorMemoryAllocation: out of device memory',
    0x23: 'cudaErrorInsufficientDriver: no GPU driver, or one older than the CUDA runtime',
    0x64: 'cudaErrorNoDevice: no GPU visible to the rank',
    0x65: 'cudaErrorInvalidDevice',
}


class GpuMpiError(ValueError):
    pass


def command_options(benchmarks, max_msglog=MAX_MSGLOG, iterations=None):
    """IMB-MPI1-GPU's arguments: the benchmarks, sizes 0 and 2^0 .. 2^max_msglog, buffers in
    device memory."""
    return [','.join(benchmarks), '-msglog', f'0:{int(max_msglog)}',
            *(['-iter', str(int(iterations))] if iterations else []), *DEVICE_BUFFERS]


def message_sizes(max_msglog=MAX_MSGLOG, benchmark='PingPong'):
    """The sizes IMB measures `benchmark` at (a reduction's start at one element)."""
    return imb.message_sizes(benchmark, 0, max_msglog)


def gpu_pairs(count):
    """The pairs of a node of `count` GPUs, each once; a node of one GPU: that GPU twice."""
    if count < 1:
        raise GpuMpiError(f'{count} GPUs: no pair')
    if count == 1:
        return [(0, 0)]
    return [(i, j) for i in range(count) for j in range(i + 1, count)]


def pair_loop(pairs, print_ranks):
    """The job script's lines around the launch of two ranks: (before, after). Each pair's
    launch is given the pair's GPUs (hpcbench.core.gpu_ranks.LAUNCH_GPUS_VARIABLE: the rank
    wrapper gives each rank one of them; Slurm would set CUDA_VISIBLE_DEVICES itself), prints `== pair GPU i GPU j` then its ranks' outputs (`print_ranks`: the wrapper's
    lines that print them, hpcbench.core.gpu_ranks.print_ranks_commands, less its exit),
    and the job exits with the status of a launch that failed."""
    words = ' '.join(shlex.quote(f'{i},{j}') for i, j in pairs)
    before = ['failed=0', f'for pair in {words}; do',
              f'export {gpu_ranks.LAUNCH_GPUS_VARIABLE}="$pair"',
              'echo "== pair GPU ${pair%,*} GPU ${pair#*,}"']
    after = [*print_ranks, 'rm -f rank-*.out', '[ "$status" -eq 0 ] || failed=$status', 'done',
             '[ "$failed" -eq 0 ] || exit "$failed"']
    return before, after


def split_pairs(text, pairs):
    """{(i, j): that pair's part of the job's output}; a pair missing or printed twice is one
    message."""
    marks = list(PAIR_LINE.finditer(text))
    parts = {}
    for mark, following in zip(marks, [*marks[1:], None]):
        pair = (int(mark.group(1)), int(mark.group(2)))
        if pair in parts:
            raise GpuMpiError(f'GPUs {pair[0]} and {pair[1]} printed twice')
        parts[pair] = text[mark.end():following.start() if following else len(text)]
    missing = [p for p in pairs if p not in parts]
    if missing:
        raise GpuMpiError('no output of the pair(s) ' + ', '.join(f'{i}-{j}' for i, j in missing)
                          + ': the job ended before them')
    return parts


def cuda_errors(text):
    """What each failed CUDA call IMB-MPI1-GPU printed says, once per call and error:
    `cudaMalloc: 0x23 cudaErrorInsufficientDriver: ...`."""
    said = []
    for code, call in _CUDA_ERROR.findall(text):
        what = f'{call}: {code} {CUDA_ERRORS.get(int(code, 16), "a CUDA error")}'
        if what not in said:
            said.append(what)
    return said


def parse(text, benchmarks, processes, max_msglog=MAX_MSGLOG):
    """{benchmark: its complete IMB table} of one IMB-MPI1-GPU run; GpuMpiError where a CUDA
    call failed, the run did not finish or a table misses a size."""
    failed = cuda_errors(text)
    if failed:
        raise GpuMpiError('a CUDA call failed, the figures time no device buffer: '
                          + '; '.join(failed))
    try:
        tables = imb.parse(text)
        return {b: imb.complete_table(tables, b, processes, message_sizes(max_msglog, b))
                for b in benchmarks}
    except imb.ImbOutputError as err:
        raise GpuMpiError(str(err)) from None


@dataclass(frozen=True)
class PairFigures:
    latency_us: float           # PingPong: half a round trip of the smallest message
    bandwidth: float            # PingPong's best, bytes/s one way
    bandwidth_size: int         # the size it was reached at
    bidirectional: float        # Biband's best, bytes/s both ways together


def pair_figures(tables):
    """The figures of one pair's PingPong and Biband tables (IMB's MB/s are 10^6 bytes/s)."""
    pingpong, biband = tables['PingPong'], tables['Biband']
    best = max(pingpong.rows, key=lambda r: r.mbytes_per_sec)
    return PairFigures(latency_us=pingpong.rows[0].t_avg, bandwidth=best.mbytes_per_sec * 1e6,
                       bandwidth_size=best.size,
                       bidirectional=max(r.mbytes_per_sec for r in biband.rows) * 1e6)


def bus_bandwidth(benchmark, ranks, size, t_avg_us):
    """(algorithm, bus) bandwidth in bytes/s of a collective of `size` bytes per rank that
    took `t_avg_us`, as nccl-tests defines them."""
    if t_avg_us <= 0:
        raise GpuMpiError(f'{benchmark}: {t_avg_us} us for {size} bytes is no time')
    algorithm = size / (t_avg_us * 1e-6)
    factor = {'Allreduce': 2 * (ranks - 1) / ranks, 'Alltoall': (ranks - 1) / ranks}[benchmark]
    return algorithm, algorithm * factor


def collective_figures(table, ranks):
    """{'latency_us': t_avg of 8 B, 'algbw': ..., 'busbw': ...} of a collective's table, the
    bandwidths at its largest size."""
    largest = table.rows[-1]
    algbw, busbw = bus_bandwidth(table.benchmark, ranks, largest.size, largest.t_avg)
    small = next((r for r in table.rows if r.size == 8), table.rows[0])
    return {'latency_us': small.t_avg, 'algbw': algbw, 'busbw': busbw,
            'size': largest.size}


def slow_pairs(efficiencies, goal=LINK_GOAL_PERCENT):
    """{(i, j): percent} of the pairs below `goal` percent of their link."""
    return {pair: value for pair, value in efficiencies.items()
            if value is not None and value < goal}


# What this module's checks report (hpcbench.benchmarks.reports).
PAIR_VARIABLES = ('latency', 'bandwidth', 'bidirectional_bandwidth', 'link_efficiency',
                  'slowest_pair_link_efficiency')
COLLECTIVE_VARIABLES = ('latency_8B', 'algbw', 'busbw')
# Units of a pair's figures (hpcbench.rfm.gpu_to_gpu measures them; OSU's pairs too).
PAIR_UNITS = {'latency': 'us', 'bandwidth': 'GB/s', 'bidirectional_bandwidth': 'GB/s',
              'link_efficiency': '%', 'slowest_pair_link_efficiency': '%'}
REPORTS = {
    'DeviceBufferPairCheck': Reports('GPU to GPU', PAIR_VARIABLES, PAIR_UNITS),
    'DeviceBufferCollectiveCheck': Reports('GPU to GPU', COLLECTIVE_VARIABLES, {
        'latency_8B': 'us', 'algbw': 'GB/s', 'busbw': 'GB/s'}),
}


def staged_through_host(bandwidths, links, host_link_rate):
    """Why the pairs of `bandwidths` ({pair: bytes/s one way}) joined by NVLink (`links`:
    {pair: path}) were not measured GPU to GPU: an MPI that stages device buffers through host
    memory moves them at most at the host link's rate (`host_link_rate`, bytes/s each way),
    far below the NVLinks'; [] where each went faster, or the rate is not known."""
    if not host_link_rate:
        return []
    return [f'GPUs {i} and {j}: {bandwidths[(i, j)] / 1e9:.1f} GB/s over {path}, no more than '
            f'the host link\'s {host_link_rate / 1e9:g} GB/s: the MPI staged the buffers through '
            'host memory, not GPU to GPU'
            for (i, j), path in sorted(links.items())
            if path.startswith('NV') and (i, j) in bandwidths
            and bandwidths[(i, j)] <= host_link_rate]
