"""Run the project's .gitlab-ci.yml on this machine with gitlab-ci-local (`make gitlab-ci-local`).

gitlab-ci-local validates the pipeline against GitLab's JSON schema, then runs its jobs with
its shell executor, as a GitLab shell runner would. It is installed from npm (4.60.0: the
newest that runs on Node.js 20) into the per-user cache, outside the checkout; it needs
Debian's rsync (and nodejs/npm), installed here when missing and running as root.

It needs Node.js 20: its regular-expression module (re2) is compiled at install time and
does not build on Debian 12's Node 18. Where the machine's Node is older, Node 20 comes from
the npm registry too: the package `node-linux-<arch>` is the Node.js release itself, its
binary and the headers a native module compiles against (so nothing is downloaded from
nodejs.org).
"""
import os
import platform
import re
import shutil
import subprocess
import sys

from hpcbench.core import paths
from hpcbench.stack import debian

VERSION = '4.60.0'
APT_PACKAGES = {'rsync': 'rsync', 'node': 'nodejs', 'npm': 'npm'}
NODE_MAJOR = 20
NODE_VERSION = '20.20.2'
NODE_ARCH = {'x86_64': 'x64', 'aarch64': 'arm64'}


class GitlabCiLocalError(RuntimeError):
    pass


def install_dir():
    return paths.cache_dir() / 'gitlab-ci-local'


def executable():
    return install_dir() / 'node_modules' / '.bin' / 'gitlab-ci-local'


def _ensure_commands():
    lacking = sorted({pkg for cmd, pkg in APT_PACKAGES.items() if not shutil.which(cmd)})
    try:
        debian.ensure(lacking)
    except debian.MissingPackages as err:
        raise GitlabCiLocalError(str(err)) from None


def node_major(node='node', env=None):
    """The major version of a Node.js binary; 0 when it does not run."""
    try:
        out = subprocess.run([node, '--version'], capture_output=True, text=True,
                             env=env).stdout
    except OSError:
        return 0
    match = re.match(r'v(\d+)\.', out)
    return int(match.group(1)) if match else 0


def node_environment():
    """The environment gitlab-ci-local is installed and run in: this one when its Node is
    recent enough; else Node NODE_VERSION from npm first on PATH, its headers as npm's
    nodedir."""
    if node_major() >= NODE_MAJOR:
        return dict(os.environ)

    arch = NODE_ARCH.get(platform.machine())
    if arch is None:
        raise GitlabCiLocalError(f'Node.js {NODE_MAJOR} is needed (found '
                                 f'{node_major() or "none"}); npm has no Node for '
                                 f'{platform.machine()}: install one')
    package = f'node-linux-{arch}'
    home = paths.cache_dir() / 'node' / NODE_VERSION
    prefix = home / 'node_modules' / package
    if node_major(str(prefix / 'bin' / 'node')) != NODE_MAJOR:
        print(f'Node.js {node_major() or "none"} here; installing Node.js {NODE_VERSION} from '
              f'npm ({package}) into {home}', flush=True)
        home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--ignore-scripts',
                               '--prefix', str(home), f'{package}@{NODE_VERSION}'])
        if done.returncode != 0 or node_major(str(prefix / 'bin' / 'node')) != NODE_MAJOR:
            raise GitlabCiLocalError(f'npm could not install {package}@{NODE_VERSION}')

    return {**os.environ, 'PATH': f'{prefix / "bin"}:{os.environ.get("PATH", "")}',
            'npm_config_nodedir': str(prefix)}


def installed_version(env=None):
    if not executable().exists():
        return None
    done = subprocess.run([str(executable()), '--version'], capture_output=True, text=True,
                          env=env)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_installed():
    """gitlab-ci-local VERSION in the cache (npm), and what it needs from Debian and npm.
    Returns the program and the environment to run it in."""
    _ensure_commands()
    env = node_environment()
    if installed_version(env) == VERSION:
        return executable(), env

    install_dir().mkdir(parents=True, exist_ok=True)
    print(f'installing gitlab-ci-local {VERSION} from npm into {install_dir()}', flush=True)
    done = subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--prefix',
                           str(install_dir()), f'gitlab-ci-local@{VERSION}'], env=env)
    if done.returncode != 0 or installed_version(env) != VERSION:
        raise GitlabCiLocalError(f'npm could not install gitlab-ci-local {VERSION}')

    return executable(), env


def main(argv=None):
    """Run gitlab-ci-local on the project with `argv` (its options); returns its status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        program, env = ensure_installed()
    except (GitlabCiLocalError, subprocess.CalledProcessError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    # It runs on the repository it is started in.
    return subprocess.run([str(program), *argv], cwd=paths.PROJECT_ROOT, env=env).returncode


if __name__ == '__main__':
    sys.exit(main())
