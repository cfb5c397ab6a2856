"""Where things live.

Three places, on purpose apart:
- the project checkout (committed sources: envs, checks, site configs, references);
- ``var/`` inside the checkout (git-ignored): everything a run produces;
- a per-user cache outside the checkout (``HPCBENCH_CACHE``): third-party code and what is
  built from it (Spack, spack-packages, the install tree, Intel MPI, the source mirror), so it
  survives fresh clones and is never committed.
"""
import os
from pathlib import Path

# The package is installed in editable mode from the checkout (src layout).
PROJECT_ROOT = Path(os.environ.get('HPCBENCH_PROJECT',
                                   Path(__file__).resolve().parents[3]))
# HPCBENCH_VAR: put a run's products elsewhere (tests use a temporary directory).
VAR_DIR = Path(os.environ.get('HPCBENCH_VAR', PROJECT_ROOT / 'var'))
SPACK_ENVS_DIR = PROJECT_ROOT / 'spack-envs'
PACKAGES_REPO_DIR = PROJECT_ROOT / 'packages' / 'spack_repo' / 'hpcbench'
# Recipes only this machine's environments (local, testbed) use: fixes for building where the
# system has its own BLAS and MPIs (Debian's).
HOST_PACKAGES_REPO_DIR = PROJECT_ROOT / 'packages' / 'spack_repo' / 'hpcbench_host'
# HPCBENCH_REFERENCES: another reference directory (tests use it).
REFERENCES_DIR = Path(os.environ.get('HPCBENCH_REFERENCES', PROJECT_ROOT / 'references'))
CHECKS_DIR = PROJECT_ROOT / 'reframe-checks'
SITE_CONFIGS_DIR = PROJECT_ROOT / 'site-configs'
# The seed papers' texts, where a developer's checkout has them beside it (../shared/seeds,
# HPCBENCH_SEEDS): not part of the project. A clone alone checks each paper figure against
# the quote stored with it (references/<system>.yaml).
SEEDS_DIR = Path(os.environ.get('HPCBENCH_SEEDS', PROJECT_ROOT.parent / 'shared' / 'seeds'))


def cache_dir():
    """The per-user cache: ``$HPCBENCH_CACHE``, else ``$XDG_CACHE_HOME/hpcbench``."""
    if os.environ.get('HPCBENCH_CACHE'):
        return Path(os.environ['HPCBENCH_CACHE'])

    xdg = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(xdg) / 'hpcbench'


def mirror_dir():
    """The local Spack source mirror: ``$HPCBENCH_MIRROR``, else ``<cache>/mirror``."""
    if os.environ.get('HPCBENCH_MIRROR'):
        return Path(os.environ['HPCBENCH_MIRROR'])

    return cache_dir() / 'mirror'


def buildcache_dir():
    """The Spack build cache (binary mirror) that installs and the pipeline push to and
    install from: ``$HPCBENCH_BUILDCACHE``, else ``<cache>/buildcache``; used when it exists."""
    if os.environ.get('HPCBENCH_BUILDCACHE'):
        return Path(os.environ['HPCBENCH_BUILDCACHE'])

    return cache_dir() / 'buildcache'


def install_tree_dir():
    """Where the isolated Spack installs (hpcbench.stack.bootstrap.spack_config_files)."""
    return cache_dir() / 'spack-install'


def locks_dir():
    """Locks concretized on this machine, by their concretization key
    (hpcbench.stack.bootstrap.concretization_key)."""
    return cache_dir() / 'locks'


def wheels_dir():
    """Wheels an offline bundle brought (hpcbench.stack.bundle): pip installs from them alone
    when the directory exists."""
    return cache_dir() / 'wheels'


TOPOLOGY_DIR = VAR_DIR / 'topology'


def topology_file(system, partition):
    """Where ReFrame keeps a partition's detected processor (general/topology_prefix)."""
    return TOPOLOGY_DIR / f'{system}-{partition}' / 'processor.json'


def io_directory():
    """Where the local system's I/O benchmarks write: $HPCBENCH_IO_DIR (never created: a
    mistyped path must not become a directory; IOR's setup refuses one that does not
    exist), else var/io (created)."""
    if os.environ.get('HPCBENCH_IO_DIR'):
        return Path(os.environ['HPCBENCH_IO_DIR'])

    directory = VAR_DIR / 'io'
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def locations_dir():
    """Where the build fixtures remember the install prefixes Spack named, per lock
    (hpcbench.rfm.build.BenchmarkBuild): ``var/spack-locations``."""
    return VAR_DIR / 'spack-locations'


# Below this, a file system is full for the suite: the room a run needs besides its
# benchmarks' I/O (which IOR checks itself: stage directories, job outputs, perflogs, a run
# report, the database's new rows; a quick run here writes about 30 MiB), and the least a
# set-up needs to write anything at all into the per-user cache.
MIN_FREE_BYTES = 64 << 20


def free_bytes(path):
    """Bytes an unprivileged writer may still use on the file system of `path` (or of its
    nearest existing parent)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def mount_point(path):
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def full(path):
    """`path`'s file system and its free space, in words: what a message about a full disk
    names."""
    return (f'the file system of {path} is full (mounted at {mount_point(path)}, '
            f'{free_bytes(path) >> 20} MiB free)')
