"""HPL's bound from a node's DGEMM and bandwidth ceilings (hpcbench.benchmarks.hpl_model),
set against what HPL's own timers measured on a real run of this project."""
import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import hpl, hpl_model, hpl_output

# This project's one-rank run (N = 14400, NB = 192): its job's DGEMM ceiling, and the
# bandwidth ceiling likwid-bench measured on a machine of the same kind (tests/fixtures/
# ceilings/local-likwid.out: stream_mem_avx512, best of 5 runs).
PER_SOCKET = FIXTURES / 'hpl' / 'hplcheck-openblas-per-socket-quick-sized.out'
CEILING_GFLOPS = 107.399
BANDWIDTH_GBS = 43.366


def test_each_phase_s_bound_is_below_what_hpl_s_timers_measured():
    for run in hpl_output.parse(PER_SOCKET.read_text()):
        found = hpl_model.bound(run.n, run.nb, CEILING_GFLOPS, BANDWIDTH_GBS, run.nbmin,
                                run.ndiv)
        assert found.update_seconds <= run.phases.update - run.phases.laswp
        assert found.swap_seconds <= run.phases.laswp
        assert found.panel_seconds <= run.phases.rfact
        assert found.seconds <= run.seconds and found.gflops >= run.gflops
    # The bound: 97.8 % of the ceiling, where the solves reached 91.1 to 92.9 %; the row
    # swaps measured 2.6 times their bandwidth's bound (a TLB miss a column, not bandwidth).
    assert found.share == pytest.approx(97.8, abs=0.05)
    assert found.words() == ('at most 97.8 % of the DGEMM ceiling at N = 14400, NB = 192: '
                             'the updates\' arithmetic 96.8 % of the time, row swaps 1.8 %, '
                             'panels 1.4 %')


def test_the_swaps_move_about_72_n_squared_bytes_and_a_panel_is_swept_once_a_level():
    assert hpl_model.swap_bytes(20000, 192) == pytest.approx(72 * 20000 ** 2, rel=0.01)
    # 192 -> 96 -> 48 -> 24 -> 12 -> 6 -> 3: six levels, then the base factorization.
    assert hpl_model.panel_sweeps(192, nbmin=4, ndiv=2) == 7
    assert hpl_model.panel_sweeps(4, nbmin=4, ndiv=2) == 1
    assert hpl_model.panel_sweeps(232, nbmin=8, ndiv=3) == 5      # 232, 78, 26, 9, 3
    # The updates do nearly all the arithmetic, more of it the larger N is against NB.
    assert hpl_model.update_flops(20000, 192) / hpl.flop_count(20000) == pytest.approx(
        0.9928, abs=1e-4)


def test_the_bound_rises_toward_the_ceiling_with_n_and_falls_with_the_bandwidth():
    shares = [hpl_model.bound(n, 192, 100.0, 40.0).share for n in (4000, 16000, 64000)]
    assert shares == sorted(shares) and shares[-1] < 100
    assert hpl_model.bound(16000, 192, 100.0, 10.0).share < shares[1]


@pytest.mark.parametrize('args, said', [
    ((14400, 192, 107.4, 43.4, 4, 2, 2), 'one process'),
    ((0, 192, 107.4, 43.4), 'no solve'),
    ((14400, 192, 0.0, 43.4), 'both must be measured'),
    ((14400, 192, 107.4, float('nan')), 'both must be measured'),
    ((14400, 192, 107.4, 43.4, 4, 1), 'no panel recursion'),
])
def test_what_it_does_not_model_is_refused(args, said):
    with pytest.raises(hpl_model.HplModelError, match=said):
        hpl_model.bound(*args)


def test_the_bound_stays_below_the_ceiling_whatever_the_block_and_the_bandwidth():
    # A large NB on a node of high bandwidth: the panels' arithmetic, not their sweeps,
    # bounds them (NB = 384 at 60 GB/s once read 100.0 % of the ceiling).
    found = hpl_model.bound(15744, 384, 88.3, 60.3)
    assert found.panel_seconds == pytest.approx(
        (hpl.flop_count(15744) - hpl_model.update_flops(15744, 384)) / 88.3e9)
    assert found.share < 99.5
    for nb in (64, 192, 384, 1024):
        assert hpl_model.bound(20000, nb, 100.0, 1e6).share < 100
