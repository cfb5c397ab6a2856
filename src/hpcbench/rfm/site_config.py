"""What every site config shares: where results go (perflogs, results database, stage and
output under var/), the logging format, and how an MPI stack becomes a ReFrame environment."""
import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from hpcbench.benchmarks import dgemm, hpcc, hpl, imb
from hpcbench.core import job_script, paths, run_lock
from hpcbench.core import accelerators as accelerator_facts
from hpcbench.machine import datasheets, description
from hpcbench.rfm import backends
from hpcbench.stack import spack

VAR = str(paths.VAR_DIR)


def refuse_unsafe_paths():
    """The per-user cache, mirror and build cache reach every job script (its MPI stacks'
    variables, which ReFrame expands by running any command they hold): one of shell syntax
    is refused in one message before ReFrame loads anything (paths.plain)."""
    try:
        for where in (paths.cache_dir, paths.mirror_dir, paths.buildcache_dir):
            where()
    except paths.UnsafePathError as err:
        sys.exit(f'error: {err}')
    # ReFrame reads a site config from its own directory: a relative path taken there is not
    # where the command started (make and hpcbench give ReFrame absolute ones).
    taken_in_site_configs = paths.SITE_CONFIGS_DIR.is_dir() and paths.TAKEN_FROM and \
        os.path.samefile(paths.TAKEN_FROM, paths.SITE_CONFIGS_DIR)
    for name, given in paths.GIVEN_RELATIVE.items() if taken_in_site_configs else ():
        sys.exit(f'error: {name}={given!r} is a relative path, which ReFrame would take from '
                 f'the directory of the file it reads ({paths.from_environment(name)}), not '
                 f'from where it started: give an absolute one ({name}="$PWD/{given}")')


refuse_unsafe_paths()


def take_var_for_this_run():
    """A ReFrame run (hpcbench.core.run_lock) locks var/ and checks that it can keep the run's
    results (room, a database that takes a write) before anything is written there: the
    site configs detect the host into var/ before they call config()."""
    dry_run = '--dry-run' in sys.argv
    run_lock.acquire_for_this_run(VAR, None if dry_run else f'{VAR}/results.db')


def say_an_unwritable_log_once():
    """A log record ReFrame cannot write (its file system filled during the run) is said
    once, in one line, then such records are dropped: Python's logging prints a traceback
    per record otherwise (125 in one short run whose var/ filled). What ReFrame could not
    keep it says in its own warnings, and `make run` fails saying why."""
    said = []

    def handle_error(handler, record):
        if not said:
            said.append(True)
            where = getattr(handler, 'baseFilename', None) or type(handler).__name__
            print(f'hpcbench: a log of this run cannot be written ({where}: '
                  f'{sys.exc_info()[1]}); its records are dropped from here', file=sys.stderr)

    def close(handler, close_file=logging.FileHandler.close):
        # Closing flushes too: at exit, a traceback of its own.
        try:
            close_file(handler)
        except OSError:
            handle_error(handler, None)

    logging.Handler.handleError = handle_error
    logging.FileHandler.close = close


def claim_var():
    """ReFrame writes its log, the detected topology and a run's stage into var/ as soon as
    it loads the site config: a results directory that is not the suite's (a directory of
    other files, a path of shell syntax) is refused first, in one message."""
    try:
        run_lock.plain_path(paths.VAR_DIR)
        paths.claim_var_dir()
    except (run_lock.VarUnusableError, paths.VarNotOursError) as err:
        sys.exit(f'error: {err}')
    except OSError as err:
        sys.exit(f'error: {run_lock.unusable(paths.VAR_DIR, err)}')


def drop_the_startup_log():
    """ReFrame logs its start, before it reads a site config, into a temporary file of its
    own (/tmp/rfm-*.log) and leaves it there: one more file per command. This run's log is
    in var/logs; the temporary one is removed as soon as the site config loads."""
    from reframe.core import logging as reframe_logging
    temporary = Path(tempfile.gettempdir())
    for name in reframe_logging.log_files() if reframe_logging._logger else ():
        path = Path(name)
        if path.parent == temporary and path.name.startswith('rfm-') and path.suffix == '.log':
            with contextlib.suppress(OSError):
                path.unlink()


if Path(sys.argv[0]).name == 'reframe':
    drop_the_startup_log()
    claim_var()
    take_var_for_this_run()
    say_an_unwritable_log_once()

# One line per test case: where and what it ran (its inputs, the build, the node, the project
# and Spack commits and the lock: hpcbench.rfm.plugins.Provenance; the node's state before the
# launch: hpcbench.rfm.plugins.QuietNode), each figure's values within the job and how they were
# aggregated, figures withheld (hpcbench.rfm.plugins.Samples), then every performance variable
# as `name=value unit (ref=..., l=..., u=...)`.
PERFLOG_FORMAT = (
    '%(check_job_completion_time)s|reframe %(version)s|%(check_info)s|'
    'jobid=%(check_jobid)s|%(check_system)s:%(check_partition)s|%(check_environ)s|'
    'inputs=%(check_inputs)s|build=%(check_build_spec)s|topology=%(check_topology)s|'
    'commit=%(check_project_commit)s|spack=%(check_spack_commit)s|'
    'lock=%(check_spack_lock)s|node=%(check_node_state)s|'
    'aggregation=%(check_aggregation)s|samples=%(check_samples)s|flagged=%(check_flagged)s|'
    '%(check_perfvalues)s'
)
PERFLOG_VARIABLE_FORMAT = (
    '%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s '
    '(ref=%(check_perf_ref)s, l=%(check_perf_lower_thres)s, u=%(check_perf_upper_thres)s)|'
)


def accelerator_settings(accelerators, topology=None, system=None):
    """What a partition whose nodes each have `accelerators` (hpcbench.core.accelerators)
    linked as `topology` shows (hpcbench.core.gpu_topology, or None) adds to its
    description: ReFrame's `devices`, its features (`gpu`, `cuda`) and its description's
    `accelerators` with the model's datasheet (hpcbench.machine.datasheets: `system`'s own
    file first); {} and {} for none, so that a partition without any is described as
    before. A datasheets file that is not one stops the site config with one message."""
    if not accelerators:
        return {}, {}
    try:
        sheet = datasheets.find(accelerators[0].model, datasheets.table(system))
    except datasheets.DatasheetError as err:
        sys.exit(f'error: {err}')
    return ({'devices': accelerator_facts.devices_entry(accelerators),
             'features': accelerator_facts.features(accelerators)},
            accelerator_facts.partition_facts(accelerators, topology, sheet))


def reframe_partition(where, system, name, fields, **reframe_fields):
    """ReFrame's partition `name` of `system` from its description `fields`
    (hpcbench.machine.description: validated here, once, for every route to a system; a
    description that is not one stops the site config with one message naming `where`, its
    file, and the field), pointed at the project's Spack and the system's environment
    (spack_partition_settings). `reframe_fields`: ReFrame's own (descr, scheduler,
    launcher, access, processor, environs, max_jobs, devices, features, resources). A
    field set to None is unset."""
    spack_fields, spack_env_vars = spack_partition_settings()
    fields = {**fields, **spack_fields, 'spack_env': str(spack_env_dir(system))}
    try:
        described = description.partition({k: v for k, v in fields.items() if v is not None},
                                          f'{where}: partitions[{name}]')
    except description.DescriptionError as err:
        sys.exit(f'error: {err}')
    return {'name': name, **reframe_fields, 'env_vars': spack_env_vars,
            'extras': described.to_extras()}


def this_host(where, facts):
    """`facts()`, what hpcbench.machine.host reads of this machine for a partition's
    description; a fact it cannot read, or one given that is none (HPCBENCH_CLOCK_HZ=-5),
    stops the site config `where` with one message."""
    try:
        return facts()
    except RuntimeError as err:
        sys.exit(f'error: {where}: {err}')


def stack_extras(where, **fields):
    """A ReFrame environment's `extras`: its MPI stack's description (hpcbench.machine.
    description.StackDescription), validated; None fields unset."""
    try:
        return description.stack({k: v for k, v in fields.items() if v is not None},
                                 where).to_extras()
    except description.DescriptionError as err:
        sys.exit(f'error: {err}')


# The resource a Slurm partition's GPU checks ask for the node's GPUs with (hpcbench.rfm.gpu:
# one rank per GPU), by GRES.
SLURM_GPU_RESOURCES = [{'name': 'gpu', 'options': ['--gres=gpu:{num_gpus_per_node}']}]


def spack_env_dir(system):
    """The Spack environment of a system (spack-envs/<system>)."""
    return paths.SPACK_ENVS_DIR / system


def spack_partition_settings():
    """The description field (spack_root) and env_vars that point a partition's checks at
    the project's Spack.

    Without a Spack the checks that need one skip, saying so (see hpcbench.rfm.build).
    """
    found = spack.find()
    if not found:
        return {'spack_root': None}, []

    env = spack.isolated_environment(found)
    env_vars = [[k, v] for k, v in env.items()]
    env_vars.append(['PATH', f'{found.root}/bin:$PATH'])
    return {'spack_root': str(found.root)}, env_vars


# The feature of an environment whose benchmarks Spack builds. The checks built only by Spack
# ask for it, so that where no Spack is they are not generated at all (rather than listed and
# skipped); checks a registry binary can run also accept `registry-<name>`.
BUILDS_FROM_SPACK = 'spack-builds'


# The feature of an environment that is one MPI stack's other launcher (MVAPICH2's
# mpirun_rsh beside its Hydra mpirun): only the checks that measure launching ask for it
# (MPI start-up); the others run each stack once, under the partition's launcher.
OTHER_LAUNCHER = 'mpi-launcher'
# Environment names of the other launchers: <stack>-<suffix>.
LAUNCHER_SUFFIXES = {'mpirun_rsh': 'rsh'}


# The feature of an environment that is one MPI stack with another BLAS than the default
# (hpcbench.stack.blas): only the checks a BLAS changes ask for it (HPL, HPCC and the DGEMM
# ceiling); the others run each stack once, with the default BLAS.
OTHER_BLAS = 'other-blas'


def _with_spack(spack_fields):
    """Whether Spack builds the checks: the partitions' `spack_fields` name a Spack, or this
    is a dry run (whose job scripts can be read without one)."""
    return bool(spack_fields.get('spack_root')) or '--dry-run' in sys.argv


# The feature of the environment in which a partition's OpenMP programs that use no MPI
# (STREAM) run: on this machine's systems, the first stack's only, so that they run once per
# partition, not once per MPI stack.
OPENMP_ONLY = 'openmp'


def mpi_environment(stack, target_systems, spack_fields, features=(), run_env=None,
                    launcher=None, blas=None, other_blas=False):
    """A ReFrame environment for one MPI stack of this machine: its wrappers first on PATH,
    its run-time variables (the stack's, updated with `run_env`), the `mpi` and `blas` Spack
    constraints the checks use to pick their builds (`blas`: a hpcbench.stack.blas library), and
    the binaries a registry ships built against it (feature `registry-<name>`, its stack's
    `registry_programs`: the path). Feature BUILDS_FROM_SPACK with a Spack (_with_spack).
    `launcher`: one of the stack's other_launchers, an environment of its own (<stack>-rsh,
    feature OTHER_LAUNCHER and no other `features`: no check that does not launch MPI runs
    in it) whose jobs list this host in the host file the launcher reads. `other_blas`: the
    stack with `blas`, not the default one, an environment of its own (<stack>-<blas>,
    feature OTHER_BLAS instead of `mpi`)."""
    registry = [] if launcher or other_blas else sorted(stack.registry_binaries.items())
    features = () if launcher else features
    name = stack.name
    if launcher:
        name, kind = f'{stack.name}-{LAUNCHER_SUFFIXES[launcher]}', OTHER_LAUNCHER
    elif other_blas:
        name, kind = f'{stack.name}-{blas.name}', OTHER_BLAS
    else:
        kind = 'mpi'
    return {
        'name': name,
        'target_systems': list(target_systems),
        'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpif90',
        'features': [kind, stack.name, *features,
                     *(f'registry-{n}' for n, _ in registry),
                     *([BUILDS_FROM_SPACK] if _with_spack(spack_fields) else [])],
        'extras': stack_extras(f'environment {name}', spack_mpi=stack.spack_name,
                               known_failures=stack.known_failures() or None,
                               spack_blas=blas.spack_spec if blas else None,
                               registry_programs=dict(registry) or None, launcher=launcher,
                               device_buffers=_device_buffers(stack)),
        'env_vars': [['PATH', f'{stack.bin_dir}:$PATH'],
                     *([k, v] for k, v in {**stack.run_env, **(run_env or {})}.items())],
        # One node, this host: its name, as the launcher compares it with its own to start
        # ranks without a remote shell.
        'prepare_cmds': backends.hostfile_lines('hostname', 1) if launcher else [],
    }


def _device_buffers(stack):
    answer = stack.device_buffers()
    return answer.to_description() if answer else None


def stack_environments(stacks, target_systems, spack_fields, blas_libraries=(),
                       run_env=None):
    """Every environment of these stacks: each under the partition's launcher and under
    each of its other launchers, with the default BLAS (the first of `blas_libraries`);
    and, where Spack builds the checks, the first stack with each other BLAS. The first
    stack's is the one OpenMP programs without MPI run in (OPENMP_ONLY). `run_env`:
    {stack name: its run-time variables on this system}."""
    default, *others = blas_libraries or [None]
    run_env = run_env or {}
    environments = [mpi_environment(stack, target_systems, spack_fields,
                                    (OPENMP_ONLY,) if stack is stacks[0] else (),
                                    run_env=run_env.get(stack.name), launcher=launcher,
                                    blas=default)
                    for stack in stacks for launcher in (None, *stack.other_launchers)]
    if stacks and _with_spack(spack_fields):
        environments += [mpi_environment(stacks[0], target_systems, spack_fields,
                                         run_env=run_env.get(stacks[0].name), blas=blas,
                                         other_blas=True)
                         for blas in others]
    return environments


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


def _log_file():
    """ReFrame's debug log: each run its own, var/logs/reframe-run_<time>.log (kept); the
    listings and queries of stored results (`hpcbench report`, ...) share one, rewritten
    each time, so that they never replace a run's."""
    if run_lock.is_a_run(sys.argv[1:]):
        return {'name': f'{VAR}/logs/reframe-run.log', 'timestamp': '%Y%m%dT%H%M%S'}

    return {'name': f'{VAR}/logs/reframe-query.log'}


# Runs of their own (make tune, make screen), left out of both modes: a tag and its check.
RUNS_OF_THEIR_OWN = {'sweep': 'HplTuningSweep', 'screen': 'HplNodeScreen'}


def paper_run_tags(system):
    """The runs of their own that are part of a system's paper run (`full` there): those
    whose check the paper gives reference figures of (T2K screened every node with
    single-node HPL before its 625-node run, §4.2: its HplNodeScreen figures)."""
    from hpcbench.results import references
    measured = {fig.check for fig in references.load(system).figures if fig.use == 'reference'}
    return [tag for tag, check in RUNS_OF_THEIR_OWN.items() if check in measured]


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
    from hpcbench.stack import site_description
    shared = system == 'testbed' or site_description.nodes_share_hosts(system)
    return ['--exec-policy=serial'] if shared else []


# How often, at least, ReFrame looks whether a job of this machine ended (per second). Its
# default slows to one look in 10 s: a one-minute HPL job then ended up to 9 s before
# ReFrame saw it, and the next waited (the durations of make run's jobs fell on ReFrame's
# polling ticks: four HPL jobs 55.4 s, four 63.7 s). Where jobs run on this machine a look
# costs a waitpid; a cluster's scheduler keeps ReFrame's gentler default.
LOCAL_POLL_RATE_MIN = 1


def refuse_unsafe_job_values(systems, environments):
    """What every partition and environment writes into job scripts is checked here, where
    they all enter ReFrame, before ReFrame loads any of it: each variable they export
    (Spack's paths, the stacks' and a description's run-time variables, whatever their
    name: hpcbench.core.job_script.exported_variables) and each scheduler option of a
    partition's `access` (a line of its own in the job script, `#SBATCH --account=...`: a
    newline in it would start a command). One that is not stops the site config with one
    message."""
    places = [(f'system {system.get("name")}, partition {part.get("name")}', part)
              for system in systems for part in system.get('partitions', [])]
    places += [(f'environment {env.get("name")}', env) for env in environments]
    try:
        for where, entry in places:
            job_script.exported_variables(entry.get('env_vars') or [], where)
            job_script.scheduler_options(entry.get('access') or [], where)
    except job_script.UnsafeVariableError as err:
        sys.exit(f'error: {err}')


def site(systems, environments):
    """A complete ReFrame configuration around the given systems and environments."""
    # A dry run measures nothing: no perflog line, no stored session, no run report among
    # the runs' (its report, of the job scripts it wrote, is var/dry-run-report.json).
    dry_run = '--dry-run' in sys.argv
    take_var_for_this_run()
    # ReFrame opens its log file in VAR before it creates any directory of its own.
    try:
        (paths.VAR_DIR / 'logs').mkdir(parents=True, exist_ok=True)
    except OSError as err:
        sys.exit(f'error: {run_lock.unusable(paths.VAR_DIR, err)}')
    refuse_unsafe_job_values(systems, environments)
    for system in systems:
        system.setdefault('prefix', VAR)
        system.setdefault('stagedir', f'{VAR}/stage')
        system.setdefault('outputdir', f'{VAR}/output')

    schedulers = {part.get('scheduler') for system in systems
                  for part in system.get('partitions', [])}
    from hpcbench.results.reference_schema import ReferenceError
    try:
        system_modes = [{**mode, 'target_systems': [system['name']]}
                        for system in systems for mode in modes(system['name'])]
    except ReferenceError as err:
        # A references file broken by hand: its own message, not a traceback of ReFrame's.
        sys.exit(f'error: {err}')
    return {
        'systems': systems,
        'environments': environments,
        # Each system's own (its paper's run: modes()), for --mode and --ci-generate.
        'modes': system_modes,
        'general': [{
            **({'poll_rate_min': LOCAL_POLL_RATE_MIN} if schedulers == {'local'} else {}),
            'topology_prefix': str(paths.TOPOLOGY_DIR),
            'report_file': (f'{VAR}/dry-run-report.json' if dry_run
                            else f'{VAR}/reports/run-report-{{sessionid}}.json'),
            'check_search_path': [str(paths.CHECKS_DIR)],
            'check_search_recursive': True,
        }],
        'storage': [{'enable': not dry_run, 'sqlite_db_file': f'{VAR}/results.db'}],
        'logging': [{
            'handlers$': [{'type': 'stream', 'name': 'stdout', 'level': 'info',
                           'format': '%(message)s'}],
            # debug, not debug2: ReFrame builds every record's check fields, a deprecated
            # one through inspect.stack(), and debug2 records are most of them (a dry run
            # of TSUBAME's 663 test cases: 9,400 of 22,000 records).
            'handlers': [{**_log_file(), 'type': 'file', 'level': 'debug',
                          'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                          'append': False}],
            'handlers_perflog': [] if dry_run else [{
                'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                'basedir': f'{VAR}/perflogs', 'level': 'info', 'append': True,
                'format': PERFLOG_FORMAT, 'format_perfvars': PERFLOG_VARIABLE_FORMAT,
            }],
        }],
    }
