"""NVIDIA's wheels laid out as installed trees (hpcbench.stack.wheels, for hpcbench.stack.cuda
and hpcbench.stack.nccl): hostile wheels, as an offline bundle's `wheels/` could hold them,
refused whole before anything is written; the real wheels, where the per-user cache holds
them, within the bounds."""
import os
import stat
import zipfile

import pytest

from hpcbench.stack import cuda, nccl, wheels

NCCL_H = '#define NCCL_MAJOR 2\n#define NCCL_MINOR 32\n#define NCCL_PATCH 3\n'


def _nccl_wheel(path, members, compression=zipfile.ZIP_STORED):
    """An NCCL wheel of `members` ({name: (bytes, mode)}; names as written in the archive)
    beside a good nccl.h and libnccl.so.2."""
    good = {nccl.WHEEL_TREE + 'include/nccl.h': (NCCL_H.encode(), stat.S_IFREG | 0o644),
            nccl.WHEEL_TREE + 'lib/libnccl.so.2': (b'\x7fELF', stat.S_IFREG | 0o755)}
    with zipfile.ZipFile(path, 'w', compression) as archive:
        for name, (data, mode) in {**good, **members}.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            info.compress_type = compression
            archive.writestr(info, data)
    return path


@pytest.mark.parametrize('name', [
    'nvidia/nccl/../../../../ESCAPED',
    '/ESCAPED-absolute',
    'nvidia/nccl/lib/../../../ESCAPED',
    '../ESCAPED',
    'nvidia\\nccl\\..\\..\\ESCAPED',
])
def test_a_member_whose_path_leaves_the_tree_refuses_the_wheel_and_writes_nothing(
        tmp_path, name):
    cache = tmp_path / 'cache' / 'nccl'
    wheel = _nccl_wheel(tmp_path / 'nccl.whl', {name: (b'pwned', stat.S_IFREG | 0o644)})
    with pytest.raises(nccl.NcclError, match=r'nccl.whl: member .* leaves the tree it unpacks '
                                             r'into: not a wheel to install'):
        nccl.lay_out(wheel, cache / '2.32.3')
    assert not list(tmp_path.rglob('ESCAPED*')) and not os.path.exists('/ESCAPED-absolute')
    assert not cache.exists() or list(cache.iterdir()) == []


@pytest.mark.parametrize('below', ['{tmp}/ESCAPED-absolute', '/{tmp}/ESCAPED-two-slashes',
                                   'lib//{tmp}/ESCAPED-inside', 'lib/./{tmp}/ESCAPED-dot'])
def test_a_member_whose_path_below_the_tree_is_absolute_refuses_the_wheel(tmp_path, below):
    """Issue 70: `nvidia/nccl//tmp/x` (the tree, then an absolute path) passed the member's
    checks and was written at /tmp/x; the path below the tree is checked itself: for NCCL's
    wheel and the toolkit's, in variations (an empty part inside it, a `.`)."""
    member = below.format(tmp=tmp_path)
    wheel = _nccl_wheel(tmp_path / 'nccl.whl', {nccl.WHEEL_TREE + member:
                                                (b'pwned', stat.S_IFREG | 0o644)})
    with pytest.raises(nccl.NcclError, match=r'leaves the tree it unpacks into \(below '):
        nccl.lay_out(wheel, tmp_path / 'nccl' / '2.32.3')
    toolkit = tmp_path / 'nvcc.whl'
    with zipfile.ZipFile(toolkit, 'w') as archive:
        archive.writestr(cuda.WHEEL_TREE + 'bin/nvcc', '#!/bin/sh\n')
        archive.writestr(cuda.WHEEL_TREE + member, 'pwned')
    with pytest.raises(cuda.CudaError, match=r'leaves the tree it unpacks into \(below '):
        cuda.lay_out([toolkit], tmp_path / 'cuda' / '13.0.88')
    assert not list(tmp_path.rglob('ESCAPED*'))
    assert not (tmp_path / 'nccl').exists() and not (tmp_path / 'cuda').exists()


def test_special_bits_are_dropped_and_the_rest_of_the_mode_kept(tmp_path):
    wheel = _nccl_wheel(tmp_path / 'nccl.whl', {
        nccl.WHEEL_TREE + 'bin/setuid-tool': (b'#!/bin/sh\n', stat.S_IFREG | 0o4755),
        nccl.WHEEL_TREE + 'bin/setgid-sticky': (b'', stat.S_IFREG | 0o3775)})
    prefix = tmp_path / 'nccl' / '2.32.3'
    nccl.lay_out(wheel, prefix)
    assert stat.S_IMODE((prefix / 'bin' / 'setuid-tool').stat().st_mode) == 0o755
    assert stat.S_IMODE((prefix / 'bin' / 'setgid-sticky').stat().st_mode) == 0o775
    assert os.readlink(prefix / 'lib' / 'libnccl.so') == 'libnccl.so.2'


@pytest.mark.parametrize('mode', [stat.S_IFLNK | 0o777, stat.S_IFCHR | 0o666,
                                  stat.S_IFIFO | 0o644])
def test_a_link_or_device_member_refuses_the_wheel(tmp_path, mode):
    wheel = _nccl_wheel(tmp_path / 'nccl.whl', {
        nccl.WHEEL_TREE + 'lib/libevil.so': (b'/etc/passwd', mode)})
    with pytest.raises(nccl.NcclError, match=r'member .*libevil.so.* is not a regular file'):
        nccl.lay_out(wheel, tmp_path / 'nccl' / '2.32.3')
    assert not (tmp_path / 'nccl').exists()


def test_a_small_wheel_that_unpacks_to_a_huge_library_is_refused_before_writing(tmp_path):
    """300 MiB of zeros compress to about 300 KB: refused from the sizes its listing gives,
    nothing written."""
    wheel = tmp_path / 'nccl.whl'
    with zipfile.ZipFile(wheel, 'w', zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(nccl.WHEEL_TREE + 'include/nccl.h', NCCL_H)
        with archive.open(nccl.WHEEL_TREE + 'lib/libnccl.so.2', 'w', force_zip64=True) as out:
            chunk = bytes(1 << 20)
            for _ in range(300):
                out.write(chunk)
    assert wheel.stat().st_size < 400_000
    with pytest.raises(nccl.NcclError, match=r'unpack to 300 MiB from \d+ KiB .*libnccl.so.2 '
                                             r'300 MiB\), more than 20 times the wheel'):
        nccl.lay_out(wheel, tmp_path / 'nccl' / '2.32.3')
    assert not (tmp_path / 'nccl').exists()


def test_a_wheel_that_is_a_fifo_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / 'nccl.whl')
    with pytest.raises(nccl.NcclError, match='nccl.whl: not a regular file, so not a wheel'):
        nccl.lay_out(tmp_path / 'nccl.whl', tmp_path / 'nccl' / '2.32.3')


def test_the_toolkit_s_wheels_are_held_to_the_same_rules(tmp_path):
    wheel = tmp_path / 'nvcc.whl'
    with zipfile.ZipFile(wheel, 'w') as archive:
        archive.writestr(cuda.WHEEL_TREE + 'bin/nvcc', '#!/bin/sh\n')
        archive.writestr(cuda.WHEEL_TREE + '../../../ESCAPED', 'x')
    with pytest.raises(cuda.CudaError, match='leaves the tree it unpacks into'):
        cuda.lay_out([wheel], tmp_path / 'cuda' / '13.0.88')
    assert not list(tmp_path.rglob('ESCAPED'))


@pytest.mark.machine_dependent
def test_the_pinned_wheels_are_within_the_bounds():
    """Each pinned wheel the per-user cache holds passes every member check, and unpacks to
    well under MAX_RATIO times its size."""
    found = [w for w in (nccl._wheel_in(nccl.wheel_files_dir()),
                         *(cuda._wheel_of(cuda.wheel_files_dir(), n, v)
                           for n, v in cuda.WHEELS.items())) if w]
    if not found:
        pytest.skip('no pinned wheel in the per-user cache (python -m hpcbench.stack.cuda '
                    'install, python -m hpcbench.stack.nccl install)')
    for wheel in found:
        tree = nccl.WHEEL_TREE if wheel.name.startswith('nvidia_nccl') else cuda.WHEEL_TREE
        kept = wheels.checked_members(wheel, tree)
        assert sum(m.file_size for m, _ in kept) < wheels.MAX_RATIO / 2 * wheel.stat().st_size
