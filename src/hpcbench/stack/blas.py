"""The BLAS libraries of this machine, side by side: Debian's OpenBLAS and BLIS, Intel MKL
from PyPI, and a newer OpenBLAS Spack builds from source. One description serves the
bootstrap (prefixes, Spack externals, host.yaml) and the local site config (a ReFrame
environment per BLAS for the checks that depend on one: HPL, HPCC and the DGEMM ceiling).

The default BLAS (the one every MPI stack's HPL and HPCC are built with) is the one the
machine's order names first: the order measured when this was written (BY_SPEED), until
the user chooses another. A benchmark environment measures the same stack until the user
changes it: `hpcbench setup` ranks the libraries by the DGEMM ceilings of the newest session
that measured them (choose_default) and, when another is ahead, only suggests it; `hpcbench
blas --default NAME` makes the change, recorded with the old order in the per-user cache
(the history every later session's provenance names). The others run on one MPI stack only
(the first the machine has), as a BLAS does not change how an MPI moves data.
"""
import datetime
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import paths
from hpcbench.stack import debian, wheels

# Intel MKL's PyPI wheels, pinned to the newest version spack-packages v2025.11.0's
# intel-oneapi-mkl knows (2025.3.0).
MKL_VERSION = '2025.3.0'
# The OpenBLAS Spack builds: the newest release whose GitHub archive `git archive` reproduces
# byte for byte (Spack's checksum of 0.3.28 matches), so a local mirror can hold it.
SPACK_OPENBLAS_VERSION = '0.3.28'
SPACK_OPENBLAS_SHA256 = 'f1003466ad074e9b0c8d421a204121100b0751c96fc6fcf3d1456bd12f8a00a1'

# Fastest first, measured on this machine when the VM presented an Intel Xeon (2 cores,
# AVX-512), dgemm-rate N=4000, best of 5, three rounds: MKL 161, 138, 146 GFLOP/s; Debian's
# OpenBLAS 0.3.21 (its Cooper Lake kernels) 127, 122, 118; BLIS 0.9.0 74 and 107 (its
# Haswell kernels: it cannot count this CPU's FMA units, `BLIS_ARCH_DEBUG=1` says so).
# Through the suite (DgemmCeiling, best of 2, one session): MKL 147.8 and 140.6, OpenBLAS
# 0.3.28 134.6, OpenBLAS 0.3.21 132.1, BLIS 69.2; HPL (N=11136, one rank of 2 threads) 106.0
# and 108.3, 94.6, 92.0, 46.3 GFLOP/s. With a statistic (tests/fixtures/reframe/
# blas-hpl-n20000-session.json, `hpcbench compare-stacks`): DGEMM medians of 5 calls MKL
# 173.3, OpenBLAS 0.3.21 129.9, 0.3.28 126.9, BLIS 62.8; MKL ahead of both OpenBLAS at
# p = 0.004, the two OpenBLAS not told apart (0.3.28 stays second: it knows this CPU).
# The order until the user chooses another (set_default, which a measurement only suggests:
# choose_default): the same VM presenting an AMD EPYC later gave OpenBLAS 0.3.21 and 0.3.28
# 108.2 and 107.6, BLIS 103.8, MKL 99.4.
BY_SPEED = ('mkl', 'openblas-spack', 'openblas', 'blis')


@dataclass
class BlasLibrary:
    name: str                 # ReFrame environment suffix: <stack>-<name>
    # The Spack constraint that picks its builds (`hpl ^<spack_spec>`); it tells the two
    # OpenBLAS apart by their threading, as Debian's version is Debian's to change.
    spack_spec: str
    prefix: Path = None       # the external's prefix; None: Spack builds it

    @property
    def package(self):
        """The Spack package providing it."""
        return self.spack_spec.split()[0].split('@')[0]

    def version(self):
        raise NotImplementedError

    def prepare(self):
        """Install what the prefix links to, when the library brings its own files."""

    def links(self):
        """{path inside the prefix: target} making up the prefix."""
        return {}

    def runtime_links(self):
        return self.links()

    def missing(self, runtime_only=False):
        return [str(t) for t in self.links().values() if not Path(t).exists()]

    def spack_external(self):
        """The packages.yaml entry of this library, or None when Spack builds it."""
        return None

    def available(self):
        """Whether the machine can have it (a build Spack can fetch the source of)."""
        return True


class DebianOpenblas(BlasLibrary):
    """Debian's OpenBLAS (pthreads). Its libraries resolve from prefix /usr."""

    def version(self):
        return debian.upstream_version_of('libopenblas-dev')

    def spack_external(self):
        return {'spec': f'openblas@{self.version()} threads=pthreads ~ilp64',
                'prefix': '/usr'}


class DebianBlis(BlasLibrary):
    """Debian's BLIS, OpenMP build, in a prefix of links (from /usr Spack's blis would find
    every libblis.so below it)."""

    def version(self):
        return debian.upstream_version_of('libblis-openmp-dev')

    def links(self):
        arch = debian.multiarch()
        return {'lib': f'/usr/lib/{arch}/blis-openmp',
                'include': f'/usr/include/{arch}/blis-openmp'}

    def spack_external(self):
        return {'spec': f'blis@{self.version()} threads=openmp', 'prefix': str(self.prefix)}


class PypiMkl(BlasLibrary):
    """Intel MKL from PyPI, laid out as Spack's intel-oneapi-mkl expects of an install:
    <prefix>/mkl/<X.Y>/{lib,include}, lib/ holding the unversioned names a link needs (the
    wheels ship only libmkl_*.so.2)."""

    @property
    def wheel_prefix(self):
        return self.prefix / 'pip'

    @property
    def component(self):
        return self.prefix / 'mkl' / '.'.join(MKL_VERSION.split('.')[:2])

    def version(self):
        return MKL_VERSION

    # What pip installs (hpcbench.stack.bundle downloads the same).
    wheel_options = ('--no-deps',)

    def wheel_requirements(self):
        return [f'{wheel}=={MKL_VERSION}' for wheel in ('mkl', 'mkl-devel', 'mkl-include')]

    def prepare(self):
        """pip-install the wheels into <prefix>/pip (atomically)."""
        if not (self.wheel_prefix / 'lib' / 'libmkl_core.so.2').exists():
            wheels.install_wheels(f'Intel MKL {MKL_VERSION}', self.wheel_prefix,
                                      self.wheel_requirements(), *self.wheel_options)

    def links(self):
        component = self.component.relative_to(self.prefix)
        links = {f'{component}/include': self.wheel_prefix / 'include'}
        lib = self.wheel_prefix / 'lib'
        if lib.is_dir():
            for item in lib.glob('libmkl_*.so.*'):
                links[f'{component}/lib/{item.name}'] = item
                links[f'{component}/lib/{item.name.split(".so.")[0]}.so'] = item
        else:
            links[f'{component}/lib/libmkl_core.so'] = lib / 'libmkl_core.so.2'
        return links

    def spack_external(self):
        # OpenMP threads (the GNU ones: HPL's ranks take their threads from OMP_NUM_THREADS);
        # the recipe requires a compiler for them, which an external must then name.
        return {'spec': f'intel-oneapi-mkl@{MKL_VERSION}+shared~ilp64~cluster~gfortran'
                        '~envmods threads=openmp %gcc',
                'prefix': str(self.prefix)}


class SpackOpenblas(BlasLibrary):
    """A newer OpenBLAS than Debian's, built by Spack (OpenMP threads) from the local source
    mirror, or from upstream where there is none."""

    def version(self):
        return SPACK_OPENBLAS_VERSION

    def available(self):
        # A local mirror without its source (an older cache) would fail the whole install
        # on a machine without the internet; online, Spack fetches it from upstream.
        mirror = paths.mirror_dir()
        return (not mirror.is_dir() or
                (mirror / '_source-cache' / 'archive' / SPACK_OPENBLAS_SHA256[:2]
                 / f'{SPACK_OPENBLAS_SHA256}.tar.gz').is_file())


def debian_openblas():
    return DebianOpenblas('openblas', 'openblas threads=pthreads', Path('/usr'))


def local_libraries():
    """Every BLAS this machine can have, the default first: in the order the user chose
    (recorded_order), else BY_SPEED. `HPCBENCH_BLAS` (a comma-separated list of names) keeps
    only those, in its order; the first is then the default."""
    cache = paths.cache_dir()
    libraries = {
        'mkl': PypiMkl('mkl', 'intel-oneapi-mkl', cache / 'mkl' / MKL_VERSION),
        # Built for the kernels of the machine's target alone (hpcbench_host's recipe;
        # dynamic dispatch would build every x86 kernel set, many times longer), without
        # LAPACK, which no benchmark calls (it took 4.5 of a 6.6-min build), and without
        # the complex routines (~complex), which none calls either.
        'openblas-spack': SpackOpenblas(
            'openblas-spack', f'openblas@{SPACK_OPENBLAS_VERSION} threads=openmp '
                              '~dynamic_dispatch ~lapack ~complex'),
        'openblas': debian_openblas(),
        'blis': DebianBlis('blis', 'blis', cache / 'blas' / 'blis'),
    }
    chosen = os.environ.get('HPCBENCH_BLAS')
    names = recorded_order()
    if chosen:
        names = [n.strip() for n in chosen.split(',') if n.strip()]
        unknown = [n for n in names if n not in libraries]
        if unknown or not names:
            print(f'error: HPCBENCH_BLAS={chosen!r}: the BLAS libraries are '
                  f'{", ".join(BY_SPEED)}', file=sys.stderr)
            sys.exit(1)
    return [libraries[n] for n in names if libraries[n].available()]


# --- the default, chosen by measurement ------------------------------------------------------

def order_path():
    """Where the measured order is kept: a property of the machine, in its per-user cache,
    so that every checkout on it builds the same environment (and reuses its lock)."""
    return paths.cache_dir() / 'blas' / 'order.json'


def _recorded():
    """The recorded choice ({'order', 'reason', 'time', 'history'}), {} without one; a
    damaged record is said and ignored."""
    path = order_path()
    try:
        recorded = json.loads(path.read_text())
        if not isinstance(recorded['order'], list):
            raise TypeError('its order is no list')
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f'warning: {path} is not a BLAS order ({err}): using the order measured when '
              f'hpcbench.stack.blas was written', file=sys.stderr)
        return {}
    return recorded


def recorded_order():
    """The BLAS names, the default first, as the user last chose them (set_default;
    libraries the record does not name after, in BY_SPEED's order), else BY_SPEED."""
    known = [name for name in _recorded().get('order', []) if name in BY_SPEED]
    return known + [name for name in BY_SPEED if name not in known]


def choice_history():
    """The changes of the default so far, oldest first: [{'time', 'from', 'to', 'reason'}]."""
    return list(_recorded().get('history', []))


def set_default(name, reason):
    """Make `name` HPL's default BLAS (the user's explicit change of the stack), keeping the
    others' order, and record it with the change (atomically). Returns (old, new) default."""
    if name not in BY_SPEED:
        raise ValueError(f'{name!r} is no BLAS library of this suite: {", ".join(BY_SPEED)}')
    order = recorded_order()
    old = order[0]
    new_order = [name, *(n for n in order if n != name)]
    history = choice_history()
    now = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    if old != name:
        history.append({'time': now, 'from': old, 'to': name, 'reason': reason})
    path = order_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix('.tmp')
    temporary.write_text(json.dumps({'order': new_order, 'reason': reason, 'time': now,
                                     'history': history}, indent=1) + '\n')
    temporary.replace(path)
    return old, name


def choice_provenance():
    """What a session records of the BLAS choice: `<default>` and how it became the
    default (`the built-in order`, or the time of the user's change), for
    --session-extras (no ',' '{' '}')."""
    history = choice_history()
    default = recorded_order()[0]
    how = (f'chosen {history[-1]["time"]} in place of {history[-1]["from"]}' if history
           else 'the built-in order')
    if os.environ.get('HPCBENCH_BLAS'):
        default, how = os.environ['HPCBENCH_BLAS'].split(',')[0].strip(), 'HPCBENCH_BLAS'
    return {'blas_default': default, 'blas_default_from': how.replace(',', ' ')}


@dataclass(frozen=True)
class DefaultChoice:
    order: tuple        # library names, the default first
    medians: dict       # {name: median GFLOP/s} of those measured
    changed: bool       # whether it names another default (a suggestion: set_default applies)
    reason: str


def choose_default(samples, order):
    """The default BLAS the DGEMM ceilings measured in one session suggest: `samples`
    {library name: [GFLOP/s, ...]}, `order` the current order (its first: the default). It
    is never applied by itself (set_default is the user's). Another is suggested only when
    the library with the best median is ahead of it by compare's rule
    (hpcbench.results.changes.judge: more than 5 % and a one-sided Mann-Whitney U test at
    p <= 0.05), so that two libraries a run cannot tell apart are not suggested in turn."""
    from hpcbench.results import changes
    medians = {name: statistics.median(values) for name, values in samples.items() if values}
    current = order[0]
    by_median = sorted(medians, key=medians.get, reverse=True)
    if len(by_median) < 2:
        return DefaultChoice(tuple(order), medians, False,
                             f'{current} stays: fewer than two libraries measured')

    best = by_median[0]

    def figure(name):
        return f'{name} {medians[name]:.1f} GFLOP/s (median of {len(samples[name])})'

    if best == current:
        default, changed = current, False
        reason = f'{current} stays: the best DGEMM, {figure(best)}; next {figure(by_median[1])}'
    elif current not in medians:
        default, changed = best, True
        reason = f'{best}: the best DGEMM, {figure(best)}; {current} was not measured'
    else:
        verdict = changes.judge('gflops', 'GFLOP/s', samples[current], samples[best])
        changed = verdict.verdict == 'improvement'
        default = best if changed else current
        reason = (f'{best}: the best DGEMM, {figure(best)}, ahead of {figure(current)}: '
                  f'{verdict.reason}' if changed else
                  f'{current} stays: {figure(best)} is not told apart from {figure(current)}: '
                  f'{verdict.reason}')
    # The others keep their places: their order is not a choice, and a new one would only
    # change the environment's text and have it concretized again.
    return DefaultChoice((default, *[name for name in order if name != default]), medians,
                         changed, reason)


def library_of(provider, libraries):
    """The library of `libraries` a build's BLAS provider (`openblas@0.3.28`) is, or None."""
    package, _, version = provider.partition('@')
    return next((library.name for library in libraries
                 if library.package == package and library.version() == version), None)


def suggested_default():
    """(DefaultChoice, session UUID) of the newest stored session whose DGEMM ceilings cover
    two libraries or more (choose_default), else (None, None)."""
    if not (paths.VAR_DIR / 'results.db').exists():
        return None, None

    from hpcbench.results import case_builds, results_db
    libraries = local_libraries()
    for session in results_db.stored_sessions(results_db.site_config('local')):
        samples = {}
        for provider, rates in case_builds.dgemm_by_blas(session).items():
            name = library_of(provider, libraries)
            if name:
                samples[name] = rates
        if len(samples) > 1:
            return (choose_default(samples, [lib.name for lib in libraries]),
                    session['session_info']['uuid'])
    return None, None
