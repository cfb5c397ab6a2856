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


def archive_uri():
    """The Debian archive this machine's apt uses (its first `URIs:` or `deb` line), else
    Debian's own."""
    for source in ('/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'):
        try:
            text = open(source).read()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ['URIs:'] and len(words) > 1:
                return words[1]
            if words[:1] == ['deb'] and len(words) > 2:
                return next(w for w in words[1:] if not w.startswith('['))
    return 'http://deb.debian.org/debian'


def download_non_free(package, directory, suite='bookworm'):
    """Download `package`'s .deb from Debian's non-free component into `directory`, with a
    source list and apt state of its own (the machine's apt is left as it is: non-free is not
    in it); returns the .deb's path. MissingPackages with apt's reason where it fails."""
    directory = os.path.abspath(directory)
    state = os.path.join(directory, 'apt')
    for sub in ('lists/partial', 'cache/archives/partial'):
        os.makedirs(os.path.join(state, sub), exist_ok=True)
    sources = os.path.join(state, 'sources.list')
    with open(sources, 'w') as out:
        out.write(f'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] '
                  f'{archive_uri()} {suite} non-free\n')
    options = ['-o', f'Dir::Etc::SourceList={sources}', '-o', 'Dir::Etc::SourceParts=/dev/null',
               '-o', f'Dir::State::Lists={state}/lists', '-o', f'Dir::Cache={state}/cache',
               '-o', 'APT::Sandbox::User=root']
    for step in (['update', '-q'], ['download', package]):
        done = subprocess.run(['apt-get', *options, *step], cwd=directory, capture_output=True,
                              text=True)
        if done.returncode != 0:
            said = ' '.join((done.stdout + done.stderr).split())[-300:]
            raise MissingPackages(f'apt-get {" ".join(step)} from Debian non-free failed: '
                                  f'{said}')
    debs = sorted(p for p in os.listdir(directory) if p.startswith(f'{package}_')
                  and p.endswith('.deb'))
    if not debs:
        raise MissingPackages(f'apt-get download {package} left no .deb in {directory}')
    return os.path.join(directory, debs[-1])
