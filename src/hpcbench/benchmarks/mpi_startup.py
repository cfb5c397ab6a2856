"""MPI start-up time (Oakforest-PACS: MPI_Init cost and "Hello World" up to 128K ranks):
parsing what our mpi-startup program and the job script around it print.

One job launches the program `launches` times. Per launch every rank prints a hello line,
rank 0 a summary (MPI_Init's longest and mean duration over the ranks, and the longest time
from the launch to a rank leaving MPI_Init), and the job script the wall time of the whole
launch, which is the hello world's time:

    hello from rank 1 of 2 on vm
    mpi-startup: ranks=2 hosts=1 init_max_s=0.228650 init_mean_s=0.228180 launch_to_init_max_s=0.281667
    launch 1: wall_ns=335200782
"""
import re
import statistics
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

# The job script's record of one launch (hpcbench.rfm.partition.repeat_launch).
# MpiStartupCheck's performance variables.
VARIABLES = ('mpi_init', 'launch_to_init', 'hello_world', 'hello_world_max')
_LAUNCH = re.compile(r'^launch (\d+): wall_ns=(\d+)\s*$', re.M)
_HELLO = re.compile(r'^hello from rank (\d+) of (\d+) on (\S+)\s*$', re.M)
_SUMMARY = re.compile(r'^mpi-startup: ranks=(\d+) hosts=(\d+) init_max_s=(\S+) '
                      r'init_mean_s=(\S+) launch_to_init_max_s=(\S+)\s*$', re.M)


class StartupOutputError(ValueError):
    pass


@dataclass(frozen=True)
class Launch:
    hosts: int
    init_max: float          # seconds: the slowest rank's MPI_Init
    init_mean: float
    launch_to_init: float    # seconds from the launcher's start to the last rank initialised
    hello_world: float       # seconds: the whole launch, as the job script timed it


@dataclass(frozen=True)
class Summary:
    launches: tuple

    def mean(self, field):
        return statistics.fmean(getattr(launch, field) for launch in self.launches)

    def max(self, field):
        return max(getattr(launch, field) for launch in self.launches)


def _seconds(text, what):
    try:
        value = float(text)
    except ValueError:
        raise StartupOutputError(f'{what} {text!r} is not a number') from None

    if not value >= 0 or value == float('inf'):
        raise StartupOutputError(f'{what} {text!r} is not a finite non-negative time')

    return value


def _launch(index, text, ranks, wall_ns):
    where = f'launch {index}'
    hellos = [(int(r), int(n)) for r, n, _host in _HELLO.findall(text)]
    if sorted(hellos) != [(r, ranks) for r in range(ranks)]:
        said = sorted({r for r, _ in hellos})
        raise StartupOutputError(
            f'{where}: {len(hellos)} hello line(s) from ranks '
            f'{said[:8]}{"..." if len(said) > 8 else ""}, expected one from each of {ranks}')

    summaries = _SUMMARY.findall(text)
    if len(summaries) != 1:
        raise StartupOutputError(f'{where}: {len(summaries)} mpi-startup summary lines, '
                                 'expected 1')

    size, hosts, init_max, init_mean, launch_to_init = summaries[0]
    if int(size) != ranks:
        raise StartupOutputError(f'{where}: {size} ranks started, {ranks} expected')

    return Launch(int(hosts), _seconds(init_max, f'{where} init_max_s'),
                  _seconds(init_mean, f'{where} init_mean_s'),
                  _seconds(launch_to_init, f'{where} launch_to_init_max_s'),
                  int(wall_ns) * 1e-9)


@any_newlines
def parse(text, ranks, launches):
    """Every launch of the job, checked: each rank said hello once, the summary counts
    `ranks`, and the job made `launches` launches. (Hosts are recorded, not checked: the
    nodes a test bed emulates on one machine share its host name.)"""
    ends = list(_LAUNCH.finditer(text))
    if [int(m.group(1)) for m in ends] != list(range(1, launches + 1)):
        raise StartupOutputError(f'{len(ends)} launch record(s), the job makes {launches}')

    result, start = [], 0
    for match in ends:
        result.append(_launch(int(match.group(1)), text[start:match.start()], ranks,
                              match.group(2)))
        start = match.end()

    return Summary(tuple(result))

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'MpiStartupCheck': Reports('MPI start-up', VARIABLES, {v: 's' for v in VARIABLES})}
