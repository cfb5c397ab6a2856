"""What a compute node says of itself, for `hpcbench new-system`: one short job on a node of
each partition runs print_node_facts (its processor by ReFrame's own detector, its memory,
clock, flop per cycle, its GPUs as their tool names them and how they are linked) and the
login node reads its one JSON line back, checked (FACTS_SCHEMA)."""
import json
import socket
import sys

from hpcbench.core import accelerators, gpu_topology
from hpcbench.core.node import NodeDescriptionError, from_partition
from hpcbench.core.slurm_cluster import SlurmDescriptionError
from hpcbench.machine import description_schema, host, slurm_query
from hpcbench.machine.description_schema import DescriptionError
from hpcbench.machine.gpus import NODE_GPU_FIELDS


# What a node of the partition prints about itself (print_node_facts), as one JSON line.
NODE_FACTS_CODE = ('from hpcbench.machine import node_facts; '
                   'node_facts.print_node_facts()')


NODE_FACTS_MARK = 'hpcbench-node-facts: '


def print_node_facts():
    """Run on a compute node: its processor (ReFrame's detector, as ReFrame's own remote
    detection runs it), memory, clock, double-precision flop per cycle, each GPU as its
    vendor's tool describes it (nvidia-smi, else rocm-smi, else xpu-smi: model,
    architecture, memory, UUID, PCI bus, power limit where the tool says them: the node's
    own word, whatever label Slurm's GRES gives them) and how they are linked
    (`nvidia-smi topo -m`: hpcbench.core.gpu_topology), as one JSON line. A GPU tool that
    fails is said in `gpu_tool_error`, the rest still printed."""
    from reframe.utility.cpuinfo import cpuinfo
    hz, source = host.clock()
    try:
        gpus, said = accelerators.detect_any(host.gpu_tools(), host.gpu_tool_timeout()), ''
    except (accelerators.AcceleratorError, OSError) as err:
        gpus, said = [], str(err)
    models = {gpu.model for gpu in gpus}
    topology = host.gpu_topology(gpus) if len(models) == 1 else None
    print(NODE_FACTS_MARK + json.dumps({
        'hostname': socket.gethostname(), 'processor': cpuinfo(),
        'memory_bytes': host.memory_bytes(), 'clock_hz': hz,
        'clock_source': source, 'flops_per_cycle': host.flops_per_cycle(),
        'gpus_seen': len(gpus),
        'gpus': [{field: getattr(gpu, field) for field in NODE_GPU_FIELDS} for gpu in gpus],
        **({'gpu_tool_error': said} if said else {}),
        **({'gpu_topology': topology.to_description()} if topology else {})}))


def node_facts(partition, access=(), env=None, timeout=600):
    """What one node of `partition` says of itself, from a job of one task there."""
    command = ('srun', f'--partition={partition}', '--nodes=1', '--ntasks=1', '--time=5',
               '--job-name=hpcbench-describe', *access, sys.executable, '-c', NODE_FACTS_CODE)
    output = slurm_query.ask(command, env, timeout)
    for line in output.splitlines():
        if line.startswith(NODE_FACTS_MARK):
            return checked_facts(partition, line[len(NODE_FACTS_MARK):])
    raise SlurmDescriptionError(f'the job on partition {partition} printed no node facts: '
                                f'{output.strip()[-300:]!r}')


# The fields of a node's facts (print_node_facts) and their types.
# What a compute node prints about itself (print_node_facts), checked by its schema.
FACTS_SCHEMA = {
    'type': 'object',
    'required': ['hostname', 'processor', 'clock_hz', 'clock_source', 'flops_per_cycle',
                 'gpus_seen'],
    'properties': {
        'hostname': {'type': 'string'}, 'processor': {'type': 'object'},
        'memory_bytes': description_schema.SCHEMA['properties']['memory_bytes'],
        'clock_hz': description_schema.SCHEMA['properties']['clock_hz'],
        'clock_source': {'type': 'string'},
        'flops_per_cycle': description_schema.SCHEMA['properties']['flops_per_cycle'],
        'gpus_seen': {'type': 'integer', 'minimum': 0},
        'gpus': {'type': 'array', 'maxItems': accelerators.MAX_DEVICES, 'items': {
            'type': 'object', 'required': ['vendor', 'kind', 'model', 'arch', 'memory_bytes'],
            'properties': {
                'vendor': {'type': 'string', 'minLength': 1, 'maxLength': 64},
                'kind': {'type': 'string', 'minLength': 1, 'maxLength': 64},
                'model': {'type': 'string', 'minLength': 1, 'maxLength': 200},
                'arch': {'type': 'string', 'maxLength': 64},
                'memory_bytes': {'type': 'integer', 'minimum': 0},
                'index': {'type': 'integer', 'minimum': 0},
                'uuid': {'type': 'string', 'maxLength': 200},
                'pci_bus_id': {'type': 'string', 'maxLength': 64},
                'max_sm_clock_hz': {'type': 'number', 'minimum': 0},
                'power_limit_w': {'type': 'number', 'minimum': 0},
                'driver_version': {'type': 'string', 'maxLength': 64}}}},
        'gpu_tool_error': {'type': 'string'},
        'gpu_topology': gpu_topology.SCHEMA,
    },
}


def checked_facts(partition, text):
    """The node facts a job on `partition` printed (one JSON line), refused in one message
    (SlurmDescriptionError) unless they describe a node: JSON, each field of its type, a
    processor ReFrame describes, a clock and a flop count that are positive."""
    where = f'the node facts of partition {partition}'
    try:
        facts = json.loads(text)
    except ValueError as err:
        raise SlurmDescriptionError(f'{where} are not JSON ({err}): {text[:200]!r}') from None
    try:
        description_schema.validated(facts, FACTS_SCHEMA, f'{where}:')
        from_partition(facts['processor'], {'memory_bytes': 1, **facts}, where)
    except (DescriptionError, NodeDescriptionError) as err:
        raise SlurmDescriptionError(str(err)) from None
    return facts
