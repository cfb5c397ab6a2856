"""MPI between GPUs (hpcbench.benchmarks.gpu_mpi, reframe-checks/gpu_mpi.py): IMB-MPI1-GPU's
outputs read back pair by pair, judged against the link between the GPUs, and refused where
a CUDA call failed.

The outputs are real runs of Intel MPI 2021.17's IMB-MPI1-GPU (from its PyPI wheel) on this
project's machine, which has no GPU (tests/fixtures/gpu/device-buffers, its README): with
`-mem_alloc_type device` every CUDA call fails and MPI aborts; with `-mem_alloc_type cpu` the
same program measures host buffers and prints its tables as it does for device buffers. A
node with a GPU driver prints no `cudaGetDeviceCount` error: those two lines are removed
where a run stands for a GPU node's."""
import re

import pytest
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from conftest import FIXTURES, a100_node_pair_record, check_classes_of, pair_check_under_test
from hpcbench.benchmarks import gpu_mpi
from hpcbench.core import gpu_ranks, gpu_topology
from hpcbench.stack import testbed_system

RUNS = FIXTURES / 'gpu' / 'device-buffers'
NO_DRIVER = (RUNS / 'imb-mpi1-gpu-no-driver.out').read_text()


def _with_driver(name):
    """A run as a node with a GPU driver prints it: without the missing driver's lines."""
    text = (RUNS / name).read_text()
    return re.sub(r'^ERROR: 0x23 returned from cuda_proxy\.cudaGetDeviceCount.*\n', '', text,
                  flags=re.M)


PAIR_RUN = _with_driver('imb-mpi1-gpu-pair-host-buffers.out')
COLLECTIVE_RUN = _with_driver('imb-mpi1-gpu-collectives-host-buffers.out')
H100_NODE = gpu_topology.parse(testbed_system.GPU_TOPOLOGY_FILE.read_text())


def test_the_options_ask_for_device_buffers_and_sizes_to_64_mib():
    assert gpu_mpi.command_options(gpu_mpi.PAIR_BENCHMARKS) == [
        'PingPong,Biband', '-msglog', '0:26', '-mem_alloc_type', 'device']
    assert list(gpu_mpi.message_sizes(3)) == [0, 1, 2, 4, 8]


def test_a_node_s_pairs_each_once_and_one_gpu_paired_with_itself():
    assert gpu_mpi.gpu_pairs(1) == [(0, 0)]
    assert len(gpu_mpi.gpu_pairs(8)) == 28 and (3, 7) in gpu_mpi.gpu_pairs(8)
    with pytest.raises(gpu_mpi.GpuMpiError):
        gpu_mpi.gpu_pairs(0)


def test_a_real_run_s_tables_and_figures():
    tables = gpu_mpi.parse(PAIR_RUN, gpu_mpi.PAIR_BENCHMARKS, 2, max_msglog=22)
    figures = gpu_mpi.pair_figures(tables)
    assert figures.latency_us == 2.75                   # 0 bytes, half a round trip
    assert (figures.bandwidth, figures.bandwidth_size) == (35127.15e6, 131072)
    assert figures.bidirectional > 0


def test_a_run_without_a_gpu_driver_is_refused_naming_the_cuda_calls():
    with pytest.raises(gpu_mpi.GpuMpiError) as err:
        gpu_mpi.parse(NO_DRIVER, gpu_mpi.PAIR_BENCHMARKS, 2, max_msglog=4)
    said = str(err.value)
    assert said.startswith('a CUDA call failed, the figures time no device buffer: ')
    assert ('cudaGetDeviceCount: 0x23 cudaErrorInsufficientDriver: no GPU driver, or one older '
            'than the CUDA runtime') in said and 'cudaMalloc: 0x23' in said


@pytest.mark.parametrize('broken, said', [
    (PAIR_RUN[:PAIR_RUN.index('# All processes entering MPI_Finalize')], 'IMB did not finish'),
    (PAIR_RUN.replace('      4194304           10       161.38     25990.42\n', '', 1),
     'message sizes'),
])
def test_a_cut_run_is_refused(broken, said):
    with pytest.raises(gpu_mpi.GpuMpiError, match=said):
        gpu_mpi.parse(broken, gpu_mpi.PAIR_BENCHMARKS, 2, max_msglog=22)


def test_collectives_bus_bandwidth_as_nccl_tests_defines_it():
    tables = gpu_mpi.parse(COLLECTIVE_RUN, gpu_mpi.COLLECTIVES, 2, max_msglog=22)
    allreduce = gpu_mpi.collective_figures(tables['Allreduce'], 2)
    # 4 MiB in 9143.71 us; two ranks: busbw = algbw x 2(n-1)/n = algbw.
    assert allreduce['algbw'] == pytest.approx(4194304 / 9143.71e-6)
    assert allreduce['busbw'] == pytest.approx(allreduce['algbw'])
    assert allreduce['latency_us'] == 0.70
    algbw, busbw = gpu_mpi.bus_bandwidth('Alltoall', 8, 1 << 20, 100.0)
    assert busbw == pytest.approx(algbw * 7 / 8)
    algbw, busbw = gpu_mpi.bus_bandwidth('Allreduce', 8, 1 << 20, 100.0)
    assert busbw == pytest.approx(algbw * 14 / 8)


def _pair_job(pairs, run=PAIR_RUN, placements=None):
    """A pair job's output as the loop prints it: each pair's mark, then its two ranks'
    outputs (rank 0's holds IMB's), each headed by the wrapper (placed on `placements`:
    {(pair, rank): CPUs})."""
    parts = []
    for pair in pairs:
        parts.append(f'== pair GPU {pair[0]} GPU {pair[1]}\n')
        for rank, gpu in enumerate(pair):
            cpus = (placements or {}).get((pair, rank))
            where = f', CPUs {cpus} (numactl: GPU {gpu}\'s CPUs)' if cpus else ''
            parts.append(f'== rank {rank}: GPU {gpu} on g1{where}\n'
                         + (run if rank == 0 else ''))
    return ''.join(parts)


def test_each_pair_s_part_of_the_job_and_a_pair_missing_is_named():
    parts = gpu_mpi.split_pairs(_pair_job([(0, 1), (0, 2)]), [(0, 1), (0, 2)])
    assert set(parts) == {(0, 1), (0, 2)}
    assert gpu_ranks.split(parts[(0, 2)], 2)[1][:2] == ('2', 'g1')
    with pytest.raises(gpu_mpi.GpuMpiError, match='no output of the pair.s. 1-2: the job ended'):
        gpu_mpi.split_pairs(_pair_job([(0, 1)]), [(0, 1), (1, 2)])


def test_the_job_s_loop_gives_each_pair_its_gpus_and_keeps_a_failed_launch():
    before, after = gpu_mpi.pair_loop([(0, 1), (2, 3)], ['status=$?', 'cat'])
    assert before[1] == 'for pair in 0,1 2,3; do'
    assert 'export HPCBENCH_RANK_GPUS="$pair"' in before
    assert after[-1] == '[ "$failed" -eq 0 ] || exit "$failed"'


@pytest.fixture(scope='module')
def checks():
    return check_classes_of('gpu_mpi.py')


def test_the_pair_check_judges_each_pair_against_its_nvlinks(checks, tmp_path, caplog):
    """Two pairs of the published H100 node (18 NVLinks each, 450 GB/s each way): this
    machine's host-buffer figures are far below, and each pair is named slow."""
    pairs = [(0, 1), (4, 7)]
    check, test = pair_check_under_test(checks, tmp_path, _pair_job(pairs), pairs)
    assert sn.evaluate(check.every_pair_measured(test))
    assert test.samples['bandwidth'] == [pytest.approx(35.12715)] * 2
    assert test.samples['link_efficiency'] == [pytest.approx(100 * 35.12715 / 450)] * 2
    assert test.aggregation['link_efficiency'] == (
        'median over 2 pair(s), each the best size of IMB-MPI1-GPU')


def test_a_pair_over_nvlink_no_faster_than_the_host_link_was_staged_and_fails(checks,
                                                                             tmp_path):
    """Issue 60, item 8: an MPI that stages device buffers through host memory passed,
    merely slow. This machine's real host-buffer PingPong (35.1 GB/s) over the H100's 18
    NVLinks, whose host link is PCIe 5.0 x16 (64 GB/s): staged, named."""
    pairs = [(0, 1), (4, 7)]
    check, test = pair_check_under_test(checks, tmp_path, _pair_job(pairs), pairs,
                              host_link_bandwidth=64e9)
    with pytest.raises(SanityError, match=r'^GPUs 0 and 1: 35.1 GB/s over NV18, no more than '
                                          r"the host link's 64 GB/s: the MPI staged the "
                                          r'buffers through host memory, not GPU to GPU; '
                                          r'GPUs 4 and 7: '):
        sn.evaluate(check.every_pair_measured(test))


def test_the_pair_check_fails_a_pair_whose_cuda_calls_failed(checks, tmp_path):
    pairs = [(0, 1), (2, 3)]
    output = _pair_job([(0, 1)]) + _pair_job([(2, 3)], run=NO_DRIVER)
    check, test = pair_check_under_test(checks, tmp_path, output, pairs)
    with pytest.raises(SanityError, match=r'^GPUs 2 and 3: a CUDA call failed, .*cudaMalloc: '
                                          r'0x23 cudaErrorInsufficientDriver'):
        sn.evaluate(check.every_pair_measured(test))


def test_the_pair_check_names_a_rank_placed_on_the_far_socket(checks, tmp_path):
    pairs = [(0, 5)]
    output = _pair_job(pairs, placements={((0, 5), 0): '0-51', ((0, 5), 1): '0-51'})
    check, test = pair_check_under_test(checks, tmp_path, output, pairs)
    with pytest.raises(SanityError, match=re.escape(
            'GPUs 0 and 5: rank 1 (GPU 5 on g1): its CPUs 0-51 are not all next to GPU 5, '
            'whose CPUs are 52-103 (NUMA node 1)')):
        sn.evaluate(check.every_pair_measured(test))


def test_each_gpu_pair_of_a_real_node_is_a_keyed_figure_beside_its_link(checks, tmp_path):
    """Issue 62, item 2: each pair's figures are recorded under its key (node and GPUs) with
    the link it crossed, as data; the report's matrix shows each pair's bandwidth, its share
    of its link and the link, and names the slowest pair. A real 8 x A100 node: every pair
    at 88 to 92 % of its twelve NVLinks (300 GB/s each way)."""
    from hpcbench.core import device_keys
    from hpcbench.report import contents
    from hpcbench.results import measured
    case, = measured.measured_cases(a100_node_pair_record(tmp_path))
    assert len(case.pairs) == 28 and not case.gpus
    first = case.pairs[0]
    assert first.key == device_keys.GpuPair('a100-node', 0, 1) and first.link == 'NV12'
    assert first.figures == {'latency': 3.38, 'bandwidth': 268.94,
                             'link_efficiency': pytest.approx(100 * 268.94 / 300)}
    (heading, header, grid, notes), = contents.gpu_pair_matrices([case])
    assert heading.startswith('DeviceBufferPairCheck path=intra-node (openmpi) on a100-node')
    assert header == ['', *(f'GPU{i}' for i in range(8))]
    assert grid[0][:3] == ['GPU0', '-', '268.9, 90 % (NV12)']
    # A pair is one figure, in its row and its column (row i wrote to column j, i < j).
    assert grid[5][3] == grid[2][6] == '273.8, 91 % (NV12)'
    assert notes == ['slowest pair: GPUs 0 and 1 of a100-node, 268.9 GB/s, 89.6 % of its '
                     'link (NV12)', 'every pair at 80 % of its link or more']


def test_a_slow_pair_of_a_real_node_is_named_and_no_other(checks, tmp_path):
    """The same node with one pair's figure cut to a third (GPUs 2 and 5: a link that lost
    most of its lanes): that pair is named below the goal, in the matrix and in the rows,
    and no other pair is."""
    from hpcbench.report import contents
    from hpcbench.results import measured
    data = a100_node_pair_record(tmp_path, cut={(2, 5): 1 / 3})
    case, = measured.measured_cases(data)
    slow, slowest = case.slow_pairs()
    assert [p.key.gpus for p in slow] == [(2, 5)] and slowest.key.gpus == (2, 5)
    (_, _, grid, notes), = contents.gpu_pair_matrices([case])
    assert grid[2][6] == grid[5][3] == '91.26, 30 % (NV12)'
    assert notes == ['slowest pair: GPUs 2 and 5 of a100-node, 91.26 GB/s, 30.4 % of its '
                     'link (NV12)',
                     'below 80 % of its link: GPUs 2 and 5 of a100-node (91.26 GB/s, 30.4 % '
                     'of its link (NV12))']
    assert case.value('slowest_pair_link_efficiency') == pytest.approx(100 * 273.79 / 3 / 300)


def test_the_report_of_a_stored_session_of_a_real_node_names_its_slow_pair(checks, tmp_path):
    """The whole report (summary.md and index.html) of a stored session holding the pair
    check's case of the real 8 x A100 node, one pair cut: the node's matrix with every
    pair's share of its link, the slow pair named, in both."""
    import copy
    from hpcbench.report import pages
    from hpcbench.results import picture
    (tmp_path / 'job').mkdir()
    data = a100_node_pair_record(tmp_path / 'job', cut={(2, 5): 1 / 3})
    session = {'session_info': {'uuid': '0a100000-0000-4000-8000-000000000001',
                                'time_start': '2026-11-29T03:00:00+0000',
                                'time_start_unix': 1795921200.0},
               'runs': copy.deepcopy(data['runs'])}
    index = pages.write(tmp_path / 'report', picture.of_sessions('cluster', [session]))
    summary = (tmp_path / 'report' / 'summary.md').read_text()
    page = index.read_text()
    for text in (summary, page):
        assert ('DeviceBufferPairCheck path=intra-node (openmpi) on a100-node: GB/s per pair, '
                "its share of its link, the link") in text
        assert 'below 80 % of its link: GPUs 2 and 5 of a100-node (91.26 GB/s, 30.4 % of its ' \
               'link (NV12))' in text
        assert text.count('91.26, 30 % (NV12)') == 2         # its row and its column
    assert '| GPU0 | - | 268.9, 90 % (NV12) |' in summary
