"""STREAM's sizing, parsing and balance, on real outputs captured here and mutated copies."""

import pytest

from hpcbench.benchmarks import stream

MiB = 2**20


def test_array_is_four_times_the_total_last_level_cache_rounded_up():
    # This host: one 32 MiB L3 -> 4 x 32 MiB / 8 B = 16 Mi elements per array.
    assert stream.array_size(32 * MiB, 24 * 2**30) == 16 * MiB
    # Two sockets with 12 MiB each (24 MiB): 12 Mi elements.
    assert stream.array_size(24 * MiB, 64 * 2**30) == 12 * MiB
    # An LLC that does not divide evenly still gets at least 4x.
    assert stream.array_size(5 * MiB, 2**34) * 8 >= 4 * 5 * MiB


def test_array_that_does_not_fit_in_memory_is_refused():
    with pytest.raises(stream.StreamInputError, match='GiB'):
        stream.array_size(1024 * MiB, 4 * 2**30)


@pytest.mark.parametrize('cores, sweep', [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]),
                                          (16, [1, 2, 4, 8, 16]),
                                          (68, [1, 2, 4, 8, 16, 32, 64, 68])])
def test_thread_sweep_runs_from_one_to_all_cores(cores, sweep):
    assert stream.thread_sweep(cores) == sweep


def test_spack_spec_names_the_build_variants():
    assert stream.spack_spec(16 * MiB) == 'stream stream_array_size=16777216 ntimes=20'


def test_openmp_placement_is_explicit():
    env = stream.openmp_environment(2)
    assert env == {'OMP_NUM_THREADS': '2', 'OMP_PLACES': 'cores', 'OMP_PROC_BIND': 'spread'}


@pytest.mark.parametrize('name, threads', [('stream/local-1-thread.out', 1),
                                           ('stream/local-2-threads.out', 2)])
def test_real_outputs_parse(fixture_text, name, threads):
    result = stream.parse(fixture_text(name), expected_threads=threads)
    assert result.threads == threads
    assert result.array_size == 16777216 and result.ntimes == 20
    assert set(result.best_rate_mbps) == set(stream.KERNELS)
    assert all(rate > 1000 for rate in result.best_rate_mbps.values())


def test_two_thread_triad_is_the_captured_figure(fixture_text):
    result = stream.parse(fixture_text('stream/local-2-threads.out'))
    assert result.best_rate_mbps['Triad'] == 48037.4


MUTATIONS = ['truncated before Triad', 'failed validation', 'no validation line', 'nan triad',
             'zero copy rate', 'empty']


def _mutations(text):
    triad = next(ln for ln in text.splitlines() if ln.startswith('Triad:'))
    copy = next(ln for ln in text.splitlines() if ln.startswith('Copy:'))
    return {
        'truncated before Triad': text[:text.index('Triad:')],
        'failed validation': text.replace(
            'Solution Validates: avg error less than 1.000000e-13 on all three arrays',
            'Failed Validation on array c[], AvgRelAbsErr > epsilon (1.000000e-13)'),
        'no validation line': text.replace('Solution Validates', 'Solution done'),
        'nan triad': text.replace(triad, 'Triad:          nan     0.1 0.1 0.1'),
        'zero copy rate': text.replace(copy, 'Copy:               0.0     0.1 0.1 0.1'),
        'empty': '',
    }


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_broken_real_output_fails(fixture_text, mutation):
    text = fixture_text('stream/local-2-threads.out')
    mutated = _mutations(text)
    assert set(mutated) == set(MUTATIONS)
    with pytest.raises(stream.StreamOutputError):
        stream.parse(mutated[mutation], expected_threads=2)


def test_two_runs_in_one_output_are_refused(fixture_text):
    # As a site's log of a 1-thread run then a 2-thread run: header of one, rates of the other.
    text = fixture_text('stream/local-1-thread.out') + fixture_text('stream/local-2-threads.out')
    with pytest.raises(stream.StreamOutputError, match='holds 2 STREAM runs'):
        stream.parse(text)


def test_the_mean_rate_is_from_the_average_time(fixture_text):
    """48037.4 MB/s is the best of 19 triads; their average time, 0.012252 s for 3 arrays of
    16 Mi doubles, is 32864 MB/s: the node's rate swings within a run."""
    result = stream.parse(fixture_text('stream/local-2-threads.out'))
    assert result.mean_rate_mbps['Triad'] == pytest.approx(3 * 8 * 16777216 / 0.012252 / 1e6)
    assert result.mean_rate_mbps['Copy'] == pytest.approx(2 * 8 * 16777216 / 0.008024 / 1e6)
    assert round(result.mean_rate_mbps['Triad']) == 32864


def test_wrong_thread_count_fails(fixture_text):
    with pytest.raises(stream.StreamOutputError, match='1 OpenMP threads ran, 2 expected'):
        stream.parse(fixture_text('stream/local-1-thread.out'), expected_threads=2)


@pytest.mark.parametrize('core_peak, threads, triad, balance', [
    # CHiC 2007 Table 1, gcc-4.2: Opteron 2 flop/cycle x 2.6 GHz, Woodcrest 4 x 2.0 GHz.
    (2 * 2.6e9, 1, 3294.2, 12.6),
    (2 * 2.6e9, 2, 3708.6, 22.4),
    (2 * 2.6e9, 4, 9345.7, 17.8),
    (4 * 2.0e9, 1, 3063.7, 20.9),
    (4 * 2.0e9, 4, 5294.5, 48.3),
])
def test_machine_balance_reproduces_chic_table_1(core_peak, threads, triad, balance):
    # The paper prints one decimal, sometimes truncated (48.35 -> 48.3).
    assert stream.machine_balance(core_peak, threads, triad) == pytest.approx(balance, abs=0.06)
