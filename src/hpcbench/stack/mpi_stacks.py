"""The MPI stacks of this machine: Open MPI and MPICH from Debian and Intel MPI from PyPI,
which any Debian machine can have without building one, and an MVAPICH2 the site installed
(found, not installed: see site_mvapich2). One description serves the bootstrap (prefixes,
Spack externals) and the local site config (ReFrame environments).

Debian's MPIs cannot be given to Spack with prefix /usr: Open MPI's mpi.h is not under
/usr/include, and /usr/bin/mpicc is an alternatives link to one of them, so an MPICH at /usr
could silently build against Open MPI. Each stack gets a prefix of its own made of symlinks.
"""
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hpcbench.core import paths
from hpcbench.machine import device_buffers
from hpcbench.stack import debian, wheels

# Intel MPI's PyPI wheels, pinned to a version Spack's intel-oneapi-mpi knows (2021.17.0 is
# the newest in spack-packages v2025.11.0; 2021.19 needs a libfabric wheel PyPI does not have).
INTEL_MPI_VERSION = '2021.17.0'

# Open MPI refuses to run as root unless told (a CI runner, a container may be root).
OPEN_MPI_AS_ROOT = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}


# How each MPI is asked whether it sends from GPU memory: its program or library, read by.
_ASK = {'ompi_info': (['--parsable', '--all'], device_buffers.from_ompi_info),
        'mpichversion': ([], device_buffers.from_mpichversion),
        'intel': (None, device_buffers.from_intel_library)}


def _asked(how, path):
    """The answer of the MPI program or library at `path` (_ASK[how]); None where it is not
    there. Kept in the per-user cache by the file's path, size and time, so that a site
    config asks once per install (ompi_info takes a quarter of a second), not at each load."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return _asked_once(how, str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _asked_once(how, path, size, mtime):
    cache = paths.cache_dir() / 'detected' / 'device-buffers.json'
    key = f'{how} {path} {size} {mtime}'
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return device_buffers.from_description(known[key])
    args, read = _ASK[how]
    try:
        if args is None:
            answer = read(path)
        else:
            out = subprocess.run([path, *args], capture_output=True, text=True,
                                 errors='replace', timeout=60).stdout
            answer = read(out)
    except (OSError, subprocess.TimeoutExpired, device_buffers.ProbeError) as err:
        return device_buffers.DeviceBuffers(False, f'{Path(path).name} could not be asked: '
                                                   f'{err}')
    known[key] = answer.to_description()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f'.{cache.name}.{os.getpid()}')
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        tmp.replace(cache)
    except OSError:
        pass                    # a read-only cache: asked again next time
    return answer


def _first_version(cmd, pattern):
    try:
        # A tool that prints no text (a broken install's binary output) tells no version.
        out = subprocess.run(cmd, capture_output=True, text=True, errors='replace',
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None

    match = re.search(pattern, out)
    return match.group(1) if match else None


@dataclass
class MpiStack:
    name: str                      # ReFrame environment name
    spack_name: str                # Spack package providing `mpi`
    spack_variants: str            # variants of the external spec
    prefix: Path                   # the external's prefix given to Spack
    bin_dir: Path                  # where mpicc and mpirun are
    run_env: dict = field(default_factory=dict)   # variables its programs need to run here
    # Benchmarks a registry ships built against this MPI (the registry-only path), by the
    # name of the check's build (hpcbench.rfm.build.BenchmarkBuild.registry_name): the program's
    # path (Debian's hpcc; the IMB-MPI1 of Intel MPI's PyPI wheel).
    registry_binaries: dict = field(default_factory=dict)

    def version(self):
        raise NotImplementedError

    def prepare(self):
        """Install what the prefix links to, when the stack brings its own files."""

    def links(self):
        """{path inside the prefix: target} making up the prefix."""
        raise NotImplementedError

    def runtime_links(self):
        """The part of links() that runs programs (launchers, libraries): all the
        registry-only path needs, without the headers a build needs."""
        return {rel: target for rel, target in self.links().items()
                if rel.split('/')[-1] != 'include'}

    def missing(self, runtime_only=False):
        links = self.runtime_links() if runtime_only else self.links()
        return [str(t) for t in links.values() if not Path(t).exists()]

    def available(self):
        """Whether this machine has it, or the suite's set-up installs it (PyPI's)."""
        return not self.missing()

    def known_failures(self):
        """{what (e.g. 'IMB Uniband'): why}: the benchmarks this build of the MPI is known to
        crash in, which the checks skip on it, saying why (KNOWN_FAILURES)."""
        return {}

    def device_buffers(self):
        """Whether it sends from GPU memory, asked of the MPI itself (hpcbench.machine.
        device_buffers.DeviceBuffers); None where it cannot be asked here (not installed)."""
        return None

    # Spack's own detection (`spack external find`) describes the external: for an MPI a
    # site built, whose variants only its configure line tells (hpcbench.stack.bootstrap).
    spack_detects = False
    # Launchers of this stack other than the partition's (`mpirun`): ReFrame launcher names.
    other_launchers = ()

    def spack_external(self):
        version = self.version()
        if not version:
            raise RuntimeError(f'{self.name}: cannot tell the version of {self.prefix}')

        return {'spec': f'{self.spack_name}@{version}{self.spack_variants}',
                'prefix': str(self.prefix)}


class DebianMpi(MpiStack):
    def available(self):
        # The set-up installs Debian's MPIs where it can (as root, with apt).
        return not self.missing() or debian.installable()


class DebianOpenMpi(DebianMpi):
    def version(self):
        return _first_version(['ompi_info', '--version'], r'Open MPI v([\d.]+)')

    def device_buffers(self):
        return _asked('ompi_info', self.bin_dir / 'ompi_info')

    def links(self):
        arch = debian.multiarch()
        links = {f'bin/{w}': f'/usr/bin/{w}.openmpi'
                 for w in ('mpicc', 'mpicxx', 'mpic++', 'mpif77', 'mpif90', 'mpifort',
                           'mpirun', 'mpiexec')}
        links['bin/ompi_info'] = '/usr/bin/ompi_info'
        links['include'] = f'/usr/lib/{arch}/openmpi/include'
        links['lib'] = f'/usr/lib/{arch}/openmpi/lib'
        return links


class DebianMpich(DebianMpi):
    def version(self):
        return _first_version(['mpichversion'], r'MPICH Version:\s+([\d.]+)')

    def device_buffers(self):
        return _asked('mpichversion', self.bin_dir / 'mpichversion')

    def links(self):
        arch = debian.multiarch()
        links = {f'bin/{w}': f'/usr/bin/{w}.mpich'
                 for w in ('mpicc', 'mpicxx', 'mpif77', 'mpif90', 'mpifort',
                           'mpirun', 'mpiexec')}
        for tool in ('mpichversion', 'hydra_pmi_proxy', 'hydra_nameserver', 'hydra_persist'):
            links[f'bin/{tool}'] = f'/usr/bin/{tool}'

        links['include'] = f'/usr/include/{arch}/mpich'
        for lib in ('libmpich.so', 'libmpichcxx.so', 'libmpichfort.so'):
            links[f'lib/{lib}'] = f'/usr/lib/{arch}/{lib}'

        # MPICH's own installs name the library libmpi too; Spack's recipe looks for it.
        links['lib/libmpi.so'] = f'/usr/lib/{arch}/libmpich.so'
        return links


class PypiIntelMpi(MpiStack):
    """Intel MPI from PyPI, laid out as Spack's intel-oneapi-mpi expects of an install:
    <prefix>/mpi/<X.Y>/{bin,include,lib,lib/release,libfabric/lib,env/vars.sh}."""

    @property
    def wheel_prefix(self):
        return self.prefix / 'pip'

    def version(self):
        return INTEL_MPI_VERSION

    def available(self):
        return True                # `hpcbench setup` installs the wheels from PyPI

    # What pip installs (hpcbench.stack.bundle downloads the same).
    wheel_options = ()

    def wheel_requirements(self):
        return [f'impi-rt=={self.version()}', f'impi-devel=={self.version()}']

    def prepare(self):
        """pip-install the wheels into <prefix>/pip (atomically) and write env/vars.sh."""
        if not (self.wheel_prefix / 'bin' / 'mpicc').exists():
            wheels.install_wheels(f'Intel MPI {self.version()}', self.wheel_prefix,
                           self.wheel_requirements(), *self.wheel_options)

        component = self.bin_dir.parent
        vars_sh = component / 'env' / 'vars.sh'
        vars_sh.parent.mkdir(parents=True, exist_ok=True)
        vars_sh.write_text(f'export I_MPI_ROOT={component}\nexport PATH={component}/bin:$PATH\n')

    def device_buffers(self):
        return _asked('intel', self.wheel_prefix / 'lib' / 'libmpi.so.12')

    def links(self):
        wheel = self.wheel_prefix
        component = self.bin_dir.parent.relative_to(self.prefix)
        links = {
            f'{component}/bin': wheel / 'bin',
            f'{component}/include': wheel / 'include',
            f'{component}/lib/release': wheel / 'lib',
            f'{component}/libfabric/lib': wheel / 'lib',
        }
        # lib/ is a directory of links, not a link, so that lib/release can sit inside it.
        if (wheel / 'lib').is_dir():
            for item in (wheel / 'lib').iterdir():
                links[f'{component}/lib/{item.name}'] = item

        return links


class InstalledMpi(MpiStack):
    """An MPI the site installed in a prefix of its own (a module's, /opt/...), named by
    `hpcbench new-system --mpi PREFIX` (installed_mpi): its wrappers and launchers used as they
    are, no prefix of links; Spack's own detection describes it (its variants from the
    configure line it records), but for Open MPI: spack-packages v2025.11.0's detection of it
    fails on every install ('Spec' object has no attribute 'cc' in get_spack_compiler_spec;
    fixed upstream by spack/spack-packages#4163), so it is openmpi@<its version>, as Debian's."""

    @property
    def spack_detects(self):
        return self.spack_name != 'openmpi'

    def version(self):
        return _installed_version(self.spack_name, self.prefix)

    def device_buffers(self):
        # Cray's MPICH says it by its GPU transport library, whatever its tools say.
        cray = device_buffers.from_cray_library_dir(self.prefix / 'lib')
        if cray is not None:
            return cray
        tool = 'ompi_info' if self.spack_name == 'openmpi' else 'mpichversion'
        return _asked(tool, self.bin_dir / tool)

    def links(self):
        return {}


class InstalledMvapich2(InstalledMpi):
    """An MVAPICH2 installed by the site, in a prefix of its own (its bin/mpichversion says
    MVAPICH2), found without being named (site_mvapich2) or named."""

    def known_failures(self):
        return KNOWN_FAILURES.get(('mvapich2', self.version(), mvapich2_device(self.prefix)),
                                  {})

    @property
    def other_launchers(self):
        # mpirun_rsh (TSUBAME's and Oakforest-PACS's launcher) is built unless the site
        # configured Hydra alone.
        return ('mpirun_rsh',) if (self.bin_dir / 'mpirun_rsh').exists() else ()


# Where sites install MVAPICH2 when no module or variable says (OSU's default prefix, Mellanox
# OFED's MPI tree, /opt).
MVAPICH2_LOCATIONS = ('/usr/local/mvapich2*', '/opt/mvapich2*', '/opt/mvapich2/*',
                      '/usr/mpi/gcc/mvapich2*')


def mvapich2_version(prefix):
    """The MVAPICH2 version of an install prefix, from its bin/mpichversion (or bin/mpiname,
    which only some builds have), or None when it is not one."""
    for tool, args, pattern in (('mpichversion', [], r'MVAPICH2 Version:\s+([\d.]+\w*)'),
                                ('mpiname', ['-a'], r'^MVAPICH2 ([\d.]+\w*)')):
        program = Path(prefix) / 'bin' / tool
        version = program.is_file() and _first_version([str(program), *args], pattern)
        if version:
            return version
    return None


def mvapich2_device(prefix):
    """The device an MVAPICH2 was built with (`ch3:nemesis`, `ch3:mrail`, ...), from its
    bin/mpichversion, or None."""
    return _first_version([str(Path(prefix) / 'bin' / 'mpichversion')],
                          r'MVAPICH2 Device:\s+(\S+)')


# Benchmarks a build of an MPI crashes in, by (stack, version, device): a crash gives no
# figure, and the defect is the MPI's, so the checks skip them there with this reason rather
# than fail every run. Each entry says how it was seen.
_NEMESIS_WAITALL_CRASH = (
    'MVAPICH2 2.3.7 built with ch3:nemesis segfaults in it (SIGSEGV in MPID_nem_handle_pkt, '
    'from MPI_Waitall in IMB_uni_bandwidth; two ranks on one node, at every size from 0 B; '
    'PingPong, PingPing, Sendrecv and Exchange run)')
KNOWN_FAILURES = {
    ('mvapich2', '2.3.7', 'ch3:nemesis'): {'IMB Uniband': _NEMESIS_WAITALL_CRASH,
                                           'IMB Biband': _NEMESIS_WAITALL_CRASH},
}


class Mvapich2NotFound(RuntimeError):
    pass


class InstalledMpiError(RuntimeError):
    pass


# How an MPI installed in a prefix says its version, by Spack package: the program in its bin/
# and what that prints. MVAPICH2 is asked first (mvapich2_version): its mpichversion is
# MPICH's tool, renamed in its output.
INSTALLED_MPIS = {
    'mpich': ('mpichversion', (), r'MPICH Version:\s+([\d.]+\w*)'),
    'openmpi': ('ompi_info', ('--version',), r'Open MPI v([\d.]+\w*)'),
}


def _installed_version(package, prefix):
    if package == 'mvapich2':
        return mvapich2_version(prefix)
    tool, args, pattern = INSTALLED_MPIS[package]
    program = Path(prefix) / 'bin' / tool
    return _first_version([str(program), *args], pattern) if program.is_file() else None


def installed_mpi(prefix):
    """The MPI installed at `prefix` (Open MPI, MPICH or MVAPICH2: its bin/ holds mpicc and
    ompi_info or mpichversion) as a stack named after its Spack package; an error naming
    what was looked for where there is none."""
    try:
        prefix = paths.plain(Path(prefix).expanduser().absolute(), 'an MPI install prefix')
    except paths.UnsafePathError as err:
        raise InstalledMpiError(str(err)) from None
    if not (prefix / 'bin' / 'mpicc').is_file():
        raise InstalledMpiError(f'{prefix}: no MPI installed there (no bin/mpicc); give the '
                                'prefix whose bin/ holds its mpicc, e.g. what `module show '
                                '<mpi>` sets PATH to, less /bin')
    for package in ('mvapich2', *INSTALLED_MPIS):
        if _installed_version(package, prefix):
            kind = InstalledMvapich2 if package == 'mvapich2' else InstalledMpi
            env = dict(OPEN_MPI_AS_ROOT) if package == 'openmpi' else {}
            return kind(package, package, '', prefix, prefix / 'bin', env)
    raise InstalledMpiError(
        f'{prefix}: its bin/mpicc is no MPI this suite knows: neither bin/ompi_info (Open MPI) '
        'nor bin/mpichversion (MPICH, MVAPICH2) tells a version. Intel MPI needs no prefix: '
        'every system gets it from PyPI (intelmpi)')


def site_mvapich2(environ=os.environ, locations=MVAPICH2_LOCATIONS):
    """The installed MVAPICH2's prefix: `HPCBENCH_MVAPICH2_PREFIX` (which must be one), else
    that of an `mpichversion` on PATH that is MVAPICH2's, else the newest in a standard
    location; None when there is none."""
    given = environ.get('HPCBENCH_MVAPICH2_PREFIX')
    if given:
        try:
            paths.plain(Path(given), 'HPCBENCH_MVAPICH2_PREFIX')
        except paths.UnsafePathError as err:
            raise Mvapich2NotFound(str(err)) from None
        if not mvapich2_version(given):
            raise Mvapich2NotFound(
                f'HPCBENCH_MVAPICH2_PREFIX={shlex.quote(given)}: not an MVAPICH2 install '
                '(no bin/mpichversion or bin/mpiname saying MVAPICH2 there); unset it or '
                'give the prefix whose bin/ holds its mpicc and mpichversion')
        return Path(given)

    # Every mpichversion on PATH: Debian's MPICH has one too.
    candidates = [Path(d).resolve().parent for d in environ.get('PATH', '').split(os.pathsep)
                  if d and (Path(d) / 'mpichversion').is_file()]
    for pattern in locations:
        candidates += sorted(Path('/').glob(pattern.lstrip('/')), reverse=True)
    return next((c for c in candidates if mvapich2_version(c)), None)


def local_stacks(environ=os.environ):
    """The MPI stacks of this machine, in the order the suite lists them."""
    cache = paths.cache_dir()
    impi_prefix = cache / 'intel-mpi' / INTEL_MPI_VERSION
    impi_component = impi_prefix / 'mpi' / '.'.join(INTEL_MPI_VERSION.split('.')[:2])
    return [
        # Debian builds its hpcc package against its default MPI, Open MPI.
        DebianOpenMpi('openmpi', 'openmpi', '', cache / 'mpi' / 'openmpi',
                      cache / 'mpi' / 'openmpi' / 'bin', dict(OPEN_MPI_AS_ROOT),
                      {'hpcc': '/usr/bin/hpcc'}),
        DebianMpich('mpich', 'mpich', '', cache / 'mpi' / 'mpich',
                    cache / 'mpi' / 'mpich' / 'bin'),
        PypiIntelMpi('intelmpi', 'intel-oneapi-mpi',
                     '+generic-names~envmods~ilp64~external-libfabric', impi_prefix,
                     impi_component / 'bin',
                     # One node: shared memory only (libfabric's providers from the wheel
                     # do not initialise here without a fabric).
                     # The wheel's own programs (IMB-MPI1) have no RPATH to libmpi: its
                     # library directory, as Intel's vars.sh sets it.
                     {'I_MPI_ROOT': str(impi_component), 'I_MPI_FABRICS': 'shm',
                      'LD_LIBRARY_PATH': f'{impi_component / "lib"}:$LD_LIBRARY_PATH'},
                     # The wheel ships Intel's own builds of IMB-MPI1 and of IMB-MPI1-GPU
                     # (device buffers; no Spack recipe builds it).
                     {'imb': str(impi_component / 'bin' / 'IMB-MPI1'),
                      'imb-gpu': str(impi_component / 'bin' / 'IMB-MPI1-GPU')}),
        *_site_stacks(environ),
    ]


def _site_stacks(environ):
    try:
        mvapich2 = site_mvapich2(environ)
    except Mvapich2NotFound as err:
        # A site config or a bootstrap cannot go on without the MPI it was told to use: one
        # message, before anything is written.
        print(f'error: {err}', file=sys.stderr)
        sys.exit(1)

    # Its Hydra runs as root without asking; its binding is switched off where ranks are
    # bound (hpcbench.core.layout).
    return [InstalledMvapich2('mvapich2', 'mvapich2', '', mvapich2, mvapich2 / 'bin')] \
        if mvapich2 else []
