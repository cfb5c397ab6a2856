"""nccl-tests' outputs (hpcbench.benchmarks.nccl_tests) read back and refused when broken.

The output is real: all_reduce_perf over 16 H100s of two nodes (8 GB, 338.8 GB/s bus
bandwidth out of place), as published with its command line (tests/fixtures/gpu/nccl, its
README cites it); the broken ones are copies of it with one thing wrong each."""
import re

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
    run = nccl_tests.parse(TWO_NODES, 16, 8, 8589934592, collective='all_reduce')
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
    # Issue 60, item 7: figures nccl-tests did not compute, nothing verified, two ranks on
    # one GPU.
    (_broken('179.92  337.35', '1799.2  3373.5'), 'size 8589934592 in place: algbw 1799.2 GB/s '
                                                  'is not 8589934592 bytes in 47743 us (179.92 '
                                                  'GB/s): not what nccl-tests computes'),
    (_broken('179.92  337.35', '179.92  3373.5'), 'busbw 3373.5 GB/s is not algbw 179.92 x '
                                                  '1.875 (337.35 GB/s)'),
    (_broken('    47535  180.71', '     4753  180.71'), 'algbw 180.71 GB/s is not 8589934592 '
                                                        'bytes in 4753 us'),
    (re.sub(r'(?m)(\s)(\d+)$', r'\1N/A', TWO_NODES.replace('      0    ', '    N/A    ')),
     '#wrong N/A at 31 of 31 sizes (first 8 bytes): not verified, -c 1 was asked'),
    (_broken('validation: 1', 'validation: 0'), 'validation: 0: no data was verified'),
    (_broken('device  6 [0000:8b:00]', 'device  5 [0000:85:00]'),
     'ranks 5, 6 drove one GPU (0000:85:00) on ztan-mig-235z: one rank per GPU was asked'),
    # Issue 70, item 10: the average it reports, 10 times its rows' (70.742 GB/s), and a
    # variation: a hundredth off where its rows round to hundredths.
    (_broken('# Avg bus bandwidth    : 70.742', '# Avg bus bandwidth    : 707.42'),
     'average bus bandwidth 707.42 GB/s, where the 62 bus bandwidths of its rows (out of '
     'place and in place) average 70.7415: not what nccl-tests computes from them'),
    (_broken('# Avg bus bandwidth    : 70.742', '# Avg bus bandwidth    : 70.76'),
     'average bus bandwidth 70.76 GB/s, where the 62 bus bandwidths'),
])
def test_a_broken_run_is_one_message(text, said):
    with pytest.raises(nccl_tests.NcclTestsError) as err:
        nccl_tests.parse(text, 16, 8, 8589934592, collective='all_reduce')
    assert said in str(err.value)


def test_a_run_without_a_gpu_driver_is_refused_naming_the_failure():
    """The real run of nccl-tests as built here, on this machine without a GPU."""
    text = (NCCL / 'all-reduce-no-driver.out').read_text()
    with pytest.raises(nccl_tests.NcclTestsError) as err:
        nccl_tests.parse(text, 2, 8, 64, collective='all_reduce')
    assert str(err.value) == ("nccl-tests failed: vm: Test CUDA failure common.cu:1030 'CUDA "
                              "driver version is insufficient for CUDA runtime version'")


def test_the_published_figure_of_eight_gpus_and_none_elsewhere():
    busbw, source = nccl_tests.published('all_reduce', 'H200 SXM', 8, 1)
    assert busbw == 479.98 and 'ND_H200_v5_results.md' in source
    assert nccl_tests.published('all_reduce', 'H200 SXM', 8, 2) is None
    assert nccl_tests.published('all_gather', 'H100 SXM', 8, 1) is None
    assert nccl_tests.published('all_reduce', 'H100 SXM', 4, 1) is None


# Real outputs of other sites (tests/fixtures/gpu/nccl/README.md cites each).
def _real(name):
    return (NCCL / name).read_text()


def test_all_gather_over_two_ranks_prints_zero_byte_rows_for_the_smallest_sizes():
    """all_gather -b 8 over two B200s of two nodes: 8 and 16 bytes asked are 0 bytes (each
    rank's share rounds to no element), then 32 on: read, not refused as missing sizes."""
    run = nccl_tests.parse(_real('all-gather-2x1-b200-dranet.out'), 2, 8, 1 << 30,
                           collective='all_gather')
    assert [r.size for r in run.rows[:3]] == [0, 0, 32] and len(run.rows) == 28
    assert nccl_tests.figures(run)['busbw'] == 45.14
    assert [r[1] for r in run.ranks] == ['nccl-gib-test-0', 'nccl-gib-test-1']


@pytest.mark.parametrize('collective', ['all_reduce', 'sendrecv'])
def test_a_figure_is_judged_with_its_collective_s_factor(collective):
    """The same rows read as another collective's: the bus bandwidth is not its factor's."""
    text = _real('all-gather-2x1-b200-dranet.out')
    with pytest.raises(nccl_tests.NcclTestsError, match='busbw .* is not algbw .* x '):
        nccl_tests.parse(text, 2, 8, 1 << 30, collective=collective)


def test_output_tagged_by_the_launchers_is_read_as_rank_0_printed_it():
    """SkyPilot's and Open MPI's --tag-output tags before every line (16 H200s, all_gather);
    srun --label's `0: ` on the published all_reduce."""
    run = nccl_tests.parse(_real('all-gather-2x8-h200-skypilot-tagged.out'), 16, 1024, 8 << 30,
                           collective='all_gather')
    assert nccl_tests.figures(run)['busbw'] == 332.58 and len(run.ranks) == 16
    labelled = ''.join(f'0: {line}' for line in TWO_NODES.splitlines(True))
    run = nccl_tests.parse(labelled, 16, 8, 8589934592, collective='all_reduce')
    assert nccl_tests.figures(run)['busbw'] == 337.35


def test_two_ranks_driving_one_gpu_are_refused_as_real_runs_printed_them():
    """Two ranks on one RTX 5090 (tagged by Open MPI): a pair's figure of one GPU."""
    with pytest.raises(nccl_tests.NcclTestsError,
                       match=r'^ranks 0, 1 drove one GPU \(0000:02:00\) on lab: one rank per GPU'):
        nccl_tests.parse(_real('all-reduce-two-ranks-one-gpu-tagged.out'), 2, 1 << 20, 1 << 27,
                         collective='all_reduce')


def _with_network(text, said):
    """A real run with NCCL's INIT line naming the network it chose, as NCCL prints it at
    NCCL_DEBUG=INFO (`host:pid:tid [dev] NCCL INFO Using network X`)."""
    return text.replace('#\n# Using devices', f'nccl-gib-test-0:1444:1444 [0] NCCL INFO Using '
                                              f'network {said}\n#\n# Using devices', 1)


@pytest.mark.parametrize('said, nodes, expected, why', [
    ('IB', 2, '', None),
    ('AWS Libfabric', 2, '', None),
    ('Socket', 1, '', None),
    ('Socket', 2, '', 'NCCL fell back to its socket transport (NET/Socket) between the nodes'),
    ('Socket', 2, 'Socket', None),
    ('IB', 2, 'AWS Libfabric', 'NCCL used network IB between the nodes, AWS Libfabric was '
                               'expected'),
    (None, 2, '', 'NCCL did not say which network it used between the nodes'),
])
def test_the_network_nccl_chose_between_nodes_is_checked(said, nodes, expected, why):
    text = _real('all-gather-2x1-b200-dranet.out')
    text = _with_network(text, said) if said else text
    nccl_tests.parse(text, 2, 8, 1 << 30, collective='all_gather')
    assert nccl_tests.network(text) == said
    found = nccl_tests.check_network(nccl_tests.network(text), nodes, expected)
    assert (found is None) if why is None else found.startswith(why)
