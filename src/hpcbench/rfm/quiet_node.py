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
measure under each other's load. The job script opens the lock file on a descriptor of its
own (job_lines) and this check locks that descriptor, so that the lock lasts as long as the
job script, not this process; the kernel releases it however the job ends. A job that
waited for another says so in its line, naming it; one that waited `lock_wait` seconds in
vain is busy.

Standard library only: the job runs it with the node's python3, outside the project's venv.
Prints one line beginning with MARKER; exits BUSY_EXIT when busy and the action is `fail`.
"""
import argparse
import datetime
import errno
import fcntl
import getpass
import os
import re
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
    `chosen` settings (settings()). The shell opens the lock file (created readable and
    writable by every user, once) on a descriptor it keeps to its end; `python` is a shell
    word, `script` a quoted path."""
    return [
        f'hpcbench_launch_lock="${{{LAUNCH_LOCK_ENV}:-{LAUNCH_LOCK}}}"',
        '[ -e "$hpcbench_launch_lock" ] || (umask 0 && set -C && : > "$hpcbench_launch_lock") '
        '2>/dev/null',
        'exec {hpcbench_launch_lock_fd}<"$hpcbench_launch_lock" || { echo "hpcbench: the '
        'node\'s launch lock $hpcbench_launch_lock cannot be opened: set '
        f'{LAUNCH_LOCK_ENV} to a file on the node every user can read" >&2; exit 1; }}',
        f'{python} {script} --launch-lock "$hpcbench_launch_lock" --launch-lock-fd '
        f'"$hpcbench_launch_lock_fd" --lock-wait {chosen["lock_wait"]} --action '
        f'{chosen["action"]} --max-busy-cores {chosen["max_busy_cores"]} --max-memory-in-use '
        f'{chosen["max_memory_in_use"]} --sample {chosen["sample"]} --wait {chosen["wait"]} '
        '|| exit $?']


def _holders(path):
    """Who has the lock file open besides this process and its ancestors: [(pid, command)]
    (the processes of another job: its script, its launcher, its ranks; those of other
    users are seen by root only)."""
    try:
        wanted = os.stat(path)
    except OSError:
        return []
    own = ancestors(os.getpid(), _snapshot())
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) in own:
            continue
        try:
            for fd in os.listdir(f'/proc/{entry}/fd'):
                held = os.stat(f'/proc/{entry}/fd/{fd}')
                if (held.st_dev, held.st_ino) == (wanted.st_dev, wanted.st_ino):
                    found.append((int(entry), _command(int(entry))))
                    break
        except OSError:
            continue
    return sorted(found)


def _holder(path):
    """(the lock's holder in words: what it wrote into the lock file and the processes that
    have it open; whether it is orphaned: the process that started its job script (ReFrame,
    the scheduler's step) is gone, as when ReFrame was killed with SIGKILL)."""
    try:
        with open(path, errors='replace') as fp:
            written = fp.read(500).strip()
    except OSError:
        written = ''
    holders = _holders(path)
    # A job's script, launcher and ranks: twice the culprits of a busy verdict.
    processes = '; '.join(f'PID {pid}: {command}' for pid, command in holders[:2 * NAMED])
    recorded = re.match(r'PID (\d+) .*started by PID (\d+)', written)
    orphaned = False
    if recorded and int(recorded.group(1)) in dict(holders):
        job = _stat(int(recorded.group(1)))
        orphaned = job is not None and job[2] != int(recorded.group(2))
    words = ', '.join(part for part in (written and f'the job of {written}',
                                        processes and f'held by {processes}') if part)
    return (words or 'a job that has not yet said who it is'), orphaned


def take_launch_lock(fd, path, lock_wait):
    """Lock the node's launch lock, open on descriptor `fd` (the job script's), waiting at
    most `lock_wait` seconds for another job, not at all for an orphaned one (its run was
    killed: nobody will end it). Returns (seconds waited or None when the lock was not had,
    the holder in words or '' when it was free at once, whether the holder is orphaned)."""
    start = time.monotonic()
    holder = ''
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        if not holder:
            holder, orphaned = _holder(path)
            if orphaned:
                return None, holder, True
            print(f'hpcbench launch lock: another hpcbench job runs on this node ({holder}); '
                  f'waiting up to {lock_wait:g} s', flush=True)
        if time.monotonic() - start >= lock_wait:
            return None, _holder(path)[0], False
        time.sleep(0.2)
    waited = time.monotonic() - start
    # Who holds it now, for a job that will wait for this one (the file is every user's;
    # not writable, it names nobody). The job script is this process's parent.
    job = os.getppid()
    try:
        with open(path, 'r+') as fp:
            started = datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')
            fp.write(f'PID {job} (user {getpass.getuser()}, since {started}, started by PID '
                     f'{(_stat(job) or (0, 0, 0))[2]}) in {os.getcwd()}')
            fp.truncate()
    except OSError:
        pass
    return waited, holder, False


def _stat(pid):
    """(CPU ticks used, resident bytes, parent PID) of a process, or None once it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            text = fp.read()
    except OSError:
        return None

    # The command name is in parentheses and may hold spaces or parentheses itself.
    fields = text[text.rindex(')') + 2:].split()
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
                        help='the lock file open on --launch-lock-fd (named when waited for)')
    parser.add_argument('--launch-lock-fd', type=int,
                        help="the job script's descriptor of the node's launch lock")
    args = parser.parse_args(argv)
    try:
        chosen = settings({'max_busy_cores': args.max_busy_cores,
                           'max_memory_in_use': args.max_memory_in_use,
                           'sample': args.sample, 'wait': args.wait,
                           'lock_wait': args.lock_wait}, args.action)
    except QuietNodeSettingsError as err:
        parser.error(str(err))

    lock_note = ''
    if args.launch_lock_fd is not None:
        waited, holder, orphaned = take_launch_lock(args.launch_lock_fd, args.launch_lock,
                                                    chosen['lock_wait'])
        if waited is None:
            how = ('orphaned (the run that started it is gone): not waited for'
                   if orphaned else f'waited for {chosen["lock_wait"]:g} s')
            line = (f'{MARKER} BUSY: the node\'s launch lock is held by another hpcbench job, '
                    f'{how}: {holder}')
            print(line, flush=True)
            return BUSY_EXIT if chosen['action'] == 'fail' else 0
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
