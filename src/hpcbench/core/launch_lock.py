"""The node's launch lock (hpcbench.core.quiet_node explains it): one per node, in its memory
file system, taken by every benchmark job before its quiet-node check and held by a
process of the job's own to the job's end, so that two runs never measure at the same
time. Standard library only (the job's python3)."""
import datetime
import errno
import fcntl
import os
import re
import select
import stat
import subprocess
import sys
import time

from hpcbench.core import node_processes

# The holder is the quiet-node check's script run with --hold (its command line is its record).
QUIET_NODE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'quiet_node.py')

# Node-wide (tmpfs, one per node, every user's); HPCBENCH_LAUNCH_LOCK in a job's
# environment moves it (a node without /dev/shm, a test's own).
LAUNCH_LOCK = '/dev/shm/hpcbench-launch.lock'


LAUNCH_LOCK_ENV = 'HPCBENCH_LAUNCH_LOCK'


# A job's processes named beside a holder: its script, launcher and ranks, at most these.
NAMED_PROCESSES = 10


# How a job's line begins where it did not take the launch lock: it ran nothing, whatever
# the check's action.
LOCK_REFUSED = 'REFUSED:'


LOCK_NOT_HAD = "BUSY: the node's launch lock is"


# Seconds a lock's holder process may take to start.
HOLDER_START = 60


class LockRefused(Exception):
    """The launch lock's path is not a lock this check may take (one message)."""


# Owners of a lock file other than root and the job's own user that no hpcbench job can have
# been: system accounts (below the first login UID) and the overflow user `nobody`.
FIRST_LOGIN_UID = 1000


NOBODY_UID = 65534


_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
          (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'))


def open_launch_lock(path):
    """A descriptor of the node's launch lock at `path`, read-only, made (0644) where there is
    none. Opened without following a link and without blocking (a FIFO), then refused
    (LockRefused, one message) unless it is a regular file of one link owned by root, this
    user or another login user: nothing is ever written to it, so a link another user
    planted there cannot aim a job at a file, and a FIFO cannot hang it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    why = ('refused, nothing was run: remove it (no hpcbench job made it) or set '
           f'{LAUNCH_LOCK_ENV} to another path')
    for _ in range(3):
        try:
            fd = os.open(path, flags)
            break
        except FileNotFoundError:
            pass
        except OSError as err:
            what = ('a symbolic link' if err.errno == errno.ELOOP else
                    f'not to be opened ({err.strerror})')
            raise LockRefused(f'the node\'s launch lock {path} is {what}: {why}') from None
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            os.fchmod(fd, 0o644)
            break
        except FileExistsError:
            continue
        except OSError as err:
            raise LockRefused(f'the node\'s launch lock {path} cannot be made '
                              f'({err.strerror}): set {LAUNCH_LOCK_ENV} to a file on the node '
                              'every user can read') from None
    else:
        raise LockRefused(f'the node\'s launch lock {path} keeps changing: {why}')
    found = os.fstat(fd)
    problem = next((what for test, what in _KINDS if test(found.st_mode)), None)
    if problem is None and not stat.S_ISREG(found.st_mode):
        problem = 'not a regular file'
    elif problem is None and found.st_nlink != 1:
        problem = f'a file of {found.st_nlink} hard links (another file\'s name)'
    elif problem is None and found.st_uid not in (0, os.geteuid()) and (
            found.st_uid < FIRST_LOGIN_UID or found.st_uid == NOBODY_UID):
        owner = node_processes.user_name(found.st_uid)
        problem = f'owned by the system account {owner}, not by a user'
    if problem:
        os.close(fd)
        if not _removable(path, found):
            # A device or a directory of files is the system's or a user's (/dev/null, /tmp):
            # never to be removed for a lock.
            why = f'refused, nothing was run: set {LAUNCH_LOCK_ENV} to a file\'s path'
        raise LockRefused(f'the node\'s launch lock {path} is {problem}: {why}')
    return fd


def _removable(path, found):
    """Whether what is at the lock's path (its stat `found`) is what someone planted there,
    which removing takes nothing from anyone: not a device, nor a directory that holds
    anything."""
    if stat.S_ISCHR(found.st_mode) or stat.S_ISBLK(found.st_mode):
        return False
    if stat.S_ISDIR(found.st_mode):
        try:
            return not os.listdir(path)
        except OSError:
            return False
    return True


def _lock_owner(lock):
    """The PID that holds the flock of the file `lock` (device, inode), from /proc/locks
    (every user may read it), or None."""
    try:
        with open('/proc/locks') as fp:
            lines = fp.read().splitlines()
    except OSError:
        return None
    device, inode = lock
    wanted = f'{os.major(device):02x}:{os.minor(device):02x}:{inode}'
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 00:1a:567 0 EOF"; a waiter's line starts "1: ->".
        if len(fields) >= 6 and fields[1] == 'FLOCK' and fields[5] == wanted:
            return int(fields[4]) if fields[4].lstrip('-').isdigit() else None
    return None


# The record a holder carries in its command line, for any user to read: (option, key).
RECORD = (('--job', 'job'), ('--job-parent', 'parent'), ('--job-user', 'user'),
           ('--job-since', 'since'), ('--job-directory', 'directory'))


def _record_of(pid):
    """{key: text} of the job a holder of the lock holds it for (its command line), or None
    when `pid` is no holder."""
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as fp:
            words = [w.decode(errors='replace') for w in fp.read().split(b'\0')]
    except OSError:
        return None
    if '--hold' not in words:
        return None
    record = {}
    for option, key in RECORD:
        if option in words[:-1]:
            record[key] = node_processes.printable(words[words.index(option) + 1])
    return record if record.get('job', '').isdigit() else None


def _group_members(group, but=()):
    """The running processes (not zombies) of process group `group`, but those in `but`."""
    members = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in but:
            continue
        fields = node_processes.stat_fields(entry)
        if fields and fields[0] != 'Z' and int(fields[2]) == group:
            members.append(int(entry))
    return sorted(members)


def _job_processes(job, holder):
    """The processes of the job whose script is `job`: the script and what it started (its
    descendants) or, once the script is gone, what is left of its process group; not
    `holder`."""
    processes = node_processes.snapshot()
    if job not in processes:
        return _group_members(job, (holder,))
    children = {}
    for pid, (_, _, parent) in processes.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [job]
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo += sorted(children.get(pid, []))
    return [pid for pid in found if pid != holder]


def _holder(lock):
    """(the holder of the lock `lock` (device, inode) in words: the job it holds it for, as
    its holder's command line records it, and that job's processes; whether it is orphaned:
    the process that started its job script (ReFrame, the scheduler's step) is gone, as when
    ReFrame was killed with SIGKILL). A job whose script has ended is not orphaned: the
    rest of its process group is ending (a launcher's tail), and is waited for."""
    holder = _lock_owner(lock)
    if holder is None:
        return 'a process this node does not show (another PID namespace)', False
    record = _record_of(holder)
    if record is None:
        command = node_processes.printable(node_processes.command(holder))
        return f'PID {holder}, no hpcbench job: {command}', False
    job = int(record['job'])
    state = node_processes.process_stat(job)
    orphaned = state is not None and str(state[2]) != record.get('parent')
    written = (f'PID {job} (user {record.get("user", "?")}, since {record.get("since", "?")}, '
               f'started by PID {record.get("parent", "?")}) in {record.get("directory", "?")}')
    # A job's script, launcher and ranks: twice the culprits of a busy verdict.
    processes = '; '.join(f'PID {pid}: {node_processes.printable(node_processes.command(pid))}'
                          for pid in _job_processes(job, holder)[:NAMED_PROCESSES])
    ended = '' if state else ', its script ended'
    return (f'the job of {written}{ended}' + (f', held by {processes}' if processes else
                                              ', its processes gone')), orphaned


def _started(pid):
    """When `pid` started (clock ticks after boot), or None once it is gone: a PID the
    kernel gives again is another process."""
    fields = node_processes.stat_fields(pid)
    return int(fields[19]) if fields else None


def _wait_for_exit(pid, started):
    """Return once process `pid` (which started at `started`) has ended: on a descriptor of
    it where the kernel has them (Linux 5.3, Python 3.9), else by looking every second."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    if handle is not None:
        if _started(pid) == started:
            select.select([handle], [], [])
        os.close(handle)
        return
    while _started(pid) == started:
        time.sleep(1)


def hold(path, job):
    """The lock's holder (run as `--hold PATH --job PID ...` by take_launch_lock): takes the
    lock, says so on its standard output (`waiting` while another job holds it, then
    `locked`; `refused MESSAGE` for a lock it may not take), and keeps it until the job
    script `job` has ended and, where that script led its process group (as under ReFrame
    and Slurm), every process left of the group. The kernel releases the lock however this
    process ends; a job's cancellation ends it with the job's process group."""
    def say(line):
        os.write(1, (line + '\n').encode(errors='replace'))

    try:
        fd = open_launch_lock(path)
    except LockRefused as err:
        say(f'refused {err}')
        return 1
    started = _started(job)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        found = os.fstat(fd)
        say(f'waiting {found.st_dev} {found.st_ino}')
        fcntl.flock(fd, fcntl.LOCK_EX)
    say('locked')
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1):
        os.dup2(null, stream)
    if started is None:
        return 0
    _wait_for_exit(job, started)
    # What the script left running in the group it led (a launcher's tail, ranks that
    # outlived a script killed alone); a group it did not lead has no such members.
    while _group_members(job, (os.getpid(),)):
        time.sleep(0.2)
    return 0


def take_launch_lock(path, job, lock_wait):
    """Take the node's launch lock at `path` for the job script `job` (a PID): a holder
    process (hold()) takes it and keeps it to the job's end, its command line saying for
    whom. Waits at most `lock_wait` seconds for another job, not at all for an orphaned one
    (its run was killed: nobody will end it). Returns (seconds waited or None when the lock
    was not had, the holder in words or '' when it was free at once, whether the holder is
    orphaned); LockRefused for a path that is no lock."""
    state = node_processes.process_stat(job)
    started = datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')
    holder = subprocess.Popen(
        [sys.executable, QUIET_NODE_SCRIPT, '--hold', path, '--job', str(job),
         '--job-parent', str(state[2] if state else 0), '--job-user',
         node_processes.user_name(os.geteuid()), '--job-since', started,
         '--job-directory', os.getcwd()],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    start = time.monotonic()
    said, lock, words = b'', None, ''
    try:
        while b'locked\n' not in said:
            # The holder's start is a python's (well under a second); then the wait.
            left = (lock_wait if lock else HOLDER_START) - (time.monotonic() - start)
            if not select.select([holder.stdout], [], [], max(left, 0))[0]:
                if lock:
                    return None, _holder(lock)[0], False
                raise LockRefused(f'the launch lock\'s holder said nothing in {HOLDER_START} s')
            chunk = os.read(holder.stdout.fileno(), 4096)
            said += chunk
            if not chunk:
                text = said.decode(errors='replace').strip()
                raise LockRefused(text[len('refused '):] if text.startswith('refused ') else
                                  f'the launch lock\'s holder ended (exit status '
                                  f'{holder.wait()}) before it took {path}: {text}')
            waiting = re.search(rb'^waiting (\d+) (\d+)$', said, re.M)
            if waiting and not lock:
                lock = tuple(int(n) for n in waiting.groups())
                words, orphaned = _holder(lock)
                if orphaned:
                    return None, words, True
                print(f'hpcbench launch lock: another hpcbench job runs on this node '
                      f'({words}); waiting up to {lock_wait:g} s', flush=True)
        return time.monotonic() - start, words, False
    finally:
        holder.stdout.close()
        if b'locked\n' not in said:
            holder.kill()
            holder.wait()
