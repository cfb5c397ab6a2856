"""HPC Challenge: HPL, StarDGEMM, StarSTREAM, PingPong and RandomRing in one run (CHiC §4).

One rank per core (HPCC's Star figures are per process), bound like HPL's per-core layout;
hpccinf.txt is written by the same logic as HPL.dat (hpcbench.benchmarks.hpl,
hpcbench.benchmarks.hpcc).

HpccCheck runs Spack's hpcc from the partition's environment, for every MPI stack with the
default BLAS and on one stack with each other BLAS (hpcbench.stack.blas); without a
Spack (the registry-only path), Debian's `hpcc` binary, built against Debian's Open MPI, so on
the environments that list it (feature `registry-hpcc`): the same check, inputs and sanity.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import hpcc, hpl
from hpcbench.results import references
from hpcbench.rfm.site_environments import OTHER_BLAS
from hpcbench.rfm.partition import bind_ranks, partition_layout, partition_node
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.rfm.plugins import SiteTuning, skip_unless_first_stack
from hpcbench.rfm.run import BenchmarkRun

OUTPUT = 'hpccoutf.txt'


class HpccBuild(BenchmarkBuild):
    spec = 'hpcc'
    needs_mpi = True
    needs_blas = True
    registry_name = 'hpcc'


@rfm.simple_test
class HpccCheck(BenchmarkRun, SiteTuning):
    descr = 'HPC Challenge, one rank per core'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi +spack-builds', '+mpi +registry-hpcc',
                           '+other-blas +spack-builds']
    #: As HPL's: `full` (80 % of the memory, TSUBAME) or `tuning` (1/25, T2K).
    sizing = variable(str, value='full')
    #: An explicit share of the node's memory for HPCC's HPL, instead of `sizing`.
    memory_fraction = variable(float, type(None), value=None)
    #: An explicit N for HPCC's HPL instead of a share of memory (still checked to fit):
    #: HPCC sizes every other test from it, so one N is one problem on nodes of any memory
    #: (a contract's run rule, as a procurement states it).
    n = variable(int, type(None), value=None)
    #: False (quick mode): with the default BLAS only. What another BLAS changes in HPCC
    #: (its HPL and DGEMM) HplCheck measures with every BLAS (DGEMM just before HPL).
    every_blas = variable(typ.Bool, value=True)
    #: False (quick mode): on the first MPI stack only. What an MPI changes, IMB and HPL
    #: measure on every stack; HPCC's quick figures (HPL, StarDGEMM, StarSTREAM, PingPong,
    #: RandomRing) are then a cross-check of the suite's own by another implementation.
    every_mpi = variable(typ.Bool, value=True)
    #: What this run used, for the perflog and the results database.
    inputs = variable(str, value='')
    input_kinds = {'memory_fraction': 'fraction', 'n': 'positive'}
    num_nodes = 1
    tags = {'hpcc', 'compute', 'quick'}

    build = fixture(HpccBuild, scope='environment')

    @run_after('setup')
    def configure_run(self):
        self.skip_if(not self.every_blas and OTHER_BLAS in self.current_environ.features,
                     'HPCC runs with the default BLAS only; HplCheck measures this one, '
                     'and its DGEMM (quick mode; MODE=full runs HPCC with every BLAS)')
        if not self.every_mpi:
            skip_unless_first_stack(self, 'HPCC runs on one MPI stack; IMB and HplCheck '
                                          'compare the stacks', 'every_mpi')
        self.node = partition_node(self.current_partition)
        self.layout = partition_layout(self.current_partition, 'per-core')
        try:
            self.plan = hpl.plan(self.node, self.num_nodes, self.layout.ranks_per_node,
                                 fraction=self.memory_fraction, n=self.n,
                                 sizing=self.sizing)
            text = hpcc.hpccinf(self.plan.inputs)
        except hpl.HplInputError as err:
            raise ReframeError(f'{self.current_partition.fullname}: {err}') from None

        self.input_files = {'hpccinf.txt': text}
        with open(os.path.join(self.stagedir, 'hpccinf.txt'), 'w') as fp:
            fp.write(text)

        inputs = self.plan.inputs
        (p, q), = inputs.grids
        self.inputs = (f'N={inputs.ns[0]} NB={inputs.tuning.nbs[0]} P={p} Q={q} '
                       f'{self.layout.describe()}')
        self.num_tasks = self.num_tasks_per_node = self.layout.ranks_per_node
        self.num_cpus_per_task = 1
        self.time_limit = int(4 * self.plan.estimated_seconds + 600)
        bind_ranks(self, self.layout, self.build.program('hpcc'))
        self.keep_files = ['hpccinf.txt', OUTPUT, 'bind-rank.sh']
        self.perf_variables = {
            'hpl': sn.make_performance_function(self.figure, 'GFLOP/s', 'hpl', 1000),
            'hpl_efficiency': sn.make_performance_function(self.hpl_efficiency, '%'),
            'hpl_ceiling_efficiency': sn.make_performance_function(
                self.hpl_ceiling_efficiency, '%'),
            'star_dgemm': sn.make_performance_function(self.figure, 'GFLOP/s', 'star_dgemm'),
            'star_stream_triad': sn.make_performance_function(self.figure, 'GB/s',
                                                              'star_stream_triad'),
        }
        if self.num_tasks > 1:
            for name in hpcc.COMMUNICATION_FIGURES:
                unit = 'us' if name.endswith('latency') else 'GB/s'
                self.perf_variables[name] = sn.make_performance_function(self.figure, unit,
                                                                         name)

        self.reference = references.reframe_reference(self)

    @sanity_function
    def hpcc_succeeded(self):
        path = os.path.join(self.stagedir, OUTPUT)
        if not os.path.exists(path):
            raise SanityError(f'HPCC wrote no {OUTPUT}')

        with open(path) as fp:
            try:
                self.figures = hpcc.parse(fp.read(), self.num_tasks)
            except hpcc.HpccOutputError as err:
                raise SanityError(str(err)) from None

        self.record_aggregation('HPCC\'s own figure of one run', *self.figures)
        self.record_aggregation('hpl / Rpeak', 'hpl_efficiency')
        self.record_aggregation('hpl / (processes x star_dgemm), both of this run',
                                'hpl_ceiling_efficiency')
        return True

    @run_before('performance')
    def judge_the_ceiling(self):
        # StarDGEMM runs in the same job, minutes from HPL; a shared node can still
        # slow one and not the other. (A dry run measured nothing.)
        if self.is_dry_run():
            return

        self.withhold_ratio_above_ceiling(
            'hpl_ceiling_efficiency', self.hpl_ceiling_efficiency(),
            f'HPL reached {self.figures["hpl"] * 1e3:.1f} GFLOP/s, StarDGEMM '
            f'{self.figures["star_dgemm"]:.1f} GFLOP/s per process in the same job: the '
            'DGEMM was measured low')
        self.withhold_ratio_to_nominal_peak(
            'hpl_efficiency', self.hpl_efficiency(), self.plan.rpeak_flops / 1e9,
            {'HPL run': self.figures['hpl'] * 1e3,
             'StarDGEMM (x processes)': self.figures['star_dgemm'] * self.num_tasks})

    def figure(self, name, scale=1):
        return self.figures[name] * scale

    def hpl_efficiency(self):
        return 100 * self.figures['hpl'] * 1e12 / self.plan.rpeak_flops

    def hpl_ceiling_efficiency(self):
        """HPL against the sum of the processes' DGEMM rates (HPCC's own ceiling)."""
        return 100 * self.figures['hpl'] * 1e3 / (self.figures['star_dgemm'] * self.num_tasks)
