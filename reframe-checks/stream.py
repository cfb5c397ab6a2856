"""STREAM: memory bandwidth of one node over an OpenMP thread sweep (CHiC 2007, Table 1).

Inputs come from the partition: the array size from its last-level caches and memory
(hpcbench.benchmarks.stream.array_size), the thread counts from its cores, the peak for the
machine balance from its clock and flop/cycle. `stores=nontemporal` runs the same STREAM
with streaming stores in its kernels (the recipe's stream_nontemporal_c.exe, x86-64 only):
no write-allocate reads, so its triad can reach the memory's bandwidth, as STREAM built by a
compiler that emits streaming stores does (CHiC's PathScale figures).

The all-core run is also judged against the node's bandwidth ceilings, measured in the same
job: `ceiling_rounds` rounds, each running likwid-bench's kernels
(hpcbench.benchmarks.ceilings) and then STREAM, so that a ceiling and the triad it divides
come from the same seconds (this VM's memory rate swings by half within seconds). Two
ratios, each the median over the rounds of STREAM's mean triad rate over the fastest of two
implementations of one triad:
- `triad_ceiling_efficiency`: the triad with non-temporal stores, likwid-bench's kernel and
  STREAM's own streaming-store program: how far the method is from the memory's bandwidth;
- `triad_cached_store_efficiency` (the compiled program only): the triad with ordinary
  stores, likwid-bench's kernel and STREAM as compiled (their write-allocate reads, which
  STREAM does not count, cap it near 3/4 of the first): how well the build and the thread
  placement do.
It uses no MPI, so it runs once per partition, in the environment for OpenMP programs
(feature `openmp`: on this machine's systems the first MPI stack's,
hpcbench.rfm.site_environments.OPENMP_ONLY). Parsing and the math live in
hpcbench.benchmarks.stream and hpcbench.benchmarks.ceilings.
"""

import statistics

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import ceilings, stream
from hpcbench.results import references
from hpcbench.rfm.partition import configured_nodes, job_output, partition_node, run_script
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.rfm.run import BenchmarkRun


def _array_size(partition):
    """STREAM's array size on a partition's node; StreamInputError, with the figures, for a
    node too small for STREAM's rule."""
    node = partition_node(partition)
    return stream.array_size(node.llc_bytes_total, node.memory_bytes)


class StreamBuild(BenchmarkBuild):
    @run_after('setup')
    def choose_build(self):
        # A node too small for STREAM's rule (a VM that reports its host's 480 MiB L3 on an
        # emulated node of 7.8 GiB) has no STREAM, as its set-up said (hpcbench.stack.
        # machine_systems): skipped in those words, not a failure of every dry run.
        try:
            self.spec = stream.spack_spec(_array_size(self.current_partition))
        except stream.StreamInputError as err:
            self.skip(f'{self.current_partition.fullname}: STREAM is not built: {err}')


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
    #: Rounds of the all-core run (STREAM beside its ceiling kernels); other runs do one.
    ceiling_rounds = variable(int, value=5)
    input_kinds = {'ceiling_rounds': 'positive'}
    num_tasks = 1
    time_limit = '10m'
    tags = {'stream', 'memory', 'quick'}
    #: What this run used, for the perflog and the results database.
    inputs = variable(str, value='')
    SCRIPT = 'stream-rounds.sh'

    # {ratio: (the ceiling's name, the likwid-bench kernel of it (a ceilings.Kernels field),
    #  the STREAM program that is its second implementation)}
    CEILING_RATIOS = {
        'triad_ceiling_efficiency': ('bandwidth ceiling', 'bandwidth', 'nontemporal'),
        'triad_cached_store_efficiency': ('ordinary-store triad', 'cached_store', 'compiled'),
    }

    @run_after('setup')
    def configure_run(self):
        node = partition_node(self.current_partition)
        self.skip_if(self.num_threads not in stream.thread_sweep(node.num_cores),
                     f'{self.num_threads} threads is not in the sweep of '
                     f'{self.current_partition.fullname} ({node.num_cores} cores)')
        self.node = node
        self.program = stream.PROGRAMS[self.stores]
        if self.build.lacks_program(self.program):
            self.skip(f'{self.build.description()} has no {self.program} (the recipe builds '
                      'streaming stores for x86-64 only)')
        kernels = ceilings.kernels(node.flops_per_cycle)
        # The ceilings are the whole node's.
        self.ceilings = self.ceilings_to_measure(kernels) \
            if self.num_threads == node.num_cores else {}
        for ratio in set(self.CEILING_RATIOS) - set(self.ceilings):
            del self.perf_variables[ratio]
        self.rounds = self.ceiling_rounds if self.ceilings else 1
        # likwid-bench's kernels first in each round, then STREAM's programs, the one
        # measured last.
        self.kernel_names = sorted({runs[0] for runs in self.ceilings.values()})
        self.programs = [*sorted({p for runs in self.ceilings.values() for p in runs[1:]}
                                 - {self.program}), self.program]
        sizes = ceilings.working_sets(kernels, node.num_cores, node.llc_bytes_total,
                                      node.memory_bytes)
        runs = [(k, ceilings.likwid_command(k, sizes[k], node.num_cores))
                for k in self.kernel_names]
        runs += [(p, self.build.program(p)) for p in self.programs]
        run_script(self, self.SCRIPT, ceilings.round_robin_script(runs, self.rounds))
        self.inputs = f'array={_array_size(self.current_partition)} ' \
            f'threads={self.num_threads}' + (f' rounds={self.rounds}' if self.ceilings else '')
        self.num_cpus_per_task = self.num_threads
        self.env_vars = stream.openmp_environment(self.num_threads)
        # One process whose threads are placed by OpenMP (likwid-bench pins its own): an MPI
        # launcher would bind it to one core. The job script runs on the node under every
        # scheduler.
        self.job.launcher = getlauncher('local')()
        self.reference = references.reframe_reference(self)

    def ceilings_to_measure(self, kernels):
        """{ratio: the runs whose faster is its ceiling: its likwid-bench kernel of
        `kernels`, and its STREAM program when the build has it}."""
        chosen = {}
        for ratio, (_, kernel, stores) in self.CEILING_RATIOS.items():
            program = stream.PROGRAMS[stores]
            chosen[ratio] = (getattr(kernels, kernel),
                             *(() if self.build.lacks_program(program) else (program,)))
        if self.stores == 'nontemporal':
            # Streaming stores do not do the ordinary-store triad's write-allocate reads.
            del chosen['triad_cached_store_efficiency']
        return chosen

    @sanity_function
    def solution_validates(self):
        try:
            self.rounds_run = ceilings.parse_rounds(job_output(self), self.kernel_names,
                                                    self.programs, self.num_threads,
                                                    self.rounds)
        except (stream.StreamOutputError, ceilings.CeilingOutputError) as err:
            raise SanityError(str(err)) from None

        results = [r.streams[self.program] for r in self.rounds_run]
        # STREAM prints only its best rate per kernel (and the times' average and range).
        self.best_mbps = {k: max(r.best_rate_mbps[k] for r in results) for k in stream.KERNELS}
        how = f'STREAM\'s best of {results[0].ntimes - 1} timed iterations'
        if self.rounds > 1:
            self.record_samples(f'best of {self.rounds} rounds (each {how})',
                                **{k.lower(): [r.best_rate_mbps[k] for r in results]
                                   for k in stream.KERNELS})
        else:
            self.record_aggregation(how, 'copy', 'scale', 'add', 'triad')
        self.record_aggregation('flop per word at the triad rate', 'balance')
        return True

    @run_before('performance')
    def judge_the_ceilings(self):
        """Say what the triad was divided by, round by round, and withhold a ratio above
        100 % (as HPL's). (A dry run measured nothing.)"""
        if self.is_dry_run():
            return

        for ratio, runs in self.ceilings.items():
            name = self.CEILING_RATIOS[ratio][0]
            kernel, program = runs[0], runs[1] if len(runs) > 1 else None
            rates = [max(r.mean_mbps[c] for c in runs) for r in self.rounds_run]
            how = (f'median of {self.rounds} rounds: STREAM\'s mean triad rate / the {name} in '
                   f'the same round (')
            if program:
                against_kernel = ceilings.percent_of_fastest(self.rounds_run, program, [kernel])
                how += (f'the faster of {kernel} and STREAM\'s {program}, {min(rates):.0f}-'
                        f'{max(rates):.0f} MB/s; {program} the faster in '
                        f'{sum(p >= 100 for p in against_kernel)} of {self.rounds}, median '
                        f'{statistics.median(against_kernel):.1f} % of {kernel})')
            else:
                how += f'{kernel}, {min(rates):.0f}-{max(rates):.0f} MB/s)'
            percents = self.percents(ratio)
            self.record_samples(how, **{ratio: percents})
            self.withhold_ratio_above_ceiling(
                ratio, statistics.median(percents),
                f'STREAM\'s triad outran the {name} in the same rounds: it was no ceiling')

    def percents(self, ratio):
        return ceilings.percent_of_fastest(self.rounds_run, self.program, self.ceilings[ratio])

    @performance_function('%')
    def triad_ceiling_efficiency(self):
        """The all-core triad against the node's bandwidth ceiling."""
        return statistics.median(self.percents('triad_ceiling_efficiency'))

    @performance_function('%')
    def triad_cached_store_efficiency(self):
        """The all-core triad against the same triad with ordinary stores."""
        return statistics.median(self.percents('triad_cached_store_efficiency'))

    @performance_function('MB/s')
    def copy(self):
        return self.best_mbps['Copy']

    @performance_function('MB/s')
    def scale(self):
        return self.best_mbps['Scale']

    @performance_function('MB/s')
    def add(self):
        return self.best_mbps['Add']

    @performance_function('MB/s')
    def triad(self):
        return self.best_mbps['Triad']

    @performance_function('flop/word')
    def balance(self):
        return stream.machine_balance(self.node.core_peak_flops, self.num_threads,
                                      self.best_mbps['Triad'])
