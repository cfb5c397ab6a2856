"""How much of the suite a run covers (`reframe --mode`, `make run MODE=`): quick and full,
the runs of their own (make tune, make screen) left out but where a paper's run did them,
and ReFrame's options for every run on a system (execution_options)."""
from hpcbench.benchmarks import dgemm, hpcc, hpl, imb


# How much of the suite a run covers (`reframe --mode`, `make run MODE=`; `--ci-generate`
# carries the mode into every job of the pipeline it writes). Sweeps and node screening are
# runs of their own (make tune, make screen): modes() leaves them out.
MODES = [
    # HPL sized in its job for 30-s solves at its DGEMM rate (hpcbench.benchmarks.hpl.
    # QUICK_SOLVE_SECONDS), two of them (QUICK_REPEATS), HPCC at 1/100
    # (hpcbench.benchmarks.hpcc.QUICK_MEMORY_FRACTION), and what does not depend on the MPI
    # stack on the first stack only (hpcbench.rfm.plugins.StackCoverage), the other BLAS
    # libraries' HPL in the one-rank layout only and no HPCC with them (HplCheck and its DGEMM
    # ceiling measure what a BLAS changes), HPCC on the first stack only (IMB and HPL compare
    # the stacks), the DGEMM ceilings in 3 calls, IMB's windowed benchmarks at a fifth of IMB's
    # volume per size (hpcbench.benchmarks.imb.QUICK_WINDOWED_VOLUME_MB): minutes. (Each setting
    # names its checks: ReFrame warns about a test that lacks the variable.)
    {'name': 'quick', 'options': ['-S', 'HplCheck.sizing=quick',
                                  '-S', f'HpccCheck.memory_fraction={hpcc.QUICK_MEMORY_FRACTION}',
                                  '-S', 'HplCheck.every_stack=false',
                                  '-S', 'HplCheck.blas_every_layout=false',
                                  '-S', 'HpccCheck.every_blas=false',
                                  '-S', 'HpccCheck.every_mpi=false',
                                  '-S', f'HplCheck.dgemm_repeats={dgemm.QUICK_REPEATS}',
                                  '-S', f'HplCheck.repeats={hpl.QUICK_REPEATS}',
                                  '-S', 'ImbPairCheck.windowed_volume_mb='
                                        f'{imb.QUICK_WINDOWED_VOLUME_MB}',
                                  '-S', 'IorCheck.every_stack=false']},
    # At 80 % of it, as a Top500 run would: hours on a small machine. On a paper's system,
    # its paper's run: node screening too where the paper screened (modes()).
    {'name': 'full', 'options': []},
]


# Runs of their own (make tune, make screen), left out of both modes: a tag and its check.
RUNS_OF_THEIR_OWN = {'sweep': 'HplTuningSweep', 'screen': 'HplNodeScreen'}


def paper_run_tags(system):
    """The runs of their own that are part of a system's paper run (`full` there): those
    whose check the paper gives reference figures of (T2K screened every node with
    single-node HPL before its 625-node run, §4.2: its HplNodeScreen figures)."""
    from hpcbench.results import references
    measured = {fig.check for fig in references.load(system).figures if fig.use == 'reference'}
    return [tag for tag, check in RUNS_OF_THEIR_OWN.items() if check in measured]


def default_mode(system):
    """quick where the suite runs here (this machine, the testbed: HPL at 1/50 of the
    memory), full on a paper's system, whose default run is its paper's."""
    from hpcbench.stack import machine_systems
    return 'quick' if system in machine_systems.machine_systems() else 'full'


def modes(system=None):
    """MODES as they apply to `system`, each leaving out the runs of their own
    (RUNS_OF_THEIR_OWN) but, in full mode, those its paper's run did (paper_run_tags)."""
    included = paper_run_tags(system) if system else []
    result = []
    for mode in MODES:
        left_out = [tag for tag in RUNS_OF_THEIR_OWN
                    if mode['name'] != 'full' or tag not in included]
        result.append({**mode, 'options': [*mode['options'],
                                           *(['-T', f'^({"|".join(left_out)})$']
                                             if left_out else [])]})
    return result


def mode_options(name, system=None):
    """The options of the mode called `name` (on `system`: modes())."""
    known = {m['name']: m['options'] for m in modes(system)}
    if name not in known:
        raise RuntimeError(f'mode {name!r}: one of {", ".join(known)}')

    return known[name]


def execution_options(system):
    """ReFrame's options for every run on `system` (make run, screen, tune): one job at a time
    where its Slurm nodes are processes of one host (the testbed; a described cluster with
    nodes_share_hosts). There ReFrame's max_jobs, per partition, let two partitions' jobs
    run at once on the same cores, the second waiting for the host's launch lock while its
    time limit ran: a 2-node HPL of the described testbed was killed at its limit so."""
    from hpcbench.machine import described_system
    shared = system == 'testbed' or described_system.nodes_share_hosts(system)
    return ['--exec-policy=serial'] if shared else []


# How often, at least, ReFrame looks whether a job of this machine ended (per second). Its
# default slows to one look in 10 s: a one-minute HPL job then ended up to 9 s before
# ReFrame saw it, and the next waited (the durations of make run's jobs fell on ReFrame's
# polling ticks: four HPL jobs 55.4 s, four 63.7 s). Where jobs run on this machine a look
# costs a waitpid, and on the testbed a query of the Slurm controller on this machine; a
# cluster's scheduler keeps ReFrame's gentler default.
LOCAL_POLL_RATE_MIN = 1
