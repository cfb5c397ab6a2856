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
import os
import sys
import time

if __package__ in (None, ''):
    # Run by path with the node's python3 (the job's line), outside the venv: the package
    # it belongs to is the checkout's.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from hpcbench.core import launch_lock, node_processes  # noqa: E402

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
# Culprits named on a busy verdict.
NAMED = 5


class QuietNodeSettingsError(ValueError):
    pass


def settings(partition_setting, action=None, wait=None, lock_wait=None):
    """The check's settings from a partition's description's `quiet_node` (a dict of DEFAULTS'
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
        f'hpcbench_launch_lock="${{{launch_lock.LAUNCH_LOCK_ENV}:-{launch_lock.LAUNCH_LOCK}}}"',
        f'{python} {script} --launch-lock "$hpcbench_launch_lock" --job "$$" --lock-wait '
        f'{chosen["lock_wait"]} --action {chosen["action"]} --max-busy-cores '
        f'{chosen["max_busy_cores"]} --max-memory-in-use {chosen["max_memory_in_use"]} '
        f'--sample {chosen["sample"]} --wait {chosen["wait"]} || exit $?']


def survey(sample):
    """What the node does besides this process and its ancestors over `sample` seconds:
    (busy cores, [(cores, resident bytes, pid, command)] busiest first, memory in use,
    total memory, 1-min load). Busy cores come from the node's CPU counters, so that
    processes too short-lived to be seen (a build's compilers) count too."""
    busy_before = node_processes.cpu_busy_ticks()
    before = node_processes.snapshot()
    start = time.monotonic()
    time.sleep(sample)
    after = node_processes.snapshot()
    elapsed = time.monotonic() - start
    busy_after = node_processes.cpu_busy_ticks()
    own = node_processes.ancestors(os.getpid(), after)
    ticks = os.sysconf('SC_CLK_TCK')
    others, own_ticks = [], 0
    for pid, (used, rss, _) in after.items():
        # A process started during the sample counts from its start.
        used_during = used - (before[pid][0] if pid in before else 0)
        if pid in own:
            own_ticks += used_during
            continue
        others.append((used_during / ticks / elapsed, rss, pid, node_processes.command(pid)))

    others.sort(reverse=True)
    busy_cores = max(0.0, (busy_after - busy_before - own_ticks) / ticks / elapsed)
    used_memory, total_memory = node_processes.memory_in_use()
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
    parser.add_argument('--launch-lock', default=launch_lock.LAUNCH_LOCK,
                        help="the node's launch lock (a file, made where there is none)")
    parser.add_argument('--job', type=int,
                        help="the job script's PID: the launch lock is held to its end")
    # The lock's holder (take_launch_lock starts it): its record, in its command line.
    parser.add_argument('--hold', help=argparse.SUPPRESS)
    for option, _ in launch_lock.RECORD[1:]:
        parser.add_argument(option, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.hold:
        return launch_lock.hold(args.hold, args.job)
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
            waited, holder, orphaned = launch_lock.take_launch_lock(
                args.launch_lock, args.job, chosen['lock_wait'])
        except launch_lock.LockRefused as err:
            print(f'{MARKER} {launch_lock.LOCK_REFUSED} {err}', flush=True)
            print(f'hpcbench: {err}', file=sys.stderr, flush=True)
            return BUSY_EXIT
        # Not had, the lock fails the job whatever the action: the check may be off, or
        # only warn, where a node's load is no verdict (the testbed's nodes share a host),
        # but two jobs never measure together.
        if waited is None:
            how = ('orphaned (the run that started it is gone): not waited for'
                   if orphaned else f'waited for {chosen["lock_wait"]:g} s')
            print(f'{MARKER} {launch_lock.LOCK_NOT_HAD} held by another hpcbench job, {how}: '
                  f'{holder}', flush=True)
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
