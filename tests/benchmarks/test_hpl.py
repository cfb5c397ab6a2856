"""HPL inputs (grid, N, memory, flop count, HPL.dat) and output parsing, on real outputs
captured here (tests/fixtures/hpl) and broken copies of them."""
import math
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from hpcbench.benchmarks import hpl, hpl_input_file, hpl_output, hpl_quick_size, hpl_sweep
from hpcbench.core.node import Node
from conftest import FIXTURES

GIB = 1 << 30
SWEEP_OUTPUT = FIXTURES / 'hpl' / 'openmpi-1x2-nb-bcast.out'
GRID_SWEEP_OUTPUT = FIXTURES / 'hpl' / 'openmpi-grid-sweep-1x2-2x1.out'

# This machine: 2 cores of 2.596 GHz x 32 flop/cycle, 24 GiB.
LOCAL = Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=32 << 20,
             memory_bytes=24 * GIB, clock_hz=2.596e9, flops_per_cycle=32)
# A TSUBAME X4600 node: 16 cores of 2.4 GHz x 2 flop/cycle, 32 GB (Table 3-6).
TSUBAME_32GB = Node(num_cores=16, num_sockets=8, num_numa_nodes=8, llc_bytes_total=16 << 20,
                    memory_bytes=32 * GIB, clock_hz=2.4e9, flops_per_cycle=2)


@pytest.mark.parametrize('ranks, grids', [
    (1, [(1, 1)]), (2, [(1, 2)]), (7, [(1, 7)]),
    (12, [(3, 4), (2, 6), (1, 12)]),
    (16, [(4, 4), (2, 8), (1, 16)]),
    (32, [(4, 8), (2, 16), (1, 32)]),        # TSUBAME Table 3-6, 4 nodes x 8 ranks: 4 x 8
])
def test_process_grids_are_near_square_first_with_p_not_above_q(ranks, grids):
    assert hpl.process_grids(ranks) == grids
    assert hpl.process_grid(ranks) == grids[0]


def test_a_grid_needs_a_process():
    with pytest.raises(hpl.HplInputError):
        hpl.process_grids(0)


@pytest.mark.parametrize('nb, p, q', [(192, 1, 2), (232, 50, 50), (240, 4, 8), (100, 3, 4)])
def test_problem_size_is_a_multiple_of_its_granule_within_the_fraction(nb, p, q):
    memory = 64 * GIB
    target = math.isqrt(int(0.8 * memory / 8))
    n = hpl.problem_size(memory, nb, p, q, 0.8)
    granule = hpl.block_granule(target, nb, p, q)
    assert n % granule == 0 and n % nb == 0
    assert 8 * n * n <= 0.8 * memory
    # The next multiple would exceed the fraction: N is the largest that fits, within 1 %.
    assert target - granule < n <= target and n >= 0.99 * target


def test_t2k_full_run_n_is_such_a_multiple():
    # T2K Table 5: N = 1,508,000 with P = Q = 50 and NB = 232 (divisible by P x NB).
    assert 1_508_000 % (232 * math.lcm(50, 50)) == 0


@pytest.mark.parametrize('fraction', [0, 1, 1.5, -0.2])
def test_problem_size_refuses_a_fraction_outside_0_1(fraction):
    with pytest.raises(hpl.HplInputError, match='between 0 and 1'):
        hpl.problem_size(GIB, 192, 1, 2, fraction)


def test_problem_size_refuses_memory_too_small_for_one_block():
    # 1/2 of 256 KiB: N = 128 < NB.
    with pytest.raises(hpl.HplInputError, match='holds no HPL matrix of at least one block'):
        hpl.problem_size(1 << 18, 192, 4, 4, 0.5)


def test_default_fraction_is_80_percent_on_one_node_and_75_on_several():
    assert hpl.default_memory_fraction(1) == 0.80
    assert hpl.default_memory_fraction(4) == 0.75
    assert hpl.memory_fraction('tuning', 1) == pytest.approx(0.04)
    assert hpl.memory_fraction('quick', 1) == pytest.approx(0.02)
    with pytest.raises(hpl.HplInputError, match='unknown HPL sizing'):
        hpl.memory_fraction('huge', 1)


def test_memory_needed_is_tsubames_formula_plus_panels_and_tsubames_run_fits():
    # TSUBAME Table 3-6: one 32 GB node, P x Q = 2 x 4, N = 58320.
    n = 58320
    tsubame = n * n * 8 + 2 * n * 8 + n * 4
    needed = hpl.memory_needed(n, 240, 2, 4, depth=1)
    panels = 2 * 4 * 2 * 8 * 240 * (n // 2 + n // 4 + 240)
    assert needed == tsubame + panels
    assert hpl.check_fits(n, 240, 2, 4, 1, 1, 32 * GIB) == needed


def test_plan_on_this_machine_uses_80_percent_and_fits():
    plan = hpl.plan(LOCAL, 1, 2, repeats=3)
    n = plan.inputs.ns[0]
    assert plan.inputs.ns == (n, n, n) and plan.inputs.grids == ((1, 2),)
    assert 0.78 * 24 * GIB < 8 * n * n <= 0.80 * 24 * GIB
    assert plan.rpeak_flops == pytest.approx(2 * 2.596e9 * 32)
    assert plan.estimated_seconds == pytest.approx(3 * hpl.flop_count(n) / plan.rpeak_flops)


def test_plan_on_several_nodes_uses_75_percent_of_them_all():
    plan = hpl.plan(TSUBAME_32GB, 4, 8)
    n = plan.inputs.ns[0]
    assert plan.inputs.grids == ((4, 8),)
    assert 0.73 * 4 * 32 * GIB < 8 * n * n <= 0.75 * 4 * 32 * GIB


def test_an_n_that_does_not_fit_is_refused_with_the_figures():
    with pytest.raises(hpl.HplInputError) as err:
        hpl.plan(LOCAL, 1, 2, n=200_000)

    message = str(err.value)
    assert 'N=200000 needs 299.7 GiB' in message and '23.0 GiB' in message


def test_an_explicit_grid_must_use_every_process():
    with pytest.raises(hpl.HplInputError, match='does not use the 8 processes'):
        hpl.plan(LOCAL, 4, 2, grids=[(2, 2)])


def test_flop_count_is_the_one_hpl_reports_its_gflops_with():
    # Every result line of a real run: Gflops = (2/3 N^3 + 2 N^2) / Time, within the
    # rounding of the printed time (two decimals).
    for run in hpl_output.parse(SWEEP_OUTPUT.read_text()):
        low = hpl.flop_count(run.n) / (run.seconds + 0.005) / 1e9
        high = hpl.flop_count(run.n) / (run.seconds - 0.005) / 1e9
        assert low <= run.gflops <= high


def test_tsubames_printed_formula_is_a_misprint():
    n = 58320
    misprinted = (2 * n * n * n) / (3 + 2 * n * n)     # TSUBAME §3 as printed: about N
    assert misprinted == pytest.approx(n, rel=1e-3)
    assert hpl.flop_count(n) == pytest.approx(2 / 3 * n ** 3, rel=1e-4)
    # TSUBAME Table 3-6, 1 node of 2.6 GHz: 72.24 GFLOP/s at N = 58320 means a solve of
    # about 30 minutes; the printed formula would make it microseconds.
    assert hpl.estimated_seconds(n, 72.24e9) == pytest.approx(1831, rel=0.01)


def _dat_values(text):
    return [line.split(None, 1)[0] if line[:1] not in ('H', 'W') else line
            for line in text.splitlines()]


def test_hpl_dat_has_every_line_hpl_reads_in_order():
    inputs = hpl.Inputs(ns=(4608, 4608), grids=((1, 2), (2, 1)),
                        tuning=hpl.Tuning(nbs=(128, 192), bcasts=(1, 3)))
    lines = hpl_input_file.hpl_dat(inputs).splitlines()
    assert len(lines) == 31
    assert lines[5] == '4608 4608' + ' ' * 5 + 'Ns'
    values = [ln.split('  ')[0] for ln in lines[2:]]
    assert values == ['HPL.out', '6', '2', '4608 4608', '2', '128 192', '0', '2', '1 2',
                      '2 1', '16.0', '1', '2', '1', '4', '1', '2', '1', '2', '2', '1 3',
                      '1', '1', '2', '64', '0', '0', '1', '8']
    assert inputs.expected_results == 2 * 2 * 2 * 2


def test_tuning_options_change_their_lines_and_bad_values_are_refused():
    tuning = replace(hpl.Tuning(), pmap=1, depths=[0], swap=1, swap_threshold=128,
                             l1_transposed=False, u_transposed=False, equilibration=False,
                             alignment=4, threshold=8.0, pfacts=[0], rfacts=[1],
                             nbmins=[2], ndivs=[3])
    values = [ln.split('  ')[0] for ln in
              hpl_input_file.hpl_dat(hpl.Inputs((1000,), ((1, 1),), tuning)).splitlines()[2:]]
    assert values[6:] == ['1', '1', '1', '1', '8.0', '1', '0', '1', '2', '1', '3', '1', '1',
                          '1', '3', '1', '0', '1', '128', '1', '1', '0', '4']
    for bad in ({'bcasts': (6,)}, {'pfacts': (3,)}, {'nbmins': (0,)}, {'ndivs': (1,)},
                {'depths': (-1,)}, {'swap': 3}, {'alignment': 0}, {'nbs': ()}, {'pmap': 2}):
        with pytest.raises(hpl.HplInputError):
            replace(hpl.Tuning(), **bad)


def test_parse_reads_every_result_of_a_real_run():
    runs = hpl_output.parse(SWEEP_OUTPUT.read_text(), expected_results=8)
    assert [(r.n, r.nb, r.p, r.q, r.bcast) for r in runs[:4]] == [
        (4608, 128, 1, 2, 1), (4608, 128, 1, 2, 3), (4608, 192, 1, 2, 1),
        (4608, 192, 1, 2, 3)]
    first = runs[0]
    assert (first.tv, first.seconds, first.gflops) == ('WR11R2R4', 0.87, 75.053)
    assert (first.depth, first.rfact, first.ndiv, first.pfact, first.nbmin) == (1, 2, 2, 2, 4)
    assert first.residual == pytest.approx(2.62432815e-03)
    summary = hpl_output.summarize(runs)
    assert summary.best_gflops == 79.439 and summary.min_gflops == 74.84
    assert summary.spread_percent == pytest.approx(100 * (79.439 - 74.84) / summary.mean_gflops)


PER_SOCKET = FIXTURES / 'hpl' / 'hplcheck-openblas-per-socket-quick-sized.out'
KNL = FIXTURES / 'hpl' / 'knl-7250-17x32-detailed-timing.out'


def test_hpl_s_own_timers_say_where_a_solve_s_time_went():
    # This project's one-rank run: 19.95 s, 19.45 of it in the trailing updates.
    first = hpl_output.parse(PER_SOCKET.read_text())[0]
    assert (first.n, first.seconds) == (14400, 19.95)
    assert first.phases == hpl_output.Phases(rfact=0.45, pfact=0.14, mxswp=0.05, update=19.45,
                                             laswp=0.89, uptrsv=0.04)
    assert first.phases.untimed(first.seconds) == pytest.approx(0.01)
    # 544 KNL processes (anand1221178/KNL-testing): 391 of the update's 502 s swapping rows
    # between processes; the timers, each the most of any process, fill the solve.
    (knl,) = hpl_output.parse(KNL.read_text())
    assert (knl.phases.update, knl.phases.laswp, knl.phases.rfact) == (502.19, 391.45, 16.16)
    assert knl.phases.untimed(knl.seconds) == 0
    # A build without the timers (Spack's builds have them): none.
    untimed = re.sub(r'(?m)^(--VVV.*|\+? ?Max aggregated wall time.*)\n', '', KNL.read_text())
    assert hpl_output.parse(untimed)[0].phases is None


@pytest.mark.parametrize('old, new, said', [
    ('update  . . :             502.19', 'update  . . :             602.19',
     'no part of its solve'),
    ('laswp . . :             391.45', 'laswp . . :             -1.00', 'no part of its solve'),
    ('rfact . . . :              16.16', 'rfact . . . :                nan', 'not finite'),
    ('Max aggregated wall time up tr sv  . :               0.34\n',
     'Max aggregated wall time update  . . :               0.34\n', 'two update timers'),
])
def test_a_timer_that_is_no_part_of_its_solve_is_refused(old, new, said):
    text = KNL.read_text()
    assert old in text
    with pytest.raises(hpl_output.HplOutputError, match=said):
        hpl_output.parse(text.replace(old, new))


def _mutations(real):
    first_passed = real.index('PASSED')
    result_lines = [m.start() for m in re.finditer(r'^WR\w+ ', real, re.M)]
    return {
        'residual FAILED': real[:first_passed] + 'FAILED' + real[first_passed + 6:],
        'cut after a result line': real[:real.index('\n', result_lines[len(result_lines) // 2])
                                        + 1],
        'cut before End of Tests': real[:real.index('End of Tests.')],
        'no result at all': real[:result_lines[0]],
        'Gflops is nan': re.sub(r'(?m)^(WR\w+\s+\d+\s+\d+\s+\d+\s+\d+\s+\S+\s+)\S+',
                                r'\g<1>nan', real, count=1),
        'residual line missing': re.sub(r'(?m)^\|\|Ax-b\|\|.*PASSED\n', '', real, count=1),
    }


MUTATIONS = list(_mutations(SWEEP_OUTPUT.read_text()))


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_parse_rejects_a_broken_real_output(mutation):
    broken = _mutations(SWEEP_OUTPUT.read_text())[mutation]
    with pytest.raises(hpl_output.HplOutputError):
        hpl_output.parse(broken, expected_results=8)


def test_parse_rejects_fewer_results_than_hpl_dat_asked_for():
    with pytest.raises(hpl_output.HplOutputError, match='8 HPL results, but HPL.dat asked for 9'):
        hpl_output.parse(SWEEP_OUTPUT.read_text(), expected_results=9)


def test_sweep_tuning_varies_one_setting_and_keeps_the_others():
    base = hpl.Tuning()
    swept = hpl_sweep.sweep_tuning(base, 'bcast')
    assert swept.bcasts == (0, 1, 2, 3, 4, 5) and swept.nbs == base.nbs
    assert hpl_sweep.sweep_tuning(base, 'swap_threshold', [128]).swap_threshold == 128
    with pytest.raises(hpl.HplInputError, match='unknown HPL sweep setting'):
        hpl_sweep.sweep_tuning(base, 'colour')


def test_the_grid_sweep_names_each_grid_once_by_its_shape_at_any_process_count():
    assert hpl_sweep.sweep_grids(1) == {'nearest-square': (1, 1)}
    # At 2 processes the nearest square is one process row; at 4 it is its own transpose.
    assert hpl_sweep.sweep_grids(2) == {'nearest-square': (1, 2), 'transposed': (2, 1)}
    assert hpl_sweep.sweep_grids(4) == {'nearest-square': (2, 2), 'one-row': (1, 4),
                                        'one-column': (4, 1)}
    assert hpl_sweep.sweep_grids(6) == {'nearest-square': (2, 3), 'transposed': (3, 2),
                                        'one-row': (1, 6), 'one-column': (6, 1)}
    for ranks in range(1, 65):
        grids = hpl_sweep.sweep_grids(ranks)
        assert all(p * q == ranks for p, q in grids.values())
        assert len(set(grids.values())) == len(grids)
        assert {f'grid={shape}' for shape in grids} <= set(hpl_sweep.sweep_variables('grid'))


def test_the_grid_sweep_is_one_job_whose_hpl_dat_lists_every_grid_and_its_rates_by_grid():
    grids = list(hpl_sweep.sweep_grids(2).values())
    planned = hpl.plan(LOCAL, 1, 2, hpl_sweep.sweep_tuning(hpl.Tuning(), 'grid'),
                       sizing='tuning', grids=grids)
    text = hpl_input_file.hpl_dat(planned.inputs)
    assert re.search(r'^2 +# of process grids', text, re.M)
    assert re.search(r'^1 2 +Ps$', text, re.M) and re.search(r'^2 1 +Qs$', text, re.M)
    words, _ = hpl.run_words(planned, (), 30, 'per-core')
    assert ' grids=1x2,2x1 ' in words and 'P=' not in words
    # A real sweep of both grids (this project's: tests/fixtures/hpl/README.md), a rate each.
    runs = hpl_output.parse(GRID_SWEEP_OUTPUT.read_text(), expected_results=2)
    rates = hpl_sweep.sweep_rates(runs, 'grid')
    assert set(rates) == {(1, 2), (2, 1)}
    assert rates == {(r.p, r.q): r.gflops for r in runs}


def test_tuning_table_marks_the_best_value_of_each_setting():
    runs = hpl_output.parse(SWEEP_OUTPUT.read_text())
    rates = {name: {hpl_sweep.setting_label(name, v): [r] for v, r in
                    hpl_sweep.sweep_rates(runs, name).items()}
             for name in ('nb', 'bcast')}
    assert rates == {'nb': {'128': [79.439], '192': [77.699]},
                     'bcast': {'1ringM': [79.232], '2ringM': [79.439]}}
    table = hpl_sweep.tuning_table(rates)
    assert re.search(r'^nb\s+128\s+79\.44  <- best$', table, re.M)
    assert re.search(r'^bcast\s+2ringM\s+79\.44  <- best$', table, re.M)
    assert table.splitlines()[-1] == 'best: nb=128 bcast=2ringM'
    # Stored figures of repeated runs: the rates only (the job's timer shares are no
    # setting), each value with every run.
    stored = [('depth=0', (60.0, 75.0)), ('update_share', (95.1,)), ('depth=1', (70.0,)),
              ('depth=0', (61.0,)), ('grid=transposed', (74.0,))]
    assert hpl_sweep.rates_by_setting(stored) == {
        'depth': {'0': [60.0, 75.0, 61.0], '1': [70.0]}, 'grid': {'transposed': [74.0]}}
    # Repeated runs: the best median wins, not the one lucky run.
    table = hpl_sweep.tuning_table({'depth': {'0': [60.0, 75.0, 61.0], '1': [70.0, 71.0]}})
    assert re.search(r'^depth\s+0\s+61\.00  3 \(60\.00 to 75\.00\)$', table, re.M)
    assert re.search(r'^depth\s+1\s+70\.50  2 \(70\.00 to 71\.00\)  <- best$', table, re.M)


def test_screening_flags_nodes_below_the_median_by_more_than_the_threshold():
    rates = {'n1': 117.0, 'n2': 116.0, 'n3': 118.0, 'n4': 104.0, 'n5': 111.5}
    screening = hpl_output.screen_nodes(rates, threshold_percent=4)
    assert screening.median == 116.0
    assert set(screening.slow) == {'n4'}
    assert screening.slow['n4'][1] == pytest.approx(100 * 12 / 116)
    assert set(hpl_output.screen_nodes(rates, threshold_percent=3).slow) == {'n4', 'n5'}
    with pytest.raises(ValueError):
        hpl_output.screen_nodes({})


def test_a_derived_n_shrinks_to_leave_the_system_its_memory_on_small_nodes():
    # CHiC: 4 GiB nodes. 75 % of 32 nodes' memory would leave less than 1 GiB per node.
    chic = Node(num_cores=4, num_sockets=2, num_numa_nodes=2, llc_bytes_total=4 << 20,
                     memory_bytes=4 << 30, clock_hz=2.6e9, flops_per_cycle=2)
    planned = hpl.plan(chic, 32, 4)
    (p, q), = planned.inputs.grids
    n = planned.inputs.ns[0]
    usable = 32 * (chic.memory_bytes - chic.os_reserve_bytes)
    nb = hpl.Tuning().nbs[0]
    assert hpl.memory_needed(n, nb, p, q) <= usable
    assert n % nb == 0
    with pytest.raises(hpl.HplInputError):
        hpl.plan(chic, 32, 4, n=hpl.problem_size(32 * chic.memory_bytes, 232, p, q, 0.75))


def test_nodes_that_keep_less_for_their_os_fit_what_the_default_reserve_refuses():
    # The 32-node testbed: each emulated node a 32nd of a 23.4-GiB host, whose one OS's
    # 1 GiB the nodes share; each reserving 1 GiB of its 0.73 left no HPL at all.
    host = int(23.4 * 2**30)
    emulated = Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=32 << 20,
                    memory_bytes=host // 32, clock_hz=2.45e9, flops_per_cycle=16,
                    os_reserve_bytes=2**30 // 32)
    planned = hpl.plan(emulated, 1, 1, sizing='tuning')
    n = planned.inputs.ns[0]
    assert hpl.memory_needed(n, 232, 1, 1) <= emulated.memory_bytes - emulated.os_reserve_bytes
    with pytest.raises(hpl.HplInputError, match=r'after 1\.0 GiB per node for the system'):
        hpl.plan(replace(emulated, os_reserve_bytes=2**30), 1, 1, sizing='tuning')


def test_a_grid_too_skinny_for_equal_shares_still_gets_an_n_of_whole_blocks():
    # Louhi's quad-core phase: 1684 nodes x 4 ranks = 16 x 421; NB x lcm = 1.56 M > N.
    target = math.isqrt(int(0.75 * 1684 * (8 << 30) / 8))
    n = hpl.problem_size(1684 * (8 << 30), 232, 16, 421, 0.75)
    assert n % 232 == 0 and n < 232 * 16 * 421
    assert 8 * n * n <= 0.75 * 1684 * (8 << 30) and n >= 0.99 * target
    with pytest.raises(hpl.HplInputError, match='holds no HPL matrix'):
        hpl.problem_size(1 << 16, 232, 1, 2, 0.01)


@pytest.mark.parametrize('nodes', [16, 64, 256, 640, 1024, 4096])
def test_a_grid_with_a_huge_lcm_loses_no_more_than_one_percent_of_n(nodes):
    # Oakforest-PACS per-core: 66 ranks per node (cores 0 and 1 excluded), 96 GiB nodes. At
    # 16 nodes 1056 ranks = 32 x 33, NB x lcm = 202,752: N was snapped to 0.516 of its target.
    p, q = hpl.process_grid(66 * nodes)
    target = math.isqrt(int(0.75 * nodes * 96 * GIB / 8))
    n = hpl.problem_size(nodes * 96 * GIB, 192, p, q, 0.75)
    assert target - hpl.block_granule(target, 192, p, q) < n <= target
    assert n >= 0.99 * target, (nodes, p, q, n / target)


def test_t2k_sized_its_run_by_its_huge_pages():
    # §4.5: 14,400 pages of 2 MB per node, 1 GB of Goto BLAS buffers, N divisible by P x NB.
    assert hpl.huge_page_problem_size(625, 14400, 2 << 20, 232, 50, 50) == 1_508_000
    with pytest.raises(hpl.HplInputError, match='less than the BLAS buffers'):
        hpl.huge_page_problem_size(1, 10, 2 << 20, 232, 1, 1)


# --- quick mode: N sized in the job from the DGEMM rate ----------------------------------------

def test_quick_sizes_are_steps_of_whole_granules_up_to_a_quarter_of_the_memory():
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    assert list(sizes) == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    assert all(n % 192 == 0 for n in sizes)
    assert 8 * sizes[0] ** 2 <= hpl.QUICK_MAX_MEMORY_FRACTION * LOCAL.memory_bytes
    assert sizes[0] == hpl.problem_size(LOCAL.memory_bytes, 192, 1, 2,
                                        hpl.QUICK_MAX_MEMORY_FRACTION)
    # Each a step below the one before, rounded down to its granule (NB x lcm(P, Q) = 384),
    # and one more where that would alias (below).
    assert all(a / hpl.QUICK_SIZE_STEP - 2 * 384 < b < a for a, b in zip(sizes, sizes[1:]))
    assert sizes[-1] >= 8 * 192 * 2


def test_the_size_for_a_rate_is_within_the_time_and_a_faster_node_gets_more():
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    slow, fast = (hpl_quick_size.size_for_rate(sizes, rate * 1e9) for rate in (100, 215))
    for n, rate in ((slow, 100e9), (fast, 215e9)):
        assert hpl.flop_count(n) / rate <= hpl.QUICK_SOLVE_SECONDS
    assert fast > slow
    # A rate too small for any size gets the smallest; a small change keeps the same N.
    assert hpl_quick_size.size_for_rate(sizes, 1e6) == min(sizes)
    assert hpl_quick_size.size_for_rate(sizes, 101e9) == slow


def _sized(tmp_path, dgemm_output, sizes, nodes=1, repeats=3):
    """The job's sizing step, as the job runs it (python -m
    hpcbench.benchmarks.hpl_quick_size size), on an HPL.dat written at set-up with the
    smallest size."""
    (tmp_path / 'dgemm-rate.out').write_text(dgemm_output)
    (tmp_path / 'HPL.dat').write_text(hpl_input_file.hpl_dat(hpl.Inputs((min(sizes),) * repeats,
                                                             ((1, 2),))))
    return subprocess.run([sys.executable, '-m', 'hpcbench.benchmarks.hpl_quick_size', 'size',
                           'dgemm-rate.out', 'HPL.dat', *map(str, sizes), '--nodes', str(nodes)],
                          cwd=tmp_path, capture_output=True, text=True)


def test_the_jobs_sizing_step_chooses_by_the_dgemm_rate_and_rewrites_only_the_ns(tmp_path):
    """On a real dgemm-rate output (best 108.862 GFLOP/s), on one node and on four."""
    real = (FIXTURES / 'dgemm' / 'local-2-cores.out').read_text()
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    for nodes in (1, 4):
        done = _sized(tmp_path, real, sizes, nodes)
        assert done.returncode == 0, done.stderr
        n = hpl_quick_size.size_for_rate(sizes, nodes * 108.862e9)
        assert hpl_quick_size.parse_size(done.stdout) == (n, hpl.QUICK_SOLVE_SECONDS, 108.862)
        assert f'x {nodes} node(s)' in done.stdout
        # Only the Ns line changed: every other line is what the check wrote.
        written = (tmp_path / 'HPL.dat').read_text()
        assert written == hpl_input_file.hpl_dat(hpl.Inputs((n,) * 3, ((1, 2),)))


def test_the_size_where_hpl_s_curve_flattens_is_the_smallest_flat_one_within_the_budget():
    """At the rates this project measured (84 to 110 GFLOP/s) the curve is flat within the
    30-s budget: the smallest size from there, not the budget's largest; a faster node's
    flattens further out, and one whose curve flattens past its budget (a 4-s budget, as
    the end-to-end tests give) runs the budget's largest."""
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    chosen = {}
    for rate in (84e9, 110e9):
        n = chosen[rate] = hpl_quick_size.size_for_rate(sizes, rate)
        flat = hpl_quick_size.flat_size(rate)
        assert n >= flat and not [s for s in sizes if flat <= s < n]
        assert hpl.flop_count(n) / rate <= hpl.QUICK_SOLVE_SECONDS
    # At 84 GFLOP/s a size below the budget's largest (14,400 of 15,168: 24 s a solve).
    assert chosen[84e9] < max(s for s in sizes if hpl.flop_count(s) / 84e9 <= 30)
    assert chosen[110e9] > chosen[84e9]
    # At 86.5 GFLOP/s the fitted curve is within 2 points of its limit from N = 14,260.
    assert hpl_quick_size.flat_size(86.5e9) == pytest.approx(14260, abs=10)
    budgeted = hpl_quick_size.size_for_rate(sizes, 100e9, seconds=4)
    assert budgeted < hpl_quick_size.flat_size(100e9)
    assert budgeted == max(s for s in sizes if hpl.flop_count(s) / 100e9 <= 4)
    # Where nothing fits the budget, the smallest size still.
    assert hpl_quick_size.size_for_rate(sizes, 1e6) == min(sizes)


def test_the_jobs_sizing_step_says_where_on_hpl_s_curve_its_size_lies(tmp_path):
    """On a real dgemm-rate output (108.862 GFLOP/s): within a 30-s budget the curve is
    flat; within 4 s it is not, and the line says how far below its limit the fitted curve
    puts N; the size line reads as before."""
    real = (FIXTURES / 'dgemm' / 'local-2-cores.out').read_text()
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    flat = hpl_quick_size.flat_size(108.862e9)
    for seconds in (30, 4):
        (tmp_path / 'dgemm-rate.out').write_text(real)
        (tmp_path / 'HPL.dat').write_text(hpl_input_file.hpl_dat(hpl.Inputs((min(sizes),),
                                                                             ((1, 2),))))
        done = subprocess.run(
            [sys.executable, '-m', 'hpcbench.benchmarks.hpl_quick_size', 'size',
             'dgemm-rate.out', 'HPL.dat', *map(str, sizes), '--seconds', str(seconds)],
            cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        n, budget, rate = hpl_quick_size.parse_size(done.stdout)
        assert (budget, rate) == (seconds, 108.862)
        assert n == hpl_quick_size.size_for_rate(sizes, 108.862e9, seconds)
        curve = hpl_quick_size.parse_curve(done.stdout)
        assert curve.startswith(f"HPL's curve as the suite fitted it: within 2 points of "
                                f'its limit from N = {flat:.0f} at 108.862 GFLOP/s')
        if seconds == 4:
            below = hpl_quick_size.QUICK_FLATTENING * 108.862 / n ** 2
            assert n < flat and curve.endswith(
                f'past the 4-s budget: by that curve N = {n} is {below:.1f} points below its '
                'limit')
        else:
            assert n >= flat and 'past' not in curve
        assert (tmp_path / 'HPL.dat').read_text().splitlines()[5].startswith(f'{n} ')


@pytest.mark.parametrize('broken', ['', 'dgemm-rate: N=4352 repeats=3\n',
                                    'repeat 1: 1.5 s nan GFLOP/s\n', 'unverified'])
def test_the_jobs_sizing_step_refuses_to_size_without_a_verified_rate(tmp_path, broken):
    real = (FIXTURES / 'dgemm' / 'local-2-cores.out').read_text()
    if broken == 'unverified':
        broken = real.replace(': Result verified', ': Result NOT verified')
    sizes = hpl.quick_sizes(LOCAL, 1, 192, 1, 2)
    done = _sized(tmp_path, broken, sizes)
    assert done.returncode == 1 and 'no verified DGEMM rate in dgemm-rate.out' in done.stderr
    assert hpl_quick_size.parse_size(done.stdout) is None
    assert (tmp_path / 'HPL.dat').read_text().splitlines()[5].startswith(f'{min(sizes)} ')


@pytest.mark.parametrize('p, q', [(1, 1), (1, 2), (2, 4), (4, 8)])
def test_quick_sizes_avoid_a_leading_dimension_of_a_multiple_of_4_kib(p, q):
    """BLIS ran HPL at N = 13824 (27 x 512) at 64 GFLOP/s and at 13632 at 90 here: no quick
    size but the smallest gives a process row a leading dimension of 512 doubles' multiple."""
    assert hpl.aliased(13824, 192, 1) and not hpl.aliased(13632, 192, 1)
    sizes = hpl.quick_sizes(LOCAL, 4, 192, p, q)
    assert not any(hpl.aliased(n, 192, p) for n in sizes[:-1])
    for n in (13824, 13632, 1508000, 1000):
        rows = hpl.local_rows(n, 232, p)
        assert sum(rows) == n and max(rows) - min(rows) <= 232


def test_a_check_s_tuning_variables_set_tuning_s_lists_and_fields():
    """One value of each variable (-S HplCheck.nb=192, a paper's): a list field takes it as
    its list, the others as themselves, None keeps Tuning's default; a value out of
    Tuning's range is its HplInputError."""
    tuned = hpl.tuned({'nb': 192, 'depth': 0, 'swap': 1, 'pmap': None})
    assert (tuned.nbs, tuned.depths, tuned.swap) == ((192,), (0,), 1)
    assert tuned.pmap == hpl.Tuning().pmap
    assert set(hpl.TUNING_SETTINGS) == {*hpl.TUNING_LISTS, *hpl.TUNING_SCALARS}
    with pytest.raises(hpl.HplInputError):
        hpl.tuned({'nb': 0})


@pytest.mark.parametrize('spec, nb', [('blis', 256), ('blis@0.9.0', 256),
                                      ('openblas@0.3.28 threads=openmp ~dynamic_dispatch', 192),
                                      ('intel-oneapi-mkl', 192), (None, 192), ('', 192)])
def test_a_blas_measured_better_at_another_nb_gets_it_with_why(spec, nb):
    chosen, why = hpl.blas_nb(spec)
    assert chosen == nb and bool(why) == (nb != 192)
