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

They run where the MPI says it sends from device memory (its environment's description:
hpcbench.machine.device_buffers, with the variables that turn it on) and skip, saying what
the MPI said, where it does not. Parsing and math: hpcbench.benchmarks.gpu_mpi.
"""
import shlex

import reframe as rfm
from reframe.core.builtins import (parameter, performance_function, run_after,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError
from reframe.core.logging import getlogger

from hpcbench.benchmarks import gpu_mpi
from hpcbench.core import gpu_ranks, gpu_topology
from hpcbench.machine.described import partition_description, stack_description
from hpcbench.rfm.gpu import GpuRun, misplaced_ranks
from hpcbench.rfm.partition import job_output


class DeviceBufferRun(GpuRun):
    """A run of IMB-MPI1-GPU in an MPI environment that can send from device memory."""
    # Every MPI: one that cannot send from device memory is skipped, saying why.
    valid_prog_environs = ['+mpi']
    #: The largest message, 2^max_msglog bytes.
    max_msglog = variable(int, value=gpu_mpi.MAX_MSGLOG)
    #: Repetitions per size (IMB's -iter; None: IMB's own).
    iterations = variable(int, type(None), value=None)
    #: Where libcudart.so is (IMB-MPI1-GPU loads it by that name); None: the Spack
    #: environment's `cuda`, else the partition's nodes' own (LD_LIBRARY_PATH).
    cuda_runtime_dir = variable(str, type(None), value=None)
    input_kinds = {**GpuRun.input_kinds, 'max_msglog': 'non-negative',
                   'iterations': 'positive'}
    time_limit = '20m'

    def depends_on_stack(self):
        return True

    @run_after('setup')
    def use_device_buffers(self):
        stack = stack_description(self.current_environ)
        said = stack.device_buffers
        self.skip_if(not said, f'{self.current_environ.name}: its MPI was not asked whether it '
                               'sends from GPU memory (not installed here)')
        self.skip_if(not said['cuda'], f'{self.current_environ.name} cannot send from GPU '
                                       f'memory: {said["evidence"]}')
        self.env_vars.update(said.get('env', {}))
        self.program = (stack.registry_programs or {}).get('imb-gpu')
        self.skip_if(not self.program, f'{self.current_environ.name}: no {gpu_mpi.PROGRAM}')
        if self.cuda_runtime_dir:
            runtime = shlex.quote(self.cuda_runtime_dir)
        else:
            env = partition_description(self.current_partition).spack_env
            runtime = f'"$(spack -e {shlex.quote(env)} location -i cuda)/lib64"'
        self.prerun_cmds = [*self.prerun_cmds,
                            f'export LD_LIBRARY_PATH={runtime}:"$LD_LIBRARY_PATH"']

    def launch(self, benchmarks, ranks_per_node, nodes):
        self.run_through_rank_wrapper(
            shlex.quote(self.program),
            *gpu_mpi.command_options(benchmarks, self.max_msglog, self.iterations),
            ranks_per_node=ranks_per_node, nodes=nodes)

    def imb_tables(self, text, benchmarks, processes, where):
        """The complete tables of one IMB-MPI1-GPU run of `processes` ranks, rank 0's output
        `text`; a CUDA call that failed or a table cut short fails the sanity check naming
        `where`."""
        try:
            return gpu_mpi.parse(text, benchmarks, processes, self.max_msglog)
        except gpu_mpi.GpuMpiError as err:
            raise SanityError(f'{where}: {err}') from None


@rfm.simple_test
class DeviceBufferPairCheck(DeviceBufferRun):
    descr = 'GPU to GPU: PingPong and Biband from device memory between GPU pairs'
    path = parameter(['intra-node', 'inter-node'])
    tags = {'gpu', 'gpu-to-gpu', 'link'}

    @run_after('setup')
    def configure_run(self):
        gpus = self.gpus()
        self.sheet = gpus.get('datasheet') or {}
        if self.path == 'intra-node':
            self.pairs = gpu_mpi.gpu_pairs(gpus['count'])
            self.launch(gpu_mpi.PAIR_BENCHMARKS, ranks_per_node=2, nodes=1)
            before, after = gpu_mpi.pair_loop(self.pairs,
                                              gpu_ranks.print_ranks_commands()[:2])
            self.prerun_cmds = [*self.prerun_cmds, *before]
            self.postrun_cmds = after
            placement = (f'{len(self.pairs)} pair(s) of {gpus["count"]} GPU(s) of one node'
                         if self.pairs != [(0, 0)] else 'two ranks on the one GPU of a node')
        else:
            self.pairs = [(0, 0)]
            self.launch(gpu_mpi.PAIR_BENCHMARKS, ranks_per_node=1, nodes=2)
            placement = 'GPU 0 of each of two nodes'
        self.topology_of_node = self.gpu_topology()
        if self.path == 'inter-node' or self.pairs == [(0, 0)] or not self.link_rates():
            for name in ('link_efficiency', 'slowest_pair_link_efficiency'):
                del self.perf_variables[name]
        self.inputs = (f'path={self.path} {placement} msglog=0:{self.max_msglog} '
                       f'buffers=device')

    def link_rates(self):
        """{pair: (bytes/s each way, what)} of the links the topology names; {} without a
        topology of the node."""
        if self.topology_of_node is None:
            return {}
        return {(i, j): gpu_topology.pair_bandwidth(self.topology_of_node.link(i, j),
                                                    self.sheet)
                for i, j in self.pairs if i != j}

    def _pair_outputs(self):
        output = job_output(self)
        if self.path == 'inter-node':
            return {(0, 0): output}
        try:
            return gpu_mpi.split_pairs(output, self.pairs)
        except gpu_mpi.GpuMpiError as err:
            raise SanityError(str(err)) from None

    @sanity_function
    def every_pair_measured(self):
        figures = {}
        for pair, text in self._pair_outputs().items():
            where = (f'GPUs {pair[0]} and {pair[1]}' if self.path == 'intra-node'
                     else 'GPU 0 of two nodes')
            ranks = self.check_ranks(text, where)
            figures[pair] = gpu_mpi.pair_figures(
                self.imb_tables(ranks[0][2], gpu_mpi.PAIR_BENCHMARKS, 2, where))
        self.per_pair = figures
        how = f'median over {len(figures)} pair(s), each the best size of IMB-MPI1-GPU'
        values = {'latency': [f.latency_us for f in figures.values()],
                  'bandwidth': [f.bandwidth / 1e9 for f in figures.values()],
                  'bidirectional_bandwidth': [f.bidirectional / 1e9 for f in figures.values()]}
        rates = self.link_rates()
        efficiencies = {pair: 100 * figures[pair].bandwidth / rate
                        for pair, (rate, _what) in rates.items() if rate}
        if 'link_efficiency' in self.perf_variables and efficiencies:
            values['link_efficiency'] = list(efficiencies.values())
            values['slowest_pair_link_efficiency'] = sorted(efficiencies.values())
            for (i, j), percent in sorted(gpu_mpi.slow_pairs(efficiencies).items()):
                self.name_slow_pair(i, j, percent, rates[(i, j)][1])
        self.record_samples(how, **values)
        return True

    def check_ranks(self, text, where):
        """{rank: (gpu, host, output)} of one launch's two ranks, placed next to their GPUs;
        else the sanity check fails naming `where`."""
        try:
            ranks = gpu_ranks.split(text, 2 if self.path == 'intra-node' else self.num_tasks)
        except gpu_ranks.RankOutputError as err:
            raise SanityError(f'{where}: {err}') from None
        misplaced = misplaced_ranks(self.topology_of_node, text)
        if misplaced:
            raise SanityError(f'{where}: ' + '; '.join(misplaced))
        return ranks

    def name_slow_pair(self, first, second, percent, link):
        getlogger().warning(f'{self.unique_name}: GPUs {first} and {second} are slow: '
                            f'{percent:.0f} % of their link ({link}), below '
                            f'{gpu_mpi.LINK_GOAL_PERCENT:g} %')

    @performance_function('us')
    def latency(self):
        return self.median('latency')

    @performance_function('GB/s')
    def bandwidth(self):
        return self.median('bandwidth')

    @performance_function('GB/s')
    def bidirectional_bandwidth(self):
        return self.median('bidirectional_bandwidth')

    @performance_function('%')
    def link_efficiency(self):
        """PingPong's best one way against the pair's link, median over the pairs."""
        return self.median('link_efficiency')

    @performance_function('%')
    def slowest_pair_link_efficiency(self):
        return min(self.samples['slowest_pair_link_efficiency'])


@rfm.simple_test
class DeviceBufferCollectiveCheck(DeviceBufferRun):
    descr = 'GPU to GPU: Allreduce and Alltoall from device memory over every GPU'
    benchmark = parameter(list(gpu_mpi.COLLECTIVES))
    tags = {'gpu', 'gpu-to-gpu', 'collective'}

    @run_after('setup')
    def configure_run(self):
        count = self.gpus()['count']
        self.launch([self.benchmark], ranks_per_node=count, nodes=self.num_gpu_nodes)
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
