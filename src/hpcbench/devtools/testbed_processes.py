"""The testbed's daemons as processes: started detached with their PID recorded (spawn), found
again by PID and start time so that a PID the kernel reused is never taken for ours
(recorded, found_running, belongs_to), waited for (wait_for), and commands run in the
testbed's environment (run_command)."""
import os
import subprocess
import time
from pathlib import Path

from hpcbench.stack.testbed_system import layout_environment


class TestbedError(RuntimeError):
    pass


def alive(pid):
    """True when `pid` is a running process (a zombie has ended)."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def start_time(pid):
    """When `pid` started (clock ticks since boot): with the PID, a process's identity (a
    PID alone may have been reused by an unrelated process)."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return int(fp.read().rsplit(')', 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


# The daemons that read SLURM_CONF: only they are told by it. Others (munged, MariaDB) a
# user starts from a shell that set it (`eval "$(ci/testbed/testbed env)"`) carry it too,
# and are the site's: the testbed's name its state directory on their command line.
SLURM_DAEMONS = ('slurmd', 'slurmctld', 'slurmdbd')


def belongs_to(pid, layout):
    """True when `pid` is a daemon of the testbed in `layout`, by what it is: its command
    line names the state directory (munged, MariaDB), or, for a Slurm daemon, its
    environment names the testbed's slurm.conf (SLURM_CONF)."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as fp:
            argv = fp.read().split(b'\0')
        with open(f'/proc/{pid}/environ', 'rb') as fp:
            environ = fp.read().split(b'\0')
    except OSError:
        return False

    root = str(layout.root).encode()
    return (any(arg.startswith(b'--') and root + b'/' in arg for arg in argv)
            or (executable(pid) in SLURM_DAEMONS
                and f'SLURM_CONF={layout.slurm_conf}'.encode() in environ))


def recorded(layout):
    """{daemon: pid} of the processes this testbed started that still run: a PID file's
    process with the start time recorded with it (not an unrelated one that reuses the
    PID)."""
    found = {}
    for pid_file in sorted(layout.run.glob('*.pid')) if layout.run.exists() else []:
        try:
            pid, started = (int(v) for v in pid_file.read_text().split()[:2])
        except ValueError:
            continue
        if alive(pid) and start_time(pid) == started:
            found[pid_file.stem] = pid

    return found


def parent_pid(pid):
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return int(fp.read().rsplit(')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


# What the testbed's daemons are, by executable: a process found by its environment or
# command line is one of them only if it runs one of these (its caller's shell, make, srun
# or a user's job carry the testbed's SLURM_CONF too: `eval "$(ci/testbed/testbed env)"`).
DAEMONS = ('slurmd', 'slurmctld', 'slurmdbd', 'mariadbd', 'mysqld', 'munged', 'prometheus',
           'prometheus-pushgateway', 'victoria-metrics')


def executable(pid):
    """The name of the program `pid` runs (its /proc/PID/exe, else its comm), or ''."""
    try:
        return os.path.basename(os.readlink(f'/proc/{pid}/exe')).removesuffix(' (deleted)')
    except OSError:
        pass
    try:
        with open(f'/proc/{pid}/comm') as fp:
            return fp.read().strip()
    except OSError:
        return ''


def ancestors(pid):
    """`pid` and the processes above it."""
    chain = set()
    while pid and pid not in chain:
        chain.add(pid)
        pid = parent_pid(pid)
    return chain


def found_running(layout):
    """{name: pid} of the testbed's daemons found by what they are (belongs_to, and a daemon
    by its executable: DAEMONS), whether or not their PID files still exist (the state
    directory removed while they ran); never this process or one above it (the user's
    shell, make). A daemon's own children (slurmctld's slurmscriptd) end with it and are
    left out."""
    mine = ancestors(os.getpid())
    found = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in mine:
            continue
        name = executable(int(entry))
        if name in DAEMONS and belongs_to(int(entry), layout):
            found[f'{name}[{entry}]'] = int(entry)

    pids = set(found.values())
    return {name: pid for name, pid in found.items() if parent_pid(pid) not in pids}


def spawn(layout, name, argv, user=None, pid_file=None):
    """Start `argv` in the foreground of its own session, its output in log/<name>.out, and
    record its PID and start time (in `pid_file`, else the daemon's: layout.pid_file);
    returns the Popen."""
    out = open(layout.log / f'{name}.out', 'ab')
    # The daemon itself as `user` (no runuser in between): the recorded PID is the daemon's.
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=layout_environment(layout),
                            user=user, group=user, extra_groups=[] if user else None)
    (pid_file or layout.pid_file(name)).write_text(f'{proc.pid} {start_time(proc.pid)}\n')
    return proc


def wait_for(what, test, timeout=30.0, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return
        time.sleep(0.1)

    tail = ''
    if log and Path(log).exists():
        tail = '\n' + '\n'.join(Path(log).read_text(errors='replace').splitlines()[-15:])
    raise TestbedError(f'{what} did not come up in {timeout:.0f} s{tail}')


def run_command(layout, *argv, check=True):
    done = subprocess.run(argv, capture_output=True, text=True, env=layout_environment(layout))
    if check and done.returncode != 0:
        raise TestbedError(f'{" ".join(argv)} failed: {done.stderr.strip() or done.stdout}')
    return done
