"""NVIDIA's wheels from PyPI laid out as an installed tree (the CUDA toolkit's: hpcbench.stack.
cuda; NCCL's: hpcbench.stack.nccl), atomically: a temporary directory beside the prefix,
renamed when complete.

A wheel comes from pip's download or from an offline bundle's `wheels/`, which anyone who
handed over the bundle could have made: each member is checked before anything is written.
Its path stays inside the tree (relative, no `..`, no absolute path, no drive; and so
its path below the tree: `nvidia/nccl//tmp/x` is /tmp/x there), it is a
regular file (a link or a device in a wheel is refused: pip's wheels hold none), its mode
keeps read, write and execute bits only (no setuid, setgid or sticky bit), and the files
unpack to at most MAX_RATIO times the wheel's size (SMALL_WHEEL_BYTES for a small one) and
MAX_BYTES in all (a 306 KB wheel held a 300 MiB library of zeros). A wheel that breaks any of these is refused whole, in one
message naming it and the member; nothing of it is left.

Wheels of Python's own kind (Intel MPI's, MKL's) are pip-installed into a prefix
(install_wheels), from an offline bundle's wheels where there are any.
"""
import os
import posixpath
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from hpcbench.core import child_processes, paths

# What a wheel's files may unpack to: MAX_RATIO times the wheel, or SMALL_WHEEL_BYTES for a
# small wheel of text, and MAX_BYTES in all. The pinned wheels unpack to 1.18 (NCCL, 290 MiB),
# 1.41 (cuBLAS, 401 MiB) to 4.66 (CCCL's headers) and 7.0 (crt's, 0.1 MiB) times their size.
MAX_RATIO = 20
SMALL_WHEEL_BYTES = 64 << 20
MAX_BYTES = 16 << 30


class WheelError(RuntimeError):
    pass


def _relative(member, tree, wheel):
    """The path below `tree` of `member` (a ZipInfo), or None where it is outside `tree`;
    WheelError for a path that leaves the archive's top or is no file's."""
    name = member.filename
    normal = posixpath.normpath(name)
    if name.startswith('/') or '\\' in name or ':' in name.split('/')[0] or \
            normal == '..' or normal.startswith('../') or '/../' in f'/{name}/':
        raise WheelError(f'{wheel}: member {name[:200]!r} leaves the tree it unpacks into: '
                         'not a wheel to install')
    if not name.startswith(tree) or member.is_dir():
        return None
    # The path below the tree, checked itself: `nvidia/nccl//tmp/x` passes every test of the
    # member's name, and `tree / '/tmp/x'` is /tmp/x (pathlib drops what is left of an
    # absolute path). Below the tree a path is plain: relative, no empty, `.` or `..` part.
    relative = name[len(tree):]
    if relative.startswith('/') or any(part in ('', '.', '..')
                                       for part in relative.split('/')):
        raise WheelError(f'{wheel}: member {name[:200]!r} leaves the tree it unpacks into '
                         f'(below {tree!r}: {relative[:200]!r}): not a wheel to install')
    mode = member.external_attr >> 16
    # A file's type bits: a regular file's, or none (zip tools that keep permissions only).
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        raise WheelError(f'{wheel}: member {name[:200]!r} is not a regular file (mode '
                         f'{oct(mode)}): not a wheel to install')
    return relative


def checked_members(wheel, tree):
    """[(ZipInfo, path below `tree`)] of the regular files of `wheel` under `tree`, every
    member checked (the module's rules); WheelError in one message otherwise."""
    found = os.stat(wheel)
    if not stat.S_ISREG(found.st_mode):
        raise WheelError(f'{wheel}: not a regular file, so not a wheel to install')
    size = found.st_size
    with zipfile.ZipFile(wheel) as archive:
        found = [(m, _relative(m, tree, wheel)) for m in archive.infolist()]
    kept = [(m, rel) for m, rel in found if rel]
    unpacked = sum(m.file_size for m, _ in kept)
    if unpacked > min(max(MAX_RATIO * size, SMALL_WHEEL_BYTES), MAX_BYTES):
        largest = max(kept, key=lambda kept_one: kept_one[0].file_size)[0]
        raise WheelError(f'{wheel}: its files unpack to {unpacked >> 20} MiB from '
                         f'{size >> 10} KiB ({largest.filename[:200]} {largest.file_size >> 20} '
                         f'MiB), more than {MAX_RATIO} times the wheel ({SMALL_WHEEL_BYTES >> 20} '
                         f'MiB for a small one, {MAX_BYTES >> 30} GiB in all): not a wheel to '
                         'install')
    return kept


def lay_out(wheels, tree, prefix, complete):
    """Unpack the files under `tree` (`nvidia/cu13/`) of every wheel in `wheels` into
    `prefix`, atomically; `complete(directory)` raises where the laid-out directory lacks
    what it must hold. Then `lib64` -> `lib` and each library's unversioned name
    (`libnccl.so` -> `libnccl.so.2`, what `-lnccl` links)."""
    prefix = Path(prefix)
    members = {wheel: checked_members(wheel, tree) for wheel in wheels}
    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f'.{prefix.name}-', dir=prefix.parent))
    try:
        for wheel, kept in members.items():
            with zipfile.ZipFile(wheel) as archive:
                for member, relative in kept:
                    target = tmp / relative
                    if not target.resolve().is_relative_to(tmp.resolve()):
                        raise WheelError(f'{wheel}: member {member.filename[:200]!r} would be '
                                         f'written at {target.resolve()}, outside the tree: '
                                         'not a wheel to install')
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as source, open(target, 'wb') as out:
                        shutil.copyfileobj(source, out)
                    target.chmod(stat.S_IMODE(member.external_attr >> 16) & 0o777 or 0o644)
        complete(tmp)
        if not (tmp / 'lib64').exists():
            (tmp / 'lib64').symlink_to('lib')
        for library in (tmp / 'lib').glob('lib*.so.*'):
            unversioned = library.with_name(library.name.split('.so')[0] + '.so')
            if not unversioned.exists():
                unversioned.symlink_to(library.name)
        tmp.chmod(0o755)
        tmp.rename(prefix)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install_wheels(what, target, requirements, *pip_options):
    """pip-install `requirements` into the prefix `target`, atomically: a temporary prefix
    beside it, renamed when pip succeeded (an interrupted install leaves no half prefix).
    From the wheels an offline bundle brought (hpcbench.stack.bundle) when there are any: then
    PyPI is not asked."""
    wheels = paths.wheels_dir()
    source = 'PyPI'
    if wheels.is_dir():
        pip_options = ('--no-index', '--find-links', str(wheels), *pip_options)
        source = wheels
    print(f'installing {what} from {source} into {target}', flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix='.pip-', dir=target.parent))
    try:
        child_processes.run([sys.executable, '-m', 'pip', 'install', '--quiet',
                             '--no-warn-script-location', *pip_options, '--prefix', str(tmp),
                             *requirements], check=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
