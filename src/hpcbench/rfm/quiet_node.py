"""Is the node quiet enough to measure on? Run by each benchmark job just before its launch
(hpcbench.rfm.plugins.QuietNode), on the node the job script runs on.

It samples the CPU time of every process twice, `sample` seconds apart, from /proc, leaving
out the job itself and its ancestors (the job script, the scheduler's or ReFrame's process),
and reads the memory in use (MemTotal - MemAvailable) and the load average. The node is busy
when the other processes used more than `max_busy_cores` cores over the sample, or more than
`max_memory_in_use` of the memory is in use; the culprits are named (PID, CPU, memory,
command). The load average is printed, not judged: it lags a minute behind. A busy node is
surveyed again for up to `wait` seconds (the tail of another job, a build finishing), so
that a passing load delays the measurement instead of failing it; a load that stays fails.

Before it surveys the node, the job takes the node's launch lock (LAUNCH_LOCK, in the
node's memory file system: every checkout, every results directory and every user of the
node takes the same one) and holds it to its end: two runs started together, from two
checkouts or two HPCBENCH_VARs, would each see the other idle at the survey and then
measure under each other's load. The lock is a file in a directory every user writes to,
so it is opened without following a link or blocking on a FIFO, refused unless it is a
regular file of one link owned by a user (open_launch_lock), and never written: what a job
says of itself is in its holder's command line. The holder (hold(), a process this check
starts in the job's process group) takes the lock and keeps it until the job script ends;
the kernel releases it however the holder ends. A job that waited for another says so in
its line, naming it (/proc/locks names the holder, every user may read both); one that
waited `lock_wait` seconds in vain, or found the holder orphaned, ran nothing, whatever
the action: the lock keeps jobs apart where a node's load is no verdict too.

Standard library only: the job runs it with the node's python3 (3.6 and later), outside the
project's venv.
Prints one line beginning with MARKER; exits BUSY_EXIT when busy and the action is `fail`.
"""
import argparse
import datetime
import errno
import fcntl
import os
import pwd
import re
import select
import stat
import subprocess
import sys
import time

MARKER = 'hpcbench quiet-node:'
BUSY_EXIT = 97
ACTIONS = ('fail', 'warn', 'off')
# Defaults: a quarter of a core for everything else (daemons use far less), half the
# memory (a full-size HPL takes 80 % of it); a minute's wait for a passing load (a job's
# clean-up, a build's last link), short against a benchmark and paid in full only where a
# load stays.
# The launch lock is waited for an hour: another run's job ends within that on a node a
# person shares (a paper system's full HPL holds a node of its own, from its scheduler).
DEFAULTS = {'action': 'fail', 'max_busy_cores': 0.25, 'max_memory_in_use': 0.5,
            'sample': 0.5, 'wait': 60, 'lock_wait': 3600}
# Node-wide (tmpfs, one per node, every user's); HPCBENCH_LAUNCH_LOCK in a job's
# environment moves it (a node without /dev/shm, a test's own).
LAUNCH_LOCK = '/dev/shm/hpcbench-launch.lock'
LAUNCH_LOCK_ENV = 'HPCBENCH_LAUNCH_LOCK'
# Culprits named on a busy verdict.
NAMED = 5
# How a job's line begins where it did not take the launch lock: it ran nothing, whatever
# the check's action.
LOCK_REFUSED = 'REFUSED:'
LOCK_NOT_HAD = "BUSY: the node's launch lock is"
# Seconds a lock's holder process may take to start.
HOLDER_START = 60


class QuietNodeSettingsError(ValueError):
    pass


def settings(partition_setting, action=None, wait=None, lock_wait=None):
    """The check's settings from a partition's `extras.quiet_node` (a dict of DEFAULTS'
    keys, or None) and an action and a wait given for the run (None: the partition's);
    validated."""
    merged = {**DEFAULTS, **(partition_setting or {})}
    if action is not None:
        merged['action'] = action
    if wait is not None:
        merged['wait'] = wait
    if lock_wait is not None:
        merged['lock_wait'] = lock_wait
    unknown = set(merged) - set(DEFAULTS)
    if unknown:
        raise QuietNodeSettingsError(f'quiet_node: unknown setting(s) {", ".join(sorted(unknown))}'
                                     f'; known: {", ".join(DEFAULTS)}')
    if merged['action'] not in ACTIONS:
        raise QuietNodeSettingsError(f'quiet_node action {merged["action"]!r}: one of '
                                     f'{", ".join(ACTIONS)}')
    for key in ('max_busy_cores', 'max_memory_in_use', 'sample'):
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise QuietNodeSettingsError(f'quiet_node {key}={value!r}: a positive number')
    for key in ('wait', 'lock_wait'):
        wait = merged[key]
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait < 1e6:
            raise QuietNodeSettingsError(f'quiet_node {key}={wait!r}: seconds, 0 or more')
    if merged['max_memory_in_use'] > 1:
        raise QuietNodeSettingsError(f'quiet_node max_memory_in_use='
                                     f'{merged["max_memory_in_use"]}: a fraction of memory, '
                                     'at most 1')
    return merged


def job_lines(python, script, chosen):
    """The job script's lines that take the node's launch lock and run this check with
    `chosen` settings (settings()); `python` is a shell word, `script` a quoted path. The
    job's own PID ($$) is what the lock's holder waits for."""
    return [
        f'hpcbench_launch_lock="${{{LAUNCH_LOCK_ENV}:-{LAUNCH_LOCK}}}"',
        f'{python} {script} --launch-lock "$hpcbench_launch_lock" --job "$$" --lock-wait '
        f'{chosen["lock_wait"]} --action {chosen["action"]} --max-busy-cores '
        f'{chosen["max_busy_cores"]} --max-memory-in-use {chosen["max_memory_in_use"]} '
        f'--sample {chosen["sample"]} --wait {chosen["wait"]} || exit $?']


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
        problem = f'owned by the system account {_user(found.st_uid)}, not by a user'
    if problem:
        os.close(fd)
        raise LockRefused(f'the node\'s launch lock {path} is {problem}: {why}')
    return fd


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f'UID {uid}'


def _printable(text):
    """Text another user wrote (a command line), safe to print on one line."""
    return ''.join(c if c.isprintable() else '?' for c in text)


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
_RECORD = (('--job', 'job'), ('--job-parent', 'parent'), ('--job-user', 'user'),
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
    for option, key in _RECORD:
        if option in words[:-1]:
            record[key] = _printable(words[words.index(option) + 1])
    return record if record.get('job', '').isdigit() else None


def _group_members(group, but=()):
    """The running processes (not zombies) of process group `group`, but those in `but`."""
    members = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in but:
            continue
        fields = _stat_fields(entry)
        if fields and fields[0] != 'Z' and int(fields[2]) == group:
            members.append(int(entry))
    return sorted(members)


def _job_processes(job, holder):
    """The processes of the job whose script is `job`: the script and what it started (its
    descendants) or, once the script is gone, what is left of its process group; not
    `holder`."""
    processes = _snapshot()
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
        return f'PID {holder}, no hpcbench job: {_printable(_command(holder))}', False
    job = int(record['job'])
    state = _stat(job)
    orphaned = state is not None and str(state[2]) != record.get('parent')
    written = (f'PID {job} (user {record.get("user", "?")}, since {record.get("since", "?")}, '
               f'started by PID {record.get("parent", "?")}) in {record.get("directory", "?")}')
    # A job's script, launcher and ranks: twice the culprits of a busy verdict.
    processes = '; '.join(f'PID {pid}: {_printable(_command(pid))}'
                          for pid in _job_processes(job, holder)[:2 * NAMED])
    ended = '' if state else ', its script ended'
    return (f'the job of {written}{ended}' + (f', held by {processes}' if processes else
                                              ', its processes gone')), orphaned


def _started(pid):
    """When `pid` started (clock ticks after boot), or None once it is gone: a PID the
    kernel gives again is another process."""
    fields = _stat_fields(pid)
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
    state = _stat(job)
    started = datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')
    holder = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), '--hold', path, '--job', str(job),
         '--job-parent', str(state[2] if state else 0), '--job-user',
         _user(os.geteuid()), '--job-since', started, '--job-directory', os.getcwd()],
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


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), or None
    once the process is gone."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            text = fp.read()
    except OSError:
        return None

    # The command name is in parentheses and may hold spaces or parentheses itself.
    return text[text.rindex(')') + 2:].split()


def _stat(pid):
    """(CPU ticks used, resident bytes, parent PID) of a process, or None once it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    # After the name: state ppid ... utime(14th field) stime(15th) ... rss(24th).
    return (int(fields[11]) + int(fields[12]), int(fields[21]) * os.sysconf('SC_PAGE_SIZE'),
            int(fields[1]))


def _snapshot():
    processes = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat:
                processes[int(entry)] = stat

    return processes


def _command(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as fp:
            words = fp.read().split(b'\0')
        text = b' '.join(w for w in words if w).decode(errors='replace')
        if text:
            return text[:120]

        with open(f'/proc/{pid}/comm') as fp:
            return f'[{fp.read().strip()}]'
    except OSError:
        return '?'


def ancestors(pid, processes):
    """`pid` and every process above it."""
    chain = set()
    while pid and pid not in chain:
        chain.add(pid)
        pid = processes.get(pid, (0, 0, 0))[2]

    return chain


def memory_in_use():
    """(bytes in use, total bytes): MemTotal - MemAvailable (the page cache is not use)."""
    fields = {}
    with open('/proc/meminfo') as fp:
        for line in fp:
            name, value = line.split(':', 1)
            fields[name] = int(value.split()[0]) * 1024

    return fields['MemTotal'] - fields['MemAvailable'], fields['MemTotal']


def _cpu_busy_ticks():
    """Ticks all CPUs spent busy since boot (user, nice, system, irq, softirq: not idle,
    I/O wait, or time the hypervisor gave to other guests)."""
    with open('/proc/stat') as fp:
        fields = [int(v) for v in fp.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return user + nice + system + irq + softirq


def survey(sample):
    """What the node does besides this process and its ancestors over `sample` seconds:
    (busy cores, [(cores, resident bytes, pid, command)] busiest first, memory in use,
    total memory, 1-min load). Busy cores come from the node's CPU counters, so that
    processes too short-lived to be seen (a build's compilers) count too."""
    busy_before = _cpu_busy_ticks()
    before = _snapshot()
    start = time.monotonic()
    time.sleep(sample)
    after = _snapshot()
    elapsed = time.monotonic() - start
    busy_after = _cpu_busy_ticks()
    own = ancestors(os.getpid(), after)
    ticks = os.sysconf('SC_CLK_TCK')
    others, own_ticks = [], 0
    for pid, (used, rss, _) in after.items():
        # A process started during the sample counts from its start.
        used_during = used - (before[pid][0] if pid in before else 0)
        if pid in own:
            own_ticks += used_during
            continue
        others.append((used_during / ticks / elapsed, rss, pid, _command(pid)))

    others.sort(reverse=True)
    busy_cores = max(0.0, (busy_after - busy_before - own_ticks) / ticks / elapsed)
    used_memory, total_memory = memory_in_use()
    with open('/proc/loadavg') as fp:
        load = float(fp.read().split()[0])

    return busy_cores, others, used_memory, total_memory, load


def verdict(chosen, busy_cores, others, used_memory, total_memory, load, waited=0.0,
            lock_note=''):
    """(busy?, the line to print); `waited`: seconds the node was busy before this
    survey; `lock_note`: how the launch lock was taken, when it had to be waited for."""
    gib = 1 << 30
    figures = (f'{lock_note}{f"after waiting {waited:.0f} s for it, " if waited else ""}'
               f'{busy_cores:.2f} core(s) busy besides this job over {chosen["sample"]} s '
               f'(at most {chosen["max_busy_cores"]}), memory in use '
               f'{used_memory / gib:.1f} of {total_memory / gib:.1f} GiB '
               f'({used_memory / total_memory:.0%}, at most {chosen["max_memory_in_use"]:.0%}), '
               f'load {load:.2f}')
    cpu_busy = busy_cores > chosen['max_busy_cores']
    memory_busy = used_memory > chosen['max_memory_in_use'] * total_memory
    if not (cpu_busy or memory_busy):
        return False, f'{MARKER} quiet: {figures}'

    # The processes behind the verdict: the busiest on CPU (at least 1 % of a core), or the
    # largest in memory.
    if cpu_busy:
        named = [o for o in others if o[0] >= 0.01][:NAMED]
    else:
        named = sorted(others, key=lambda o: o[1], reverse=True)[:NAMED]
    culprits = '; '.join(f'PID {pid} {cores:.0%} CPU {rss / gib:.2f} GiB: {command}'
                         for cores, rss, pid, command in named)
    return True, f'{MARKER} BUSY: {figures}; busiest: {culprits}'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--action', choices=ACTIONS, default=DEFAULTS['action'])
    parser.add_argument('--max-busy-cores', type=float, default=DEFAULTS['max_busy_cores'])
    parser.add_argument('--max-memory-in-use', type=float,
                        default=DEFAULTS['max_memory_in_use'])
    parser.add_argument('--sample', type=float, default=DEFAULTS['sample'])
    parser.add_argument('--wait', type=float, default=DEFAULTS['wait'])
    parser.add_argument('--lock-wait', type=float, default=DEFAULTS['lock_wait'])
    parser.add_argument('--launch-lock', default=LAUNCH_LOCK,
                        help="the node's launch lock (a file, made where there is none)")
    parser.add_argument('--job', type=int,
                        help="the job script's PID: the launch lock is held to its end")
    # The lock's holder (take_launch_lock starts it): its record, in its command line.
    parser.add_argument('--hold', help=argparse.SUPPRESS)
    for option, _ in _RECORD[1:]:
        parser.add_argument(option, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.hold:
        return hold(args.hold, args.job)
    try:
        chosen = settings({'max_busy_cores': args.max_busy_cores,
                           'max_memory_in_use': args.max_memory_in_use,
                           'sample': args.sample, 'wait': args.wait,
                           'lock_wait': args.lock_wait}, args.action)
    except QuietNodeSettingsError as err:
        parser.error(str(err))

    lock_note = ''
    if args.job is not None:
        try:
            waited, holder, orphaned = take_launch_lock(args.launch_lock, args.job,
                                                        chosen['lock_wait'])
        except LockRefused as err:
            print(f'{MARKER} {LOCK_REFUSED} {err}', flush=True)
            print(f'hpcbench: {err}', file=sys.stderr, flush=True)
            return BUSY_EXIT
        # Not had, the lock fails the job whatever the action: the check may be off, or
        # only warn, where a node's load is no verdict (the testbed's nodes share a host),
        # but two jobs never measure together.
        if waited is None:
            how = ('orphaned (the run that started it is gone): not waited for'
                   if orphaned else f'waited for {chosen["lock_wait"]:g} s')
            print(f'{MARKER} {LOCK_NOT_HAD} held by another hpcbench job, {how}: {holder}',
                  flush=True)
            return BUSY_EXIT
        if holder:
            lock_note = (f'launched after waiting {waited:.0f} s for another hpcbench job '
                         f'({holder}), ')
    if chosen['action'] == 'off':
        if lock_note:
            print(f'{MARKER} not checked: {lock_note.rstrip(", ")}', flush=True)
        return 0

    # Only a check that would fail waits: `warn` measures under the load by request.
    start = time.monotonic()
    deadline = start + (chosen['wait'] if chosen['action'] == 'fail' else 0)
    busy, line = verdict(chosen, *survey(chosen['sample']), lock_note=lock_note)
    while busy and time.monotonic() < deadline:
        busy, line = verdict(chosen, *survey(chosen['sample']),
                             waited=time.monotonic() - start, lock_note=lock_note)
    print(line, flush=True)
    return BUSY_EXIT if busy and chosen['action'] == 'fail' else 0


if __name__ == '__main__':
    sys.exit(main())
