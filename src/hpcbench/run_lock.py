"""One run per results directory (var/) at a time.

Two runs in one var/ share stage directories (one deletes what the other's job works in)
and measure under each other's load. Every ReFrame process that runs checks (`-r`, or a dry
run, which writes stage directories too) takes an exclusive lock on var/run.lock when it
loads the site config and holds it until it exits; a second such process refuses at once,
naming the first (PID, start time, command). The kernel releases the lock when its holder
dies however it dies, so a killed run leaves no stale lock.
"""
import datetime
import fcntl
import os
import shlex
import sys

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


def acquire_for_this_run(var_dir):
    """Lock `var_dir` when this process is a ReFrame run; on a held lock say so on stderr
    and exit 1 (before ReFrame writes anything)."""
    if not is_a_run(sys.argv[1:]):
        return

    try:
        acquire(var_dir, sys.argv)
    except RunLockedError as err:
        print(f'error: {err}', file=sys.stderr)
        sys.exit(1)
