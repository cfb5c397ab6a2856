"""IMB sizes, parsing and figures (hpcbench.benchmarks.imb) on real outputs captured here:
IMB-MPI1 2021.7 built by Spack against each MPI stack, all ten benchmarks, 2 ranks on this
2-core node (`mpirun -np 2 IMB-MPI1 -npmin 2 PingPong PingPing Sendrecv Exchange Allreduce
Alltoall Bcast Barrier Uniband Biband`), and broken copies of them."""
import math
import re

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import imb, imb_variability

OUTPUTS = {m: (FIXTURES / 'imb' / f'{m}-2-ranks-one-node.out').read_text()
           for m in ('openmpi', 'mpich', 'intelmpi')}
ALL_SIZES = {b: imb.message_sizes(b, 0, 22) for b in imb.BENCHMARKS}


def _block(text, benchmark):
    """The whole block of one benchmark: from its rule to the blank line after its table."""
    match = re.search(rf'#-+\n# Benchmarking {benchmark} \n.*?\n\n', text, re.S)
    assert match, benchmark
    return match


def _mutations(text):
    pingpong = _block(text, 'PingPong')
    allreduce = _block(text, 'Allreduce')
    return {
        'missing table': text[:pingpong.start()] + text[pingpong.end():],
        'truncated table': text[:allreduce.start() + (allreduce.end() - allreduce.start()) // 2],
        'truncated row': re.sub(r'(\n +1024 +1000 +\S+ +\S+ +\S+) +\S+\n', r'\1\n', text, 1),
        'NaN': re.sub(r'(\n +1048576 +40 +)\S+', r'\1nan', text, 1),
        'missing message size': re.sub(r'\n +65536 +\d+ +[^\n]*', '', text, 1),
        'out of memory': re.sub(r'\n( +4194304) +10 +[^\n]*',
                                r'\n\1 out-of-mem.; needed X=   1.000 GB; use flag "-mem X"',
                                text, 1),
        # Values in another order under the right labels (Bcast 1 B: 0.09 0.63 0.36).
        'columns swapped': re.sub(r'(# Benchmarking Bcast.*?\n +1 +1000 +)(\S+) +(\S+) +(\S+)',
                                  r'\1\4 \3 \2', text, 1, re.S),
        'columns mislabelled': text.replace('t_min[usec]  t_max[usec]  t_avg[usec]',
                                            't_avg[usec]  t_min[usec]  t_max[usec]'),
    }


MUTATIONS = list(_mutations(OUTPUTS['openmpi']))
# The benchmark whose table each mutation breaks.
BROKEN_TABLE = {'missing table': 'PingPong', 'truncated table': 'Allreduce',
                'truncated row': 'Sendrecv', 'NaN': 'PingPong',
                'missing message size': 'PingPong', 'out of memory': 'PingPong',
                'columns swapped': 'Bcast', 'columns mislabelled': 'Sendrecv'}


def complete_tables(text):
    tables = imb.parse(text)
    return {b: imb.complete_table(tables, b, 2, ALL_SIZES[b]) for b in imb.BENCHMARKS}


@pytest.mark.parametrize('mpi', OUTPUTS)
def test_every_table_of_a_real_run_is_complete(mpi):
    tables = complete_tables(OUTPUTS[mpi])
    assert tables['PingPong'].sizes == (0, *(1 << i for i in range(23)))
    assert tables['Allreduce'].sizes[:3] == (0, 4, 8)      # whole floats only
    assert len(tables['Barrier'].rows) == 1


def test_columns_are_read_by_their_labels_in_imbs_order():
    tables = complete_tables(OUTPUTS['openmpi'])
    # Sendrecv 4194304 B: t_min 352.31, t_max 352.54, t_avg 352.43 as printed.
    row = tables['Sendrecv'].row(4194304)
    assert (row.t_min, row.t_max, row.t_avg, row.mbytes_per_sec) == (352.31, 352.54, 352.43,
                                                                       23794.79)
    # Bcast's root-rotated times differ most between processes: 1 B: 0.09 / 0.63 / 0.36.
    row = tables['Bcast'].row(1)
    assert (row.t_min, row.t_max, row.t_avg) == (0.09, 0.63, 0.36)
    assert tables['Uniband'].row(0).msgs_per_sec == 9094744
    # Mbytes/sec is 10^6 B/s: 4 MiB in 352.82 us.
    pingpong = tables['PingPong'].row(4194304)
    assert pingpong.mbytes_per_sec == pytest.approx(4194304 / pingpong.t_avg, rel=1e-4)


def test_figures_of_real_runs():
    pingpong = complete_tables(OUTPUTS['openmpi'])['PingPong']
    assert imb.figures(pingpong) == {'latency': 0.15, 'bandwidth_4MiB': 11887.92,
                                     'peak_bandwidth': 13234.74, 'switch_size': 4096}
    allreduce = complete_tables(OUTPUTS['mpich'])['Allreduce']
    assert set(imb.figures(allreduce)) == {'t_avg_8B', 't_avg_16B', 't_avg_1MiB'}
    assert imb.figures(allreduce)['t_avg_1MiB'] == allreduce.row(1048576).t_avg
    biband = complete_tables(OUTPUTS['intelmpi'])['Biband']
    assert imb.figures(biband)['message_rate'] == biband.row(0).msgs_per_sec
    barrier = complete_tables(OUTPUTS['intelmpi'])['Barrier']
    assert imb.figures(barrier) == {'t_avg': 0.41}


@pytest.mark.parametrize('benchmark', imb.BENCHMARKS)
def test_declared_units_match_the_figures(benchmark):
    table = complete_tables(OUTPUTS['mpich'])[benchmark]
    declared = set(imb.performance_units(benchmark, table.sizes))
    assert set(imb.figures(table)) - {'switch_size'} == declared


def test_figures_only_for_sizes_in_the_range():
    assert imb.performance_units('Alltoall', imb.message_sizes('Alltoall', 0, 10)) == {
        't_avg_8B': 'us', 't_avg_16B': 'us'}
    assert 'bandwidth_4MiB' not in imb.performance_units('PingPong',
                                                         imb.message_sizes('PingPong', 0, 21))


@pytest.mark.parametrize('mpi, switch', [('openmpi', 4096), ('mpich', 16384),
                                         ('intelmpi', None)])
def test_eager_to_rendezvous_switch_from_the_bandwidth_curve(mpi, switch):
    """Open MPI's bandwidth falls from 4700 to 1458 MB/s at 4 KiB, MPICH's from 6537 to 4446
    at 16 KiB; Intel MPI's shared-memory curve rises to its peak without a dip (its 15 % drop
    at 512 KiB comes after the peak: the caches, not the protocol)."""
    assert imb.protocol_switch(complete_tables(OUTPUTS[mpi])['PingPong']) == switch


def test_every_mutation_names_the_table_it_breaks():
    assert set(BROKEN_TABLE) == set(MUTATIONS)


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_broken_real_outputs_fail(mutation):
    with pytest.raises(imb.ImbOutputError):
        complete_tables(_mutations(OUTPUTS['openmpi'])[mutation])


def test_failures_say_what_is_wrong():
    broken = _mutations(OUTPUTS['openmpi'])
    with pytest.raises(imb.ImbOutputError, match='no PingPong table for 2 processes'):
        complete_tables(broken['missing table'])
    with pytest.raises(imb.ImbOutputError, match='did not finish'):
        complete_tables(broken['truncated table'])
    with pytest.raises(imb.ImbOutputError, match='65536 missing'):
        complete_tables(broken['missing message size'])
    with pytest.raises(imb.ImbOutputError, match="'nan' is not a finite"):
        complete_tables(broken['NaN'])
    with pytest.raises(imb.ImbOutputError, match='did not measure this size .out-of-mem'):
        complete_tables(broken['out of memory'])
    with pytest.raises(imb.ImbOutputError, match='t_min <= t_avg <= t_max does not hold'):
        complete_tables(broken['columns swapped'])
    with pytest.raises(imb.ImbOutputError, match='columns .*expected'):
        complete_tables(broken['columns mislabelled'])


def test_a_table_at_another_process_count_is_not_the_one_asked_for():
    with pytest.raises(imb.ImbOutputError, match='no Barrier table for 4 processes'):
        imb.complete_table(imb.parse(OUTPUTS['openmpi']), 'Barrier', 4, ())


def test_message_sizes_as_imb_runs_them():
    assert imb.message_sizes('PingPong', 3, 5) == (0, 8, 16, 32)
    assert imb.message_sizes('Allreduce', 0, 3) == (0, 4, 8)
    assert imb.message_sizes('Barrier', 0, 22) == ()
    with pytest.raises(imb.ImbInputError):
        imb.message_sizes('PingPong', 5, 3)


def test_sizes_are_limited_to_what_imb_can_allocate():
    # Alltoall needs 2 x processes x size per process: 128 x 4 MiB x 2 = 1 GiB fits IMB's
    # default 1 GiB (IMB refuses only more), 256 processes do not.
    assert imb.feasible_max_log('Alltoall', 128, 22, 1.0) == 22
    assert imb.feasible_max_log('Alltoall', 256, 22, 1.0) == 21
    # MPI counts are ints: 1024 x 2^21 B overflows whatever the memory.
    assert imb.feasible_max_log('Alltoall', 1024, 22, 1000.0) == 20
    assert imb.feasible_max_log('PingPong', 2, 22, 1.0) == 22
    assert imb.memory_limit_gib(24 * imb.GIB, 2) == 6.0
    assert imb.memory_limit_gib(2 * imb.GIB, 64) == imb.IMB_DEFAULT_MEMORY_GIB


def test_placements():
    assert imb.pair_placement(1) == imb.Placement(1, 2)
    assert imb.pair_placement(32) == imb.Placement(2, 1)
    assert imb.group_placement(32, 1).ranks == 32


def test_variability_statistics():
    stats = imb_variability.Variability.of([1.0, 2.0, 3.0])
    assert (stats.mean, stats.min, stats.max) == (2.0, 1.0, 3.0)
    assert stats.cv_percent == pytest.approx(50.0)
    with pytest.raises(imb.ImbOutputError, match='at least 2'):
        imb_variability.Variability.of([1.0])
    assert not math.isnan(imb_variability.Variability.of([0.0, 0.0]).cv_percent)


def test_the_first_drop_is_the_switch_not_a_later_dip():
    """MPICH's PingPing through the suite: bandwidth falls 24 % at 16 KiB (the switch) and
    42 % at 128 KiB (oncoming traffic on this VM), both below 80 % of the peak."""
    text = (FIXTURES / 'imb' / 'mpich-pingping-suite-run.out').read_text()
    table = imb.complete_table(imb.parse(text), 'PingPing', 2, ALL_SIZES['PingPing'])
    assert table.row(131072).mbytes_per_sec < 0.6 * table.row(65536).mbytes_per_sec
    assert imb.protocol_switch(table) == 16384


def test_a_spike_is_not_a_protocol_switch():
    """Intel MPI's PingPong through the suite on a noisy moment: 16 KiB took 5.97 us, then
    32 KiB 3.01 us. A protocol costs from its switch on; a time that falls again is
    interference."""
    text = (FIXTURES / 'imb' / 'intelmpi-pingpong-spike-suite-run.out').read_text()
    table = imb.complete_table(imb.parse(text), 'PingPong', 2, ALL_SIZES['PingPong'])
    assert table.row(16384).mbytes_per_sec < 0.6 * table.row(8192).mbytes_per_sec
    assert table.row(32768).t_avg < table.row(16384).t_avg
    assert imb.protocol_switch(table) is None


def test_best_of_several_runs_takes_the_fastest_row_of_each_size():
    """Three launches of Open MPI's PingPong in one job (the suite's launch line run by hand
    with its job script's environment): the first ran in one of this VM's fast phases."""
    text = (FIXTURES / 'imb' / 'openmpi-pingpong-3-runs.out').read_text()
    tables = [imb.complete_table(run, 'PingPong', 2, ALL_SIZES['PingPong'])
              for run in imb.parse_runs(text, 3)]
    assert len(tables) == 3
    best = imb.best_of(tables)
    for i, row in enumerate(best.rows):
        assert row.t_avg == min(t.rows[i].t_avg for t in tables)
        assert row in [t.rows[i] for t in tables]        # whole rows, never mixed
    assert [imb.protocol_switch(t) for t in tables] == [4096, None, None]
    assert imb.protocol_switch(best) == 4096
    with pytest.raises(imb.ImbOutputError, match='different sizes'):
        imb.best_of([tables[0], imb.Table('PingPong', 2, tables[1].rows[:-1])])


def test_imb_2017_and_2018_banners_are_read():
    # IMB 2017/2018 print "Intel (R) MPI Benchmarks"; their tables are laid out as 2021's.
    old = OUTPUTS['openmpi'].replace('Intel(R) MPI Benchmarks 2021.7',
                                     'Intel (R) MPI Benchmarks 2018')
    assert old != OUTPUTS['openmpi']
    runs = imb.parse_runs(old + old, 2)
    assert [complete_tables_of(run) for run in runs] == [complete_tables(OUTPUTS['openmpi'])] * 2


def complete_tables_of(tables):
    return {b: imb.complete_table(tables, b, 2, ALL_SIZES[b]) for b in imb.BENCHMARKS}


def test_one_file_of_two_runs_is_read_run_by_run():
    two = OUTPUTS['openmpi'] + OUTPUTS['mpich']
    first, second = imb.parse_runs(two, 2)
    assert complete_tables_of(first) == complete_tables(OUTPUTS['openmpi'])
    assert complete_tables_of(second) == complete_tables(OUTPUTS['mpich'])
    with pytest.raises(imb.ImbOutputError, match='holds 2 IMB runs'):
        imb.parse(two)


def test_multi_pair_runs_are_compared_by_bandwidth():
    table = complete_tables(OUTPUTS['openmpi'])['Uniband']
    slower = imb.Table('Uniband', 2, tuple(
        imb.Row(r.size, r.repetitions, None, None, None, r.mbytes_per_sec / 2,
                r.msgs_per_sec / 2) for r in table.rows))
    assert imb.best_of([slower, table]).rows == table.rows
