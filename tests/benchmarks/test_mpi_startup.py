"""MPI start-up parsing (hpcbench.benchmarks.mpi_startup) on a real output captured here: our
mpi-startup program built by Spack against Open MPI, 2 ranks, 5 launches in one job through
ReFrame (MpiStartupCheck), and broken copies of it."""
import re

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import mpi_startup

OUTPUT = (FIXTURES / 'mpi_startup' / 'openmpi-2-ranks-5-launches.out').read_text()


def _mutations(text):
    return {
        'a rank did not say hello': text.replace('hello from rank 1 of 2 on vm\n', '', 1),
        'a rank said hello twice': text.replace('hello from rank 0 of 2 on vm\n',
                                                'hello from rank 0 of 2 on vm\n' * 2, 1),
        'no summary': re.sub(r'mpi-startup: [^\n]*\n', '', text, 1),
        'fewer ranks started': text.replace('mpi-startup: ranks=2', 'mpi-startup: ranks=1', 1),
        'NaN': re.sub(r'init_max_s=\S+', 'init_max_s=nan', text, 1),
        'cut short': text[:text.index('launch 4:')],
        'a launch missing': re.sub(r'launch 3: [^\n]*\n', '', text),
    }


MUTATIONS = list(_mutations(OUTPUT))


def test_a_real_output():
    summary = mpi_startup.parse(OUTPUT, ranks=2, launches=5)
    first = summary.launches[0]
    assert (first.hosts, first.init_max, first.init_mean, first.launch_to_init) == (
        1, 0.224422, 0.223805, 0.265568)
    assert first.hello_world == pytest.approx(0.320211662)
    # Launch 5: rank 1's hello reached the output after rank 0's summary.
    assert summary.launches[4].init_max == 0.224318
    assert summary.mean('init_max') == pytest.approx(
        (0.224422 + 0.223706 + 0.222897 + 0.229115 + 0.224318) / 5)
    assert summary.max('hello_world') == pytest.approx(0.320211662)
    # MPI_Init is part of the launch, which is part of the hello world.
    for launch in summary.launches:
        assert launch.init_max < launch.launch_to_init < launch.hello_world


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_broken_real_outputs_fail(mutation):
    with pytest.raises(mpi_startup.StartupOutputError):
        mpi_startup.parse(_mutations(OUTPUT)[mutation], ranks=2, launches=5)


def test_more_ranks_or_launches_than_ran_fail():
    with pytest.raises(mpi_startup.StartupOutputError, match='expected one from each of 4'):
        mpi_startup.parse(OUTPUT, ranks=4, launches=5)
    with pytest.raises(mpi_startup.StartupOutputError, match='5 launch record.s., the job '
                                                             'makes 6'):
        mpi_startup.parse(OUTPUT, ranks=2, launches=6)
