"""A root directory of our own under the per-user cache, and its end: its mounts and the
processes running in it found and ended (kill_processes_in), removed only when it is ours
and nothing is mounted in it (remove_root), roots left by an interrupted run found by
their owner's PID and start time (remove_stale_roots); the host's settings a root needs
(copy_host_settings), the kernel file systems it needs (mount_system)."""
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


# Host files that carry the registry settings, copied into the root where they exist; and
# policy-rc.d: machines of this kind run no init system and ship one that tells dpkg not to
# start services (without it, installing munge or MariaDB fails in a root with no init).
HOST_SETTINGS = ('etc/resolv.conf', 'etc/hosts', 'etc/pip.conf', 'root/.npmrc',
                 'root/.config/pip/pip.conf', 'etc/ssl/certs/ca-certificates.crt',
                 'usr/sbin/policy-rc.d')
MARKER = 'etc/hpcbench-clean-root'
# The name of every root directory the check makes (remove_stale_roots looks for it).
ROOT_PREFIX = 'hpcbench-clean-root-'


class CleanRootError(RuntimeError):
    pass


def say(msg):
    print(f'[clean-root] {msg}', flush=True)


def host_sources():
    """apt's enabled source files (what apt itself reads)."""
    etc = Path('/etc/apt')
    files = [etc / 'sources.list'] + sorted(etc.glob('sources.list.d/*.list')) \
        + sorted(etc.glob('sources.list.d/*.sources'))
    return [p for p in files if p.is_file()]


def mounts_under(root):
    """Mount points at or below `root`, deepest first."""
    root = os.path.realpath(root)
    with open('/proc/self/mountinfo') as fp:
        points = [line.split()[4].replace('\\040', ' ') for line in fp]
    inside = [p for p in points if p == root or p.startswith(root + '/')]
    return sorted(set(inside), key=len, reverse=True)


def processes_in(root):
    """PIDs of the processes whose root directory is `root` (started inside it)."""
    root = os.path.realpath(root)
    pids = []
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / 'root') == root:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def kill_processes_in(root, grace=5.0):
    """TERM, then KILL, everything still running inside `root`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = processes_in(root)
        if not pids:
            return
        say(f'stopping {len(pids)} process(es) left inside the root ({sig.name})')
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while processes_in(root) and time.monotonic() < deadline:
            time.sleep(0.2)

    if processes_in(root):
        raise CleanRootError(f'processes still run inside {root}: {processes_in(root)}')


def remove_root(root):
    """Kill, unmount, then delete `root`: only a directory we made, only once nothing is
    mounted below it, never across a file system boundary."""
    root = Path(root)
    if not root.name.startswith(ROOT_PREFIX):
        raise CleanRootError(f'{root} is not a clean root made by this check; left as it is')

    kill_processes_in(root)
    for point in mounts_under(root):
        if subprocess.run(['umount', point], capture_output=True).returncode != 0:
            subprocess.run(['umount', '--lazy', point], check=False)
    left = mounts_under(root)
    if left:
        raise CleanRootError(f'still mounted, so {root} is kept: {", ".join(left)}')

    subprocess.run(['rm', '-rf', '--one-file-system', str(root)], check=True)


def process_identity(pid):
    """'<pid>:<start time>' of a running process ('' when there is none): told apart from
    a later process given the same pid, or one after a reboot."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return ''
    return f'{pid}:{stat.rsplit(")", 1)[1].split()[19]}'


def _owner(root):
    """The identity of the check that made `root`, from its marker ('' when it has none)."""
    try:
        text = (root / MARKER).read_text()
    except OSError:
        return ''
    return next((ln.split()[1] for ln in text.splitlines() if ln.startswith('owner ')), '')


def remove_stale_roots(directory):
    """Remove the roots in `directory` whose check no longer runs (killed, or the machine
    restarted: nothing cleaned up after them), with their mounts and processes. A root
    without our marker, or whose check still runs, is left alone."""
    for root in sorted(Path(directory).glob(f'{ROOT_PREFIX}*')):
        if not (root / MARKER).is_file() or root.is_symlink():
            continue
        owner = _owner(root)
        if owner and process_identity(owner.split(':')[0]) == owner:
            continue
        say(f'{root}: left by a check that no longer runs ({owner or "no owner recorded"}); '
            'removing it')
        remove_root(root)


def copy_host_settings(root):
    """The registry settings of the host: apt's sources and its Acquire settings, DNS, the
    CA bundle (and the certificates it was made from, so that update-ca-certificates in the
    root keeps them), pip's and npm's configuration."""
    apt = root / 'etc/apt'
    for path in host_sources():
        target = apt / path.relative_to('/etc/apt')
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for path in Path('/etc/apt/apt.conf.d').glob('*'):
        if path.is_file() and 'Acquire::' in path.read_text(errors='replace'):
            (apt / 'apt.conf.d').mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, apt / 'apt.conf.d' / path.name)
    # debootstrap's own sources.list would duplicate the host's entries.
    if any(p.name != 'sources.list' for p in host_sources()):
        (apt / 'sources.list').unlink(missing_ok=True)

    local_ca = Path('/usr/local/share/ca-certificates')
    if local_ca.is_dir():
        shutil.copytree(local_ca, root / local_ca.relative_to('/'), dirs_exist_ok=True)
    for rel in HOST_SETTINGS:
        source = Path('/') / rel
        if source.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).unlink(missing_ok=True)
            shutil.copy2(source, root / rel)


def mount_system(root):
    for source, target, how in (
            ('proc', 'proc', ['-t', 'proc']),
            ('/sys', 'sys', ['--rbind']),
            ('/dev', 'dev', ['--rbind']),
            ('tmpfs', 'dev/shm', ['-t', 'tmpfs', '-o', 'mode=1777']),
            ('tmpfs', 'run', ['-t', 'tmpfs', '-o', 'mode=755'])):
        (root / target).mkdir(parents=True, exist_ok=True)
        subprocess.run(['mount', *how, source, str(root / target)], check=True)
        if '--rbind' in how:
            # Unmounting our copy must never reach the host's /dev or /sys.
            subprocess.run(['mount', '--make-rslave', str(root / target)], check=True)
