"""NCCL's collectives between GPUs: nccl-tests 2.16.3 (all_reduce, all_gather, reduce_scatter,
alltoall, sendrecv), MPI-launched, one rank per GPU of `num_gpu_nodes` nodes, each rank bound
next to its GPU (hpcbench.rfm.gpu), data verified.

NCCL moves the data; MPI only starts the ranks, so any MPI of the partition does: the check
runs in its first stack's environment, with NCCL from the site or from NVIDIA's PyPI wheel
(hpcbench.stack.nccl). Figures: the in-place bus bandwidth at 8 GiB (`busbw`), its algorithm
bandwidth, the smallest size's time, nccl-tests' own average; on one node of eight GPUs of a
model with a published figure, all_reduce's bus bandwidth against it
(`published_busbw_ratio`: the goal is 85 %). Parsing and math: hpcbench.benchmarks.nccl_tests.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import nccl_tests
from hpcbench.rfm.gpu import GpuProgramBuild, GpuRun
from hpcbench.rfm.plugins import sampled_figure


class NcclTestsBuild(GpuProgramBuild):
    spec_of = staticmethod(nccl_tests.spack_spec)
    needs_mpi = True


@rfm.simple_test
class NcclTestsCheck(GpuRun):
    descr = 'GPU to GPU: NCCL collectives (nccl-tests), one rank per GPU'
    build = fixture(NcclTestsBuild, scope='environment')
    collective = parameter(list(nccl_tests.PROGRAMS))
    #: Sizes from min_bytes to max_bytes, doubling.
    min_bytes = variable(int, value=nccl_tests.MIN_BYTES)
    max_bytes = variable(int, value=nccl_tests.MAX_BYTES)
    #: Timed calls per size, after warm-up calls.
    iterations = variable(int, value=nccl_tests.ITERATIONS)
    warmup = variable(int, value=nccl_tests.WARMUP)
    #: The network NCCL must use between nodes, as it names it (`IB`, `AWS Libfabric`,
    #: `Socket` where sockets are the network); unset: any but its socket fall-back.
    expected_network = variable(str, value='')
    input_kinds = {**GpuRun.input_kinds, 'min_bytes': 'positive', 'max_bytes': 'positive',
                   'iterations': 'positive', 'warmup': 'non-negative'}
    time_limit = '20m'
    tags = {'gpu', 'gpu-to-gpu', 'collective', 'nccl'}

    def depends_on_stack(self):
        # MPI only starts the ranks: NCCL moves the data.
        return False

    @run_after('setup')
    def configure_run(self):
        gpus = self.gpus()
        self.run_one_rank_per_gpu(self.build.program(nccl_tests.PROGRAMS[self.collective]),
                                  *nccl_tests.command_options(self.min_bytes, self.max_bytes,
                                                              self.iterations, self.warmup))
        self.skip_if(self.num_tasks < 2, f'{self.current_partition.fullname}: one GPU, no '
                                         f'{self.collective} between GPUs')
        self.env_vars.update(nccl_tests.RANK_ENV)
        model = (gpus.get('datasheet') or {}).get('model')
        self.published = nccl_tests.published(self.collective, model, gpus['count'],
                                              self.num_gpu_nodes)
        if self.published is not None:
            # all_reduce's bus bandwidth against what one node of these GPUs is published to
            # reach (hpcbench.benchmarks.nccl_tests.PUBLISHED_ALL_REDUCE): where there is one.
            self.perf_variables['published_busbw_ratio'] = sn.make_performance_function(
                sampled_figure(self, 'published_busbw_ratio'), '%')
        self.inputs = (f'collective={self.collective} gpus={self.num_tasks} '
                       f'nodes={self.num_gpu_nodes} bytes={self.min_bytes}:{self.max_bytes} '
                       f'iters={self.iterations} warmup={self.warmup} check=1')

    @sanity_function
    def every_element_verified(self):
        (_gpu, _host, text) = self.rank_outputs()[0]
        try:
            run = nccl_tests.parse(text, self.num_tasks, self.min_bytes, self.max_bytes,
                                   collective=self.collective)
        except nccl_tests.NcclTestsError as err:
            raise SanityError(str(err)) from None
        network = nccl_tests.network(text)
        wrong_network = nccl_tests.check_network(network, self.num_gpu_nodes,
                                                 self.expected_network)
        if wrong_network:
            raise SanityError(wrong_network)
        # Which network carried it, with its figures (one word: the inputs are words).
        self.inputs += f' network={(network or "not-said").replace(" ", "_")}'
        figures = nccl_tests.figures(run)
        how = f'nccl-tests, in place at {run.largest().size} bytes, {self.num_tasks} GPU(s)'
        values = {name: [value] for name, value in figures.items()}
        if self.published is not None:
            values['published_busbw_ratio'] = [100 * figures['busbw'] / self.published[0]]
        self.record_samples(how, **values)
        return True

    @performance_function('GB/s')
    def busbw(self):
        return self.median('busbw')

    @performance_function('GB/s')
    def algbw(self):
        return self.median('algbw')

    @performance_function('us')
    def latency(self):
        """The smallest size's in-place time."""
        return self.median('latency')

    @performance_function('GB/s')
    def average_busbw(self):
        return self.median('average_busbw')
