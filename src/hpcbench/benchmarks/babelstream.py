"""BabelStream 5.0 on a GPU: its array size derived from the device, its `--csv` output parsed,
and its figures judged against the device's datasheet bandwidth.

- Size: three arrays of doubles that take at most DEVICE_MEMORY_SHARE of the device's memory
  and each at least L2_MULTIPLE times its L2 cache (STREAM's rule for a CPU's last-level
  cache), as a power of two (BabelStream's CUDA model needs a multiple of its 1024-thread
  block). On the H200 (141 GB) that is 2^29 doubles, 4.3 GB an array: triad 3.95 TB/s
  there (2026-11-26), where BabelStream's default of 2^25 gave 3.79.
- Output: the five kernels (Copy, Mul, Add, Triad, Dot), each run `num_times` times on
  `n_elements` values; BabelStream checks its own results and prints `Validation failed`
  when one is wrong, which fails the run here.
- Figures in GB/s (BabelStream's MBytes/sec are 10^6 bytes: the same count), the best of
  the calls as BabelStream reports them, and triad's share of the datasheet bandwidth.

Standard library only.
"""
import csv
import io
import re
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

KERNELS = ('Copy', 'Mul', 'Add', 'Triad', 'Dot')
# The three arrays together, at most this share of the device's memory.
DEVICE_MEMORY_SHARE = 1 / 8
# Each array at least this many times the device's L2 cache.
L2_MULTIPLE = 4
# BabelStream's own default (2^25 doubles): where a device's L2 is unknown, the least size.
DEFAULT_ELEMENTS = 1 << 25
DOUBLE_BYTES = 8
NUM_TIMES = 100
# The arrays each kernel reads and writes (BabelStream's own count: a = b, b = s * c, c = a +
# b, a = b + s * c, sum of a * b): its rate is these bytes over its fastest call.
ARRAYS_MOVED = {'Copy': 2, 'Mul': 2, 'Add': 3, 'Triad': 3, 'Dot': 2}
# BabelStream prints six significant digits: a rate and its runtime agree within this.
RATE_ROUNDING = 1e-3
# The performance variables of the check: each kernel's bandwidth, and triad against the
# datasheet's memory bandwidth.
VARIABLES = tuple(f'{k.lower()}_bandwidth' for k in KERNELS) + ('triad_datasheet_efficiency',)
_FUNCTION_HEADER = 'function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,' \
                   'max_runtime,avg_runtime'


class BabelStreamInputError(ValueError):
    pass


class BabelStreamOutputError(ValueError):
    pass


def array_elements(memory_bytes, l2_bytes=None):
    """Doubles per array for a device of `memory_bytes` (and an L2 of `l2_bytes`, where
    known): the largest power of two whose three arrays fit DEVICE_MEMORY_SHARE of the
    memory; refused when that is less than L2_MULTIPLE x the L2 (or BabelStream's default)."""
    fitting = int(memory_bytes * DEVICE_MEMORY_SHARE) // (3 * DOUBLE_BYTES)
    if fitting < 1:
        raise BabelStreamInputError(f'a device of {memory_bytes} bytes holds no array')
    elements = 1 << (fitting.bit_length() - 1)
    least = max(DEFAULT_ELEMENTS, -(-L2_MULTIPLE * (l2_bytes or 0) // DOUBLE_BYTES))
    if elements < least:
        raise BabelStreamInputError(
            f'{elements} doubles an array ({elements * DOUBLE_BYTES} bytes) is less than '
            f'{least} ({L2_MULTIPLE} x the L2 of {l2_bytes} bytes, at least BabelStream\'s '
            f'default): a device of {memory_bytes} bytes is too small to measure its memory')
    return elements


def spack_spec(cuda_arch):
    """BabelStream's CUDA build for Spack's `cuda_arch` (90 for sm_90): the root spec the
    environment lists (its version pinned there); its program is bin/cuda-stream."""
    return f'babelstream +cuda cuda_arch={cuda_arch}'


PROGRAM = 'cuda-stream'


def command_options(elements, num_times=NUM_TIMES):
    """BabelStream's options for that size: CSV output, `num_times` calls of each kernel."""
    return ['--arraysize', str(elements), '--numtimes', str(num_times), '--csv']


@dataclass(frozen=True)
class Kernel:
    name: str
    num_times: int
    n_elements: int
    max_bytes_per_s: float
    min_s: float
    max_s: float
    avg_s: float


@dataclass(frozen=True)
class Run:
    device: str            # as BabelStream names it
    kernels: dict          # {name: Kernel}

    def bandwidth_gbs(self, kernel):
        return self.kernels[kernel].max_bytes_per_s / 1e9


@any_newlines
def parse(text, elements=None, num_times=None):
    """The run of BabelStream's `--csv` output: its device and the five kernels. Refused with
    one message naming what is wrong: a validation failure, a kernel missing, given twice or
    unknown, a number that is none or not above 0, values that are not doubles, a rate that
    is not its bytes over its fastest call, or another size or count than was asked."""
    failed = re.search(r'^.*Validation failed.*$', text, re.M)
    if failed:
        raise BabelStreamOutputError(f'BabelStream\'s own check failed: {failed.group(0).strip()}')
    device = re.search(r'^Using \w+ device (.+)$', text, re.M)
    if not device:
        raise BabelStreamOutputError('no "Using ... device" line: BabelStream did not start')
    if _FUNCTION_HEADER not in text:
        raise BabelStreamOutputError('no CSV table of the kernels (was --csv given?)')
    table = text[text.index(_FUNCTION_HEADER):]
    kernels = {}
    for row in csv.DictReader(io.StringIO(table)):
        name = row['function']
        if name not in KERNELS:
            raise BabelStreamOutputError(f'a kernel {name!r} in the table: BabelStream 5.0 '
                                         f'runs {", ".join(KERNELS)}')
        if name in kernels:
            raise BabelStreamOutputError(f'{name} is reported twice')
        try:
            kernel = Kernel(name, int(row['num_times']), int(row['n_elements']),
                            float(row['max_mbytes_per_sec']) * 1e6, float(row['min_runtime']),
                            float(row['max_runtime']), float(row['avg_runtime']))
            sizeof = int(row['sizeof'])
        except (TypeError, ValueError):     # a short row, or a value that is no number
            raise BabelStreamOutputError(f'{name}: a value is no number: '
                                         f'{",".join(str(v) for v in row.values())}') from None
        if not (kernel.max_bytes_per_s > 0 and 0 < kernel.min_s <= kernel.avg_s <= kernel.max_s):
            raise BabelStreamOutputError(f'{name}: {kernel.max_bytes_per_s / 1e6:g} MB/s over '
                                         f'{kernel.min_s:g} to {kernel.max_s:g} s (average '
                                         f'{kernel.avg_s:g}) is no measurement')
        if sizeof != DOUBLE_BYTES:
            raise BabelStreamOutputError(f'{name}: values of {sizeof} bytes, not doubles (8): '
                                         'the check measures double precision')
        if elements is not None and kernel.n_elements != elements:
            raise BabelStreamOutputError(f'{name} ran on {kernel.n_elements} values, '
                                         f'{elements} were asked')
        if num_times is not None and kernel.num_times != num_times:
            raise BabelStreamOutputError(f'{name} ran {kernel.num_times} times, {num_times} '
                                         'were asked')
        moved = ARRAYS_MOVED[name] * kernel.n_elements * sizeof
        if abs(kernel.max_bytes_per_s * kernel.min_s / moved - 1) > RATE_ROUNDING:
            raise BabelStreamOutputError(
                f'{name}: {kernel.max_bytes_per_s / 1e6:g} MB/s is not the {moved} bytes it '
                f'moves over its fastest call of {kernel.min_s:g} s '
                f'({moved / kernel.min_s / 1e6:g} MB/s): the output is not one run\'s')
        kernels[name] = kernel
    missing = [k for k in KERNELS if k not in kernels]
    if missing:
        raise BabelStreamOutputError(f'no result of {", ".join(missing)}')
    return Run(device.group(1).strip(), kernels)


def figures(run, datasheet_bandwidth=None):
    """{variable: (value, unit)}: each kernel's best bandwidth in GB/s and, where the
    datasheet's memory bandwidth (bytes/s) is known, triad's share of it in %."""
    values = {f'{k.lower()}_bandwidth': (run.bandwidth_gbs(k), 'GB/s') for k in KERNELS}
    if datasheet_bandwidth:
        values['triad_datasheet_efficiency'] = (
            100 * run.kernels['Triad'].max_bytes_per_s / datasheet_bandwidth, '%')
    return values

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'BabelStreamCheck': Reports(
    'BabelStream', VARIABLES, {v: '%' if v.endswith('efficiency') else 'GB/s' for v in VARIABLES})}
