"""One run per results directory (var/) at a time, and only in a var/ that can take it.

Two runs in one var/ share stage directories (one deletes what the other's job works in)
and measure under each other's load. Every ReFrame process that runs checks (`-r`, or a dry
run, which writes stage directories too) takes an exclusive lock on var/run.lock when it
loads the site config and holds it until it exits; a second such process refuses at once,
naming the first (PID, start time, command). The kernel releases the lock when its holder
dies however it dies, so a killed run leaves no stale lock.

Before it runs, a run also makes sure that what it produces can be kept (ready()): var/
can be written, its file system has room, and the results database takes a write. Each
failure is one message naming the cause (a read-only directory, a full file system, a
database another process holds or that cannot be written), before anything is measured.
"""
import datetime
import errno
import fcntl
import os
import shlex
import sqlite3
import sys
import urllib.parse

from hpcbench.core import paths

LOCK_NAME = 'run.lock'
# ReFrame's options that run checks (and write stage directories).
RUN_OPTIONS = ('-r', '--run', '--dry-run')
# The lock's file object, kept open for the life of the process.
_held = None


class RunLockedError(RuntimeError):
    pass


def is_a_run(argv):
    return any(arg in RUN_OPTIONS for arg in argv)


def acquire(var_dir, argv):
    """Lock `var_dir` for this process; RunLockedError naming the holder if another has it.
    The holder's PID, start time and command are written into the lock file."""
    global _held
    if _held is not None:
        return

    os.makedirs(var_dir, exist_ok=True)
    path = os.path.join(var_dir, LOCK_NAME)
    # Opened without truncating: the holder's description stays readable until we hold it.
    fp = open(path, 'a+')
    try:
        fcntl.flock(fp, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fp.seek(0)
        holder = fp.read().strip() or 'a process that has not yet written its name'
        fp.close()
        raise RunLockedError(
            f'{var_dir} is in use by another run ({holder}). One run per results directory '
            'at a time: wait for it to end, or give this run its own with '
            'HPCBENCH_VAR=<directory>.') from None

    fp.seek(0)
    fp.truncate()
    started = datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')
    fp.write(f'PID {os.getpid()}, started {started}: {shlex.join(argv)}\n')
    fp.flush()
    _held = fp


def acquire_for_this_run(var_dir, database=None):
    """Lock `var_dir` when this process is a ReFrame run and check that it can keep its
    results (ready(); `database`: the results database a measuring run stores into, None for
    a dry run); on a held lock or a var/ that cannot keep them, say so on stderr in one
    message and exit 1 (before ReFrame writes anything). Its path was checked, and the
    directory claimed, when the site config loaded (hpcbench.rfm.site_guards.claim_var)."""
    # Once per process: the site config's import and its config() both ask.
    if not is_a_run(sys.argv[1:]) or _held is not None:
        return

    try:
        acquire(var_dir, sys.argv)
        ready(var_dir, database)
    except (RunLockedError, VarUnusableError) as err:
        print(f'error: {err}', file=sys.stderr)
        sys.exit(1)
    except OSError as err:
        print(f'error: {unusable(var_dir, err)}', file=sys.stderr)
        sys.exit(1)


class VarUnusableError(RuntimeError):
    pass


def unusable(var_dir, err):
    """One sentence for an OSError met writing into `var_dir`."""
    if err.errno == errno.ENOSPC:
        return (f'{paths.full(var_dir)}: free some space there or give the run another '
                'results directory with HPCBENCH_VAR=<directory>')
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f'{var_dir} cannot be written ({err.strerror}: {err.filename or var_dir}): '
                'give the run a writable results directory with HPCBENCH_VAR=<directory>')
    return f'{var_dir}: {err.strerror or err} ({err.filename or var_dir})'


def plain_path(var_dir):
    """VarUnusableError when `var_dir`'s path holds what paths.UNSAFE_IN_PATH refuses (checked
    before anything is made there)."""
    if paths.UNSAFE_IN_PATH.search(str(var_dir)):
        raise VarUnusableError(
            f'{str(var_dir)!r}: a results directory\'s path has no spaces or shell syntax (it '
            'reaches job scripts, Spack and make); give the run another one with '
            'HPCBENCH_VAR=<directory>')


def ready(var_dir, database=None):
    """VarUnusableError unless a run can keep its results in `var_dir`: room on its file
    system (paths.MIN_FREE_BYTES) and, for `database`, a write the database takes (made and rolled
    back: a read-only file or mount, a directory in its place, a database another process
    locks, a file that is not one) and ReFrame's tables in it (not an empty file)."""
    if paths.free_bytes(var_dir) < paths.MIN_FREE_BYTES:
        raise VarUnusableError(
            f'{paths.full(var_dir)} (a run needs {paths.MIN_FREE_BYTES >> 20} MiB for its stage '
            'directories, outputs and results): free some space there or give the run '
            'another results directory with HPCBENCH_VAR=<directory>')
    # None yet: ReFrame makes it (the lock file showed var/ takes writes). Never made
    # here: ReFrame lays out its tables only in a database file it does not find.
    if database is None or not os.path.exists(database):
        return
    try:
        connection = sqlite3.connect(f'file:{urllib.parse.quote(str(database))}?mode=rw',
                                     uri=True, timeout=10)
        try:
            tables = {name for name, in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            connection.execute('BEGIN IMMEDIATE')
            connection.execute('CREATE TABLE hpcbench_write_probe (x)')
            connection.rollback()
        finally:
            connection.close()
    except sqlite3.Error as err:
        raise VarUnusableError(f'the results database {database} does not take a write '
                               f'({err}): the run would measure and store nothing; make it '
                               'writable or give the run another results directory with '
                               'HPCBENCH_VAR=<directory>') from None
    # ReFrame lays out its tables only in a database file it does not find: in a file
    # without them (an empty one, as a full disk leaves it) a run measures, then loses
    # every result ("no such table").
    missing = {'sessions', 'testcases'} - tables
    if missing:
        raise VarUnusableError(
            f'the results database {database} is no results database of ReFrame\'s (no '
            f'{" or ".join(sorted(missing))} table: {os.path.getsize(database)} bytes, as a '
            'full disk or an interrupted write leaves it): the run would measure and store '
            'nothing; move it aside (ReFrame makes a new one) or give the run another results '
            'directory with HPCBENCH_VAR=<directory>')
