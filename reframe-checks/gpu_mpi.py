"""MPI between GPUs, buffers in device memory: IMB-MPI1-GPU (Intel MPI's, from its PyPI
wheel), one rank per GPU, each rank bound to its GPU and its GPU's NUMA node where the
partition's topology says which they are (hpcbench.core.gpu_ranks).

- DeviceBufferPairCheck: PingPong and Biband between every pair of GPUs of a node
  (`intra-node`: one launch of two ranks per pair; a node of one GPU runs its pair on it)
  and between the first GPUs of two nodes (`inter-node`). PingPong's bandwidth is judged
  against the link between the pair (the topology's NVLinks or PCIe path, at the datasheet's
  rate: hpcbench.core.gpu_topology.pair_bandwidth); a pair below LINK_GOAL_PERCENT of its
  link is named.
- DeviceBufferCollectiveCheck: Allreduce and Alltoall over every GPU of `num_gpu_nodes`
  nodes, with nccl-tests' bus bandwidth.

They run where the MPI says it sends from device memory (hpcbench.rfm.gpu_to_gpu) and skip,
saying what the MPI said, where it does not. Parsing and math: hpcbench.benchmarks.gpu_mpi.
"""
import shlex

import reframe as rfm
from reframe.core.builtins import (parameter, performance_function, run_after,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import gpu_mpi
from hpcbench.machine.from_reframe import partition_description, stack_description
from hpcbench.rfm.gpu_to_gpu import CudaAwareRun, GpuPairs


class ImbGpuProgram(CudaAwareRun):
    """IMB-MPI1-GPU as the environment's MPI ships it (Intel MPI's wheel: no Spack recipe
    builds IMB's GPU target), with the CUDA runtime it loads."""
    #: The largest message, 2^max_msglog bytes.
    max_msglog = variable(int, value=gpu_mpi.MAX_MSGLOG)
    #: Repetitions per size (IMB's -iter; None: IMB's own).
    iterations = variable(int, type(None), value=None)
    #: Where libcudart.so is (IMB-MPI1-GPU loads it by that name); None: the Spack
    #: environment's `cuda`, else the partition's nodes' own (LD_LIBRARY_PATH).
    cuda_runtime_dir = variable(str, type(None), value=None)
    input_kinds = {**CudaAwareRun.input_kinds, 'max_msglog': 'non-negative',
                   'iterations': 'positive'}
    time_limit = '20m'

    @run_after('setup')
    def find_imb_gpu(self):
        stack = stack_description(self.current_environ)
        self.program = (stack.registry_programs or {}).get('imb-gpu')
        self.skip_if(not self.program, f'{self.current_environ.name}: no {gpu_mpi.PROGRAM}')
        if self.cuda_runtime_dir:
            runtime = shlex.quote(self.cuda_runtime_dir)
        else:
            env = partition_description(self.current_partition).spack_env
            runtime = f'"$(spack -e {shlex.quote(env)} location -i cuda)/lib64"'
        self.prerun_cmds = [*self.prerun_cmds,
                            f'export LD_LIBRARY_PATH={runtime}:"$LD_LIBRARY_PATH"']

    def imb_options(self, benchmarks):
        return gpu_mpi.command_options(benchmarks, self.max_msglog, self.iterations)

    def imb_tables(self, text, benchmarks, processes, where):
        """The complete tables of one IMB-MPI1-GPU run of `processes` ranks, rank 0's output
        `text`; a CUDA call that failed or a table cut short fails the sanity check naming
        `where`."""
        try:
            return gpu_mpi.parse(text, benchmarks, processes, self.max_msglog)
        except gpu_mpi.GpuMpiError as err:
            raise SanityError(f'{where}: {err}') from None


@rfm.simple_test
class DeviceBufferPairCheck(ImbGpuProgram, GpuPairs):
    descr = 'GPU to GPU: PingPong and Biband from device memory between GPU pairs'
    tags = {'gpu', 'gpu-to-gpu', 'link'}

    @run_after('setup')
    def configure_run(self):
        placement = self.place_pairs(shlex.quote(self.program),
                                     *self.imb_options(gpu_mpi.PAIR_BENCHMARKS))
        self.inputs = (f'path={self.path} {placement} msglog=0:{self.max_msglog} '
                       f'buffers=device')

    @sanity_function
    def every_pair_measured(self):
        figures = {pair: gpu_mpi.pair_figures(
            self.imb_tables(text, gpu_mpi.PAIR_BENCHMARKS, 2, where))
            for pair, (where, text) in self.pair_outputs().items()}
        self.record_pair_figures(
            f'median over {len(figures)} pair(s), each the best size of IMB-MPI1-GPU',
            {pair: {'latency': f.latency_us, 'bandwidth': f.bandwidth / 1e9,
                    'bidirectional_bandwidth': f.bidirectional / 1e9}
             for pair, f in figures.items()},
            one_way={pair: f.bandwidth for pair, f in figures.items()})
        return True


@rfm.simple_test
class DeviceBufferCollectiveCheck(ImbGpuProgram):
    descr = 'GPU to GPU: Allreduce and Alltoall from device memory over every GPU'
    benchmark = parameter(list(gpu_mpi.COLLECTIVES))
    tags = {'gpu', 'gpu-to-gpu', 'collective'}

    @run_after('setup')
    def configure_run(self):
        count = self.gpus()['count']
        self.run_through_rank_wrapper(shlex.quote(self.program),
                                      *self.imb_options([self.benchmark]),
                                      ranks_per_node=count, nodes=self.num_gpu_nodes)
        self.skip_if(self.num_tasks < 2, f'{self.current_partition.fullname}: one GPU, no '
                                         f'{self.benchmark} between GPUs')
        self.inputs = (f'benchmark={self.benchmark} gpus={self.num_tasks} '
                       f'nodes={self.num_gpu_nodes} msglog=0:{self.max_msglog} buffers=device')

    @sanity_function
    def collective_measured(self):
        ranks = self.rank_outputs()
        table = self.imb_tables(ranks[0][2], [self.benchmark], self.num_tasks,
                                'the job')[self.benchmark]
        figures = gpu_mpi.collective_figures(table, self.num_tasks)
        self.record_samples(f'IMB-MPI1-GPU, {figures["size"]} bytes per rank',
                            latency_8B=[figures['latency_us']],
                            algbw=[figures['algbw'] / 1e9], busbw=[figures['busbw'] / 1e9])
        return True

    @performance_function('us')
    def latency_8B(self):
        return self.median('latency_8B')

    @performance_function('GB/s')
    def algbw(self):
        return self.median('algbw')

    @performance_function('GB/s')
    def busbw(self):
        return self.median('busbw')
