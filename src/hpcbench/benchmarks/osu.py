"""OSU Micro-Benchmarks 7.3 from GPU memory (`osu-micro-benchmarks@7.3 +cuda`, built by Spack
on each MPI that sends from GPU memory, our recipe: it compiles against CUDA 13): osu_latency,
osu_bw and osu_bibw between a pair of GPUs (`-d cuda D D`), osu_allreduce over every GPU
(`-d cuda`), data validated (`-c`). Inputs, parsing and math; the checks are
reframe-checks/osu.py.

OSU prints a header (`# OSU MPI-CUDA Bandwidth Test v7.3`, where buffers are on a GPU the
line `# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)`), its column names, then
a row per size with the figure and `Pass` or `Fail`. Its MB/s are 10^6 bytes/s.

Measured here: OSU 7.3 with Intel MPI 2021.17 from PyPI (the one MPI of this machine that
sends from GPU memory) dies of a segmentation fault in its first MPI_Barrier
(MPIR_Barrier_intra_dissemination, from osu_bw.c:208), host buffers too, built with or
without CUDA; built on Debian's Open MPI it runs (tests/fixtures/gpu/osu). KNOWN_FAILURES
says so, and the checks skip that pair of OSU and MPI.
"""
import re
from dataclasses import dataclass

from hpcbench.benchmarks import gpu_mpi
from hpcbench.benchmarks.reports import Reports
from hpcbench.core.parsing import doubling, measured_value

VERSION = '7.3'
PAIR_PROGRAMS = {'osu_latency': 'pt2pt', 'osu_bw': 'pt2pt', 'osu_bibw': 'pt2pt'}
COLLECTIVE_PROGRAMS = {'osu_allreduce': 'collective'}
# Up to 64 MiB (OSU's default stops at 4 MiB, below what NVLink needs to reach its rate).
MAX_BYTES = 64 << 20
# What each program measures: the figure's column and unit.
FIGURES = {'osu_latency': ('Latency (us)', 'us'), 'osu_bw': ('Bandwidth (MB/s)', 'MB/s'),
           'osu_bibw': ('Bandwidth (MB/s)', 'MB/s'), 'osu_allreduce': ('Avg Latency(us)', 'us')}
# The smallest size each program measures (an all-reduce of floats starts at 4 bytes).
MIN_BYTES = {'osu_latency': 1, 'osu_bw': 1, 'osu_bibw': 1, 'osu_allreduce': 4}
# OSU with an MPI it is known to crash with, by the MPI's Spack package: why.
KNOWN_FAILURES = {
    'intel-oneapi-mpi': 'OSU 7.3 with Intel MPI 2021.17 (PyPI) dies of a segmentation fault '
                        'in its first MPI_Barrier (MPIR_Barrier_intra_dissemination, '
                        'osu_bw.c:208), host buffers too, with or without CUDA: measured here, '
                        'tests/fixtures/gpu/osu/osu_bw-intel-mpi-crash.out',
}
# The header of any OSU build: its flavour (MPI, MPI-CUDA, MPI-ROCM, ...), its test, its
# version. A header of another flavour or version is named as it is, never "did not start".
_HEADER = re.compile(r'^# OSU (MPI(?:-[A-Z][A-Z0-9-]*)?) (.+?) Test v(\S+)\s*$', re.M)
_BUFFERS = re.compile(r'^# Send Buffer on (\w+) \(\w+\) and Receive Buffer on (\w+) \(\w+\)',
                      re.M)
_ROW = re.compile(r'^(\d+)\s+(\S+)\s+(Pass|Fail)\s*$', re.M)
_FAILURE = re.compile(r"^.*(?:CUDA call '.*' failed|error while loading shared libraries|"
                      r'BAD TERMINATION|Segmentation fault).*$', re.M)


class OsuError(ValueError):
    pass


def spack_spec(cuda_arch):
    return f'osu-micro-benchmarks@{VERSION} +cuda cuda_arch={cuda_arch}'


def program_directory(program):
    """Where Spack's recipe installs `program`, below its prefix."""
    kind = {**PAIR_PROGRAMS, **COLLECTIVE_PROGRAMS}[program]
    return f'libexec/osu-micro-benchmarks/mpi/{kind}'


def command_options(program, max_bytes=MAX_BYTES):
    """OSU's arguments: sizes up to `max_bytes`, validated, buffers on the GPU."""
    sizes = ['-m', f'{MIN_BYTES[program]}:{int(max_bytes)}']
    if program in PAIR_PROGRAMS:
        return [*sizes, '-c', '-d', 'cuda', 'D', 'D']
    return [*sizes, '-c', '-d', 'cuda']


def sizes(program, max_bytes=MAX_BYTES):
    return doubling(MIN_BYTES[program], max_bytes)


@dataclass(frozen=True)
class Run:
    program: str
    unit: str
    rows: tuple             # ((size, value), ...)

    def best(self):
        """The highest bandwidth, or the lowest latency, and its size."""
        pick = max if self.unit == 'MB/s' else min
        return pick(self.rows, key=lambda r: r[1])

    def at(self, size):
        return dict(self.rows)[size]


def parse(text, program, device=True, max_bytes=MAX_BYTES):
    """The Run of one OSU program's output; OsuError where it failed (a CUDA call, a library
    not found, a crash), is another program's, measured other buffers than asked, a size is
    missing or a value is none, or a row failed validation."""
    failures = _FAILURE.findall(text or '')
    if failures:
        raise OsuError(f'{program} failed: ' + '; '.join(
            ' '.join(f.split()) for f in dict.fromkeys(failures)))
    header = _HEADER.search(text or '')
    if not header:
        raise OsuError(f'no OSU header (# OSU MPI ... Test v{VERSION}): {program} did not start')
    if header.group(3) != VERSION:
        raise OsuError(f'OSU {header.group(3)[:20]} ({header.group(1)[:40]}), {VERSION} asked')
    if header.group(1) not in ('MPI', 'MPI-CUDA'):
        raise OsuError(f'OSU {header.group(1)[:40]}: this suite builds and reads MPI-CUDA '
                       'and MPI (host) runs')
    column, unit = FIGURES[program]
    if column not in text:
        raise OsuError(f'no column {column!r}: not {program}\'s output')
    on_device = header.group(1) == 'MPI-CUDA'
    if on_device != device:
        raise OsuError(f'buffers on the {"GPU" if on_device else "host"}, '
                       f'{"device" if device else "host"} buffers asked')
    buffers = _BUFFERS.search(text)
    if device and program in PAIR_PROGRAMS and (not buffers or
                                               buffers.groups() != ('DEVICE', 'DEVICE')):
        said = ' and '.join(buffers.groups()) if buffers else 'not said'
        raise OsuError(f'send and receive buffers {said}, DEVICE and DEVICE asked')
    rows = []
    for match in _ROW.finditer(text):
        where = f'{program} size {match.group(1)}'
        if match.group(3) != 'Pass':
            raise OsuError(f'{where}: validation failed (the data received is wrong)')
        rows.append((int(match.group(1)), measured_value(match.group(2), OsuError, where)))
    wanted = sizes(program, max_bytes)
    if [r[0] for r in rows] != wanted:
        missing = [s for s in wanted if s not in dict(rows)]
        raise OsuError(f'{program}: sizes {", ".join(map(str, missing)) or "out of order"} '
                       f'missing of {wanted[0]} to {wanted[-1]} (the run ended early)')
    return Run(program, unit, tuple(rows))


# The figure each pair program measures (the one-way bandwidth's share of each pair's link
# added where the link is known: hpcbench.rfm.gpu_to_gpu).
PAIR_FIGURES = {'osu_latency': ('latency',), 'osu_bw': ('bandwidth',),
                'osu_bibw': ('bidirectional_bandwidth',)}
PAIR_VARIABLES = ('latency', 'bandwidth', 'bidirectional_bandwidth', 'link_efficiency',
                  'slowest_pair_link_efficiency')
COLLECTIVE_VARIABLES = ('latency_8B', 'latency_largest')
# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {
    'OsuPairCheck': Reports('GPU to GPU', PAIR_VARIABLES, gpu_mpi.PAIR_UNITS),
    'OsuAllreduceCheck': Reports('GPU to GPU', COLLECTIVE_VARIABLES,
                                 {v: 'us' for v in COLLECTIVE_VARIABLES}),
}
