"""Whether an MPI can send from GPU memory (CUDA-aware), asked of the MPI itself, never
assumed from its name: what its own tool says it was built with, or what its library
exports. Each answer says what said so (`evidence`) and what turns the support on at run
time (`env`), and goes into the MPI stack's description (hpcbench.machine.description.
StackDescription.device_buffers), so that a device-buffer check runs where the MPI can and
skips, saying why, where it cannot.

- Open MPI: `ompi_info --parsable --all` prints `..._built_with_cuda_support:value:true`
  (4.1 names it opal_built_with_cuda_support, with mpi_built_with_cuda_support its synonym;
  Open MPI's documentation, docs/tuning-apps/networking/cuda.rst, greps the latter).
- MPICH and MVAPICH2: `mpichversion` prints its configure line; a build `--with-cuda`
  (MPICH 4, through yaksa) or `--enable-cuda` (MVAPICH2; MVAPICH2-GDR says so in its
  version line) sends from device memory. MPICH needs MPIR_CVAR_ENABLE_GPU=1 (its default
  where built so, said to be sure), MVAPICH2 MV2_USE_CUDA=1.
- Intel MPI: its libmpi.so exports a CUDA layer (`MPL_gpu_cuda*`, `MPL_CUDA*`: 69 symbols in
  2021.17 from PyPI), turned on by I_MPI_OFFLOAD=1 with I_MPI_OFFLOAD_MODE=cuda.
- Cray MPICH: its GPU transport library, libmpi_gtl_cuda, beside libmpi; turned on by
  MPICH_GPU_SUPPORT_ENABLED=1.

Standard library only (the ELF reader included): it reads what compute nodes have.
"""
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from hpcbench.core import paths

# What turns each MPI's device-buffer path on at run time.
OPEN_MPI_ENV = {}
MPICH_ENV = {'MPIR_CVAR_ENABLE_GPU': '1'}
MVAPICH2_ENV = {'MV2_USE_CUDA': '1'}
INTEL_MPI_ENV = {'I_MPI_OFFLOAD': '1', 'I_MPI_OFFLOAD_MODE': 'cuda'}
CRAY_MPICH_ENV = {'MPICH_GPU_SUPPORT_ENABLED': '1'}
# Intel MPI's CUDA layer, by the names of what its library exports.
INTEL_CUDA_SYMBOL = re.compile(r'^(MPL_gpu_cuda|MPL_CUDA)')


class ProbeError(ValueError):
    pass


@dataclass(frozen=True)
class DeviceBuffers:
    """An MPI's answer: whether it sends from CUDA device memory, what said so, and the
    variables that turn it on."""
    cuda: bool
    evidence: str
    env: dict = field(default_factory=dict)

    def to_description(self):
        return {'cuda': self.cuda, 'evidence': self.evidence,
                **({'env': dict(self.env)} if self.env else {})}


# The description's schema of it (hpcbench.machine.description_schema.STACK_SCHEMA).
SCHEMA = {'type': 'object', 'required': ['cuda', 'evidence'],
          'properties': {'cuda': {'type': 'boolean'}, 'evidence': {'type': 'string'},
                         'env': {'type': 'object',
                                 'additionalProperties': {'type': 'string'}}},
          'additionalProperties': False}


def from_description(described):
    """The DeviceBuffers a description kept; None where it kept none (not asked)."""
    if not described:
        return None
    return DeviceBuffers(described['cuda'], described['evidence'], described.get('env', {}))


_OMPI = re.compile(r'^mca:\w+:base:param:(?:opal|mpi)_built_with_cuda_support:value:(\w+)$',
                   re.M)


def from_ompi_info(text):
    """Open MPI's answer from `ompi_info --parsable --all`; ProbeError where it prints no
    `built_with_cuda_support` value (not Open MPI's, or cut short)."""
    values = set(_OMPI.findall(text or ''))
    if not values:
        raise ProbeError('ompi_info --parsable --all: no built_with_cuda_support value (is it '
                         "Open MPI's, and did it finish?)")
    if values - {'true', 'false'} or len(values) > 1:
        raise ProbeError('ompi_info --parsable --all: built_with_cuda_support is '
                         f'{", ".join(sorted(values))}, not one of true and false')
    cuda = values == {'true'}
    return DeviceBuffers(cuda, f'ompi_info: built_with_cuda_support {values.pop()}',
                         OPEN_MPI_ENV if cuda else {})


def from_mpichversion(text):
    """MPICH's or MVAPICH2's answer from `mpichversion`: its configure line."""
    version = re.search(r'^(MVAPICH2(?:-GDR)?|MPICH) Version:\s*(\S+)', text or '', re.M)
    configure = re.search(r'^(?:MPICH|MVAPICH2) (?:configure|Configure Options):\s*(.*)$',
                          text or '', re.M)
    if not version or not configure:
        raise ProbeError('mpichversion: no version and configure lines (is it MPICH\'s or '
                         "MVAPICH2's?)")
    name, options = version.group(1), configure.group(1).split()
    if name == 'MVAPICH2-GDR':
        return DeviceBuffers(True, f'mpichversion: {name} {version.group(2)}', MVAPICH2_ENV)
    flag = '--enable-cuda' if name == 'MVAPICH2' else '--with-cuda'
    on, option = autoconf_option(options, flag)
    if on:
        return DeviceBuffers(True, f'mpichversion: {name} {version.group(2)} configured '
                                   f'{option}', MVAPICH2_ENV if name == 'MVAPICH2'
                             else MPICH_ENV)
    return DeviceBuffers(False, f'mpichversion: {name} {version.group(2)} configured '
                                f'{option or "without " + flag}')


def autoconf_option(options, flag):
    """(whether the feature is on, the option that says so) of a configure line's `options`
    for `flag` (`--with-cuda`, `--enable-cuda`), as autoconf reads them, the last one
    winning: `--with-cuda` and `--with-cuda=/usr/local/cuda` turn it on, `--with-cuda=no`,
    `--without-cuda` (and `--enable-cuda=no`, `--disable-cuda`) off; (False, None) where
    the line names it not at all."""
    kind, feature = flag[2:].split('-', 1)
    negative = {'with': f'--without-{feature}', 'enable': f'--disable-{feature}'}[kind]
    said = (False, None)
    for option in options:
        if option == negative or option.startswith(negative + '='):
            said = (False, option)
        elif option == flag or option.startswith(flag + '='):
            said = (option.partition('=')[2].lower() not in ('no', 'none'), option)
    return said


# Far beyond any MPI library (Intel MPI 2021.17's libmpi.so.12 is 81 MB).
MAX_LIBRARY_BYTES = 1 << 30


def elf_exported(path):
    """The names of the symbols an ELF64 little-endian shared library defines in its dynamic
    symbol table (what `nm -D --defined-only` lists); ProbeError where it is no such file:
    not a regular file (a FIFO is never read), larger than MAX_LIBRARY_BYTES, not ELF, or
    cut short (its tables point beyond its end)."""
    try:
        data = paths.read_regular(path, MAX_LIBRARY_BYTES, 'an MPI library')
    except paths.UnreadableFileError as err:
        raise ProbeError(str(err)) from None
    if data[:4] != b'\x7fELF' or len(data) < 6 or data[4] != 2 or data[5] != 1:
        raise ProbeError(f'{path}: not a 64-bit little-endian ELF file')
    try:
        return _dynamic_symbols(data)
    except (struct.error, ValueError, IndexError):
        raise ProbeError(f'{path}: its ELF tables point beyond its {len(data)} bytes: a library '
                         'cut short or damaged') from None


def _dynamic_symbols(data):
    """The names the dynamic symbol table of ELF64 `data` defines."""
    section_offset, = struct.unpack_from('<Q', data, 0x28)
    entry_size, count = struct.unpack_from('<HH', data, 0x3A)
    sections = [struct.unpack_from('<IIQQQQIIQQ', data, section_offset + i * entry_size)
                for i in range(count)]
    names = set()
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, sym_size in sections:
        if kind != 11:                                  # SHT_DYNSYM
            continue
        strings = sections[link][4]
        for at in range(offset + sym_size, offset + size, sym_size):   # entry 0 is null
            name_at, _info, _other, index = struct.unpack_from('<IBBH', data, at)
            if index:                                   # defined here, not imported
                end = data.index(b'\0', strings + name_at)
                names.add(data[strings + name_at:end].decode(errors='replace'))
    return names


def from_intel_library(path):
    """Intel MPI's answer from its libmpi.so: the CUDA layer's exported symbols."""
    exported = [n for n in elf_exported(path) if INTEL_CUDA_SYMBOL.match(n)]
    if exported:
        return DeviceBuffers(True, f'{Path(path).name} exports {len(exported)} CUDA layer '
                                   'symbols (MPL_gpu_cuda*, MPL_CUDA*)', INTEL_MPI_ENV)
    return DeviceBuffers(False, f'{Path(path).name} exports no CUDA layer (MPL_gpu_cuda*)')


def from_cray_library_dir(lib_dir):
    """Cray MPICH's answer: its GPU transport library beside libmpi; None where the
    directory has no libmpi of Cray's (no libmpi_gtl_*)."""
    lib_dir = Path(lib_dir)
    transports = sorted(p.name for p in lib_dir.glob('libmpi_gtl_*.so*'))
    if not transports:
        return None
    cuda = [t for t in transports if t.startswith('libmpi_gtl_cuda')]
    if cuda:
        return DeviceBuffers(True, f'{lib_dir}: {cuda[0]}', CRAY_MPICH_ENV)
    return DeviceBuffers(False, f'{lib_dir}: GPU transports {", ".join(transports)}, no CUDA')
