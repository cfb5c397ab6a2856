"""What a site config checks and claims as ReFrame loads it, before ReFrame writes anything:
paths that reach job scripts plain and absolute (refuse_unsafe_paths, at import), the
results directory the suite's and locked for a run (claim_var, take_var_for_this_run),
ReFrame's start-up log removed, a log that cannot be written said once
(say_an_unwritable_log_once: Python's logging patched, in ReFrame's process alone), and
every variable and scheduler option partitions and environments write into job scripts
(refuse_unsafe_job_values)."""
import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path

from hpcbench.core import job_script, paths, run_lock

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
