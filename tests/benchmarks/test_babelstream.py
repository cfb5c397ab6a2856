"""BabelStream on a GPU (hpcbench.benchmarks.babelstream): the array size derived from the
device, and the parser on the real `--csv` output of BabelStream 5.0 on an H200 node
(tests/fixtures/gpu/h200) and on broken copies of it."""
import re

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import babelstream

RUNS = (FIXTURES / 'gpu' / 'h200' / 'babelstream-cuda-h200.txt').read_text()
# The third run of the fixture: `-s 536870912 -n 50 --csv`.
CSV_RUN = RUNS[RUNS.rindex('Using CUDA device'):]
H200_MEMORY = 143771 << 20
H100_MEMORY = 81559 << 20
HOPPER_L2 = 50 << 20


def test_the_h200_s_arrays_are_the_size_that_measured_its_memory():
    assert babelstream.array_elements(H200_MEMORY, HOPPER_L2) == 536870912     # 4.3 GB each
    assert babelstream.array_elements(H100_MEMORY, HOPPER_L2) == 268435456
    assert babelstream.command_options(536870912, 50) == ['--arraysize', '536870912',
                                                          '--numtimes', '50', '--csv']


def test_a_device_too_small_for_its_l2_is_refused():
    with pytest.raises(babelstream.BabelStreamInputError, match='is too small to measure'):
        babelstream.array_elements(1 << 30, 64 << 20)
    with pytest.raises(babelstream.BabelStreamInputError, match='holds no array'):
        babelstream.array_elements(10)


def test_the_real_csv_output_gives_the_five_kernels_and_triad_against_the_datasheet():
    run = babelstream.parse(CSV_RUN, elements=536870912, num_times=50)
    assert run.device == 'NVIDIA H200' and list(run.kernels) == list(babelstream.KERNELS)
    values = babelstream.figures(run, datasheet_bandwidth=4800e9)
    assert values['triad_bandwidth'] == (pytest.approx(3947.74), 'GB/s')
    assert values['dot_bandwidth'] == (pytest.approx(4452.72), 'GB/s')
    assert values['triad_datasheet_efficiency'] == (pytest.approx(82.24, abs=0.01), '%')
    assert set(values) == set(babelstream.VARIABLES)
    # Without a datasheet, no ratio (nothing is judged against a guess).
    assert 'triad_datasheet_efficiency' not in babelstream.figures(run)


def _broken(old, new, count=1):
    assert old in CSV_RUN
    return CSV_RUN.replace(old, new, count)


MUTATIONS = {
    'validation failed': (CSV_RUN + 'Validation failed on a[]. Average error 1.2e-3\n',
                          "BabelStream's own check failed: Validation failed on a[]"),
    'no device line': (_broken('Using CUDA device NVIDIA H200', 'Using something else'),
                       'did not start'),
    'text output': (RUNS[RUNS.index('BabelStream'):RUNS.index('Using CUDA device', 300)],
                    'no CSV table of the kernels'),
    'a kernel missing': (re.sub(r'^Dot,.*\n', '', CSV_RUN, flags=re.M), 'no result of Dot'),
    'a kernel twice': (CSV_RUN + 'Triad,50,536870912,8,3.9e+06,0.0032,0.0033,0.0032\n',
                       'Triad is reported twice'),
    'not a number': (_broken('3.94774e+06', 'nan(ind)'), 'Triad: a value is no number'),
    'no bandwidth': (_broken('3.94774e+06', '0'), 'Triad: 0 MB/s'),
    'another size': (_broken('Add,50,536870912', 'Add,50,33554432'),
                     'Add ran on 33554432 values, 536870912 were asked'),
    'truncated': (CSV_RUN[:CSV_RUN.index('Triad,')], 'no result of Triad, Dot'),
    # Issue 51, item 8: rates its own runtime and size do not give, other values, more rows.
    'an infinite rate': (_broken('3.94774e+06', 'inf'), 'Triad: inf MB/s is not the'),
    'a rate of 1e300': (_broken('3.94774e+06', '1e300'), 'Triad: 1e+300 MB/s is not the'),
    'ten times the rate': (_broken('3.94774e+06', '3.94774e+07'),
                           "Triad: 3.94774e+07 MB/s is not the 12884901888 bytes it moves over "
                           "its fastest call of 0.00326386 s (3.94775e+06 MB/s): the output is "
                           "not one run's"),
    'floats': (_broken('Copy,50,536870912,8,', 'Copy,50,536870912,4,'),
               'Copy: values of 4 bytes, not doubles (8)'),
    'no size': (_broken('Copy,50,536870912,8,', 'Copy,50,536870912,0,'),
                'Copy: values of 0 bytes'),
    'an extra kernel': (CSV_RUN + 'Nstream,50,536870912,8,3.9e+06,0.0032,0.0033,0.0032\n',
                        "a kernel 'Nstream' in the table: BabelStream 5.0 runs Copy, Mul, "
                        'Add, Triad, Dot'),
}


@pytest.mark.parametrize('name', MUTATIONS)
def test_a_broken_output_is_refused_with_one_message(name):
    output, said = MUTATIONS[name]
    with pytest.raises(babelstream.BabelStreamOutputError, match=re.escape(said)):
        babelstream.parse(output, elements=536870912, num_times=50)


def test_another_count_of_calls_than_asked_is_refused():
    with pytest.raises(babelstream.BabelStreamOutputError, match='Copy ran 50 times, 100 were'):
        babelstream.parse(CSV_RUN, num_times=100)
