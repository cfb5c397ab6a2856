"""NCCL for nccl-tests (hpcbench.stack.nccl): the site's named by NCCL_HOME, or NVIDIA's PyPI
wheel laid out as an installed NCCL (the real wheel where the per-user cache holds it)."""
import os
import stat
import zipfile

import pytest

from hpcbench.stack import nccl


def _wheel(path, files):
    with zipfile.ZipFile(path, 'w') as archive:
        for name, text in files.items():
            info = zipfile.ZipInfo(nccl.WHEEL_TREE + name)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, text)
        archive.writestr('nvidia_nccl_cu13-2.32.3.dist-info/METADATA', 'Name: x\n')
    return path


@pytest.mark.machine_dependent
def test_the_wheel_is_laid_out_as_an_installed_nccl(tmp_path):
    wheel = nccl._wheel_in(nccl.wheel_files_dir())
    if wheel is None:
        pytest.skip(f'no {nccl.REQUIREMENT} wheel in {nccl.wheel_files_dir()} (`python -m '
                    'hpcbench.stack.nccl install` downloads it)')
    prefix = tmp_path / 'nccl' / nccl.WHEEL_VERSION
    nccl.lay_out(wheel, prefix)
    assert nccl.header_version(prefix / 'include' / 'nccl.h') == nccl.WHEEL_VERSION
    assert os.readlink(prefix / 'lib' / 'libnccl.so') == 'libnccl.so.2'
    assert os.readlink(prefix / 'lib64') == 'lib'
    found = nccl.site_nccl({'NCCL_HOME': str(prefix)})
    assert found.spack_external() == {'spec': f'nccl@{nccl.WHEEL_VERSION}',
                                      'prefix': str(prefix)}


def test_a_wheel_without_nccl_h_is_refused_and_leaves_nothing(tmp_path):
    wheel = _wheel(tmp_path / 'nccl.whl', {'lib/libnccl.so.2': ''})
    with pytest.raises(nccl.NcclError, match='holds no nvidia/nccl/include/nccl.h'):
        nccl.lay_out(wheel, tmp_path / 'cache' / '2.32.3')
    assert list((tmp_path / 'cache').iterdir()) == []


def test_an_nccl_home_without_nccl_is_one_message(tmp_path):
    with pytest.raises(nccl.NcclError, match=r'NCCL_HOME=.*: no include/nccl.h with its '
                                             r'version and lib/libnccl.so there'):
        nccl.site_nccl({'NCCL_HOME': str(tmp_path)})


def test_the_version_is_the_header_s(tmp_path):
    header = tmp_path / 'nccl.h'
    header.write_text('#define NCCL_MAJOR 2\n#define NCCL_MINOR 32\n#define NCCL_PATCH 3\n')
    assert nccl.header_version(header) == '2.32.3'
    header.write_text('#define NCCL_MAJOR 2\n')
    assert nccl.header_version(header) is None
