"""STREAM: memory bandwidth of one node over an OpenMP thread sweep (CHiC 2007, Table 1).

Inputs come from the partition: the array size from its last-level caches and memory
(hpcbench.stream.array_size), the thread counts from its cores, the peak for the machine
balance from its clock and flop/cycle. The all-core triad is also reported against the
node's bandwidth ceiling (the faster of two triads with non-temporal stores, measured before
it: likwid-bench's, NodeCeilings, and STREAM's own, StreamingStoreCeiling) and against the
same triad with ordinary stores, as STREAM's compiled code does it (likwid-bench's; its
write-allocate reads, which STREAM does not count, cap it near 3/4 of the ceiling: the
first ratio says how far the method is from the memory's bandwidth, the second how well the
build and the thread placement do). `stores=nontemporal` runs the same STREAM with streaming
stores in its kernels (the recipe's stream_nontemporal_c.exe, x86-64 only): no write-allocate
reads, so its triad can reach the bandwidth ceiling, as STREAM built by a compiler that emits
streaming stores does (CHiC's PathScale figures). It uses no MPI, so
it runs once per partition, in the environment for OpenMP programs (feature `openmp`: on this
machine's systems the first MPI stack's, hpcbench.rfmconfig.OPENMP_ONLY). Parsing and the math
live in hpcbench.stream.
"""

import shlex

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench import ceilings, references, stream
from hpcbench.rfm import (BenchmarkRun, BenchmarkBuild, NodeCeilings, configured_nodes,
                          job_output, measured_before, partition_node, repeat_launch)


def _array_size(partition):
    """STREAM's array size on a partition's node; a node too small for STREAM's rule is
    refused in setup with the figures."""
    node = partition_node(partition)
    try:
        return stream.array_size(node.llc_bytes_total, node.memory_bytes)
    except stream.StreamInputError as err:
        raise ReframeError(f'{partition.fullname}: {err}') from None


class StreamBuild(BenchmarkBuild):
    @run_after('setup')
    def choose_build(self):
        self.spec = stream.spack_spec(_array_size(self.current_partition))


class StreamingStoreCeiling(BenchmarkRun):
    """STREAM's triad with streaming stores on all cores, `repeats` runs in one job: the
    bandwidth ceiling's second kernel beside likwid-bench's (NodeCeilings), the same
    a(i) = b(i) * s + c(i) with non-temporal stores on arrays of the same size. On this
    machine it was the faster of the two in paired rounds (18: median 111.5 % and 114.3 %
    of likwid-bench's; by mean rates 106 %), though within one job either can win (the
    memory's rate swings within seconds), so likwid-bench's alone was no ceiling. Without the
    streaming-store program (not x86-64) it measures nothing and likwid-bench's kernel
    alone is the ceiling."""
    descr = 'STREAM triad with streaming stores on all cores (bandwidth ceiling)'
    valid_systems = ['*']
    valid_prog_environs = ['*']
    build = fixture(StreamBuild, scope='environment')
    repeats = variable(int, value=ceilings.REPEATS)
    input_kinds = {'repeats': 'positive'}
    #: What this run used, for the perflog and the results database.
    inputs = variable(str, value='')
    num_tasks = 1
    time_limit = '10m'

    @run_after('setup')
    def configure_run(self):
        self.cores = partition_node(self.current_partition).num_cores
        self.inputs = f'array={_array_size(self.current_partition)} threads={self.cores} ' \
            f'repeats={self.repeats}'
        self.num_cpus_per_task = self.cores
        self.env_vars = stream.openmp_environment(self.cores)
        self.job.launcher = getlauncher('local')()
        program = stream.PROGRAMS['nontemporal']
        self.measures = not self.build.lacks_program(program)
        if self.measures:
            self.executable = self.build.program(program)
            repeat_launch(self, self.repeats)
        else:
            self.executable = 'echo'
            self.executable_opts = [shlex.quote(f'{self.build.description()} has no {program}')]
            del self.perf_variables['triad']

    @sanity_function
    def every_run_validates(self):
        self.triads = []
        if not self.measures:
            return True

        try:
            runs = stream.parse_runs(job_output(self), self.cores, self.repeats)
        except stream.StreamOutputError as err:
            raise SanityError(str(err)) from None

        self.triads = [run.best_rate_mbps['Triad'] for run in runs]
        self.record_samples(f'best of {self.repeats} runs (each STREAM\'s best of '
                            f'{runs[0].ntimes - 1} timed iterations)', triad=self.triads)
        return True

    @performance_function('MB/s')
    def triad(self):
        return max(self.triads)


def _thread_counts():
    counts = {n for node in configured_nodes() for n in stream.thread_sweep(node.num_cores)}
    return sorted(counts) or [1]


@rfm.simple_test
class StreamCheck(BenchmarkRun):
    descr = 'STREAM memory bandwidth of one node, OpenMP thread sweep'
    valid_systems = ['*']
    valid_prog_environs = ['+openmp +spack-builds']
    num_threads = parameter(_thread_counts())
    # The stores the compiler made (what STREAM measures as built), or streaming stores.
    stores = parameter(list(stream.PROGRAMS))
    build = fixture(StreamBuild, scope='environment')
    # The bandwidth ceiling the all-core triad is compared with: the faster of two
    # triads with non-temporal stores, likwid-bench's and STREAM's own.
    node_ceilings = fixture(NodeCeilings, scope='partition')
    streaming_store_ceiling = fixture(StreamingStoreCeiling, scope='environment')
    num_tasks = 1
    time_limit = '10m'
    tags = {'stream', 'memory', 'quick'}
    #: What this run used, for the perflog and the results database.
    inputs = variable(str, value='')

    @run_after('setup')
    def configure_run(self):
        node = partition_node(self.current_partition)
        self.skip_if(self.num_threads not in stream.thread_sweep(node.num_cores),
                     f'{self.num_threads} threads is not in the sweep of '
                     f'{self.current_partition.fullname} ({node.num_cores} cores)')
        self.node = node
        self.inputs = f'array={_array_size(self.current_partition)} threads={self.num_threads}'
        self.num_cpus_per_task = self.num_threads
        self.env_vars = stream.openmp_environment(self.num_threads)
        program = stream.PROGRAMS[self.stores]
        if self.build.lacks_program(program):
            self.skip(f'{self.build.description()} has no {program} (the recipe builds '
                      'streaming stores for x86-64 only)')
        self.executable = self.build.program(program)
        # One process whose threads are placed by OpenMP: an MPI launcher would bind it to
        # one core. The job script runs on the node under every scheduler.
        self.job.launcher = getlauncher('local')()
        if self.num_threads != node.num_cores:
            # The ceilings are the whole node's.
            for ratio in self.CEILING_RATIOS:
                del self.perf_variables[ratio]
        elif self.stores == 'nontemporal':
            # Streaming stores do not do the ordinary-store triad's write-allocate reads.
            del self.perf_variables['triad_cached_store_efficiency']
        self.reference = references.reframe_reference(self)

    @sanity_function
    def solution_validates(self):
        try:
            self.result = stream.parse(job_output(self), self.num_threads)
        except stream.StreamOutputError as err:
            raise SanityError(str(err)) from None

        # STREAM prints only its best rate per kernel (and the times' average and range).
        self.record_aggregation(f'STREAM\'s best of {self.result.ntimes - 1} timed '
                                'iterations', 'copy', 'scale', 'add', 'triad')
        self.record_aggregation('flop per word at the triad rate', 'balance')
        return True

    # {ratio: (what it divides by, the NodeCeilings kernel and its runs)}
    CEILING_RATIOS = {
        'triad_ceiling_efficiency': ('the bandwidth ceiling', 'bandwidth'),
        'triad_cached_store_efficiency': ('the ordinary-store triad', 'cached_store'),
    }

    @run_before('performance')
    def judge_the_ceilings(self):
        """As HPL's ratios: say what the triad was divided by, and withhold a ratio above
        100 % (its ceiling was then measured low). (A dry run measured nothing.)"""
        if self.is_dry_run():
            return

        for ratio, (name, kernel) in self.CEILING_RATIOS.items():
            if ratio not in self.perf_variables:
                continue
            ceiling = self.ceiling_mbps(kernel)
            self.record_aggregation(f'triad / {name} ({ceiling:.0f} MB/s, '
                                    f'{self.ceiling_source(kernel)})', ratio)
            self.withhold_ratio_above_ceiling(
                ratio, self.percent_of(kernel),
                f'STREAM\'s triad reached {self.result.best_rate_mbps["Triad"]:.0f} MB/s '
                f'against {name} of {ceiling:.0f} MB/s: it was measured low')

    @performance_function('%')
    def triad_ceiling_efficiency(self):
        """The all-core triad against the node's bandwidth ceiling (NodeCeilings)."""
        return self.percent_of('bandwidth')

    @performance_function('%')
    def triad_cached_store_efficiency(self):
        """The all-core triad against the same triad with ordinary stores (NodeCeilings)."""
        return self.percent_of('cached_store')

    def ceiling_runs(self, kernel):
        """{what ran: (its rates, the fixture that ran it)} of the kernels a ceiling is the
        best of."""
        runs = {getattr(self.node_ceilings.kernels, kernel):
                (getattr(self.node_ceilings.result, f'{kernel}_mbps'), self.node_ceilings)}
        if kernel == 'bandwidth' and self.streaming_store_ceiling.triads:
            runs['STREAM\'s streaming-store triad'] = (self.streaming_store_ceiling.triads,
                                                       self.streaming_store_ceiling)
        return runs

    def ceiling_mbps(self, kernel):
        return max(max(rates) for rates, _ in self.ceiling_runs(kernel).values())

    def ceiling_source(self, kernel):
        """E.g. 'best of 3 runs of stream_mem_avx512 (41904, measured 900 s before this
        job) and 3 runs of STREAM's streaming-store triad (44671, measured 420 s before
        this job)'."""
        return 'best of ' + ' and '.join(
            f'{len(rates)} runs of {name} ({max(rates):.0f}, '
            f'{measured_before(fixture, self.job)})'
            for name, (rates, fixture) in self.ceiling_runs(kernel).items())

    def percent_of(self, kernel):
        return 100 * self.result.best_rate_mbps['Triad'] / self.ceiling_mbps(kernel)

    @performance_function('MB/s')
    def copy(self):
        return self.result.best_rate_mbps['Copy']

    @performance_function('MB/s')
    def scale(self):
        return self.result.best_rate_mbps['Scale']

    @performance_function('MB/s')
    def add(self):
        return self.result.best_rate_mbps['Add']

    @performance_function('MB/s')
    def triad(self):
        return self.result.best_rate_mbps['Triad']

    @performance_function('flop/word')
    def balance(self):
        return stream.machine_balance(self.node.core_peak_flops, self.num_threads,
                                      self.result.best_rate_mbps['Triad'])
