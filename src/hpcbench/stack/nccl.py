"""NCCL, the library nccl-tests measures, given to Spack as its `nccl` external.

The site's where there is one (`NCCL_HOME`, else Debian's and Ubuntu's `libnccl-dev`: nccl.h
in /usr/include, libnccl.so beside the system's libraries); else NVIDIA's wheel from PyPI
(`nvidia-nccl-cu13`: the library and its headers, no test programs), unpacked into the
per-user cache and laid out as an installed NCCL (`include`, `lib` with the unversioned
`libnccl.so` that `-lnccl` links), as the CUDA toolkit's wheels are (hpcbench.stack.cuda).
Its version is what its nccl.h says (NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH).

Run as `python -m hpcbench.stack.nccl [describe|install]`.
"""
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import child_processes, paths
from hpcbench.stack import wheels as wheel_files

# NCCL for CUDA 13 (the toolkit's wheels are 13.0): library and headers.
WHEEL_NAME, WHEEL_VERSION = 'nvidia-nccl-cu13', '2.32.3'
REQUIREMENT = f'{WHEEL_NAME}=={WHEEL_VERSION}'
PIP_OPTIONS = ('--no-deps', '--only-binary=:all:')
WHEEL_TREE = 'nvidia/nccl/'
SYSTEM_HEADER = Path('/usr/include/nccl.h')
SYSTEM_LIBRARY_DIRS = (Path('/usr/lib/x86_64-linux-gnu'), Path('/usr/lib64'), Path('/usr/lib'))


class NcclError(RuntimeError):
    pass


@dataclass(frozen=True)
class Nccl:
    prefix: Path
    version: str
    source: str             # where it comes from, said with it

    def spack_external(self):
        return {'spec': f'nccl@{self.version}', 'prefix': str(self.prefix)}


def header_version(header):
    """NCCL's version as its nccl.h defines it ('2.32.3'); None where it defines none."""
    try:
        text = Path(header).read_text(errors='replace')
    except OSError:
        return None
    parts = [re.search(rf'^#define NCCL_{part}\s+(\d+)', text, re.M)
             for part in ('MAJOR', 'MINOR', 'PATCH')]
    return '.'.join(p.group(1) for p in parts) if all(parts) else None


def site_nccl(environ=os.environ):
    """The site's NCCL: $NCCL_HOME's (an error where it holds no nccl.h and libnccl: the
    user named it), else the system's libnccl-dev; None where there is none."""
    named = environ.get('NCCL_HOME')
    if named:
        prefix = Path(named)
        version = header_version(prefix / 'include' / 'nccl.h')
        if not version or not any((prefix / d).glob('libnccl.so*') for d in ('lib', 'lib64')):
            raise NcclError(f'NCCL_HOME={named}: no include/nccl.h with its version and '
                            'lib/libnccl.so there')
        return Nccl(prefix, version, 'NCCL_HOME')
    version = header_version(SYSTEM_HEADER)
    if version and any(any(d.glob('libnccl.so')) for d in SYSTEM_LIBRARY_DIRS):
        return Nccl(Path('/usr'), version, 'the system\'s libnccl-dev')
    return None


def wheels_prefix():
    """Where the wheel's NCCL is laid out: <cache>/nccl/<its version>."""
    return paths.cache_dir() / 'nccl' / WHEEL_VERSION


def wheel_files_dir():
    """Where the wheel is kept: an offline bundle's wheels when it brought it, else
    <cache>/nccl/wheels (downloaded once)."""
    bundled = paths.wheels_dir()
    if any(bundled.glob(f'{WHEEL_NAME.replace("-", "_")}-{WHEEL_VERSION}-*.whl')):
        return bundled
    return paths.cache_dir() / 'nccl' / 'wheels'


def _wheel_in(directory):
    found = sorted(Path(directory).glob(f'{WHEEL_NAME.replace("-", "_")}-{WHEEL_VERSION}-*.whl'))
    return found[0] if found else None


def download_wheel(directory):
    if _wheel_in(directory):
        return _wheel_in(directory)
    print(f'downloading NCCL {WHEEL_VERSION} ({WHEEL_NAME}) from PyPI into {directory} (about '
          '300 MB, once)', flush=True)
    Path(directory).mkdir(parents=True, exist_ok=True)
    child_processes.run([sys.executable, '-m', 'pip', 'download', '--quiet', *PIP_OPTIONS,
                         '--dest', str(directory), REQUIREMENT], check=True)
    return _wheel_in(directory)


def lay_out(wheel, prefix):
    """Lay out NCCL's files of `wheel` (its nvidia/nccl/ tree) in `prefix` as an installed
    NCCL (hpcbench.stack.wheels: each member checked, atomically), with `libnccl.so` beside
    `libnccl.so.2` and `lib64` -> `lib`."""
    def complete(directory):
        if not header_version(directory / 'include' / 'nccl.h') or \
                not any((directory / 'lib').glob('libnccl.so.*')):
            raise NcclError(f'{wheel} holds no {WHEEL_TREE}include/nccl.h and lib/libnccl.so.*')

    try:
        wheel_files.lay_out([wheel], WHEEL_TREE, prefix, complete)
    except wheel_files.WheelError as err:
        raise NcclError(str(err)) from None


def wheel_nccl():
    """The wheel's NCCL, downloaded and laid out on first use."""
    prefix = wheels_prefix()
    if not (prefix / 'include' / 'nccl.h').is_file():
        lay_out(download_wheel(wheel_files_dir()), prefix)
    version = header_version(prefix / 'include' / 'nccl.h')
    if not version:
        raise NcclError(f'{prefix}/include/nccl.h names no version: remove {prefix} to lay it '
                        'out again')
    return Nccl(prefix, version, f'NVIDIA\'s PyPI wheel {WHEEL_NAME} {WHEEL_VERSION}')


def library(environ=os.environ):
    """The NCCL nccl-tests is built with: the site's, else the wheel's."""
    return site_nccl(environ) or wheel_nccl()


def environment_uses_wheel(host_yaml):
    """Whether an environment's host.yaml (hpcbench.stack.bootstrap) builds nccl-tests over
    the wheel's NCCL: then an offline bundle of it carries the wheel (hpcbench.stack.bundle)."""
    import yaml
    try:
        config = yaml.safe_load(Path(host_yaml).read_text()) or {}
    except OSError:
        return False
    externals = (config.get('packages') or {}).get('nccl', {}).get('externals') or []
    return any(e.get('prefix') == str(wheels_prefix()) for e in externals)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv not in (['describe'], ['install']):
        print('usage: python -m hpcbench.stack.nccl [describe|install]', file=sys.stderr)
        return 2
    try:
        found = site_nccl() if argv == ['describe'] else library()
    except (NcclError, OSError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1
    if found is None:
        print(f'no site NCCL (NCCL_HOME, {SYSTEM_HEADER}); `install` lays out {REQUIREMENT}')
        return 0
    print(f'NCCL {found.version} at {found.prefix} ({found.source})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
