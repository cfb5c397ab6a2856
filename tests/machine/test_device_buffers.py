"""Whether an MPI sends from GPU memory (hpcbench.machine.device_buffers), read from what real
MPIs say of themselves (tests/fixtures/mpi/device-buffers) and from broken copies; the
answer each stack of this machine gives, kept in its environment's description."""
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from hpcbench.machine import device_buffers

ANSWERS = FIXTURES / 'mpi' / 'device-buffers'
INTEL_LIBMPI = (Path.home() / '.cache' / 'hpcbench' / 'intel-mpi' / '2021.17.0' / 'pip' / 'lib'
                / 'libmpi.so.12')


def _text(name):
    return (ANSWERS / name).read_text()


def test_debian_s_open_mpi_says_it_is_not_cuda_aware():
    answer = device_buffers.from_ompi_info(_text('openmpi-4.1.4-debian.ompi_info.txt'))
    assert answer == device_buffers.DeviceBuffers(
        False, 'ompi_info: built_with_cuda_support false')


def test_a_cuda_aware_open_mpi_says_so():
    answer = device_buffers.from_ompi_info(_text('openmpi-cuda-documented.ompi_info.txt'))
    assert answer.cuda and answer.evidence == 'ompi_info: built_with_cuda_support true'


def test_debian_s_mpich_was_configured_without_cuda():
    answer = device_buffers.from_mpichversion(_text('mpich-4.0.2-debian.mpichversion.txt'))
    assert not answer.cuda
    assert answer.evidence == 'mpichversion: MPICH 4.0.2 configured without --with-cuda'


def test_an_mpich_configured_with_cuda_is_asked_to_use_it():
    """Debian's mpichversion, its configure line given --with-cuda (the flag MPICH 4's
    GPU support is built with)."""
    text = _text('mpich-4.0.2-debian.mpichversion.txt').replace(
        '--with-ucx=/usr ', '--with-ucx=/usr --with-cuda=/usr/local/cuda ', 1)
    answer = device_buffers.from_mpichversion(text)
    assert answer.cuda and answer.env == {'MPIR_CVAR_ENABLE_GPU': '1'}
    assert 'configured --with-cuda=/usr/local/cuda' in answer.evidence


@pytest.mark.parametrize('options, cuda, said', [
    ('--with-cuda=no', False, 'configured --with-cuda=no'),
    ('--without-cuda', False, 'configured --without-cuda'),
    ('--with-cuda=/usr/local/cuda --without-cuda', False, 'configured --without-cuda'),
    ('--without-cuda --with-cuda=/opt/cuda', True, 'configured --with-cuda=/opt/cuda'),
    ('--with-cuda=yes', True, 'configured --with-cuda=yes'),
])
def test_mpich_s_configure_line_is_read_as_autoconf_reads_it(options, cuda, said):
    """Issue 60, item 9: `--with-cuda=no` was read as CUDA-aware. The last of the options
    for one feature wins, as in autoconf."""
    text = _text('mpich-4.0.2-debian.mpichversion.txt').replace(
        '--with-ucx=/usr ', f'--with-ucx=/usr {options} ', 1)
    answer = device_buffers.from_mpichversion(text)
    assert answer.cuda is cuda and answer.evidence.endswith(said)


@pytest.mark.parametrize('options, cuda', [('--enable-cuda=no', False), ('--disable-cuda', False),
                                           ('--enable-cuda', True),
                                           ('--enable-cuda --disable-cuda', False)])
def test_mvapich2_s_configure_line_is_read_as_autoconf_reads_it(options, cuda):
    text = (_text('mpich-4.0.2-debian.mpichversion.txt')
            .replace('MPICH Version:', 'MVAPICH2 Version:').replace('MPICH Configure',
                                                                    'MVAPICH2 Configure')
            .replace('--with-ucx=/usr ', f'--with-ucx=/usr {options} ', 1))
    answer = device_buffers.from_mpichversion(text)
    assert answer.cuda is cuda and options.split()[-1] in answer.evidence


@pytest.mark.parametrize('read, text, said', [
    (device_buffers.from_ompi_info, '', 'no built_with_cuda_support value'),
    (device_buffers.from_ompi_info, _text('openmpi-4.1.4-debian.ompi_info.txt').replace(
        'cuda_support:value:false', 'cuda_support:value:maybe', 1), 'maybe, not one of'),
    (device_buffers.from_mpichversion, 'MPICH Version: 4.0.2\n', 'no version and configure'),
])
def test_an_answer_that_is_none_is_one_message(read, text, said):
    with pytest.raises(device_buffers.ProbeError, match=said):
        read(text)


def test_the_elf_reader_lists_what_a_library_defines_not_what_it_imports():
    libc = Path('/lib/x86_64-linux-gnu/libc.so.6')
    if not libc.exists():
        pytest.skip(f'no {libc} here')
    exported = device_buffers.elf_exported(libc)
    assert {'printf', 'malloc', 'memcpy'} <= exported
    # libpython imports malloc from libc: it does not define it.
    python_lib = next(Path(sys.base_prefix).glob('lib/libpython3*.so.1.0'), None)
    if python_lib:
        assert 'malloc' not in device_buffers.elf_exported(python_lib)
        assert 'Py_Initialize' in device_buffers.elf_exported(python_lib)


def test_a_file_that_is_no_library_is_one_message(tmp_path):
    (tmp_path / 'libmpi.so').write_text('not ELF')
    with pytest.raises(device_buffers.ProbeError, match='not a 64-bit little-endian ELF'):
        device_buffers.elf_exported(tmp_path / 'libmpi.so')


def test_a_library_cut_short_or_a_fifo_is_one_message_and_never_blocks(tmp_path):
    """Issue 60, items 12 and 20: a truncated libmpi.so.12 in the cache broke every ReFrame
    command (struct.error); a FIFO in its place blocked."""
    import os
    libc = Path('/lib/x86_64-linux-gnu/libc.so.6')
    if not libc.exists():
        pytest.skip(f'no {libc} here')
    cut = tmp_path / 'libmpi.so.12'
    cut.write_bytes(libc.read_bytes()[:4096])
    with pytest.raises(device_buffers.ProbeError, match='its ELF tables point beyond its 4096 '
                                                        'bytes: a library cut short'):
        device_buffers.from_intel_library(cut)
    fifo = tmp_path / 'fifo' / 'libmpi.so.12'
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(device_buffers.ProbeError, match='not a regular file'):
        device_buffers.from_intel_library(fifo)


@pytest.mark.machine_dependent
def test_intel_mpi_from_pypi_exports_its_cuda_layer():
    if not INTEL_LIBMPI.exists():
        pytest.skip(f'Intel MPI is not installed here ({INTEL_LIBMPI}): `make run` installs it')
    symbols = set(_text('intel-mpi-2021.17.0-libmpi-cuda-symbols.txt').split())
    exported = device_buffers.elf_exported(INTEL_LIBMPI)
    assert {n for n in exported if device_buffers.INTEL_CUDA_SYMBOL.match(n)} == symbols
    answer = device_buffers.from_intel_library(INTEL_LIBMPI)
    assert answer.cuda and answer.env == {'I_MPI_OFFLOAD': '1', 'I_MPI_OFFLOAD_MODE': 'cuda'}
    assert 'exports 69 CUDA layer symbols' in answer.evidence


def test_cray_mpich_is_told_by_its_gpu_transport(tmp_path):
    assert device_buffers.from_cray_library_dir(tmp_path) is None
    (tmp_path / 'libmpi_gtl_hsa.so.0').write_text('')
    assert not device_buffers.from_cray_library_dir(tmp_path).cuda
    (tmp_path / 'libmpi_gtl_cuda.so.0').write_text('')
    answer = device_buffers.from_cray_library_dir(tmp_path)
    assert answer.cuda and answer.env == {'MPICH_GPU_SUPPORT_ENABLED': '1'}


def test_the_description_keeps_the_answer():
    answer = device_buffers.DeviceBuffers(True, 'x', {'I_MPI_OFFLOAD': '1'})
    assert device_buffers.from_description(answer.to_description()) == answer
    assert device_buffers.from_description(None) is None


@pytest.mark.machine_dependent
@pytest.mark.parametrize('stack, said', [('mpich', 'mpichversion: MPICH 4.0.2'),
                                         ('openmpi', 'ompi_info: built_with_cuda_support')])
def test_a_site_mpi_named_by_its_prefix_is_asked_the_same_way(stack, said):
    """`hpcbench new-system --mpi PREFIX`: the MPI installed at a prefix (here this machine's
    Debian MPIs, through the prefixes of links the set-up makes) says it itself."""
    from hpcbench.core import paths
    from hpcbench.stack import mpi_stacks
    prefix = paths.cache_dir() / 'mpi' / stack
    if not (prefix / 'bin' / 'mpicc').exists():
        pytest.skip(f'no {stack} prefix here ({prefix}): `make run` makes it')
    answer = mpi_stacks.installed_mpi(prefix).device_buffers()
    assert not answer.cuda and answer.evidence.startswith(said)
