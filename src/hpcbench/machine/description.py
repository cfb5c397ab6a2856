"""A partition's description and an MPI stack's, typed (PartitionDescription,
StackDescription): every route to a system makes them here, validated once against their
file format (hpcbench.machine.description_schema) when its site config loads: a description
that is not one is one DescriptionError naming the file and the field. ReFrame carries them
in a partition's and an environment's `extras` (to_extras), the only free-form place its
configuration has; hpcbench.machine.from_reframe reads them back, the one reader of
`extras`.

The GPUs' count is not in the partition's extras: ReFrame's `devices` holds it
(hpcbench.rfm.site_partitions.accelerator_settings writes it from the devices found), and the
reader takes it from there.
"""
import dataclasses
from typing import Optional

from hpcbench.machine.description_schema import SCHEMA, STACK_SCHEMA, validated


@dataclasses.dataclass(frozen=True)
class PartitionDescription:
    """What a partition's nodes are and how the suite runs there; every field but the
    first four optional. Sizes in bytes, clocks in Hz."""
    memory_bytes: int
    clock_hz: float
    flops_per_cycle: int            # double precision, per core
    spack_env: str                  # the system's Spack environment (spack-envs/<system>)
    num_nodes: int = 1
    clock_source: Optional[str] = None
    node_clocks: tuple = ()         # ((nodes, clock_hz), ...): a partition of mixed clocks
    node_counts: Optional[tuple] = None     # the counts the multi-node checks run at
    memory_bandwidth_bytes: object = None
    # Memory a job cannot have (hpcbench.core.node.DEFAULT_OS_RESERVE_BYTES when not said).
    os_reserve_bytes: Optional[int] = None
    memory_dimms: Optional[int] = None
    binding: Optional[dict] = None  # hpcbench.core.layout.BINDING_KEYS
    hugepages: Optional[dict] = None    # {'pages': per node, 'page_kib': their size}
    quiet_node: Optional[dict] = None   # hpcbench.core.quiet_node.DEFAULTS' keys
    accelerators: Optional[dict] = None     # ACCELERATORS_SCHEMA, count included
    io_directory: Optional[str] = None
    io_read_cache_policy: Optional[str] = None
    io_stripe_size: Optional[int] = None
    io_stripe_count: Optional[int] = None
    spack_root: Optional[str] = None
    # The papers' runs (hpcbench.results.references.paper_settings).
    hpl_tuning: object = None
    ior: object = None
    imb_group: object = None
    imb_variability: object = None
    mpi_startup: object = None

    @property
    def gpus_per_node(self):
        return (self.accelerators or {}).get('count', 0)

    def paper_settings(self, check):
        """What a paper ran `check` (hpl_tuning, ior, ...) with, as described; None."""
        return getattr(self, check)

    def to_extras(self):
        """The partition's ReFrame `extras`: every field set, the GPUs' count left to
        ReFrame's `devices`."""
        kept = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None or (field.name == 'node_clocks' and not value):
                continue
            if field.name == 'accelerators':
                value = {k: v for k, v in value.items() if k != 'count'}
            elif field.name in ('node_clocks', 'node_counts'):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            kept[field.name] = value
        return kept


@dataclasses.dataclass(frozen=True)
class StackDescription:
    """An MPI stack as the suite builds and launches with it."""
    spack_mpi: Optional[str] = None     # the Spack spec of its MPI
    spack_blas: Optional[str] = None    # the BLAS its builds name, where several are built
    launcher: Optional[str] = None      # a launcher of its own (hpcbench.rfm.backends)
    known_failures: Optional[dict] = None   # {what: why} (hpcbench.stack.mpi_stacks)
    registry_programs: Optional[dict] = None    # {benchmark: program a registry ships}
    # Whether it sends from GPU memory, as the MPI said (hpcbench.machine.device_buffers):
    # {'cuda': bool, 'evidence': what said so, 'env': what turns it on}; None: not asked.
    device_buffers: Optional[dict] = None

    def to_extras(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


def partition(fields, where):
    """The PartitionDescription of `fields` (as a site config or a description file gives
    them), validated against SCHEMA; `where` names its file and partition in every
    message."""
    fields = dict(fields or {})
    validated(fields, SCHEMA, where)
    return _made(fields)


def from_extras(extras, gpus_per_node):
    """A partition's description back from the ReFrame extras to_extras made of a
    validated one; `gpus_per_node`: the count of ReFrame's `devices`. ReFrame adds its own
    `scheduler` and `launcher` to every partition's extras: those are not ours."""
    ours = {f.name for f in dataclasses.fields(PartitionDescription)}
    fields = {k: v for k, v in extras.items() if k in ours}
    if fields.get('accelerators') is not None:
        fields['accelerators'] = {**fields['accelerators'], 'count': gpus_per_node}
    return _made(fields)


def _made(fields):
    for name in ('node_clocks', 'node_counts'):
        if fields.get(name) is not None:
            fields[name] = tuple(tuple(v) if isinstance(v, list) else v
                                 for v in fields[name])
    return PartitionDescription(**fields)


def stack(fields, where):
    """The StackDescription of an MPI stack's fields, validated against STACK_SCHEMA."""
    fields = dict(fields or {})
    validated(fields, STACK_SCHEMA, where)
    return StackDescription(**fields)


def stack_from_extras(extras):
    """An MPI stack's description back from the ReFrame extras to_extras made."""
    ours = {f.name for f in dataclasses.fields(StackDescription)}
    return StackDescription(**{k: v for k, v in extras.items() if k in ours})
