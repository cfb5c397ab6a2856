"""Where things live.

Three places, on purpose apart:
- the project checkout (committed sources: envs, checks, site configs, references);
- ``var/`` inside the checkout (git-ignored): everything a run produces;
- a per-user cache outside the checkout (``HPCBENCH_CACHE``): third-party code and what is
  built from it (Spack, spack-packages, the install tree, Intel MPI, the source mirror), so it
  survives fresh clones and is never committed.
"""
import contextlib
import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path


# The path variables given relative ({name: as given}). ReFrame imports each site config
# and check from the file's own directory: read there, a relative path is not where the
# command started (hpcbench.rfm.site_config refuses one; make and hpcbench make theirs
# absolute before ReFrame starts). A relative HPCBENCH_VAR had a run write its lock and
# topology into site-configs/var/, and they were committed.
GIVEN_RELATIVE = {}
# The working directory relative paths were taken from.
try:
    TAKEN_FROM = os.getcwd()
except FileNotFoundError:
    TAKEN_FROM = ''


def from_environment(name, default=None):
    """The path the environment variable `name` names, absolute, else `default`. A relative
    one is taken from the working directory and written back as such, so that what this
    command starts (ReFrame, its jobs, which run in their stage directories) reads the same
    place; it is noted in GIVEN_RELATIVE."""
    given = os.environ.get(name)
    if not given:
        return None if default is None else Path(default)
    if not os.path.isabs(given):
        GIVEN_RELATIVE[name] = given
    absolute = os.path.abspath(given)
    os.environ[name] = absolute
    return Path(absolute)


# The variables that name a place, made absolute where this module is first imported.
PATH_VARIABLES = ('HPCBENCH_PROJECT', 'HPCBENCH_VAR', 'HPCBENCH_REFERENCES', 'HPCBENCH_SEEDS',
                  'HPCBENCH_CACHE', 'HPCBENCH_MIRROR', 'HPCBENCH_BUILDCACHE',
                  'HPCBENCH_TESTBED_DIR', 'HPCBENCH_IO_DIR', 'HPCBENCH_SPACK_PACKAGES',
                  'SPACK_ROOT', 'XDG_CACHE_HOME')
for _name in PATH_VARIABLES:
    from_environment(_name)

# The package is installed in editable mode from the checkout (src layout).
CHECKOUT_ROOT = Path(__file__).resolve().parents[3]
PROJECT_ROOT = from_environment('HPCBENCH_PROJECT', CHECKOUT_ROOT)
# HPCBENCH_VAR: put a run's products elsewhere (tests use a temporary directory).
VAR_DIR = from_environment('HPCBENCH_VAR', PROJECT_ROOT / 'var')
SPACK_ENVS_DIR = PROJECT_ROOT / 'spack-envs'
PACKAGES_REPO_DIR = PROJECT_ROOT / 'packages' / 'spack_repo' / 'hpcbench'
# Recipes only this machine's environments (local, testbed) use: fixes for building where the
# system has its own BLAS and MPIs (Debian's).
HOST_PACKAGES_REPO_DIR = PROJECT_ROOT / 'packages' / 'spack_repo' / 'hpcbench_host'
# HPCBENCH_REFERENCES: another reference directory (tests use it).
REFERENCES_DIR = from_environment('HPCBENCH_REFERENCES', PROJECT_ROOT / 'references')
# Accelerators' cited datasheets: data the code ships with, read from its own checkout
# (hpcbench.machine.datasheets; a site's own beside its description).
DATASHEETS_FILE = CHECKOUT_ROOT / 'references' / 'datasheets' / 'accelerators.yaml'
CHECKS_DIR = PROJECT_ROOT / 'reframe-checks'
SITE_CONFIGS_DIR = PROJECT_ROOT / 'site-configs'
# Acceptance contracts, one per system (hpcbench.acceptance.contract).
CONTRACTS_DIR = PROJECT_ROOT / 'contracts'
# The seed papers' texts, where a developer's checkout has them beside it (../shared/seeds,
# HPCBENCH_SEEDS): not part of the project. A clone alone checks each paper figure against
# the quote stored with it (references/<system>.yaml).
SEEDS_DIR = from_environment('HPCBENCH_SEEDS', PROJECT_ROOT.parent / 'shared' / 'seeds')


# What a path that reaches a shell may not hold (a job script's exported variables, Spack's
# and make's command lines): anything but letters, digits and _ . / - + @ : ~ =, the
# Makefile's rule for HPCBENCH_VAR. ReFrame runs the command of a `$(...)` or backquotes in
# an environment's variables when it loads it, and writes them unquoted into job scripts.
# The characters of such a path, as a regular expression's character class ('-' first: a
# literal, whatever is added after it).
PLAIN_IN_PATH = r'-A-Za-z0-9_./+@:~='
UNSAFE_IN_PATH = re.compile(rf'[^{PLAIN_IN_PATH}]')


class UnsafePathError(RuntimeError):
    pass


def plain(path, what):
    """`path` (a Path), refused (UnsafePathError naming `what`) when it holds anything
    UNSAFE_IN_PATH refuses."""
    if UNSAFE_IN_PATH.search(str(path)):
        raise UnsafePathError(
            f'{what} {str(path)!r}: a path that reaches job scripts, Spack and make has '
            'letters, digits and _ . / - + @ : ~ = only (no spaces, quotes or shell syntax); '
            'give another one')
    return path


def cache_dir():
    """The per-user cache: ``$HPCBENCH_CACHE``, else ``$XDG_CACHE_HOME/hpcbench``."""
    if os.environ.get('HPCBENCH_CACHE'):
        return plain(from_environment('HPCBENCH_CACHE'), 'HPCBENCH_CACHE')

    xdg = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return plain(Path(xdg) / 'hpcbench', 'the per-user cache (set HPCBENCH_CACHE)')


def mirror_dir():
    """The local Spack source mirror: ``$HPCBENCH_MIRROR``, else ``<cache>/mirror``."""
    if os.environ.get('HPCBENCH_MIRROR'):
        return plain(from_environment('HPCBENCH_MIRROR'), 'HPCBENCH_MIRROR')

    return cache_dir() / 'mirror'


def buildcache_dir():
    """The Spack build cache (binary mirror) that installs and the pipeline push to and
    install from: ``$HPCBENCH_BUILDCACHE``, else ``<cache>/buildcache``; used when it exists."""
    if os.environ.get('HPCBENCH_BUILDCACHE'):
        return plain(from_environment('HPCBENCH_BUILDCACHE'), 'HPCBENCH_BUILDCACHE')

    return cache_dir() / 'buildcache'


# The file that makes a directory the suite's results directory: a run writes into, and
# `make clean` removes scratch from, only a directory that is new, empty, the checkout's own
# var/ or holds it. A directory of other files given as HPCBENCH_VAR (/, /etc, a project's)
# is refused: its own stage/ or ci/ are not the suite's to fill or delete.
VAR_MARKER = '.hpcbench-results'


class VarNotOursError(RuntimeError):
    pass


def claim_var_dir(var_dir=None):
    """Make `var_dir` (VAR_DIR) the suite's results directory, or refuse it
    (VarNotOursError, one message): it is created where there is none and marked
    (VAR_MARKER) where it is empty or the checkout's var/; a directory of other files with no
    marker is not the suite's. OSError where it cannot be written."""
    var_dir = Path(var_dir or VAR_DIR)
    marker = var_dir / VAR_MARKER
    if os.path.isfile(marker) and not os.path.islink(marker):
        return var_dir
    try:
        entries = os.listdir(var_dir)
    except FileNotFoundError:
        entries = []
    except NotADirectoryError:
        raise VarNotOursError(f'the results directory {var_dir} is a file: give the run a '
                              'directory with HPCBENCH_VAR=<directory>') from None
    if entries and os.path.realpath(var_dir) != os.path.realpath(PROJECT_ROOT / 'var'):
        raise VarNotOursError(
            f'the results directory {var_dir} holds other files ({", ".join(sorted(entries)[:5])}'
            f'{", ..." if len(entries) > 5 else ""}) and is not the suite\'s (no {VAR_MARKER} '
            'in it): give the run a new or empty directory with HPCBENCH_VAR=<directory> (one '
            f'an earlier version of the suite wrote: touch {marker})')
    os.makedirs(var_dir, exist_ok=True)
    try:
        with open(marker, 'x') as fp:
            fp.write('The results directory of hpcbench: ReFrame\'s results database, '
                     'perflogs, run reports, and the stage and output of its runs.\n')
    except FileExistsError:
        # Another command claimed it at the same moment: its marker is as good.
        if not os.path.isfile(marker) or os.path.islink(marker):
            raise VarNotOursError(f'{marker} is not a file: the results directory {var_dir} '
                                  'is not the suite\'s; give the run another one with '
                                  'HPCBENCH_VAR=<directory>') from None
    return var_dir


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
    found = os.statvfs(path)
    return found.f_bavail * found.f_frsize


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


def shown(path):
    """`path` as a message names it: relative to the project where it is inside it
    (site-configs/chic.yaml), else whole."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT.resolve()))
    except ValueError:
        return str(path)


class UnreadableFileError(ValueError):
    pass


def read_regular(path, max_bytes, what='a file'):
    """The bytes of `path`, a regular file (a link to one is followed) of at most `max_bytes`;
    UnreadableFileError in one line naming it otherwise: a FIFO or a device (opened without
    blocking, never read), a directory, a file too large to be `what`. OSError where it
    cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise UnreadableFileError(f'{path}: not a regular file, so not {what}')
        if found.st_size > max_bytes:
            raise UnreadableFileError(f'{path}: {found.st_size} bytes, more than {what} holds '
                                      f'({max_bytes} at most)')
        with os.fdopen(os.dup(fd), 'rb') as fp:
            data = fp.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise UnreadableFileError(f'{path}: more than {max_bytes} bytes: more than {what} '
                                      'holds')
        return data
    finally:
        os.close(fd)


def write_atomically(path, data):
    """Write `data` (text or bytes) to `path` whole or not at all: into a file beside it,
    renamed over it, so that a reader, a kill or a full disk never leaves half of one; the
    file beside it is removed where writing fails (OSError, naming `path`)."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.part', dir=path.parent)
    try:
        with os.fdopen(fd, 'wb') as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise OSError(err.errno, err.strerror, str(path)) from None


def file_sha256(path):
    """The sha256 of a file's bytes, hex, read a megabyte at a time (a bundle's archive is
    gigabytes)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()
