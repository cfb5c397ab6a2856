"""A system `hpcbench new-system` described (site-configs/NAME.yaml), read: its description
checked as every command reads it, which systems are described, each partition's node
states as its controller printed them, and whether its nodes share hosts. The reader beside
the description's schema (hpcbench.machine.description_schema); the writer
(hpcbench.stack.new_system) describes and writes, and nothing at run time imports it."""
from pathlib import Path

from hpcbench.core import gres
from hpcbench.core import accelerators, paths, slurm_cluster
from hpcbench.core.node import NodeDescriptionError, from_partition
from hpcbench.machine import description_schema, plain_yaml
from hpcbench.machine.gpus import gpus_of

# The first line of every description this command writes: what --force may overwrite.
HEADER = '# Written by `hpcbench new-system'


# A description that is not one: hpcbench.machine.description's, one message naming its
# file and field.
DescriptionError = description_schema.DescriptionError


def load(path):
    """The description in `path`, its fields checked."""
    path = Path(path)
    try:
        description = plain_yaml.load(path)
    except plain_yaml.PlainYamlError as err:
        raise DescriptionError(str(err)) from None
    return checked(description, str(path))


def checked(description, where_file):
    """`description` (of file `where_file`), refused in one DescriptionError naming the file
    and the field unless every later command can read it: the schema every reader uses,
    each partition's name, node count, processor, and GPUs (their count where the node's
    topology names them)."""
    description_schema.cluster(description, where_file)
    for entry in description['partitions']:
        where = f'{where_file}: partitions[{entry["name"]}]'
        if not slurm_cluster.PARTITION_NAME.fullmatch(entry['name']):
            raise DescriptionError(f'{where}.name: a partition name has letters, digits, _ and '
                                   '- only (starting with a letter or _, at most 64)')
        if not 1 <= entry['num_nodes'] <= slurm_cluster.NODE_LIMITS['TotalNodes']:
            raise DescriptionError(f'{where}.num_nodes: {entry["num_nodes"]} is no count of '
                                   'nodes')
        try:
            from_partition(entry['processor'], entry, where)
            gres.gres_gpus(entry.get('gres', ''))
            gpus = gpus_of(entry)
        except NodeDescriptionError as err:
            raise DescriptionError(str(err)) from None
        except accelerators.AcceleratorError as err:
            raise DescriptionError(f'{where}.gres: {err}') from None
        linked = len((entry.get('gpu_topology') or {}).get('gpus', []))
        if entry.get('gpu_topology') and linked != len(gpus):
            raise DescriptionError(f'{where}.gpu_topology: {linked} GPUs, its GPUs '
                                   f'({entry.get("gres") or "none"}) are {len(gpus)}')
    return description


def description_of(system):
    """(the description, its path) of described system `system`."""
    path = paths.SITE_CONFIGS_DIR / f'{system}.yaml'
    return load(path), path


def node_states(system):
    """{partition: (its nodes' states, {node: why it cannot run})} of described system
    `system`, as its controller printed them when it was described; {} for a system this
    command did not describe (or described before node states were kept)."""
    if system not in described_systems():
        return {}
    return {entry['name']: (entry.get('node_states') or {}, entry.get('nodes_out_of_service')
                            or {})
            for entry in description_of(system)[0]['partitions']}


def nodes_share_hosts(system):
    """Whether the Slurm nodes of described system `system` are processes of shared hosts."""
    return system in described_systems() and \
        bool(description_of(system)[0].get('nodes_share_hosts'))


def described_systems(site_configs=None):
    """The systems this command described (site-configs/<name>.yaml it wrote), by name."""
    return sorted(p.stem for p in Path(site_configs or paths.SITE_CONFIGS_DIR).glob('*.yaml')
                  if p.read_text().startswith(HEADER))
