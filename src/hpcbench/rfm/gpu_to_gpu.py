"""What the checks of MPI between GPUs share (reframe-checks/gpu_mpi.py: IMB-MPI1-GPU;
reframe-checks/osu.py: OSU): a run in an MPI environment that sends from GPU memory (its
description says so, asked of the MPI: hpcbench.machine.device_buffers; the others skip
saying what their MPI said), and the placement of a pair of ranks on every pair of GPUs of
a node (`intra-node`: one launch per pair, hpcbench.benchmarks.gpu_mpi.pair_loop) or on the
first GPU of two nodes (`inter-node`), each pair's bandwidth judged against its link
(hpcbench.core.gpu_topology.pair_bandwidth) and a slow one named.
"""
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError
from reframe.core.logging import getlogger

from hpcbench.benchmarks import gpu_mpi
from hpcbench.core import device_keys, gpu_ranks
from hpcbench.machine.from_reframe import stack_description
from hpcbench.rfm.gpu import GpuRun, misplaced_ranks
from hpcbench.rfm.partition import job_output
from hpcbench.rfm.plugins import sampled_figure


class CudaAwareRun(GpuRun):
    """A run of one rank per GPU in an MPI environment whose MPI sends from GPU memory,
    with the variables that turn that on."""
    # Every MPI: one that cannot send from device memory is skipped, saying why.
    valid_prog_environs = ['+mpi']

    def depends_on_stack(self):
        return True

    @run_after('setup')
    def skip_unless_cuda_aware(self):
        said = stack_description(self.current_environ).device_buffers
        self.skip_if(not said, f'{self.current_environ.name}: its MPI was not asked whether it '
                               'sends from GPU memory (not installed here)')
        self.skip_if(not said['cuda'], f'{self.current_environ.name} cannot send from GPU '
                                       f'memory: {said["evidence"]}')
        self.env_vars.update(said.get('env', {}))


# The figures of a check between GPU pairs, each the median over the pairs, and its units
# (declared once, hpcbench.benchmarks.gpu_mpi.PAIR_UNITS); the link's where one applies:
# each pair's one-way bandwidth against its link, the median and the slowest pair's.
PAIR_FIGURES = {name: gpu_mpi.PAIR_UNITS[name]
                for name in ('latency', 'bandwidth', 'bidirectional_bandwidth')}
LINK_FIGURES = {name: gpu_mpi.PAIR_UNITS[name]
                for name in ('link_efficiency', 'slowest_pair_link_efficiency')}


class GpuPairs(rfm.RegressionTestPlugin):
    """Two ranks on every pair of GPUs of a node, or on the first GPU of two nodes: mixed
    into a CudaAwareRun (its program's base). A check says which of PAIR_FIGURES it measures
    (`pair_figures`); each is added as it applies, the link's where the pairs have links
    of known rate and `bandwidth` is measured."""
    path = parameter(['intra-node', 'inter-node'])
    #: Per GPU pair measured (its key as hpcbench.core.device_keys writes it): the link
    #: between its GPUs as the node's topology names it (`NV18`, `SYS`).
    pair_links = variable(typ.Dict[str, str], value={})

    def pair_figures(self):
        return tuple(PAIR_FIGURES)

    def add_pair_figures(self):
        measured = {name: PAIR_FIGURES[name] for name in self.pair_figures()}
        if 'bandwidth' in measured and self.path == 'intra-node' and \
                self.pairs != [(0, 0)] and self.link_rates():
            measured.update(LINK_FIGURES)
        for name, unit in measured.items():
            aggregate = min if name == 'slowest_pair_link_efficiency' else statistics.median
            self.perf_variables[name] = sn.make_performance_function(
                sampled_figure(self, name, aggregate), unit)

    def record_pair_figures(self, how, figures, one_way=None):
        """Record the pairs' `figures` ({pair: {figure: value}}) and, from `one_way`
        ({pair: bytes/s one way}), each pair's share of its link (link_efficiencies): the
        aggregated figures, and each pair's own under its key with the link it crossed."""
        pairs = list(figures)
        keys = {pair: self.pair_key(pair) for pair in pairs}
        values = {name: [figures[pair][name] for pair in pairs]
                  for name in next(iter(figures.values()), {})}
        self.record_device_samples(how, [keys[pair] for pair in pairs], **values)
        if one_way is not None:
            efficiencies = self.link_efficiencies(one_way)
            if 'link_efficiency' in self.perf_variables and efficiencies:
                self.record_device_samples(how, [keys[pair] for pair in efficiencies],
                                           link_efficiency=list(efficiencies.values()))
                self.record_samples(how, slowest_pair_link_efficiency=sorted(
                    efficiencies.values()))
        if self.topology_of_node is not None and self.path == 'intra-node':
            self.pair_links = {keys[(i, j)]: self.topology_of_node.link(i, j)
                               for i, j in pairs if i != j}

    def pair_key(self, pair):
        """The key of `pair`'s figures: its GPUs and the node or nodes its ranks ran on."""
        hosts = self.pair_hosts[pair]
        if self.path == 'inter-node':
            return device_keys.pair_key(hosts[0], pair[0], pair[1], hosts[1])
        return device_keys.pair_key(hosts[0], *pair)

    def place_pairs(self, program, *args):
        """The job: `program args` once per pair, two ranks, each on its GPU of the pair."""
        gpus = self.gpus()
        self.sheet = gpus.get('datasheet') or {}
        self.topology_of_node = self.gpu_topology()
        if self.path == 'intra-node':
            self.pairs = gpu_mpi.gpu_pairs(gpus['count'])
            self.run_through_rank_wrapper(program, *args, ranks_per_node=2, nodes=1)
            before, after = gpu_mpi.pair_loop(self.pairs, gpu_ranks.print_ranks_commands()[:2])
            self.prerun_cmds = [*self.prerun_cmds, *before]
            self.postrun_cmds = after
            placement = (f'{len(self.pairs)} pair(s) of {gpus["count"]} GPU(s) of one node'
                         if self.pairs != [(0, 0)] else 'two ranks on the one GPU of a node')
        else:
            self.pairs = [(0, 0)]
            self.run_through_rank_wrapper(program, *args, ranks_per_node=1, nodes=2)
            placement = 'GPU 0 of each of two nodes'
        self.add_pair_figures()
        return placement

    def link_rates(self):
        """{pair: (bytes/s each way, what)} of the links the topology names; {} without a
        topology of the node."""
        if self.topology_of_node is None:
            return {}
        return self.topology_of_node.link_rates(self.sheet, self.pairs)

    def pair_outputs(self):
        """{(i, j): that pair's ranks' outputs, checked}: {pair: (where, rank 0's output)}."""
        output = job_output(self)
        if self.path == 'inter-node':
            parts = {(0, 0): output}
        else:
            try:
                parts = gpu_mpi.split_pairs(output, self.pairs)
            except gpu_mpi.GpuMpiError as err:
                raise SanityError(str(err)) from None
        checked, self.pair_hosts = {}, {}
        for pair, text in parts.items():
            where = (f'GPUs {pair[0]} and {pair[1]}' if self.path == 'intra-node'
                     else 'GPU 0 of two nodes')
            ranks = self.check_ranks(text, where)
            checked[pair] = (where, ranks[0][2])
            self.pair_hosts[pair] = (ranks[0][1], ranks[1][1])
        return checked

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

    def link_efficiencies(self, bandwidths):
        """{pair: percent of its link} of `bandwidths` ({pair: bytes/s one way}); the pairs
        below LINK_GOAL_PERCENT named in the log. A pair joined by NVLink that went no faster
        than the host link fails the sanity check: its MPI staged the buffers through host
        memory (hpcbench.benchmarks.gpu_mpi.staged_through_host)."""
        if self.topology_of_node is not None and self.path == 'intra-node':
            staged = gpu_mpi.staged_through_host(
                bandwidths, {(i, j): self.topology_of_node.link(i, j)
                             for i, j in self.pairs if i != j},
                self.sheet.get('host_link_bandwidth'))
            if staged:
                raise SanityError('; '.join(staged))
        rates = self.link_rates()
        efficiencies = {pair: 100 * bandwidths[pair] / rate
                        for pair, (rate, _what) in rates.items() if rate and pair in bandwidths}
        for (i, j), percent in sorted(gpu_mpi.slow_pairs(efficiencies).items()):
            getlogger().warning(f'{self.unique_name}: GPUs {i} and {j} are slow: '
                                f'{percent:.0f} % of their link ({rates[(i, j)][1]}), below '
                                f'{gpu_mpi.LINK_GOAL_PERCENT:g} %')
        return efficiencies
