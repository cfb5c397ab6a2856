"""Finding the pinned Spack and running it isolated from the user's and the system's config.

Standard library only: ``make run`` calls ``python3 -m hpcbench.stack.spack locate`` before any
venv exists, so that a machine without Spack fails fast with one message.
"""
import functools
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import child_processes, paths

# The pinned release: Spack v1.1.0 and the builtin packages released with it.
SPACK_RELEASE = 'v1.1.0'
SPACK_COMMIT = '2e907202bcc8209a6a62243aab50c179b524cc3b'
SPACK_URL = os.environ.get('HPCBENCH_SPACK_URL', 'https://github.com/spack/spack.git')
PACKAGES_RELEASE = 'v2025.11.0'
PACKAGES_COMMIT = '119680aeee8ea802c6111b7167583bddef97e82f'
PACKAGES_URL = os.environ.get('HPCBENCH_SPACK_PACKAGES_URL',
                              'https://github.com/spack/spack-packages.git')


class SpackNotFound(Exception):
    pass


@dataclass(frozen=True)
class Spack:
    root: Path          # a Spack checkout (has bin/spack)
    packages: Path      # a spack-packages checkout (has repos/spack_repo/builtin)

    @property
    def executable(self):
        return self.root / 'bin' / 'spack'

    @property
    def builtin_repo(self):
        return self.packages / 'repos' / 'spack_repo' / 'builtin'

    def content_key(self):
        """A digest of what of Spack and spack-packages decides a concretization, by
        content: Spack's library (its version, the concretizer and its rules), its default
        configuration, and every file of the builtin repository. Two copies with the same
        files share it, whether git checkouts or not (a copy that is not one has no commit
        to tell it from another); a change to any of those files changes it."""
        return _content_key(self.root, self.packages)

    def commits(self):
        """The commits of the Spack and spack-packages copies: the one a copy from an
        offline bundle recorded (COMMIT_FILE), else its own git's, else ''."""
        return tuple(_commit(repo) for repo in (self.root, self.packages))


# Where a copy of a checkout that has no .git (one unpacked from an offline bundle,
# hpcbench.stack.bundle) keeps the commit it was copied from.
COMMIT_FILE = '.hpcbench-commit'


def _commit(repo):
    recorded = Path(repo) / COMMIT_FILE
    if recorded.is_file():
        return recorded.read_text().strip()
    # Only the copy's own .git: git would otherwise answer with the commit of a checkout
    # the copy happens to sit in.
    if not (Path(repo) / '.git').exists():
        return ''
    return subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True,
                          text=True).stdout.strip()


# Spack's own tests and caches do not decide a concretization.
_NOT_INPUTS = {'__pycache__', 'test'}


@functools.lru_cache(maxsize=None)
def _content_key(root, packages):
    digest = hashlib.sha256()
    builtin = packages / 'repos' / 'spack_repo' / 'builtin'
    for base in (root / 'lib' / 'spack' / 'spack', root / 'etc' / 'spack' / 'defaults', builtin):
        files = sorted(p for p in base.rglob('*') if p.is_file()
                       and not _NOT_INPUTS.intersection(p.relative_to(base).parts))
        for path in files:
            digest.update(str(path.relative_to(base.parent)).encode() + b'\0' + path.read_bytes())
    return digest.hexdigest()


def _is_spack(root):
    return root is not None and (Path(root) / 'bin' / 'spack').is_file()


def _is_packages(root):
    return root is not None and (
        Path(root) / 'repos' / 'spack_repo' / 'builtin' / 'repo.yaml').is_file()


def _candidates():
    """Where Spack and spack-packages are looked for, in order, with a label for messages."""
    cache = paths.cache_dir()
    spack = []
    if os.environ.get('SPACK_ROOT'):
        spack.append(('$SPACK_ROOT', paths.from_environment('SPACK_ROOT')))

    spack.append(('the per-user cache', cache / 'spack'))
    packages = []
    if os.environ.get('HPCBENCH_SPACK_PACKAGES'):
        packages.append(('$HPCBENCH_SPACK_PACKAGES',
                         paths.from_environment('HPCBENCH_SPACK_PACKAGES')))

    packages.append(('the per-user cache', cache / 'spack-packages'))
    return spack, packages


def disabled():
    """HPCBENCH_NO_SPACK=1 runs the registry-only path even where a Spack exists."""
    return os.environ.get('HPCBENCH_NO_SPACK', '') not in ('', '0')


# Where Spack fetches a source no local mirror holds: Spack's own mirror first.
UPSTREAM_HOST = 'mirror.spack.io'
_PROXIES = ('https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY')


def sources_unavailable(resolve_within=5.0):
    """Why Spack could fetch no benchmark source here, or None when it could: a local
    source mirror (HPCBENCH_MIRROR or the cache's), a proxy, or the upstream's name resolves
    (within `resolve_within` seconds: an offline resolver may never answer). A Spack with
    neither fails on its first fetch, after everything external has been set up."""
    mirror = paths.mirror_dir()
    if mirror.is_dir() or any(os.environ.get(name) for name in _PROXIES):
        return None

    answer = []

    def resolve():
        try:
            answer.append(bool(socket.getaddrinfo(UPSTREAM_HOST, 443)))
        except (OSError, UnicodeError):
            answer.append(False)

    worker = threading.Thread(target=resolve, daemon=True)
    worker.start()
    worker.join(resolve_within)
    if answer and answer[0]:
        return None

    return (f'no source mirror ({mirror}) and {UPSTREAM_HOST} cannot be reached from here: '
            'see docs/setup.md, "Using an existing Spack or a local source mirror"')


def find():
    """The Spack to use, or None. Never downloads anything."""
    if disabled():
        return None

    spack, packages = _candidates()
    root = next((p for _, p in spack if _is_spack(p)), None)
    repo = next((p for _, p in packages if _is_packages(p)), None)
    if root and repo:
        return Spack(root, repo)

    return None


def _clone(url, tag, commit, dest):
    """Clone a pinned tag into dest atomically: a temporary dir renamed at the end."""
    created = not dest.parent.exists()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f'.{dest.name}-', dir=dest.parent))
    try:
        child_processes.run(['git', 'clone', '--quiet', '--depth', '1', '--branch', tag,
                             url, str(tmp)], check=True, capture_output=True, text=True,
                            timeout=600, env={**os.environ, 'GIT_TERMINAL_PROMPT': '0'})
        head = subprocess.run(['git', '-C', str(tmp), 'rev-parse', 'HEAD'], check=True,
                              capture_output=True, text=True).stdout.strip()
        if head != commit:
            raise SpackNotFound(f'{url} tag {tag} is at {head}, expected {commit}')

        tmp.rename(dest)
    except (subprocess.SubprocessError, OSError) as err:
        lines = (getattr(err, 'stderr', '') or str(err)).strip().splitlines() or ['']
        detail = next((ln for ln in lines if ln.startswith('fatal:')), lines[0])
        raise SpackNotFound(f'cloning {url} ({tag}) failed ({detail})') from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not any(dest.parent.iterdir()):
            dest.parent.rmdir()


def not_found_message(reason=''):
    spack, packages = _candidates()
    looked = ', '.join(f'{label} ({p})' for label, p in spack + packages)
    return (
        f'No Spack found{": " + reason if reason else ""}. Looked at {looked}. '
        f'Fix: export SPACK_ROOT=<a Spack {SPACK_RELEASE} checkout> and '
        f'HPCBENCH_SPACK_PACKAGES=<a spack-packages {PACKAGES_RELEASE} checkout> '
        f'(or put them at {paths.cache_dir()}/spack and {paths.cache_dir()}/spack-packages), '
        f'then run make again.'
    )


def locate_or_clone():
    """The Spack to use; clones the pinned release into the per-user cache if none is found.

    Raises SpackNotFound with the one message to show when nothing is possible; a failed
    clone leaves nothing behind.
    """
    if disabled():
        raise SpackNotFound('HPCBENCH_NO_SPACK is set: Spack is not used')

    found = find()
    if found:
        return found

    cache = paths.cache_dir()
    spack, packages = _candidates()
    try:
        if not any(_is_spack(p) for _, p in spack):
            _clone(SPACK_URL, SPACK_RELEASE, SPACK_COMMIT, cache / 'spack')

        if not any(_is_packages(p) for _, p in packages):
            _clone(PACKAGES_URL, PACKAGES_RELEASE, PACKAGES_COMMIT, cache / 'spack-packages')
    except SpackNotFound as err:
        raise SpackNotFound(not_found_message(str(err))) from None

    return find()


def isolated_environment(spack, python=None):
    """Environment variables that run this Spack with the project's own config scopes only.

    ``~/.spack`` and ``/etc/spack`` are replaced by directories in the per-user cache;
    SPACK_DISABLE_LOCAL_CONFIG is not used because it also drops the user scope, which holds
    the pinned builtin repo (without it Spack tries to git-clone spack-packages).
    """
    cache = paths.cache_dir()
    return {
        'SPACK_ROOT': str(spack.root),
        'SPACK_PYTHON': python or sys.executable,
        'SPACK_USER_CONFIG_PATH': str(cache / 'spack-config'),
        'SPACK_SYSTEM_CONFIG_PATH': str(cache / 'spack-system-config'),
        'SPACK_USER_CACHE_PATH': str(cache / 'spack-user-cache'),
    }


# Where an environment's builds are, as `spack location -i` named them: a Spack start per
# build fixture (about 2.4 s each, 35 of them in make run: 84 s of a warm run) is then paid
# once per lock, not once per run. Keyed by the lock's content: a new lock is a new
# concretization, and a prefix that is gone (an emptied install tree) is asked again.
def _locations_file(env_dir):
    lock = Path(env_dir) / 'spack.lock'
    if not lock.is_file():
        return None

    return paths.locations_dir() / f'{hashlib.sha256(lock.read_bytes()).hexdigest()}.json'


def _read_locations(path):
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}

    return known if isinstance(known, dict) else {}


# What a whole install holds: Spack writes its spec into the prefix when the install starts
# and the manifest of its files when it has finished (its post-install hook; an install
# from the build cache brings the manifest with it). A prefix with the spec alone is an
# install that stopped half-way.
INSTALLED_MARKS = ('spec.json', 'install_manifest.json')


def remembered_prefix(env_dir, spec):
    """The install prefix of `spec` in the environment at `env_dir` that Spack named for its
    current lock, if it is still installed there, whole (INSTALLED_MARKS); else None."""
    path = _locations_file(env_dir)
    prefix = _read_locations(path).get(spec) if path else None
    if isinstance(prefix, str) and all((Path(prefix) / '.spack' / mark).is_file()
                                       for mark in INSTALLED_MARKS):
        return prefix

    return None


def remember_prefix(env_dir, spec, prefix):
    """Record the prefix Spack named for `spec` under the environment's current lock (a
    file replaced whole, so that a reader never sees half of one; a store that cannot be
    written is left: Spack is asked again)."""
    path = _locations_file(env_dir)
    if not path:
        return

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        known = {**_read_locations(path), spec: prefix}
        paths.write_atomically(path, json.dumps(known, indent=1, sort_keys=True))
    except OSError:
        pass


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ['locate']:
        try:
            found = locate_or_clone()
        except SpackNotFound as err:
            print(f'error: {err}', file=sys.stderr)
            return 1

        print(found.root)
        return 0

    if argv == ['find']:
        found = find()
        print(found.root if found else '')
        return 0 if found else 1

    print('usage: python -m hpcbench.stack.spack {locate|find}', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
