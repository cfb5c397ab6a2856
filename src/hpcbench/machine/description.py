"""A partition's description and an MPI stack's, typed, with one JSON Schema (SCHEMA,
STACK_SCHEMA). Every route to a system makes them and validates them here, once, when its
site config loads: a description that is not one is one DescriptionError naming the file
and the field (`<file>: partitions[<name>].memory_bytes: -1 is less than the minimum of
1`). ReFrame carries them in a partition's and an environment's `extras` (to_extras), the
only free-form place its configuration has; hpcbench.machine.described reads them back, the
one reader of `extras`.

The GPUs' count is not in the partition's extras: ReFrame's `devices` holds it
(hpcbench.rfm.site_config.reframe_partition writes it from `accelerators.count`), and the
reader takes it from there.
"""
import dataclasses
import math
from typing import Optional

import jsonschema

from hpcbench.benchmarks import ior

_COUNT = {'type': 'integer', 'minimum': 1}
_BYTES = {'type': 'integer', 'minimum': 1}
_POSITIVE = {'type': 'number', 'exclusiveMinimum': 0}
_TEXT = {'type': 'string', 'minLength': 1}
_KNOWN_OR_0 = {'type': 'number', 'minimum': 0}
_PAPER_SETTINGS = {'type': ['object', 'array', 'null'],
                   'description': "a paper's run: {'settings': ..., 'source': ..., 'where': "
                                  "...} or a list of them (hpcbench.results.references."
                                  'paper_settings checks each against its check)'}

# The nodes' accelerators, as hpcbench.core.accelerators.partition_extras describes them.
ACCELERATORS_SCHEMA = {
    'type': 'object',
    'required': ['vendor', 'kind', 'model', 'count'],
    'properties': {
        'vendor': _TEXT, 'kind': _TEXT, 'model': _TEXT, 'arch': {'type': ['string', 'null']},
        'count': _COUNT,
        # 0: not known (a GRES says how many GPUs, not what they are like)
        'memory_bytes': _KNOWN_OR_0, 'max_sm_clock_hz': _KNOWN_OR_0, 'power_limit_w': _KNOWN_OR_0,
        'ecc_enabled': {'type': ['boolean', 'null']},
        'driver_version': {'type': ['string', 'null']},
        'datasheet': {'type': ['object', 'null']},
        'l2_bytes': _BYTES,
        'stand_in': {'type': 'string', 'description': 'why these GPUs are not real here'},
    },
    'additionalProperties': False,
}

SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'hpcbench partition description',
    'type': 'object',
    'required': ['memory_bytes', 'clock_hz', 'flops_per_cycle', 'spack_env'],
    'properties': {
        'num_nodes': _COUNT,
        'memory_bytes': _BYTES,
        'clock_hz': _POSITIVE,
        'clock_source': _TEXT,
        'flops_per_cycle': _COUNT,
        'node_clocks': {'type': 'array', 'items': {
            'type': 'array', 'prefixItems': [_COUNT, _POSITIVE], 'minItems': 2,
            'maxItems': 2}},
        'node_counts': {'type': 'array', 'items': _COUNT, 'minItems': 1},
        'memory_bandwidth_bytes': {'type': ['number', 'object']},
        'memory_dimms': _COUNT,
        'binding': {'type': 'object', 'properties': {
            'tool': {'enum': ['numactl', 'taskset']},
            'domain_order': {'type': 'array', 'items': {'type': 'integer', 'minimum': 0}},
            'excluded_cores': {'type': 'array', 'items': {'type': 'integer', 'minimum': 0}},
        }, 'additionalProperties': False},
        'hugepages': {'type': 'object', 'required': ['pages', 'page_kib'], 'properties': {
            'pages': _COUNT, 'page_kib': _COUNT}},
        'quiet_node': {'type': 'object'},
        'accelerators': ACCELERATORS_SCHEMA,
        'io_directory': _TEXT,
        'io_read_cache_policy': {'enum': list(ior.READ_CACHE_POLICIES)},
        'io_stripe_size': _BYTES,
        'io_stripe_count': {'type': 'integer'},
        'spack_env': _TEXT,
        'spack_root': {'type': 'string'},
        'hpl_tuning': _PAPER_SETTINGS,
        'ior': _PAPER_SETTINGS,
        'imb_group': _PAPER_SETTINGS,
        'imb_variability': _PAPER_SETTINGS,
        'mpi_startup': _PAPER_SETTINGS,
    },
    'additionalProperties': False,
}

STACK_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'hpcbench MPI stack description',
    'type': 'object',
    'properties': {
        'spack_mpi': _TEXT,
        'spack_blas': _TEXT,
        'launcher': _TEXT,
        'known_failures': {'type': 'object', 'additionalProperties': {'type': 'string'}},
        'registry_programs': {'type': 'object', 'additionalProperties': {'type': 'string'}},
    },
    'additionalProperties': False,
}


class DescriptionError(ValueError):
    """A description that is not one: one line naming its file and field."""


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
    memory_dimms: Optional[int] = None
    binding: Optional[dict] = None  # hpcbench.core.layout.BINDING_KEYS
    hugepages: Optional[dict] = None    # {'pages': per node, 'page_kib': their size}
    quiet_node: Optional[dict] = None   # hpcbench.rfm.quiet_node.DEFAULTS' keys
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

    def to_extras(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


def _field_path(where, error):
    path = ''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in error.absolute_path)
    return f'{where}{path}'


def _validated(data, schema, where):
    if not isinstance(data, dict):
        raise DescriptionError(f'{where}: {data!r} is no mapping of fields')
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data),
                    key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        first = errors[0]
        if first.validator == 'additionalProperties':
            unknown = sorted(set(first.instance) - set(first.schema['properties']))
            raise DescriptionError(f'{_field_path(where, first)}: no such field '
                                   f'{", ".join(unknown)} (the fields: '
                                   f'{", ".join(first.schema["properties"])})')
        raise DescriptionError(f'{_field_path(where, first)}: {first.message}')
    for name, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise DescriptionError(f'{where}.{name}: {value} is not a finite figure')


def partition(fields, where):
    """The PartitionDescription of `fields` (as a site config or a description file gives
    them), validated against SCHEMA; `where` names its file and partition in every
    message."""
    fields = dict(fields or {})
    _validated(fields, SCHEMA, where)
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
    _validated(fields, STACK_SCHEMA, where)
    return StackDescription(**fields)


def stack_from_extras(extras):
    """An MPI stack's description back from the ReFrame extras to_extras made."""
    ours = {f.name for f in dataclasses.fields(StackDescription)}
    return StackDescription(**{k: v for k, v in extras.items() if k in ours})
