"""The one reader of ReFrame's `extras`: a partition's description and an environment's MPI
stack (hpcbench.machine.description), as the site config made and validated them. Every
check and every module of the suite reads a partition through `partition_description`
and an environment through `stack_description`, never `extras` itself. The GPUs' count is
ReFrame's `devices`. (A ReFrame partition or environment, or anything with their
attributes: this layer does not import ReFrame.)"""
from hpcbench.machine import description


def partition_description(partition):
    """The PartitionDescription of a ReFrame partition (made once per partition)."""
    made = getattr(partition, '_hpcbench_description', None)
    if made is None:
        accelerators = partition.extras.get('accelerators')
        count = devices_per_node(partition, accelerators['kind']) if accelerators else 0
        made = description.from_extras(partition.extras, count)
        try:
            partition._hpcbench_description = made
        except AttributeError:       # an object that keeps no attribute of ours
            pass
    return made


def devices_per_node(partition, kind='gpu'):
    """The devices of `kind` (gpu, accelerator) of each node of `partition`: ReFrame's
    `devices` (0 for none)."""
    select = getattr(partition, 'select_devices', None)
    devices = select(kind) if select else []
    return devices[0].num_devices if devices else 0


def stack_description(environment):
    """The StackDescription of a ReFrame environment."""
    return description.stack_from_extras(environment.extras)
