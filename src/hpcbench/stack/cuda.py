"""The CUDA toolkit GPU programs are built with, given to Spack as its `cuda` external.

The site's toolkit where there is one (`CUDA_HOME`, `nvcc` on PATH, `/usr/local/cuda*`);
else NVIDIA's toolkit wheels from PyPI, unpacked into the per-user cache and laid out as an
installed toolkit (`bin/nvcc`, `include`, `lib`, `lib64`, `nvvm`), as Intel MPI's wheels are
(hpcbench.stack.mpi_stacks). A machine without a GPU gets the wheels too when its GPU
programs are to be built (CI compiles them): nvcc needs no driver.

One CUDA minor version for every part: with nvcc 13.0 and the newer nvvm that cuBLAS's wheel
pulls in, ptxas refuses the PTX ("Unsupported .version 9.5"); so pip is told no dependency
and each part is pinned. A toolkit newer than the node's driver builds programs the driver
cannot load: the driver's CUDA version, where a node has one, bounds the toolkit's.

Run as `python -m hpcbench.stack.cuda [install|describe]`.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import accelerators as accelerator_facts
from hpcbench.core import child_processes, paths
from hpcbench.stack import wheels as wheel_files

# The parts of the 13.0 toolkit the GPU programs need, each at the version that worked
# together (built here, run on an H200 whose driver 580.159.04 reports CUDA 13.0).
WHEELS_CUDA_VERSION = '13.0'
WHEELS = {
    'nvidia-cuda-nvcc': '13.0.88',
    'nvidia-nvvm': '13.0.88',
    'nvidia-cuda-crt': '13.0.88',
    'nvidia-cuda-nvrtc': '13.0.88',
    'nvidia-cuda-runtime': '13.0.96',
    'nvidia-cuda-cccl': '13.0.85',
    'nvidia-cublas': '13.0.2.14',
}
# How pip fetches them: each part pinned, none of their dependencies (a newer nvvm).
REQUIREMENTS = [f'{name}=={version}' for name, version in WHEELS.items()]
PIP_OPTIONS = ('--no-deps', '--only-binary=:all:')
# Where each wheel keeps the toolkit's files.
WHEEL_TREE = 'nvidia/cu13/'
# The least Linux driver of each CUDA minor version: NVIDIA CUDA Toolkit Release Notes,
# Table 3 "CUDA Toolkit and Corresponding Driver Versions" (GA releases).
MINIMUM_DRIVER = {'13.0': '580.65.06', '12.9': '575.51.03', '12.8': '570.26',
                  '12.6': '560.28.03', '12.4': '550.54.14', '12.0': '525.60.13'}
SITE_LOCATIONS = ('/usr/local/cuda', '/usr/local/cuda-*')
# Spack's cuda_arch values to build the GPU programs for on a machine that lacks those GPUs
# (a login node, CI): e.g. 90, or 80,90.
ARCH_VARIABLE = 'HPCBENCH_CUDA_ARCH'


class CudaError(RuntimeError):
    pass


@dataclass(frozen=True)
class Toolkit:
    prefix: Path
    version: str            # nvcc's own (`nvcc --version`: V13.0.88), as Spack detects it
    source: str             # where it comes from, said with it

    @property
    def minor(self):
        return '.'.join(self.version.split('.')[:2])

    def spack_external(self):
        return {'spec': f'cuda@{self.version}', 'prefix': str(self.prefix)}


def _version_tuple(text):
    return tuple(int(p) for p in re.findall(r'\d+', text))


def build_archs(accelerators, environ=os.environ):
    """Spack's cuda_arch values (['90']) the GPU programs are built for: HPCBENCH_CUDA_ARCH's
    where set, else those of the node's NVIDIA GPUs (sm_90 -> 90); [] for none: then no
    toolkit is installed and no GPU program is built."""
    given = environ.get(ARCH_VARIABLE, '').strip()
    if given:
        archs = [a.strip() for a in given.split(',')]
        if not all(re.fullmatch(r'\d{2,3}[af]?', a) for a in archs):
            raise CudaError(f'{ARCH_VARIABLE}={given!r}: compute capabilities as Spack\'s '
                            'cuda_arch names them, e.g. 90 or 80,90')
        return sorted(set(archs))
    return sorted({accelerator_facts.cuda_arch(a.vendor, a.arch) for a in accelerators}
                  - {None})


def nvcc_version(nvcc):
    """nvcc's version (13.0.88), or None where it does not run."""
    try:
        out = subprocess.run([str(nvcc), '--version'], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'release [\d.]+, V(\d+(?:\.\d+)+)', out)
    return match.group(1) if match else None


def driver_supports(driver_version, cuda_minor):
    """Whether a Linux driver runs programs of `cuda_minor` (MINIMUM_DRIVER); True for a minor
    version the table does not have, whose programs the node itself will judge."""
    least = MINIMUM_DRIVER.get(cuda_minor)
    return least is None or _version_tuple(driver_version) >= _version_tuple(least)


def site_toolkit(environ=os.environ, locations=SITE_LOCATIONS):
    """The site's toolkit: $CUDA_HOME's, else the nvcc on PATH's, else the newest of
    /usr/local/cuda*; None where there is none. A CUDA_HOME without a working nvcc is an
    error: the user named it."""
    named = environ.get('CUDA_HOME')
    if named:
        version = nvcc_version(Path(named) / 'bin' / 'nvcc')
        if not version:
            raise CudaError(f'CUDA_HOME={named}: no working {named}/bin/nvcc')
        return Toolkit(Path(named), version, 'CUDA_HOME')

    on_path = shutil.which('nvcc', path=environ.get('PATH', ''))
    if on_path:
        version = nvcc_version(on_path)
        if version:
            return Toolkit(Path(on_path).resolve().parent.parent, version, 'nvcc on PATH')

    found = []
    for pattern in locations:
        for prefix in sorted(Path('/').glob(pattern.lstrip('/'))):
            version = nvcc_version(prefix / 'bin' / 'nvcc')
            if version:
                found.append(Toolkit(prefix.resolve(), version, str(prefix)))
    return max(found, key=lambda t: _version_tuple(t.version), default=None)


def wheels_prefix():
    """Where the wheels' toolkit is laid out: <cache>/cuda/<nvcc's version>."""
    return paths.cache_dir() / 'cuda' / WHEELS['nvidia-cuda-nvcc']


def wheel_files_dir():
    """Where the wheels are kept: an offline bundle's wheels when it brought them, else
    <cache>/cuda/wheels (downloaded once)."""
    bundled = paths.wheels_dir()
    if any(bundled.glob('nvidia_cuda_nvcc-*.whl')):
        return bundled
    return paths.cache_dir() / 'cuda' / 'wheels'


def _wheel_of(directory, name, version):
    matches = sorted(Path(directory).glob(f'{name.replace("-", "_")}-{version}-*.whl'))
    return matches[0] if matches else None


def download_wheels(directory):
    """pip-download the pinned wheels that `directory` lacks (no dependencies: each part is
    pinned, see the module's docstring)."""
    wanted = [r for r, (n, v) in zip(REQUIREMENTS, WHEELS.items())
              if not _wheel_of(directory, n, v)]
    if not wanted:
        return
    print(f'downloading the CUDA {WHEELS_CUDA_VERSION} toolkit wheels from PyPI into '
          f'{directory} (about 600 MB, once)', flush=True)
    Path(directory).mkdir(parents=True, exist_ok=True)
    child_processes.run([sys.executable, '-m', 'pip', 'download', '--quiet', *PIP_OPTIONS,
                         '--dest', str(directory), *wanted], check=True)


def lay_out(wheels, prefix):
    """Lay out the toolkit's files of `wheels` (each wheel's nvidia/cu13/ tree) in `prefix`
    as an installed toolkit (hpcbench.stack.wheels: each member checked, atomically), with
    `lib64` -> `lib` (nvcc's profile links from lib64) and each library's unversioned name
    (`-lcublas`)."""
    def complete(directory):
        if not (directory / 'bin' / 'nvcc').is_file():
            raise CudaError(f'the wheels in {Path(wheels[0]).parent} hold no {WHEEL_TREE}bin/nvcc')

    try:
        wheel_files.lay_out(wheels, WHEEL_TREE, prefix, complete)
    except wheel_files.WheelError as err:
        raise CudaError(str(err)) from None


def wheels_toolkit():
    """The wheels' toolkit, downloaded and laid out on first use."""
    prefix = wheels_prefix()
    if not (prefix / 'bin' / 'nvcc').is_file():
        directory = wheel_files_dir()
        download_wheels(directory)
        lay_out([_wheel_of(directory, n, v) for n, v in WHEELS.items()], prefix)
    version = nvcc_version(prefix / 'bin' / 'nvcc')
    if not version:
        raise CudaError(f'{prefix}/bin/nvcc does not run: remove {prefix} to lay it out again')
    return Toolkit(prefix, version, f'NVIDIA\'s PyPI wheels, CUDA {WHEELS_CUDA_VERSION}')


# What links a program to the driver's API (`-lcuda`: OSU's configure asks for it) on a
# machine without a GPU, where NVIDIA's wheels bring none (the toolkit's stubs/ are not in
# them): Debian non-free's `libcuda1`, the driver's user-space library, unpacked as the
# laid-out toolkit's lib64/libcuda.so. Only its name links: programs built with it load
# the node's own libcuda.so.1 at run time (its SONAME; the toolkit holds no libcuda.so.1).
DRIVER_LINK_PACKAGE = 'libcuda1'


def has_driver_link_library(prefix):
    """Whether a program built with the toolkit at `prefix` can link `-lcuda`: its lib64 or
    stubs hold libcuda.so, or this machine's driver does."""
    prefix = Path(prefix)
    return any(p.exists() for p in (prefix / 'lib64' / 'libcuda.so',
                                    prefix / 'lib64' / 'stubs' / 'libcuda.so',
                                    Path('/usr/lib/x86_64-linux-gnu/libcuda.so'),
                                    Path('/usr/lib64/libcuda.so')))


def add_driver_link_library(prefix):
    """Give the wheels' toolkit at `prefix` a libcuda.so to link (DRIVER_LINK_PACKAGE),
    once; CudaError saying why where it cannot be had (not Debian, apt offline)."""
    from hpcbench.stack import debian
    target = Path(prefix) / 'lib' / 'libcuda.so'
    if has_driver_link_library(prefix):
        return target
    directory = paths.cache_dir() / 'cuda' / 'driver'
    try:
        deb = debian.download_non_free(DRIVER_LINK_PACKAGE, directory)
        unpacked = Path(tempfile.mkdtemp(prefix='.libcuda-', dir=directory))
        try:
            child_processes.run(['dpkg-deb', '-x', deb, str(unpacked)], check=True)
            library = next(unpacked.glob('usr/lib/*/nvidia/current/libcuda.so.*'), None) or \
                next(unpacked.glob('usr/lib/*/libcuda.so.*'), None)
            if library is None:
                raise CudaError(f'{deb} holds no libcuda.so.*')
            shutil.copyfile(library, target.with_name('.libcuda.so.tmp'))
            target.with_name('.libcuda.so.tmp').rename(target)
        finally:
            shutil.rmtree(unpacked, ignore_errors=True)
    except (debian.MissingPackages, subprocess.CalledProcessError, OSError) as err:
        raise CudaError(f'no libcuda.so to link -lcuda with: {err}') from None
    return target


def toolkit(driver_version=None, environ=os.environ):
    """The toolkit to build with: the site's, else the wheels'. `driver_version`: the node's
    driver where it has GPUs; a toolkit newer than it supports is refused, saying what to
    set, as is a node too old for the wheels' version."""
    found = site_toolkit(environ)
    if found is None:
        if driver_version and not driver_supports(driver_version, WHEELS_CUDA_VERSION):
            raise CudaError(
                f'the GPU driver {driver_version} is older than CUDA {WHEELS_CUDA_VERSION} '
                f'needs ({MINIMUM_DRIVER[WHEELS_CUDA_VERSION]}) and no CUDA toolkit was found: '
                f'set CUDA_HOME to a toolkit the driver supports')
        return wheels_toolkit()
    if driver_version and not driver_supports(driver_version, found.minor):
        raise CudaError(
            f'the CUDA {found.version} toolkit at {found.prefix} ({found.source}) is newer '
            f'than the GPU driver {driver_version} supports (CUDA {found.minor} needs '
            f'{MINIMUM_DRIVER[found.minor]}): set CUDA_HOME to an older toolkit')
    return found


def environment_uses_wheels(host_yaml):
    """Whether an environment's host.yaml (hpcbench.stack.bootstrap) builds with the wheels'
    toolkit: then an offline bundle of it carries the wheels (hpcbench.stack.bundle)."""
    import yaml
    try:
        config = yaml.safe_load(Path(host_yaml).read_text()) or {}
    except OSError:
        return False
    externals = (config.get('packages') or {}).get('cuda', {}).get('externals') or []
    return any(e.get('prefix') == str(wheels_prefix()) for e in externals)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ['describe'], ['install']):
        print('usage: python -m hpcbench.stack.cuda [describe|install]', file=sys.stderr)
        return 2
    try:
        if args == ['install']:
            found = wheels_toolkit()
        else:
            found = toolkit(environ=os.environ)
    except (CudaError, subprocess.CalledProcessError, OSError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1
    print(f'CUDA {found.version} at {found.prefix} ({found.source})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
