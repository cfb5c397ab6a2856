"""Intel MPI Benchmarks (IMB-MPI1) for every MPI stack of a partition (CHiC §4, Figures 4-9)
and the run-to-run variability of collectives (Oakforest-PACS).

- ImbPairCheck: PingPong, PingPing, Uniband, Biband with two ranks, one on each of two
  nodes when the partition has two or more (CHiC: "two nodes, 1 core per node"), else both
  on one node, on different cores (PingPong and PingPing: best of three launches at each
  size). Latency, bandwidth at 4 MiB and peak, and for PingPong and PingPing the eager to
  rendezvous switch detected in the bandwidth curve.
- ImbGroupCheck: Sendrecv, Exchange, Allreduce, Alltoall, Bcast, Barrier on every node of
  the partition, one rank per core, and one rank per node where a partition has several
  nodes (CHiC: 32 nodes, one core each). Collective t_avg at 8 B, 16 B and 1 MiB.
- ImbVariability: Allreduce at 16 B and Barrier, IMB launched `repeats` times in one job;
  mean, min, max and coefficient of variation (Oakforest-PACS: one rank per node).

Each job runs one benchmark; the placement is in `inputs` (perflog, results database).
`hpcbench compare-stacks` prints each benchmark's figures side by side per MPI stack (what
`make run` ends with). Parsing and sizes are hpcbench.benchmarks.imb.
"""
import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import imb, imb_variability
from hpcbench.results import references
from hpcbench.rfm.partition import (bind_ranks, given_or_paper, job_output, paper_settings,
                                    partition_layout, partition_node, partition_num_nodes,
                                    repeat_launch, skip_beyond_partition, skip_known_failure)
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.rfm.plugins import SiteTuning
from hpcbench.rfm.run import BenchmarkRun


class ImbBuild(BenchmarkBuild):
    spec = 'intel-mpi-benchmarks'
    needs_mpi = True
    registry_name = 'imb'


def _group_layouts():
    """One rank per core everywhere; one rank per node where some partition has several."""
    several = any(partition_num_nodes(p) > 1 for p in rt.runtime().system.partitions)
    return ['per-core', 'per-node'] if several else ['per-core']


class ImbBase(BenchmarkRun, SiteTuning):
    valid_systems = ['*']
    # Spack's build of every stack; without a Spack, the IMB-MPI1 of Intel MPI's wheel.
    valid_prog_environs = ['+mpi +spack-builds', '+mpi +registry-imb']
    build = fixture(ImbBuild, scope='environment')
    #: Message sizes 0 and 2^min_msglog .. 2^max_msglog bytes (IMB's -msglog; CHiC: up to
    #: 4 MiB); sizes that do not fit IMB's buffer limit (-mem, from node memory) are dropped.
    min_msglog = variable(int, value=0)
    max_msglog = variable(int, value=22)
    #: Repetitions per message size (IMB's -iter; None: IMB's 1000, fewer for large sizes).
    iterations = variable(int, type(None), value=None)
    #: Seconds IMB may spend on one message size (IMB's -time; None: IMB's 10).
    seconds_per_size = variable(float, type(None), value=None)
    #: What this run used (benchmark, placement, sizes), for the perflog and results database.
    inputs = variable(str, value='')
    input_kinds = {'min_msglog': 'non-negative', 'max_msglog': 'non-negative',
                   'iterations': 'positive', 'seconds_per_size': 'positive'}
    time_limit = '30m'
    keep_files = ['bind-rank.sh']
    tags = {'imb', 'network'}

    def place(self, placement):
        """Tasks and binding for a placement: one core per rank where a node holds several,
        the whole node where it holds one. Returns IMB's -mem for it (GiB)."""
        part = self.current_partition
        skip_beyond_partition(self, placement.nodes)
        self.skip_if(placement.ranks < 2, f'{placement.describe()}: IMB needs two ranks')
        self.layout = partition_layout(part,
                                       'per-core' if placement.ranks_per_node > 1 else 'per-node')
        if placement.ranks_per_node > self.layout.ranks_per_node:
            raise ReframeError(f'{part.fullname}: {placement.ranks_per_node} ranks per node, '
                               f'the node has {self.layout.ranks_per_node} cores')

        self.placement = placement
        self.num_tasks = placement.ranks
        self.num_tasks_per_node = placement.ranks_per_node
        self.num_cpus_per_task = self.layout.threads_per_rank
        return imb.memory_limit_gib(partition_node(part).memory_bytes,
                                    placement.ranks_per_node)

    def volume_mb(self):
        """IMB's overall volume per message size (MB, -iter's second field); None: IMB's."""
        return None

    def imb_options(self):
        opts = ['-npmin', self.placement.ranks]
        volume = self.volume_mb()
        if volume is not None:
            opts += ['-iter', f'{self.iterations or imb.DEFAULT_REPETITIONS},{volume}']
        elif self.iterations is not None:
            opts += ['-iter', self.iterations]
        if self.seconds_per_size is not None:
            opts += ['-time', self.seconds_per_size]

        return opts

    def run_imb(self, *args):
        bind_ranks(self, self.layout,
                   self.build.program('IMB-MPI1'),
                   *self.imb_options(), *args)


class ImbBenchmark(ImbBase):
    """One IMB benchmark over the whole message-size range, launched `repeats` times in the
    job; the figures come from the fastest run at each size
    (hpcbench.benchmarks.imb.best_of)."""
    required_attributes = {'benchmark': "the IMB benchmark's name"}
    #: IMB launches in the job (None: hpcbench.benchmarks.imb.BEST_OF, three for the curves
    #: whose shape is read, PingPong and PingPing; one for the others).
    repeats = variable(int, type(None), value=None)
    #: IMB's overall volume per message size (MB) for the benchmarks that send a window of
    #: messages per repetition (hpcbench.benchmarks.imb.WINDOWED); None: IMB's 40 (quick mode:
    #: less).
    windowed_volume_mb = variable(int, type(None), value=None)
    input_kinds = {**ImbBase.input_kinds, 'repeats': 'positive',
                   'windowed_volume_mb': 'positive'}
    #: The measured table (the fastest run at each size) by column
    #: (hpcbench.benchmarks.imb.curve): the curves of the report's IMB plots, kept in the
    #: results database.
    curve = variable(typ.Dict[str, typ.List[float]], value={})
    #: Variables reported only when the measured curve shows them (references may name
    #: them: hpcbench.results.references.reframe_reference).
    measured_only_variables = ('switch_size',)

    def volume_mb(self):
        return self.windowed_volume_mb if self.benchmark in imb.WINDOWED else None

    def run_benchmark(self, placement):
        skip_known_failure(self, f'IMB {self.benchmark}')
        if self.repeats is None:
            self.repeats = imb.BEST_OF.get(self.benchmark, 1)

        memory_gib = self.place(placement)
        max_log = imb.feasible_max_log(self.benchmark, placement.ranks, self.max_msglog,
                                       memory_gib)
        try:
            self.sizes = imb.message_sizes(self.benchmark, self.min_msglog, max_log)
        except imb.ImbInputError as err:
            raise ReframeError(f'{self.benchmark}: {err}') from None

        self.run_imb('-mem', memory_gib, '-msglog', f'{self.min_msglog}:{max_log}',
                     self.benchmark)
        repeat_launch(self, self.repeats)
        sizes = (f' sizes=0,2^{self.min_msglog}..2^{max_log}B' if self.sizes else '')
        self.inputs = (f'{self.benchmark} placement={placement.describe()} '
                       f'[{self.layout.describe()}]{sizes} mem={memory_gib:g}GiB '
                       f'iterations={self.iterations or "imb-default"} '
                       + (f'volume={self.volume_mb()}MB ' if self.volume_mb() else '')
                       + f'best-of={self.repeats}')
        self.perf_variables = {
            name: sn.make_performance_function(self.figure, unit, name)
            for name, unit in imb.performance_units(self.benchmark, self.sizes).items()
        }
        self.reference = references.reframe_reference(self)

    @sanity_function
    def table_complete(self):
        try:
            runs = imb.parse_runs(job_output(self), self.repeats)
            tables = [imb.complete_table(run, self.benchmark, self.num_tasks, self.sizes)
                      for run in runs]
            table = imb.best_of(tables)
        except imb.ImbOutputError as err:
            raise SanityError(str(err)) from None

        self.figures = imb.figures(table)
        self.curve = imb.curve(table)
        # Each launch's own figures: the spread the best-of hides.
        each = [imb.figures(t) for t in tables]
        self.record_samples(f'from the fastest of {len(tables)} launch(es) at each size',
                            **{name: [f[name] for f in each] for name in self.figures
                               if all(name in f for f in each)})
        return True

    @run_before('performance')
    def report_protocol_switch(self):
        # Known only from the measured curve: reported when the curve shows it (a dry run
        # has no curve).
        if not self.is_dry_run() and 'switch_size' in self.figures:
            self.perf_variables['switch_size'] = sn.make_performance_function(
                self.figure, 'B', 'switch_size')

    def figure(self, name):
        return self.figures[name]


@rfm.simple_test
class ImbPairCheck(ImbBenchmark):
    descr = 'IMB point-to-point between two ranks, on two nodes where there are two'
    benchmark = parameter(imb.PAIR_BENCHMARKS)

    @run_after('setup')
    def configure_run(self):
        self.run_benchmark(imb.pair_placement(partition_num_nodes(self.current_partition)))


@rfm.simple_test
class ImbGroupCheck(ImbBenchmark):
    descr = 'IMB collectives and transfers on every node of the partition'
    benchmark = parameter(imb.GROUP_BENCHMARKS)
    layout_name = parameter(_group_layouts())
    #: Nodes (None: the paper's, description imb_group, else every node of the partition); kept
    #: in the variable, so that references match what ran.
    num_nodes = variable(int, type(None), value=None)
    input_kinds = {**ImbBenchmark.input_kinds, 'num_nodes': 'positive'}

    @run_after('setup')
    def configure_run(self):
        part = self.current_partition
        self.num_nodes = given_or_paper(self, 'num_nodes',
                                        paper_settings(self, 'imb_group', ['num_nodes']),
                                        partition_num_nodes(part))
        per_node = (partition_layout(part, 'per-core').ranks_per_node
                    if self.layout_name == 'per-core' else 1)
        self.run_benchmark(imb.group_placement(self.num_nodes, per_node))


@rfm.simple_test
class ImbVariability(ImbBase):
    descr = 'Run-to-run variability of Barrier and 16 B Allreduce (Oakforest-PACS)'
    #: IMB launches in the job; each gives one t_avg per benchmark.
    repeats = variable(int, value=10)
    #: Nodes (None: the paper's, description imb_variability, else every node of the
    #: partition); kept in the variable, so that references match what ran.
    num_nodes = variable(int, type(None), value=None)
    input_kinds = {**ImbBase.input_kinds, 'repeats': 'positive', 'num_nodes': 'positive'}
    tags = {'imb', 'network', 'variability'}

    @run_after('setup')
    def configure_run(self):
        part = self.current_partition
        nodes = self.num_nodes = given_or_paper(
            self, 'num_nodes', paper_settings(self, 'imb_variability', ['num_nodes']),
            partition_num_nodes(part))
        # Oakforest-PACS: one rank per node; on a single node, one per core.
        per_node = 1 if nodes > 1 else partition_layout(part, 'per-core').ranks_per_node
        self.place(imb.group_placement(nodes, per_node))
        if self.repeats < 2:
            raise ReframeError(f'repeats={self.repeats}: variability needs at least 2')

        lengths = 'msglengths'
        with open(os.path.join(self.stagedir, lengths), 'w') as fp:
            fp.write(f'{imb_variability.VARIABILITY_SIZE}\n')

        self.run_imb('-msglen', lengths, 'Allreduce', 'Barrier')
        repeat_launch(self, self.repeats)
        self.keep_files = [*self.keep_files, lengths]
        self.inputs = (f'Allreduce {imb_variability.VARIABILITY_SIZE}B, Barrier x '
                       f'{self.repeats} launches '
                       f'placement={self.placement.describe()} [{self.layout.describe()}] '
                       f'iterations={self.iterations or "imb-default"}')
        self.perf_variables = {
            variable: sn.make_performance_function(self.statistic, unit, name, stat)
            for variable, (name, stat, unit) in imb_variability.VARIABILITY_VARIABLES.items()
        }
        self.reference = references.reframe_reference(self)

    @sanity_function
    def every_launch_complete(self):
        try:
            self.stats = imb_variability.variability(job_output(self), self.num_tasks, self.repeats)
        except imb.ImbOutputError as err:
            raise SanityError(str(err)) from None

        for figure, (name, stat, _unit) in imb_variability.VARIABILITY_VARIABLES.items():
            how = ('standard deviation / mean' if stat == 'cv_percent' else stat)
            self.record_samples(f'{how} of {self.repeats} launches\' t_avg',
                                **{figure: self.stats[name].values})
        return True

    def statistic(self, name, stat):
        return getattr(self.stats[name], stat)
