"""The plugin every benchmark run mixes in (hpcbench.rfm.run.BenchmarkRun) for the hardware's
own evidence (issue 73): `HardwareFacts`, the node's health facts read before and after the
job, their figures kept (`node_facts`, `device_facts`) with what could not be read
(`facts_unread`)."""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable

from hpcbench.core import fact_figures, quiet_node
from hpcbench.core import node_facts as reader
from hpcbench.rfm.partition import SLURM_SCHEDULERS, suite_module


class HardwareFacts(rfm.RegressionTestPlugin):
    """What the nodes' hardware says of itself around the job (issue 73): each node's health
    facts (hpcbench.core.node_facts: memory errors, CPUs, each GPU's PCIe link, ECC, remaps,
    NVLinks and clock event reasons, each RDMA port's state, rate and error counters, XID
    events) read by the node's python3 before the job's first step and after its last, on
    every node of a Slurm job of several (one task a node), each read bounded in time and
    none failing the job; kept as figures beside the job's own: each node's, by its name in
    its own word (`node_facts`), each GPU's and port's by its device key (`device_facts`:
    `n1:gpu3`, `n1:nic:mlx5_0/1`), and what could not be read, with why (`facts_unread`). A
    contract judges them as facts (hpcbench.acceptance.contract). A node that stands in a
    tree of files (an emulated one) is read there: the job's environment names it,
    HPCBENCH_FACTS_ROOT, `%n` in it the node's name."""
    #: Each node's fact figures over the job ({node: {name: value}}: hpcbench.core.
    #: fact_figures), by the name the node gave itself.
    node_facts = variable(typ.Dict[str, typ.Dict[str, float]], value={})
    #: Each GPU's and port's fact figures ({device key: {name: value}}).
    device_facts = variable(typ.Dict[str, typ.Dict[str, float]], value={})
    #: Each node's text facts (versions, settings: {node: {name: text}}), and its GPUs' and
    #: ports' ({device key: {name: text}}).
    node_texts = variable(typ.Dict[str, typ.Dict[str, str]], value={})
    device_texts = variable(typ.Dict[str, typ.Dict[str, str]], value={})
    #: What was not read, with why.
    facts_unread = variable(typ.List[str], value=[])

    # Around all the job does, not its launch line: a job may launch in a loop that its
    # pre- and post-run lines open and close (IMB's and the start-up's timed launches, IOR's
    # write, drop and read), which a read inside would be timed with. The read before comes
    # just after the node's quiet-node check (its lock held), the read after is the job's
    # last line.
    @run_before('run', always_last=True)
    def read_facts_around_the_job(self):
        command = suite_module(self.current_partition, 'hpcbench.core.node_facts')
        slurm = self.current_partition.scheduler.registered_name in SLURM_SCHEDULERS
        checked = [i for i, line in enumerate(self.prerun_cmds)
                   if quiet_node.__file__ in line]
        at = checked[-1] + 1 if checked else 0
        self.prerun_cmds = [*self.prerun_cmds[:at],
                            reader.job_line(command, reader.BEFORE, slurm),
                            *self.prerun_cmds[at:]]
        self.postrun_cmds = [*self.postrun_cmds, reader.job_line(command, reader.AFTER, slurm)]

    @run_before('sanity')
    def keep_the_facts(self):
        if self.is_dry_run():
            return
        found, unread = fact_figures.job_figures(self.stagedir)
        self.facts_unread = unread[:50]
        self.node_facts = {node: figured.node for node, figured in found.items()}
        self.device_facts = {key: values for figured in found.values()
                             for key, values in figured.devices.items()}
        self.node_texts = {node: figured.texts for node, figured in found.items()}
        self.device_texts = {key: values for figured in found.values()
                             for key, values in figured.device_texts.items()}
