"""Debian packages the suite's tools need (the Spack path, the testbed, gitlab-ci-local):
installed when missing and running as root, else one error naming the command to run."""
import os
import shutil
import subprocess

from hpcbench.core import child_processes


class MissingPackages(RuntimeError):
    pass


def missing(packages):
    """The packages of `packages` that are not installed."""
    if not packages:
        return []
    out = subprocess.run(['dpkg-query', '-W', '-f', '${Package} ${db:Status-Abbrev}\n',
                          *packages], capture_output=True, text=True).stdout
    installed = {ln.split()[0] for ln in out.splitlines() if ln.split()[1:2] == ['ii']}
    return [p for p in packages if p not in installed]


def installable():
    """Whether the suite can install Debian packages here (ensure): root, with apt."""
    return os.geteuid() == 0 and shutil.which('apt-get') is not None


def multiarch():
    """Debian's multiarch tuple of this machine (x86_64-linux-gnu): where its libraries and
    arch-specific headers are."""
    try:
        return subprocess.run(['gcc', '-print-multiarch'], capture_output=True, text=True,
                              check=True).stdout.strip() or 'x86_64-linux-gnu'
    except (OSError, subprocess.CalledProcessError):
        return 'x86_64-linux-gnu'


def upstream_version(debian_version):
    """'1:0.3.21+ds-4' -> '0.3.21': epoch, Debian revision and repack suffix dropped."""
    return debian_version.split(':')[-1].split('+')[0].rsplit('-', 1)[0]


def upstream_version_of(package):
    """The upstream version of an installed package ('' when it is not installed)."""
    out = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', package],
                         capture_output=True, text=True).stdout
    return upstream_version(out)


# How long apt waits for the dpkg lock another apt (unattended upgrades, a user) holds.
LOCK_TIMEOUT = 300


def ensure(packages, say=print, lock_timeout=None):
    """Install what `packages` lacks (as root), saying so; refuse otherwise. apt waits for
    the dpkg lock up to `lock_timeout` seconds; an apt that fails (offline, the lock still
    held) is MissingPackages with apt's own reason."""
    lacking = missing(packages)
    if not lacking:
        return

    cmd = ['apt-get', 'install', '-y', '--no-install-recommends', *lacking]
    if os.geteuid() != 0:
        raise MissingPackages('missing Debian packages; as root run: '
                              f'apt-get update && {" ".join(cmd)}')

    say(f'installing Debian packages: {" ".join(lacking)}')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    wait = ['-o', f'DPkg::Lock::Timeout={int(lock_timeout or LOCK_TIMEOUT)}']
    for step in (['apt-get', *wait, 'update', '-q'], [cmd[0], *wait, *cmd[1:]]):
        proc = child_processes.run(step, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE,
                              text=True)
        if proc.returncode != 0:
            said = [ln for ln in proc.stderr.splitlines() if ln.startswith(('E:', 'W:'))]
            raise MissingPackages(f'could not install {" ".join(lacking)}: `{" ".join(step)}` '
                                  f'failed (exit {proc.returncode}): '
                                  f'{" ".join(said) or proc.stderr.strip()[-500:]}')
