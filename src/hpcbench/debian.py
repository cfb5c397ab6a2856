"""Debian packages the suite's tools need (the Spack path, the testbed, gitlab-ci-local):
installed when missing and running as root, else one error naming the command to run."""
import os
import subprocess


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


def ensure(packages, say=print):
    """Install what `packages` lacks (as root), saying so; refuse otherwise."""
    lacking = missing(packages)
    if not lacking:
        return

    cmd = ['apt-get', 'install', '-y', '--no-install-recommends', *lacking]
    if os.geteuid() != 0:
        raise MissingPackages('missing Debian packages; as root run: '
                              f'apt-get update && {" ".join(cmd)}')

    say(f'installing Debian packages: {" ".join(lacking)}')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    subprocess.run(['apt-get', 'update', '-q'], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
