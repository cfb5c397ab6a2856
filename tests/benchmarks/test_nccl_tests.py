"""nccl-tests' outputs (hpcbench.benchmarks.nccl_tests) read back and refused when broken.

The output is real: all_reduce_perf over 16 H100s of two nodes (8 GB, 338.8 GB/s bus
bandwidth out of place), as published with its command line (tests/fixtures/gpu/nccl, its
README cites it); the broken ones are copies of it with one thing wrong each."""
import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import nccl_tests

NCCL = FIXTURES / 'gpu' / 'nccl'
TWO_NODES = (NCCL / 'all-reduce-2x8-h100-published.out').read_text()
ROW_8G = ('  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    '
          '47743  179.92  337.35      0')


def test_the_options_ask_for_one_gpu_per_rank_and_verified_data():
    assert nccl_tests.command_options() == ['-b', '8', '-e', str(8 << 30), '-f', '2', '-g', '1',
                                            '-n', '20', '-w', '5', '-c', '1']
    assert nccl_tests.sizes(8, 64) == [8, 16, 32, 64]
    assert nccl_tests.spack_spec('90') == 'nccl-tests@2.16.3 +mpi cuda_arch=90'


def test_a_published_two_node_run_its_ranks_sizes_and_figures():
    run = nccl_tests.parse(TWO_NODES, 16, 8, 8589934592)
    assert len(run.ranks) == 16 and run.ranks[9][1:3] == ('ztan-mig-gq73', 1)
    assert run.ranks[0][4] == 'NVIDIA H100 80GB HBM3'
    assert len(run.rows) == 31 and run.largest().out_of_place.busbw == 338.82
    figures = nccl_tests.figures(run)
    assert figures == {'busbw': 337.35, 'algbw': 179.92, 'latency': 123.5,
                       'average_busbw': 70.742}


def test_the_bus_bandwidth_is_nccl_tests_own():
    """all_reduce over 16 ranks: busbw = algbw x 2 x 15 / 16, as the row prints it."""
    algbw, busbw = nccl_tests.bus_bandwidth('all_reduce', 16, 8589934592, 47535)
    assert algbw == pytest.approx(180.71, abs=0.01)
    assert busbw == pytest.approx(338.82, abs=0.01)


def _broken(old, new):
    assert old in TWO_NODES
    return TWO_NODES.replace(old, new, 1)


@pytest.mark.parametrize('text, said', [
    (_broken(ROW_8G, ROW_8G[:-1] + '3'), 'elements verified wrong: 3 at 8589934592 bytes in '
                                         'place'),
    (_broken('# Out of bounds values : 0 OK', '# Out of bounds values : 12 FAILED'),
     'out of bounds values: 12'),
    (_broken(ROW_8G + '\n', ''), 'sizes 8589934592 missing of 8 to 8589934592'),
    (TWO_NODES[:TWO_NODES.index('  4294967296')], 'sizes 4294967296, 8589934592 missing'),
    (_broken('#  Rank 15 Group  0 Pid   6740 on ztan-mig-gq73 device  7 [0000:8c:00] NVIDIA '
             'H100 80GB HBM3\n', ''), 'ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 '
                                     'used devices, 16 were launched'),
    (_broken('nThread 1 nGpus 1', 'nThread 1 nGpus 8'), '8 GPUs per rank, one of each asked'),
    (_broken('  180.71  338.82', '     nan  338.82'), "'nan' is not a finite"),
    ('', 'no nccl-tests header'),
])
def test_a_broken_run_is_one_message(text, said):
    with pytest.raises(nccl_tests.NcclTestsError) as err:
        nccl_tests.parse(text, 16, 8, 8589934592)
    assert said in str(err.value)


def test_a_run_without_a_gpu_driver_is_refused_naming_the_failure():
    """The real run of nccl-tests as built here, on this machine without a GPU."""
    text = (NCCL / 'all-reduce-no-driver.out').read_text()
    with pytest.raises(nccl_tests.NcclTestsError) as err:
        nccl_tests.parse(text, 2, 8, 64)
    assert str(err.value) == ("nccl-tests failed: vm: Test CUDA failure common.cu:1030 'CUDA "
                              "driver version is insufficient for CUDA runtime version'")


def test_the_published_figure_of_eight_gpus_and_none_elsewhere():
    busbw, source = nccl_tests.published('all_reduce', 'H200 SXM', 8, 1)
    assert busbw == 479.98 and 'ND_H200_v5_results.md' in source
    assert nccl_tests.published('all_reduce', 'H200 SXM', 8, 2) is None
    assert nccl_tests.published('all_gather', 'H100 SXM', 8, 1) is None
    assert nccl_tests.published('all_reduce', 'H100 SXM', 4, 1) is None
