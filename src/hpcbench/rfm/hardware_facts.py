"""The plugin every benchmark run mixes in (hpcbench.rfm.run.BenchmarkRun) for the hardware's
own evidence (issue 73): `HardwareFacts`, the node's health facts read before and after the
job, their figures kept (`node_facts`, `device_facts`) with what could not be read
(`facts_unread`)."""
import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable

from hpcbench.core import fact_figures, quiet_node
from hpcbench.core import node_facts as reader
from hpcbench.rfm.partition import suite_module


class HardwareFacts(rfm.RegressionTestPlugin):
    """What the node's hardware says of itself around the job (issue 73): its health facts
    (hpcbench.core.node_facts: memory errors, CPUs, each GPU's PCIe link, ECC, remaps and
    clock event reasons, each RDMA port's state, rate and error counters, XID events) read
    by the node's python3 before the job's first step and after its last, each read bounded in
    time and none failing the job; kept as figures beside the job's own: the node's
    (`node_facts`), each GPU's and port's by its device key (`device_facts`: `n1:gpu3`,
    `n1:nic:mlx5_0/1`), and what could not be read, with why (`facts_unread`). A contract
    judges them as facts (hpcbench.acceptance.contract). The facts are of the node the job
    script runs on (a job of several nodes: its first), in its own word (the node's name).
    A node that stands in a tree of files (an emulated one) is read there: the job's
    environment names it, HPCBENCH_FACTS_ROOT, `%n` in it the node's name."""
    #: The node's fact figures over the job ({name: value}: hpcbench.core.node_facts).
    node_facts = variable(typ.Dict[str, float], value={})
    #: The node the facts are of, as it named itself.
    facts_node = variable(str, value='')
    #: Each GPU's and port's fact figures ({device key: {name: value}}).
    device_facts = variable(typ.Dict[str, typ.Dict[str, float]], value={})
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
        checked = [i for i, line in enumerate(self.prerun_cmds)
                   if quiet_node.__file__ in line]
        at = checked[-1] + 1 if checked else 0
        self.prerun_cmds = [*self.prerun_cmds[:at], reader.job_line(command, reader.BEFORE),
                            *self.prerun_cmds[at:]]
        self.postrun_cmds = [*self.postrun_cmds, reader.job_line(command, reader.AFTER)]

    @run_before('sanity')
    def keep_the_facts(self):
        if self.is_dry_run():
            return
        found, unread = fact_figures.job_figures(self.stagedir)
        self.facts_unread = unread[:50]
        if found is not None:
            self.facts_node = found.node_name
            self.node_facts = found.node
            self.device_facts = found.devices
