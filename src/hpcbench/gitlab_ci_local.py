"""Run the project's .gitlab-ci.yml on this machine with gitlab-ci-local (`make gitlab-ci-local`).

gitlab-ci-local validates the pipeline against GitLab's JSON schema, then runs its jobs with
its shell executor, as a GitLab shell runner would. It is installed from npm (4.60.0: the
newest that runs on Node.js 20) into the per-user cache, outside the checkout; it needs
Debian's rsync (and nodejs/npm), installed here when missing and running as root.
"""
import shutil
import subprocess
import sys

from hpcbench import debian, paths

VERSION = '4.60.0'
APT_PACKAGES = {'rsync': 'rsync', 'node': 'nodejs', 'npm': 'npm'}


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


def installed_version():
    if not executable().exists():
        return None
    done = subprocess.run([str(executable()), '--version'], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_installed():
    """gitlab-ci-local VERSION in the cache (npm), and what it needs from Debian."""
    _ensure_commands()
    if installed_version() == VERSION:
        return executable()

    install_dir().mkdir(parents=True, exist_ok=True)
    print(f'installing gitlab-ci-local {VERSION} from npm into {install_dir()}', flush=True)
    done = subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--prefix',
                           str(install_dir()), f'gitlab-ci-local@{VERSION}'])
    if done.returncode != 0 or installed_version() != VERSION:
        raise GitlabCiLocalError(f'npm could not install gitlab-ci-local {VERSION}')

    return executable()


def main(argv=None):
    """Run gitlab-ci-local on the project with `argv` (its options); returns its status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        program = ensure_installed()
    except (GitlabCiLocalError, subprocess.CalledProcessError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    # It runs on the repository it is started in.
    return subprocess.run([str(program), *argv], cwd=paths.PROJECT_ROOT).returncode


if __name__ == '__main__':
    sys.exit(main())
