"""HPL: the headline benchmark of all five papers, with inputs derived from the partition.

- HplCheck: N from the nodes' memory (80 % on one node, 75 % on several; TSUBAME §3), a
  near-square P x Q (or, where the partition's paper gives them, its HPL.dat, grid and N per
  node count: description hpl_tuning, cited), every distinct rank/thread layout of the node (T2K
  §3.2) with each rank bound by numactl, every node count of the partition; efficiency
  against nominal Rpeak, against the flop rate the node's cores sustain (NodeCeilings,
  hpcbench.benchmarks.ceilings) and against the DGEMM ceiling: the DGEMM rate of its BLAS on
  the node (hpcbench.benchmarks.dgemm), measured in HPL's own job just before HPL, so that a
  ceiling and the rate it divides come from the same minute (this VM's speed drifts, and a
  ceiling measured minutes before under another load made HPL "118 %" of it); on every MPI
  stack with the default BLAS and on one stack with each other BLAS library
  (hpcbench.stack.blas).
- HplTuningSweep (tag `sweep`): one setting at a time at 1/25 of the memory (T2K §4.4);
  `hpcbench hpl-tuning` prints the table of the best values (T2K Tables 2-4).
- HplNodeScreen (tag `screen`): single-node HPL, one rank per node with threads, on every
  node with `--distribute` (T2K §4.2); `hpcbench screen-nodes` flags the slow ones.

The math (sizes, grid, memory, HPL.dat, parsing) is hpcbench.benchmarks.hpl (its output
hpl_output, its bound hpl_model); the figures a job's output gives, hpcbench.rfm.hpl_figures;
layouts and binding are hpcbench.core.layout.
"""
import os
import statistics
from dataclasses import replace

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import dgemm, hpl, hpl_input_file, hpl_quick_size, hpl_sweep
from hpcbench.results import references
from hpcbench.rfm.site_environments import OTHER_BLAS
from hpcbench.rfm.partition import (bind_ranks, bound_command, configured_layout_names,
                                    configured_node_counts, given_or_paper, job_output,
                                    measured_before, paper_settings, partition_layout,
                                    partition_layouts, partition_node, skip_beyond_partition,
                                    skip_unless_node_count, suite_module_command)
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.machine.from_reframe import partition_description, stack_description
from hpcbench.rfm.hpl_figures import read_solves, record_against_ceiling
from hpcbench.rfm.plugins import SiteTuning
from hpcbench.rfm.run import BenchmarkRun, NodeCeilings


class HplBuild(BenchmarkBuild):
    spec = 'hpl'
    needs_mpi = True
    needs_blas = True


class DgemmRateBuild(BenchmarkBuild):
    spec = 'dgemm-rate ~cuda'
    needs_blas = True


class HplBase(BenchmarkRun, SiteTuning):
    """One HPL job: inputs planned from the partition, each rank bound by its layout."""
    valid_systems = ['*']
    valid_prog_environs = ['+mpi +spack-builds']
    build = fixture(HplBuild, scope='environment')
    required_attributes = {'layout_name': 'the rank layout, of hpcbench.core.layout.LAYOUT_NAMES',
                           'num_nodes': 'the nodes of a run'}

    #: Solves of the same N in one job; the spread between them is reported.
    repeats = variable(int, value=3)
    #: `full`: N from 80 % of the memory on one node, 75 % on several (TSUBAME);
    #: `tuning`: from 1/25 of it (T2K's tuning size); `quick`: 1/50, what `make run` uses
    #: by default (hpcbench.benchmarks.hpl.QUICK_MEMORY_FRACTION).
    sizing = variable(str, value='full')
    #: `quick` in HplCheck: the most seconds a solve may take at the DGEMM rate its job
    #: measures; N is where HPL's curve flattens within them (hpcbench.benchmarks.
    #: hpl_quick_size; hpl.QUICK_SOLVE_SECONDS).
    solve_seconds = variable(float, value=hpl.QUICK_SOLVE_SECONDS)
    #: An explicit share of the nodes' memory for the matrix, instead of `sizing`.
    memory_fraction = variable(float, type(None), value=None)
    #: An explicit N instead of the memory fraction (still checked to fit).
    n = variable(int, type(None), value=None)
    # The papers' tunings, one value each (None: hpcbench.benchmarks.hpl.Tuning's documented
    # default).
    nb = variable(int, type(None), value=None)
    pmap = variable(int, type(None), value=None)
    pfact = variable(int, type(None), value=None)
    nbmin = variable(int, type(None), value=None)
    ndiv = variable(int, type(None), value=None)
    rfact = variable(int, type(None), value=None)
    bcast = variable(int, type(None), value=None)
    depth = variable(int, type(None), value=None)
    swap = variable(int, type(None), value=None)
    swap_threshold = variable(int, type(None), value=None)
    l1_transposed = variable(typ.Bool, type(None), value=None)
    u_transposed = variable(typ.Bool, type(None), value=None)
    equilibration = variable(typ.Bool, type(None), value=None)
    alignment = variable(int, type(None), value=None)
    threshold = variable(float, type(None), value=None)
    #: What this run used (N, NB, grid, layout), for the perflog and the results database.
    inputs = variable(str, value='')
    keep_files = ['HPL.dat', 'bind-rank.sh']
    # The tuning's own ranges are hpcbench.benchmarks.hpl.Tuning's.
    input_kinds = {'repeats': 'positive', 'memory_fraction': 'fraction', 'n': 'positive',
                   'num_nodes': 'positive', 'solve_seconds': 'positive'}

    # What a paper may give per node count beside HPL.dat's settings (description hpl_tuning
    # entries matching a `num_nodes`: TSUBAME's Table 3-6).
    _RUN_SETTINGS = ('grid', 'n')

    def depends_on_stack(self):
        # One rank (per-socket on a one-socket node, one node screened, ...) sends no MPI
        # message.
        layout = partition_layout(self.current_partition, self.layout_name)
        return self.num_nodes * layout.ranks_per_node > 1

    def paper(self):
        """The paper's HPL settings for this partition and node count (description hpl_tuning)."""
        return paper_settings(self, 'hpl_tuning', [*hpl.TUNING_SETTINGS, *self._RUN_SETTINGS],
                              num_nodes=self.num_nodes)

    def tuning(self):
        """HPL.dat's settings: those given (-S), else the paper's for the partition and node
        count (description hpl_tuning), else hpcbench.benchmarks.hpl.Tuning's defaults; NB
        the one measured best for the environment's BLAS where it is not Tuning's
        (hpl.NB_BY_BLAS)."""
        paper = self.paper()
        nb, self.nb_reason = hpl.blas_nb(stack_description(self.current_environ).spack_blas)
        try:
            return hpl.tuned({name: given_or_paper(self, name, paper,
                                                   nb if name == 'nb' else None)
                              for name in hpl.TUNING_SETTINGS})
        except hpl.HplInputError as err:
            raise ReframeError(str(err)) from None

    def paper_run(self, ranks):
        """(grid, N) of the paper's run at this node count when it used this many ranks
        (TSUBAME Table 3-6: its 8 ranks per node), else (None, None): derived. The paper's
        N is a full-size run's, taken unless N, a memory fraction or the tuning size is
        asked for."""
        paper = self.paper()
        grid = paper.get('grid')
        if not grid or grid[0] * grid[1] != ranks:
            return None, None

        full_size = self.sizing == 'full' and self.n is None and self.memory_fraction is None
        return [tuple(grid)], (paper.get('n') if full_size else None)

    def plan_run(self, tuning, repeats):
        """Plan the job (refusing, before anything runs, an input that cannot fit) and
        set it up: HPL.dat in the stage directory, tasks, binding, time limit."""
        part = self.current_partition
        skip_beyond_partition(self, self.num_nodes)
        self.node = partition_node(part)
        self.layout = partition_layout(part, self.layout_name)
        hugepages = partition_description(part).hugepages
        ranks = self.num_nodes * self.layout.ranks_per_node
        grids, paper_n = self.paper_run(ranks)
        n = self.n or paper_n
        self.sizes = ()
        if n is None and self.memory_fraction is None and self.sizes_in_job():
            # The job picks N among these from the DGEMM rate it measures; HPL.dat starts
            # with the one for the nominal peak (what a dry run shows).
            p, q = (grids or [hpl.process_grid(ranks)])[0]
            self.sizes = hpl.quick_sizes(self.node, self.num_nodes, max(tuning.nbs), p, q,
                                         max(tuning.depths))
            n = hpl_quick_size.size_for_rate(self.sizes,
                                             self.node.peak_flops_of(self.num_nodes),
                                             self.solve_seconds)
        try:
            # With huge pages, a full-size N is the largest they hold, as T2K's (§4.5).
            self.plan = hpl.plan(self.node, self.num_nodes, self.layout.ranks_per_node,
                                 tuning, self.memory_fraction, n, repeats,
                                 grids=grids, sizing=self.sizing,
                                 huge_pages=hugepages and (hugepages['pages'],
                                                           hugepages['page_kib'] * 1024))
        except hpl.HplInputError as err:
            raise ReframeError(f'{part.fullname}: {err}') from None

        inputs = self.plan.inputs
        self.input_files = {'HPL.dat': hpl_input_file.hpl_dat(inputs)}
        with open(os.path.join(self.stagedir, 'HPL.dat'), 'w') as fp:
            fp.write(self.input_files['HPL.dat'])

        # What makes two runs the same test case: the sizing rule where the job sizes N
        # (its N follows the node's DGEMM rate, and is kept with the solves).
        self.inputs, largest = hpl.run_words(self.plan, self.sizes, self.solve_seconds,
                                             self.layout.describe())
        self.num_tasks = ranks
        self.num_tasks_per_node = self.layout.ranks_per_node
        self.num_cpus_per_task = self.layout.threads_per_rank
        # Four times the solve at Rpeak (HPL rarely runs below 25 % of it) plus start-up;
        # for the largest N the job may choose.
        self.time_limit = int(4 * inputs.expected_results
                              * hpl.estimated_seconds(largest, self.plan.rpeak_flops) + 300)
        bind_ranks(self, self.layout, self.build.program('xhpl'),
                   rank_env=self.use_huge_pages(hugepages))

    def sizes_in_job(self):
        """Whether the job sets N itself, in quick mode (HplCheck: from the DGEMM rate its
        job measures first); else N comes from the memory (hpcbench.benchmarks.hpl.plan)."""
        return False

    def use_huge_pages(self, hugepages):
        """The matrix on huge pages, as T2K did (§4.5), when the partition reserves them
        (its description's hugepages: pages per node and their size, integers the schema
        checked): a check before the run that the node has them, and libhugetlbfs's malloc
        for HPL itself."""
        if not hugepages:
            return None

        self.prerun_cmds = [*self.prerun_cmds,
                            hpl.huge_pages_check(hugepages['pages'], hugepages['page_kib'])]
        return {'HUGETLB_MORECORE': 'yes', 'LD_PRELOAD': 'libhugetlbfs.so'}

    @sanity_function
    def residuals_passed(self):
        read_solves(self)
        return True

    # Every HPL job's figures (the tuning sweep replaces them by one per swept value).
    @performance_function('GFLOP/s')
    def gflops(self):
        return self.summary.best_gflops

    @performance_function('%')
    def efficiency(self):
        """Rmax / Rpeak, Rpeak from the processor description (cores x clock x flop/cycle)."""
        return self.percent_of_rpeak()

    def percent_of_rpeak(self):
        return 100 * self.summary.best_gflops * 1e9 / self.plan.rpeak_flops

    def measured_on_the_nodes(self):
        """{what: GFLOP/s} this job measured on its nodes, each a floor of their real peak."""
        return {'HPL run': self.summary.best_gflops}

    @run_before('performance')
    def judge_the_nominal_peak(self):
        """No efficiency against a nominal peak the nodes exceed (a base clock): withheld
        with the reason. (A dry run measured nothing.)"""
        if not self.is_dry_run():
            self.withhold_ratio_to_nominal_peak('efficiency', self.percent_of_rpeak(),
                                                self.plan.rpeak_flops / 1e9,
                                                self.measured_on_the_nodes())


@rfm.simple_test
class HplCheck(HplBase):
    descr = 'HPL with inputs derived from the partition, per layout and node count'
    layout_name = parameter(configured_layout_names())
    num_nodes = parameter(configured_node_counts())
    # Also on the other BLAS libraries of the machine (hpcbench.stack.blas), one MPI stack each.
    valid_prog_environs = ['+mpi +spack-builds', '+other-blas +spack-builds']
    # The DGEMM ceiling's program, built with this environment's BLAS; it runs in HPL's job.
    dgemm_build = fixture(DgemmRateBuild, scope='environment')
    node_ceilings = fixture(NodeCeilings, scope='partition')
    #: Calls of DGEMM just before HPL (one process on all cores of the node); the best is
    #: the DGEMM ceiling.
    dgemm_repeats = variable(int, value=dgemm.REPEATS)
    input_kinds = {**HplBase.input_kinds, 'dgemm_repeats': 'positive'}
    # The DGEMM ceiling's wrapper (the job's own, bind-rank.sh, binds HPL's ranks).
    DGEMM_BIND_SCRIPT = 'bind-dgemm.sh'
    #: False (quick mode): the other BLAS libraries run the node's one-rank layout only,
    #: where the BLAS's own threads do all the work; the default BLAS runs every layout.
    blas_every_layout = variable(typ.Bool, value=True)
    tags = {'hpl', 'compute'}

    def depends_on_stack(self):
        if self.layout_name not in partition_layouts(self.current_partition)[0]:
            return True  # configure_run says why it does not run

        return super().depends_on_stack()

    @run_after('setup')
    def configure_run(self):
        skip_unless_node_count(self, self.num_nodes)
        kept, same_as = partition_layouts(self.current_partition)
        self.skip_if(self.layout_name in same_as,
                     f'{self.layout_name} is the same placement as {same_as.get(self.layout_name)} '
                     f'on {self.current_partition.fullname}')
        self.skip_if(self.layout_name not in kept,
                     f'{self.current_partition.fullname} has no {self.layout_name} layout')
        if not self.blas_every_layout and OTHER_BLAS in self.current_environ.features:
            one_rank = next((name for name, chosen in kept.items()
                             if chosen.ranks_per_node == 1), None)
            self.skip_if(self.layout_name != one_rank,
                         f'another BLAS than the default runs HPL in the one-rank layout '
                         f'({one_rank}) only (quick mode; MODE=full runs every layout)')
        self.plan_run(self.tuning(), self.repeats)
        self.measure_dgemm_first()
        self.reference = references.reframe_reference(self)

    def sizes_in_job(self):
        return self.sizing == 'quick'

    def measure_dgemm_first(self):
        """The job runs dgemm-rate before HPL: one process on all cores of the node the job
        script runs on (the first of several), bound as the one-rank-per-node layout; in
        quick mode its rate then sets HPL's N
        (hpcbench.benchmarks.hpl_quick_size.size_in_job)."""
        node_ = partition_node(self.current_partition)
        self.dgemm_order = dgemm.matrix_order(node_.peak_flops, node_.memory_bytes)
        self.prerun_cmds = [*self.prerun_cmds, bound_command(
            self, self.DGEMM_BIND_SCRIPT, partition_layout(self.current_partition, 'per-node'),
            self.dgemm_build.program('dgemm-rate'), self.dgemm_order, self.dgemm_repeats,
            output=hpl_quick_size.DGEMM_OUTPUT)]
        if self.sizes:
            self.keep_files = [*self.keep_files, hpl_quick_size.DGEMM_OUTPUT]
            self.prerun_cmds = [*self.prerun_cmds, suite_module_command(
                self.current_partition, 'hpcbench.benchmarks.hpl_quick_size', 'size',
                hpl_quick_size.DGEMM_OUTPUT, 'HPL.dat', *self.sizes, '--nodes', self.num_nodes,
                '--seconds', self.solve_seconds)]

    @sanity_function
    def residuals_passed(self):
        """HPL's results, each proven by its residual check, and the DGEMM ceiling's calls
        before them, verified."""
        try:
            self.dgemm = dgemm.parse(job_output(self), self.dgemm_repeats)
        except dgemm.DgemmOutputError as err:
            raise SanityError(f'the DGEMM ceiling before HPL: {err}') from None

        self.record_samples(f'best of {self.dgemm_repeats} calls just before HPL in its job',
                            dgemm_ceiling=self.dgemm.rates)
        read_solves(self, self.read_size() if self.sizes else '')
        record_against_ceiling(self)
        return True


    def read_size(self):
        """The N the job chose (in quick mode), from its sizing line and the HPL.dat it
        wrote, kept as the input file that ran; how it was chosen, in words."""
        sized = hpl_quick_size.parse_size(job_output(self))
        if not sized:
            raise SanityError(
                f'no "{hpl_quick_size.SIZE_MARKER} N=..." line: the job did not size HPL')
        n, seconds, rate = sized
        if n not in self.sizes:
            raise SanityError(f'the job sized HPL at N={n}, not one of its sizes')
        with open(os.path.join(self.stagedir, 'HPL.dat')) as fp:
            self.input_files = {**self.input_files, 'HPL.dat': fp.read()}
        self.plan = replace(self.plan, inputs=replace(self.plan.inputs,
                                                      ns=(n,) * len(self.plan.inputs.ns)))
        curve = hpl_quick_size.parse_curve(job_output(self))
        return (f', sized in the job for {seconds:g} s a solve at its DGEMM ceiling, '
                f'{rate:g} GFLOP/s a node' + (f' ({curve})' if curve else ''))


    @performance_function('GFLOP/s')
    def dgemm_ceiling(self):
        """The node's DGEMM rate with this BLAS (one process, all cores), best of its calls."""
        return self.dgemm.best

    @performance_function('GFLOP/s')
    def gflops_mean(self):
        return self.summary.mean_gflops

    @performance_function('%')
    def spread(self):
        return self.summary.spread_percent

    @performance_function('s')
    def time(self):
        return self.summary.best_seconds

    @performance_function('%')
    def ceiling_efficiency(self):
        """Rmax / (nodes x the node's DGEMM rate, measured just before HPL)."""
        return self.percent_of(self.dgemm.best)

    @performance_function('%')
    def sustained_peak_efficiency(self):
        """Rmax / (nodes x the flop rate the node's cores sustain: likwid-bench's peakflops)."""
        return self.percent_of(max(self.node_ceilings.result.peak_gflops))

    def percent_of(self, per_node_gflops):
        return 100 * self.summary.best_gflops / (self.num_nodes * per_node_gflops)

    def measured_on_the_nodes(self):
        return {**super().measured_on_the_nodes(),
                'DGEMM ceiling': self.num_nodes * self.dgemm.best,
                'sustained peak': self.num_nodes * max(self.node_ceilings.result.peak_gflops)}

    @run_before('performance')
    def judge_the_ceilings(self):
        """Say what each ratio divided by and when it was measured, and withhold a ratio
        when HPL beat its ceiling: the ceiling was then measured low (another load, another
        phase of a shared node), and the ratio is no result. (A dry run measured nothing.)"""
        if self.is_dry_run():
            return

        self.judge_ratio('ceiling_efficiency', 'DGEMM ceiling', self.dgemm.best,
                         f'best of {self.dgemm_repeats} calls',
                         'measured in this job just before HPL')
        if self.samples.get('update_ceiling_efficiency'):
            self.withhold_ratio_above_ceiling(
                'update_ceiling_efficiency',
                statistics.median(self.samples['update_ceiling_efficiency']),
                'HPL\'s updates ran faster than the DGEMM ceiling measured in this job just '
                'before HPL: it was measured low')
        self.judge_ratio('sustained_peak_efficiency', 'sustained peak',
                         max(self.node_ceilings.result.peak_gflops),
                         f'best of {self.node_ceilings.repeats} runs of '
                         f'{self.node_ceilings.kernels.peak}',
                         measured_before(self.node_ceilings, self.job))

    def judge_ratio(self, variable, ceiling_name, per_node_gflops, how, when):
        self.record_aggregation(f'gflops / ({self.num_nodes} x the {ceiling_name}, '
                                f'{per_node_gflops:.1f} GFLOP/s {how}, {when})', variable)
        self.withhold_ratio_above_ceiling(
            variable, self.percent_of(per_node_gflops),
            f'HPL reached {self.summary.best_gflops:.1f} GFLOP/s against a {ceiling_name} of '
            f'{per_node_gflops:.1f} GFLOP/s per node {when}: it was measured low')


def _sweep_settings():
    return [(name,) for name in (*hpl_sweep.SWEEP, 'grid')] + [('swap_threshold', t)
                                                    for t in hpl_sweep.SWAP_THRESHOLDS]


@rfm.simple_test
class HplTuningSweep(HplBase):
    descr = 'HPL tuning sweep, one setting at a time at 1/25 of the memory (T2K 4.4)'
    sweep = parameter(_sweep_settings(), fmt=lambda s: '-'.join(map(str, s)))
    layout_name = variable(str, value='per-core')
    num_nodes = variable(int, value=1)
    repeats = 1
    sizing = 'tuning'
    tags = {'hpl', 'sweep'}

    @run_after('setup')
    def configure_run(self):
        setting, *values = self.sweep
        self.setting = setting
        tuning = hpl_sweep.sweep_tuning(self.tuning(), setting, values or None)
        self.plan_run(tuning, self.repeats)
        # Which grid each shape was at this process count, beside its rates.
        self.inputs += ''.join(f' {shape}={p}x{q}' for shape, (p, q) in self.shapes.items())
        # One figure per swept value, named like `bcast=2ringM`.
        self.perf_variables = {
            hpl_sweep.sweep_variable(setting, value): sn.make_performance_function(
                self.rate_of, 'GFLOP/s', value)
            for value in hpl_sweep.swept_values(setting, tuning, values, self.shapes)
        }

    def paper_run(self, ranks):
        # The grid sweep's grids, all in one HPL.dat, instead of the paper's or the rule's.
        grids, n = super().paper_run(ranks)
        self.shapes = hpl_sweep.sweep_grids(ranks) if self.setting == 'grid' else {}
        return list(self.shapes.values()) or grids, n

    def rate_of(self, value):
        if self.setting == 'swap_threshold':
            return self.summary.best_gflops

        return hpl_sweep.sweep_rates(self.runs, self.setting)[self.shapes.get(value, value)]


@rfm.simple_test
class HplNodeScreen(HplBase):
    descr = 'single-node HPL, one threaded rank per node, to screen nodes (T2K 4.2)'
    layout_name = variable(str, value='per-node')
    num_nodes = 1
    repeats = 1
    tags = {'hpl', 'screen'}

    @run_after('setup')
    def configure_run(self):
        self.plan_run(self.tuning(), self.repeats)
        self.reference = references.reframe_reference(self)
