"""The programs a command starts (Spack, apt-get, pip, git) end with it, whatever ends it.

Each runs in a process group of its own (run()), so that what it starts in turn (Spack's
build processes, compilers, make) is reached through the group; when the command is ended
by a signal (Ctrl-C's SIGINT, SIGTERM, SIGHUP: end_on_signals() turns the last two into an
exception, as Python turns SIGINT into KeyboardInterrupt), the group is sent SIGTERM, then
SIGKILL after GRACE seconds, and waited for, before the command says so in one line
(hpcbench.cli.main). Python's subprocess.run kills its child alone: a SIGTERM to `hpcbench
setup` left Spack's install running, orphaned (issue 51).
"""
import contextlib
import os
import signal
import subprocess
import sys
import time

# Seconds a group has to end on SIGTERM before it is killed.
GRACE = 10


class Terminated(KeyboardInterrupt):
    """The command was sent SIGTERM or SIGHUP: handled where Ctrl-C is."""


def end_on_signals():
    """SIGTERM and SIGHUP end this process as Ctrl-C does: through the code that ends its
    children and says what was left. A signal the process was started ignoring (`nohup`
    ignores SIGHUP) stays ignored."""
    def handler(signum, _frame):
        raise Terminated(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, handler)


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def end_group(proc, grace=GRACE):
    """End the process group led by `proc` (a Popen started by run()): SIGTERM, then SIGKILL
    to what is left after `grace` seconds; `proc` is waited for."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        # The leader counts until it is waited for (poll() does): then the rest of its group.
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            proc.poll()
            time.sleep(0.1)
        if not _group_alive(proc.pid):
            break
    proc.wait()


# A group of its own: Popen's process_group (Python 3.11), else setpgid in the child.
_OWN_GROUP = ({'process_group': 0} if sys.version_info >= (3, 11)
              else {'preexec_fn': os.setpgrp})


def run(args, *, input=None, capture_output=False, timeout=None, check=False,
        **popen_kwargs):
    """subprocess.run(), but the program runs in a process group of its own, and the whole
    group is ended (end_group) when the call is left by an exception: Ctrl-C, a signal that
    ends the command (end_on_signals), its timeout."""
    if capture_output:
        popen_kwargs['stdout'] = popen_kwargs['stderr'] = subprocess.PIPE
    if input is not None:
        popen_kwargs['stdin'] = subprocess.PIPE
    with subprocess.Popen(args, **_OWN_GROUP, **popen_kwargs) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except BaseException:
            end_group(proc)
            raise
        retcode = proc.poll()
    if check and retcode:
        raise subprocess.CalledProcessError(retcode, args, stdout, stderr)
    return subprocess.CompletedProcess(args, retcode, stdout, stderr)
