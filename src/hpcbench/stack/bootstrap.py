"""Set-up of this machine for the suite: Debian packages, MPI prefixes, Intel MPI, Spack
config scopes, the detected topology, then every system's host.yaml
(hpcbench.stack.machine_systems: what each system on this machine builds).

Idempotent: every step checks before it acts, so a second run takes seconds.
"""
import contextlib
import datetime
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from hpcbench.core import child_processes, paths
from hpcbench.machine import host
from hpcbench.stack import blas, debian, machine_systems, mpi_stacks, spack
from hpcbench.stack.machine_systems import BootstrapError, say

# The registry-only path: what runs real benchmarks with no Spack (Debian's HPCC on Debian's
# Open MPI, the IMB-MPI1 of Intel MPI's PyPI wheel, ranks bound with numactl). OpenBLAS is
# named so that it, not the reference BLAS, provides the libblas.so.3 hpcc depends on.
REGISTRY_APT_PACKAGES = ('libopenblas0-pthread', 'openmpi-bin', 'hpcc', 'numactl',
                         # mpicc's libraries: a site's own checks compile with the
                         # environments' wrappers (cc = mpicc) where no Spack is.
                         'libopenmpi-dev')
# What the registry-only path measures, and what it cannot without a Spack (one line each).
REGISTRY_MEASURES = ('HPCC from Debian on Open MPI (HPL, DGEMM, STREAM, PingPong, RandomRing) '
                     'and IMB from Intel MPI\'s PyPI wheel on intelmpi')
NEEDS_SPACK = ('HPL (and its sweep, screening, DGEMM ceiling), STREAM, IOR, MPI start-up, '
               'and HPCC and IMB on the other MPI stacks need a Spack: see docs/setup.md, '
               '"Using an existing Spack or a local source mirror"')
# What the Spack environment and the checks need from Debian.
APT_PACKAGES = (
    'build-essential', 'gfortran', 'git', 'file', 'patch', 'unzip', 'bzip2', 'xz-utils',
    'libopenmpi-dev', 'openmpi-bin', 'libmpich-dev', 'mpich', 'libopenblas-dev',
    'autoconf', 'automake', 'libtool', 'autoconf-archive', 'patchelf', 'pkg-config',
    'numactl', 'hpcc',
    # BLIS, one of the BLAS libraries HPL is compared on (hpcbench.stack.blas).
    'libblis-openmp-dev',
    # likwid-bench: the node's sustained peak and bandwidth ceiling
    # (hpcbench.benchmarks.ceilings).
    'likwid',
)

# Build tools Spack should take from the system rather than build (found by
# `spack external find`): compilers and what the benchmarks' build systems use.
SPACK_DETECTED_TOOLS = (
    'gcc', 'autoconf', 'automake', 'libtool', 'm4', 'perl', 'pkgconf', 'gmake', 'cmake',
    'gawk', 'sed', 'tar', 'gzip', 'bzip2', 'xz', 'findutils', 'diffutils', 'coreutils',
    'gettext', 'texinfo',
)



class Phases:
    """The seconds each phase of a set-up took, in the order they first ran: packages
    (Debian's), wheels (the MPI and BLAS prefixes, from PyPI's wheels), externals (Spack's
    config, the detected tools and MPIs, host.yaml), concretize, install, push (the build
    cache). `hpcbench setup` says them on one line at its end (perf/setup_phases.py reads
    it)."""
    NAMES = ('packages', 'wheels', 'externals', 'concretize', 'install', 'push')

    def __init__(self):
        self.seconds = {}

    @contextlib.contextmanager
    def __call__(self, name):
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    def line(self):
        spent = ', '.join(f'{name} {self.seconds.get(name, 0.0):.1f}' for name in self.NAMES)
        return f'set-up phases (s): {spent}; total {sum(self.seconds.values()):.1f}'


# The phases of this process's set-up.
phase = Phases()


# --- Debian packages -------------------------------------------------------------------------

def missing_apt_packages(packages=APT_PACKAGES):
    return debian.missing(packages)


def ensure_apt_packages(packages=APT_PACKAGES):
    try:
        debian.ensure(packages, say)
    except debian.MissingPackages as err:
        raise BootstrapError(str(err)) from None


# --- MPI and BLAS prefixes ----------------------------------------------------------------------

def _link(path, target):
    if path.is_symlink() and os.readlink(path) == str(target):
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()

    path.symlink_to(target)


def ensure_prefixes(installs, runtime_only=False):
    """Each MPI stack's or BLAS library's prefix (hpcbench.stack.mpi_stacks,
    hpcbench.stack.blas); `runtime_only`: only what runs programs (no headers)."""
    for install in installs:
        install.prepare()
        missing = install.missing(runtime_only)
        if missing:
            raise BootstrapError(f'{install.name}: missing {", ".join(missing)}')

        links = install.runtime_links() if runtime_only else install.links()
        for rel, target in links.items():
            _link(install.prefix / rel, target)


# --- Spack -----------------------------------------------------------------------------------

def spack_config_files(found, mirror, buildcache=None):
    """The isolated user scope: pinned builtin repo, install tree, local source mirror and
    build cache (when they exist), no downloaded bootstrap binaries (clingo comes from the
    venv)."""
    cache = paths.cache_dir()
    files = {
        'repos.yaml': f'repos::\n  builtin: {found.builtin_repo}\n',
        'config.yaml': (
            'config:\n'
            f'  install_tree:\n    root: {paths.install_tree_dir()}\n'
            f'  build_stage:\n  - {cache / "spack-stage"}\n'
            f'  source_cache: {cache / "spack-source-cache"}\n'
            f'  misc_cache: {cache / "spack-misc-cache"}\n'
            # build_jobs is Spack's own: this machine's cores, at most 16. Three builds at
            # once: one's serial autoreconf and configure (10 to 18 s of HPL's and IOR's 20
            # to 55) run beside the others' compiles; a cold install on 2 cores took 367 s
            # with three against 386 with two (one run each, 2026-12-06).
            '  concurrent_packages: 3\n'
        ),
        'bootstrap.yaml': ('bootstrap:\n  trusted:\n    github-actions-v2: false\n'
                           '    github-actions-v0.6: false\n    spack-install: false\n'),
    }
    mirrors = ''
    if mirror.is_dir():
        # Tried first; Spack still falls back to each package's upstream URL.
        mirrors += f'  local:\n    url: {mirror.as_uri()}\n    binary: false\n'
    if buildcache and buildcache.is_dir():
        # What earlier pipelines built: installed instead of building again.
        mirrors += (f'  buildcache:\n    url: {buildcache.as_uri()}\n    source: false\n'
                    '    signed: false\n')
    files['mirrors.yaml'] = f'mirrors::\n{mirrors}' if mirrors else 'mirrors: {}\n'

    return files


def write_spack_config(found):
    env = spack.isolated_environment(found)
    config_dir = Path(env['SPACK_USER_CONFIG_PATH'])
    config_dir.mkdir(parents=True, exist_ok=True)
    Path(env['SPACK_SYSTEM_CONFIG_PATH']).mkdir(parents=True, exist_ok=True)
    mirror, buildcache = paths.mirror_dir(), paths.buildcache_dir()
    for name, text in spack_config_files(found, mirror, buildcache).items():
        target = config_dir / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)

    say(f'Spack {found.root} (packages {found.packages}); source mirror: '
        f'{mirror if mirror.is_dir() else "none (upstream URLs)"}; build cache: '
        f'{buildcache if buildcache.is_dir() else "none"}')
    unavailable = spack.sources_unavailable()
    if unavailable:
        say(f'warning: {unavailable}; only what is installed or external can be used')


def run_spack(found, *args, quiet=False, env=None, stderr=None):
    """Run the isolated Spack (with `env` over its environment; `quiet`: its standard
    output dropped; `stderr`: where its errors go, else here); its own errors show what
    went wrong, ours names the step."""
    env = {**os.environ, **spack.isolated_environment(found), **(env or {})}
    proc = child_processes.run([str(found.executable), *args], env=env,
                               stdout=subprocess.DEVNULL if quiet else None, stderr=stderr)
    if proc.returncode != 0:
        said = [line for line in (proc.stderr or b'').decode(errors='replace').splitlines()
                if line.strip()]
        raise BootstrapError(f'`spack {" ".join(args)}` failed (exit {proc.returncode})'
                             + (f': {said[-1].strip()}' if said else ''))


def spack_external_find(found, *args):
    """What `spack external find <args>` detects, as packages.yaml's `packages` (written to a
    scratch user scope, so that nothing else lands in it). The scratch scope is the user
    scope less its packages.yaml: Spack runs as every other command of the set-up runs it,
    so that the package index it builds on its first run (83 to 93 s on 2 cores) lands in
    the misc cache the concretization reads, not in a second one that has it built again."""
    config_dir = Path(spack.isolated_environment(found)['SPACK_USER_CONFIG_PATH'])
    with tempfile.TemporaryDirectory() as scratch:
        for path in config_dir.glob('*.yaml'):
            if path.name != 'packages.yaml':
                shutil.copy(path, scratch)

        run_spack(found, 'external', 'find', '--scope', 'user', *args, quiet=True,
                  env={'SPACK_USER_CONFIG_PATH': scratch})
        written = Path(scratch) / 'packages.yaml'
        return yaml.safe_load(written.read_text())['packages'] if written.exists() else {}


def detected_tools(found, refresh=False):
    """Externals for compilers and build tools, from `spack external find` (cached)."""
    cached = paths.cache_dir() / 'detected' / f'{socket.gethostname()}-tools.yaml'
    if cached.exists() and not refresh:
        return yaml.safe_load(cached.read_text())

    say('detecting compilers and build tools with spack external find')
    packages = spack_external_find(found, *SPACK_DETECTED_TOOLS)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(yaml.safe_dump(packages, sort_keys=True))
    # Always the cached form: a refresh that finds the same tools writes the same host.yaml
    # (and so does not make the environment re-concretize).
    return yaml.safe_load(cached.read_text())


def detected_mpi_externals(found, stacks):
    """{Spack package: external} of the stacks a site installed: what Spack's detection makes
    of their bin/ (variants from the configure line the MPI records), cached per prefix and
    version."""
    externals = {}
    for stack in (s for s in stacks if s.spack_detects):
        key = hashlib.sha256(f'{stack.prefix}\0{stack.version()}'.encode()).hexdigest()[:16]
        cached = paths.cache_dir() / 'detected' / f'{stack.spack_name}-{key}.yaml'
        if not cached.exists():
            say(f'{stack.name}: detecting {stack.prefix} with spack external find')
            found_there = spack_external_find(found, '--path', str(stack.bin_dir),
                                              stack.spack_name)
            mine = [e for e in found_there.get(stack.spack_name, {}).get('externals', [])
                    if Path(e['prefix']).resolve() == stack.prefix.resolve()]
            if not mine:
                raise BootstrapError(f'{stack.name}: Spack does not recognise {stack.prefix} '
                                     f'as {stack.spack_name}')
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(yaml.safe_dump(mine[0], sort_keys=True))
        externals[stack.spack_name] = yaml.safe_load(cached.read_text())
    return externals


# --- The local environment's host.yaml -------------------------------------------------------


def bootstrap(refresh=False, found=None, system=None):
    """Spack's configuration and every system's host.yaml on this machine. A described
    cluster whose description is broken is skipped, saying why, unless it is `system` (the
    one being set up): one site's broken file stops no other system's set-up."""
    found = found or spack.locate_or_clone()
    with phase('packages'):
        ensure_apt_packages()
    with phase('wheels'):
        stacks = machine_systems.machine_stacks()
        ensure_prefixes(stacks)
        ensure_prefixes(machine_systems.machine_blas())
        # The testbed's nodes are this host: the same GPU programs (the toolkit's wheels
        # installed when it has GPUs). A described cluster's are its GPU partitions' (this
        # login node may have none).
        this_host = machine_systems.gpu_build(host.accelerators())
    with phase('externals'):
        write_spack_config(found)
        tools = detected_tools(found, refresh)
        detected = detected_mpi_externals(found, stacks)
        machine_systems.write_host_yamls(system, tools, detected, this_host)
    return found


def registry_only():
    """Set up the registry-only path, no Spack: Debian's packages and the run-time prefixes
    of the MPI stacks registries ship benchmarks for (Open MPI for Debian's hpcc, Intel
    MPI's wheel for its IMB-MPI1)."""
    ensure_apt_packages(REGISTRY_APT_PACKAGES)
    ensure_prefixes([s for s in mpi_stacks.local_stacks() if s.registry_binaries],
                    runtime_only=True)


def setup(refresh=False, system='local'):
    """What `make run` needs: the Spack path when a Spack is found or can be cloned
    (`system`'s environment installed), else the registry-only path, saying so. Returns the
    Spack or None."""
    cache = paths.cache_dir()
    if paths.free_bytes(cache) < paths.MIN_FREE_BYTES:
        # Not "no Spack found": a clone, a build or the registry path's files all fail there.
        raise BootstrapError(f'{paths.full(cache)}: the per-user cache holds Spack, its '
                             'builds and the source mirror; free some space there or set '
                             'HPCBENCH_CACHE to a directory on a file system with room')
    try:
        found = spack.locate_or_clone()
    except spack.SpackNotFound as err:
        say(f'{err}')
        say(f'continuing on the registry-only path: {REGISTRY_MEASURES}')
        say(f'not run: {NEEDS_SPACK}')
        registry_only()
        return None

    suggest_default_blas()
    found = bootstrap(refresh, found, system)
    install_environment(found, system)
    say(phase.line())
    return found


def suggest_default_blas():
    """Say when another BLAS measured faster than HPL's default, and how to make it the
    default: the stack a run measures never changes by itself (hpcbench.stack.blas)."""
    if os.environ.get('HPCBENCH_BLAS'):
        return
    try:
        choice, uuid = blas.suggested_default()
    except RuntimeError as err:
        say(f"HPL's default BLAS stays {blas.local_libraries()[0].name}: {err}")
        return
    if choice and choice.changed:
        say(f"HPL's default BLAS stays {blas.local_libraries()[0].name} (the stack changes "
            f'only when you change it); the DGEMM ceilings of session {uuid} suggest '
            f'{choice.reason}. To build HPL on it: hpcbench blas --default {choice.order[0]} '
            '(then make run: one concretization; compare reports the change as a stack '
            'change, never as the machine\'s)')


def install_environment(found, system='local'):
    """Concretize spack-envs/<system> (a system on this machine) when its inputs are newer
    than its lock, then install it."""
    if system not in machine_systems.machine_systems():
        raise BootstrapError(f'{system!r} is not a system on this machine: one of '
                             f'{", ".join(machine_systems.machine_systems())}')

    env = paths.SPACK_ENVS_DIR / system
    lock = env / 'spack.lock'
    inputs = concretization_inputs(env)
    if not lock.exists() or max(p.stat().st_mtime for p in inputs) > lock.stat().st_mtime:
        # A lock concretized before from the same inputs (the other system on this machine,
        # an earlier clone) is that concretization: Spack is not asked again.
        cached = paths.locks_dir() / f'{concretization_key(inputs, found)}.lock'
        if cached.exists():
            say(f'spack-envs/{system}: the lock concretized from the same inputs ({cached})')
            shutil.copyfile(cached, lock)
        else:
            say(f'concretizing spack-envs/{system}')
            start = datetime.datetime.now()
            with phase('concretize'):
                concretize(found, env)
            say(f'concretized in {(datetime.datetime.now() - start).total_seconds():.0f} s')
            cached.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lock, cached)

    database = paths.install_tree_dir() / '.spack-db' / 'index.json'
    before = database.stat().st_mtime_ns if database.exists() else None
    with phase('install'):
        try:
            run_spack(found, '-e', str(env), 'install', '--fail-fast')
        except BootstrapError as failed:
            unavailable = spack.sources_unavailable()
            if unavailable:
                raise BootstrapError(f'{failed}; {unavailable}') from None
            raise
    if database.exists() and database.stat().st_mtime_ns != before:
        with phase('push'):
            keep_as_binaries(found, system)


def keep_as_binaries(found, system):
    """What an install built is pushed to the build cache: an emptied install tree, the
    other system on this machine or another checkout installs it from there in seconds
    instead of building it again (OpenBLAS alone: 7 min). A cache that cannot take it (a
    read-only one a site shares) is said and left."""
    try:
        push_buildcache(found, system, quiet=True)
        say(f'kept the builds of spack-envs/{system} as binaries in {paths.buildcache_dir()}')
    except (BootstrapError, OSError) as err:
        say(f'builds not kept as binaries ({paths.buildcache_dir()}): {err}')


def concretize(found, env):
    """Concretize a machine environment with the packages it never builds marked so
    (hpcbench.stack.spack_never_built, in a config scope of this command alone): the solver
    leaves them out of its problem and finds the same solution in a tenth of the time. A
    problem with no solution that way (a build tool this machine lacks must be built) is
    solved again against the whole repository, saying so."""
    with tempfile.TemporaryDirectory(prefix='hpcbench-solver-') as scope:
        try:
            run_spack(found, '-e', str(env), 'python', str(Path(__file__).parent /
                      'spack_never_built.py'), str(Path(scope) / 'packages.yaml'), quiet=True)
            run_spack(found, '-C', scope, '-e', str(env), 'concretize', '--force',
                      stderr=subprocess.PIPE)
            return
        except BootstrapError as err:
            say(f'{err}: the environment needs a package built that it does not name (a '
                'build tool this machine lacks?); concretizing against the whole Spack '
                'repository (slower)')
    run_spack(found, '-e', str(env), 'concretize', '--force')


def concretization_inputs(env):
    """The files a machine environment's concretization depends on: its own, the shared
    part, and our recipes, both repositories (a new or changed one may change what
    concretizes)."""
    return [env / 'spack.yaml', env / 'host.yaml', paths.SPACK_ENVS_DIR / 'this-machine.yaml',
            *sorted(p for repo in (paths.PACKAGES_REPO_DIR, paths.HOST_PACKAGES_REPO_DIR)
                    for p in repo.rglob('*') if p.is_file() and '__pycache__' not in p.parts)]


def _as_spack_reads_it(path):
    """A YAML input parsed (its comments and layout do not change a concretization: a
    changed comment in this-machine.yaml cost 13 minutes of concretizing), other files as
    they are."""
    if path.suffix != '.yaml':
        return path.read_bytes()

    try:
        return json.dumps(yaml.safe_load(path.read_text()), sort_keys=True).encode()
    except yaml.YAMLError as err:
        raise BootstrapError(f'{path} is not valid YAML: {err}') from None


def concretization_key(inputs, found):
    """A digest of what the concretization depends on: the environment as Spack reads it
    (spack.yaml parsed, so comments do not count; local and testbed are the same), the
    other inputs' contents by their path in the project (YAML parsed too), and Spack's and
    spack-packages' files (Spack.content_key: by content, not by commit)."""
    digest = hashlib.sha256()
    manifest, *others = inputs
    digest.update(_as_spack_reads_it(manifest))
    for path in others:
        name = path.name if path.parent == manifest.parent else path.relative_to(paths.PROJECT_ROOT)
        digest.update(str(name).encode() + b'\0' + _as_spack_reads_it(path))
    digest.update(found.content_key().encode())
    return digest.hexdigest()


def push_buildcache(found, system, quiet=False):
    """Push what spack-envs/<system> installed (not the externals) to the build cache
    directory, creating it; later installs on this runner take their builds from it (what
    is there already is left as it is). `quiet`: without Spack's line per build."""
    buildcache = paths.buildcache_dir()
    buildcache.mkdir(parents=True, exist_ok=True)
    write_spack_config(found)
    run_spack(found, '-e', str(paths.SPACK_ENVS_DIR / system), 'buildcache', 'push',
              '--unsigned', '--update-index', str(buildcache), quiet=quiet)
