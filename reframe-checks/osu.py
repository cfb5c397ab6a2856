"""MPI between GPUs with the OSU Micro-Benchmarks 7.3 (`+cuda`, built by Spack on the MPI of
the environment), buffers in device memory, one rank per GPU placed next to it.

- OsuPairCheck: osu_latency, osu_bw, osu_bibw (`-d cuda D D`) between every pair of GPUs
  of a node (`intra-node`) and between the first GPUs of two nodes (`inter-node`);
  osu_bw's best against the pair's link, a pair below LINK_GOAL_PERCENT named
  (hpcbench.rfm.gpu_to_gpu).
- OsuAllreduceCheck: osu_allreduce (`-d cuda`) over every GPU of `num_gpu_nodes` nodes.

They run where the MPI sends from GPU memory and OSU is not known to crash with it
(hpcbench.benchmarks.osu.KNOWN_FAILURES: Intel MPI 2021.17 from PyPI), and skip, saying why,
elsewhere. Parsing: hpcbench.benchmarks.osu.
"""
import reframe as rfm
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import osu
from hpcbench.machine.from_reframe import stack_description
from hpcbench.rfm.gpu import GpuProgramBuild
from hpcbench.rfm.gpu_to_gpu import CudaAwareRun, GpuPairs


class OsuBuild(GpuProgramBuild):
    spec_of = staticmethod(osu.spack_spec)
    needs_mpi = True


class OsuRun(CudaAwareRun):
    valid_prog_environs = ['+mpi +spack-builds']
    build = fixture(OsuBuild, scope='environment')
    #: The largest message, bytes.
    max_bytes = variable(int, value=osu.MAX_BYTES)
    input_kinds = {**CudaAwareRun.input_kinds, 'max_bytes': 'positive'}
    time_limit = '20m'

    @run_after('setup')
    def skip_known_failure(self):
        mpi = stack_description(self.current_environ).spack_mpi
        why = osu.KNOWN_FAILURES.get(mpi)
        self.skip_if(bool(why), f'{self.current_environ.name}: {why}')

    def program(self, name):
        """The shell word of an OSU program of the build."""
        return self.build.program(name, osu.program_directory(name))

    def osu_run(self, text, program, where):
        try:
            return osu.parse(text, program, device=True, max_bytes=self.max_bytes)
        except osu.OsuError as err:
            raise SanityError(f'{where}: {err}') from None


@rfm.simple_test
class OsuPairCheck(OsuRun, GpuPairs):
    descr = 'GPU to GPU: OSU latency and bandwidth from device memory between GPU pairs'
    benchmark = parameter(list(osu.PAIR_PROGRAMS))
    tags = {'gpu', 'gpu-to-gpu', 'link', 'osu'}

    def pair_figures(self):
        return osu.PAIR_FIGURES[self.benchmark]

    @run_after('setup')
    def configure_run(self):
        placement = self.place_pairs(self.program(self.benchmark),
                                     *osu.command_options(self.benchmark, self.max_bytes))
        self.inputs = (f'benchmark={self.benchmark} path={self.path} {placement} '
                       f'bytes={osu.MIN_BYTES[self.benchmark]}:{self.max_bytes} '
                       'buffers=device')

    @sanity_function
    def every_pair_measured(self):
        runs = {pair: self.osu_run(text, self.benchmark, where)
                for pair, (where, text) in self.pair_outputs().items()}
        how = f'median over {len(runs)} pair(s), OSU {self.benchmark}'
        if self.benchmark == 'osu_latency':
            self.record_pair_figures(f'{how} at 8 bytes',
                                     {pair: {'latency': run.at(8)} for pair, run in runs.items()})
            return True
        best = {pair: run.best()[1] * 1e6 for pair, run in runs.items()}
        name, = self.pair_figures()
        self.record_pair_figures(f'{how}, the best size',
                                 {pair: {name: b / 1e9} for pair, b in best.items()},
                                 one_way=best if self.benchmark == 'osu_bw' else None)
        return True


@rfm.simple_test
class OsuAllreduceCheck(OsuRun):
    descr = 'GPU to GPU: OSU all-reduce from device memory over every GPU'
    tags = {'gpu', 'gpu-to-gpu', 'collective', 'osu'}

    @run_after('setup')
    def configure_run(self):
        count = self.gpus()['count']
        self.run_through_rank_wrapper(self.program('osu_allreduce'),
                                      *osu.command_options('osu_allreduce', self.max_bytes),
                                      ranks_per_node=count, nodes=self.num_gpu_nodes)
        self.skip_if(self.num_tasks < 2, f'{self.current_partition.fullname}: one GPU, no '
                                         'all-reduce between GPUs')
        self.inputs = (f'gpus={self.num_tasks} nodes={self.num_gpu_nodes} '
                       f'bytes=4:{self.max_bytes} buffers=device')

    @sanity_function
    def allreduce_measured(self):
        run = self.osu_run(self.rank_outputs()[0][2], 'osu_allreduce', 'the job')
        self.record_samples(f'OSU osu_allreduce over {self.num_tasks} GPU(s)',
                            latency_8B=[run.at(8)], latency_largest=[run.rows[-1][1]])
        return True

    @performance_function('us')
    def latency_8B(self):
        return self.median('latency_8B')

    @performance_function('us')
    def latency_largest(self):
        """The largest size's average time."""
        return self.median('latency_largest')
