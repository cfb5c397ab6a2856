"""A whole ReFrame configuration around a site config's systems and environments (site):
where results go (perflogs, results database, stage and output under var/), ReFrame's
logs and the perflog's format, the modes (hpcbench.rfm.run_modes). Importing it runs the
checks every site config needs before ReFrame loads it (hpcbench.rfm.site_guards); the
partitions and environments are hpcbench.rfm.site_partitions and site_environments."""
import sys

from hpcbench.core import paths, run_lock
from hpcbench.rfm import deprecation_walk
from hpcbench.rfm.run_modes import LOCAL_POLL_RATE_MIN, modes
from hpcbench.rfm.site_guards import VAR, refuse_unsafe_job_values, take_var_for_this_run

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


def _log_file():
    """ReFrame's debug log: each run its own, var/logs/reframe-run_<time>.log (kept); the
    listings and queries of stored results (`hpcbench report`, ...) share one, rewritten
    each time, so that they never replace a run's."""
    if run_lock.is_a_run(sys.argv[1:]):
        return {'name': f'{VAR}/logs/reframe-run.log', 'timestamp': '%Y%m%dT%H%M%S'}

    return {'name': f'{VAR}/logs/reframe-query.log'}


def site(systems, environments, scheduler_here=False):
    """A complete ReFrame configuration around the given systems and environments.
    `scheduler_here`: its scheduler answers on this machine (the testbed's Slurm), as a
    `local` partition's jobs do: ReFrame looks at its jobs as often as at those."""
    # A dry run measures nothing: no perflog line, no stored session, no run report among
    # the runs' (its report, of the job scripts it wrote, is var/dry-run-report.json).
    dry_run = '--dry-run' in sys.argv
    # Before ReFrame logs its first test (hpcbench.rfm.deprecation_walk says why).
    deprecation_walk.install()
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
            **({'poll_rate_min': LOCAL_POLL_RATE_MIN}
               if scheduler_here or schedulers == {'local'} else {}),
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
