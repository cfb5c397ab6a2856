"""HPL's figures as its checks record them (reframe-checks/hpl.py): the solves of a job's
output with their samples, where HPL's own timers say the time went, and, in HplCheck,
the updates' rate and the model's bound against the job's DGEMM ceiling."""
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import hpl_model, hpl_output
from hpcbench.rfm.partition import job_output
from hpcbench.rfm.plugins import sampled_figure


def read_solves(test, sized=''):
    """HPL's results in `test`'s job output, each proven by its residual check, as many as
    HPL.dat asked for; every solve kept as the figures' sample, with its N (and, `sized`,
    how the job chose it)."""
    try:
        test.runs = hpl_output.parse(job_output(test), test.plan.inputs.expected_results)
    except hpl_output.HplOutputError as err:
        raise SanityError(str(err)) from None

    test.summary = hpl_output.summarize(test.runs)
    sizes = ','.join(str(n) for n in sorted({r.n for r in test.runs}))
    solves = f'{len(test.runs)} solve(s) of N={sizes}{sized}'
    if getattr(test, 'nb_reason', ''):
        solves += f', NB {test.runs[0].nb} for this BLAS (hpl.NB_BY_BLAS)'
    test.record_samples(f'best of {solves}', gflops=[r.gflops for r in test.runs])
    test.record_samples(f'shortest of {solves}', time=[r.seconds for r in test.runs])
    test.record_aggregation(f'mean of {solves}', 'gflops_mean')
    test.record_aggregation(f'(max - min) / mean of {solves}', 'spread')
    test.record_aggregation(f'gflops (best of {solves}) / Rpeak', 'efficiency')
    record_phases(test, solves)


# Where HPL's time went, by its own timers (hpl_output.Phases): each phase's share of its
# solve, and the trailing updates' arithmetic rate, which a BLAS's DGEMM sets.
PHASE_FIGURES = ('update_share', 'row_swap_share', 'panel_share', 'other_share')


def record_phases(test, solves):
    """Figures of HPL's own timers where its build prints them (the medians over the
    solves): the share of a solve in the trailing updates' arithmetic, their row swaps, the
    panels' factorization and the rest (back substitution, the panels' broadcasts and the
    waits for them), and the updates' GFLOP/s."""
    if not test.runs or any(r.phases is None for r in test.runs):
        return
    shares = {name: [] for name in PHASE_FIGURES}
    for run in test.runs:
        phases = run.phases
        for name, seconds in zip(PHASE_FIGURES, (
                phases.update - phases.laswp, phases.laswp, phases.rfact,
                phases.uptrsv + phases.untimed(run.seconds))):
            shares[name].append(100 * seconds / run.seconds)
    rates = [r.phases.update_gflops(r.n, r.nb) for r in test.runs]
    for name in PHASE_FIGURES:
        test.perf_variables[name] = sn.make_performance_function(
            sampled_figure(test, name), '%')
    test.record_samples(f'median of {solves}, by HPL\'s own timers (the most of any '
                        'process)', **shares)
    if None not in rates:
        test.perf_variables['update_gflops'] = sn.make_performance_function(
            sampled_figure(test, 'update_gflops'), 'GFLOP/s')
        test.record_samples(f'median of {solves}: the trailing updates\' flops over their '
                            'time less their row swaps', update_gflops=rates)


def record_against_ceiling(test):
    """HplCheck's figures against the DGEMM ceiling its job measured (`test.dgemm`): the
    updates' arithmetic against it, how much of HPL's distance to it is its DGEMM's (the
    rest its other phases': row swaps, panels, waits), and the model's bound."""
    rates = test.samples.get('update_gflops')
    if rates:
        test.perf_variables['update_ceiling_efficiency'] = sn.make_performance_function(
            sampled_figure(test, 'update_ceiling_efficiency'), '%')
        test.record_samples(
            f'median over the solves of update_gflops / ({test.num_nodes} x the DGEMM '
            f'ceiling, {test.dgemm.best:.1f} GFLOP/s)', update_ceiling_efficiency=[
                100 * r / (test.num_nodes * test.dgemm.best) for r in rates])
    record_model_bound(test)


def record_model_bound(test):
    """The most HPL can reach at its N and NB on this node (hpl_model.bound: the updates at
    the job's DGEMM ceiling, row swaps and panels at the node's bandwidth ceiling), in % of
    the DGEMM ceiling, beside ceiling_efficiency: where one process ran it."""
    ceilings = getattr(getattr(test, 'node_ceilings', None), 'result', None)
    if test.num_nodes != 1 or any(r.p * r.q != 1 for r in test.runs) or ceilings is None:
        return
    bandwidth = max(ceilings.bandwidth_mbps) / 1000
    bounds = [hpl_model.bound(r.n, r.nb, test.dgemm.best, bandwidth, r.nbmin, r.ndiv)
              for r in test.runs]
    test.perf_variables['model_ceiling_efficiency'] = sn.make_performance_function(
        sampled_figure(test, 'model_ceiling_efficiency'), '%')
    test.record_samples(
        f'hpl_model.bound of each solve: the updates at the DGEMM ceiling '
        f'({test.dgemm.best:.1f} GFLOP/s), row swaps and panels at the bandwidth ceiling '
        f'({bandwidth:.1f} GB/s, {ceilings.kernels.bandwidth}); {bounds[0].words()}',
        model_ceiling_efficiency=[b.share for b in bounds])
