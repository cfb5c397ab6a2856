"""MPI start-up time per MPI stack (Oakforest-PACS: MPI_Init cost and "Hello World" time
against the number of ranks).

MpiStartupCheck launches our mpi-startup program (packages/: built by Spack against each
MPI of the environment) `launches` times in one job, one rank per core on every node count
of the partition, and reports the means over the launches of: MPI_Init's duration on the
slowest rank, the time from the launcher's start to the last rank leaving MPI_Init, and the
wall time of the whole hello world. Ranks are not wrapped or bound: the launch is measured
as users launch. Parsing is hpcbench.benchmarks.mpi_startup.
"""

import reframe as rfm
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import mpi_startup
from hpcbench.results import references
from hpcbench.rfm.partition import (configured_node_counts, given_or_paper, job_output,
                                    paper_settings, partition_layout, repeat_launch,
                                    skip_unless_node_count)
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.rfm.plugins import SiteTuning
from hpcbench.rfm.run import BenchmarkRun


class MpiStartupBuild(BenchmarkBuild):
    spec = 'mpi-startup'
    needs_mpi = True


@rfm.simple_test
class MpiStartupCheck(BenchmarkRun, SiteTuning):
    descr = 'MPI_Init and hello world time of one rank per core (Oakforest-PACS)'
    valid_systems = ['*']
    # Also under a stack's other launchers (MVAPICH2's mpirun_rsh beside Hydra): start-up is
    # the launcher's work.
    valid_prog_environs = ['+mpi +spack-builds', '+mpi-launcher +spack-builds']
    build = fixture(MpiStartupBuild, scope='environment')
    num_nodes = parameter(configured_node_counts())
    #: Launches in the job; the figures are their means.
    launches = variable(int, value=5)
    #: Ranks per node (None: one per core; Oakforest-PACS measured 64 per node).
    ranks_per_node = variable(int, type(None), value=None)
    #: What this run used (ranks, nodes, launches), for the perflog and results database.
    inputs = variable(str, value='')
    input_kinds = {'launches': 'positive', 'ranks_per_node': 'positive'}
    time_limit = '30m'
    tags = {'mpi-startup', 'network'}

    @run_after('setup')
    def configure_run(self):
        part = self.current_partition
        skip_unless_node_count(self, self.num_nodes)
        cores = partition_layout(part, 'per-core').ranks_per_node
        # Given (-S), else the paper's (description mpi_startup, cited), else one per core; kept
        # in the variable, so that references match what ran.
        paper = paper_settings(self, 'mpi_startup', ['ranks_per_node'])
        per_node = given_or_paper(self, 'ranks_per_node', paper, cores)
        if not 1 <= per_node <= cores:
            raise ReframeError(f'{part.fullname}: ranks_per_node={per_node}: between 1 and '
                               f'the {cores} cores ranks may use')
        self.ranks_per_node = per_node
        self.num_tasks = self.num_nodes * per_node
        self.num_tasks_per_node = per_node
        self.executable = self.build.program('mpi-startup')
        self.executable_opts = ['"$start"']
        repeat_launch(self, self.launches)
        self.inputs = (f'ranks={self.num_tasks} nodes={self.num_nodes} '
                       f'ranks_per_node={per_node} launches={self.launches}')
        self.reference = references.reframe_reference(self)

    @sanity_function
    def every_rank_said_hello(self):
        try:
            self.summary = mpi_startup.parse(job_output(self), self.num_tasks,
                                             self.launches)
        except mpi_startup.StartupOutputError as err:
            raise SanityError(str(err)) from None

        each = {field: [getattr(launch, field) for launch in self.summary.launches]
                for field in ('init_max', 'launch_to_init', 'hello_world')}
        launches = f'{len(self.summary.launches)} launches'
        self.record_samples(f'mean of {launches} (the slowest rank\'s MPI_Init in each)',
                            mpi_init=each['init_max'])
        self.record_samples(f'mean of {launches}', launch_to_init=each['launch_to_init'],
                            hello_world=each['hello_world'])
        self.record_samples(f'slowest of {launches}', hello_world_max=each['hello_world'])
        return True

    @performance_function('s')
    def mpi_init(self):
        return self.summary.mean('init_max')

    @performance_function('s')
    def launch_to_init(self):
        return self.summary.mean('launch_to_init')

    @performance_function('s')
    def hello_world(self):
        return self.summary.mean('hello_world')

    @performance_function('s')
    def hello_world_max(self):
        return self.summary.max('hello_world')
