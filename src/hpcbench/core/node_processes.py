"""A node's processes and memory as /proc shows them, for the quiet-node check and the
node's launch lock (hpcbench.core.quiet_node, hpcbench.core.launch_lock), run in jobs by the
node's python3: standard library only."""
import os
import pwd

def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f'UID {uid}'


def printable(text):
    """Text another user wrote (a command line), safe to print on one line."""
    return ''.join(c if c.isprintable() else '?' for c in text)


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), or None
    once the process is gone."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            text = fp.read()
    except OSError:
        return None

    # The command name is in parentheses and may hold spaces or parentheses itself.
    return text[text.rindex(')') + 2:].split()


def process_stat(pid):
    """(CPU ticks used, resident bytes, parent PID) of a process, or None once it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    # After the name: state ppid ... utime(14th field) stime(15th) ... rss(24th).
    return (int(fields[11]) + int(fields[12]), int(fields[21]) * os.sysconf('SC_PAGE_SIZE'),
            int(fields[1]))


def snapshot():
    processes = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            stat = process_stat(int(entry))
            if stat:
                processes[int(entry)] = stat

    return processes


def command(pid):
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


def cpu_busy_ticks():
    """Ticks all CPUs spent busy since boot (user, nice, system, irq, softirq: not idle,
    I/O wait, or time the hypervisor gave to other guests)."""
    with open('/proc/stat') as fp:
        fields = [int(v) for v in fp.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return user + nice + system + irq + softirq
