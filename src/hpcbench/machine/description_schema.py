"""The file format of a machine's description: one JSON Schema per document (SCHEMA: a
partition's fields; STACK_SCHEMA: an MPI stack's; CLUSTER_SCHEMA: a cluster `hpcbench
new-system` described, site-configs/<name>.yaml; PAPER_SYSTEM_SCHEMA: a paper's system,
site-configs/<paper>.yaml), the sizes and clocks written in it (quantity), and validation
that names the file and the field of the first fault (validated: `<file>:
partitions[<name>].memory_bytes: -1 is less than the minimum of 1`). The typed records made
from it are hpcbench.machine.description."""
import functools
import math
import re
from dataclasses import dataclass

import jsonschema

from hpcbench.core import gpu_topology, slurm_cluster
from hpcbench.core.node import READ_CACHE_POLICIES
from hpcbench.machine import device_buffers, plain_yaml

_COUNT = {'type': 'integer', 'minimum': 1}
_BYTES = {'type': 'integer', 'minimum': 1}
_POSITIVE = {'type': 'number', 'exclusiveMinimum': 0}
_TEXT = {'type': 'string', 'minLength': 1}
_KNOWN_OR_0 = {'type': 'number', 'minimum': 0}
_PAPER_SETTINGS = {'type': ['object', 'array', 'null'],
                   'description': "a paper's run: {'settings': ..., 'source': ..., 'where': "
                                  "...} or a list of them (hpcbench.results.references."
                                  'paper_settings checks each against its check)'}

# The nodes' accelerators, as hpcbench.machine.gpus.partition_facts describes them.
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
        'topology': gpu_topology.SCHEMA,
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
        'os_reserve_bytes': _BYTES,
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
        'io_read_cache_policy': {'enum': list(READ_CACHE_POLICIES)},
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
        'device_buffers': device_buffers.SCHEMA,
    },
    'additionalProperties': False,
}


# A Slurm cluster `hpcbench new-system` described (site-configs/<name>.yaml, which a person
# reviews and corrects): the system, and per Slurm partition what SCHEMA has of its nodes
# beside what the scheduler says (its GRES, the options every job needs).
_SHARED = ('num_nodes', 'memory_bytes', 'clock_hz', 'clock_source', 'flops_per_cycle',
           'quiet_node', 'io_directory', 'os_reserve_bytes')
CLUSTER_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'hpcbench description of a Slurm cluster (hpcbench new-system)',
    'type': 'object',
    'required': ['name', 'descr', 'hostnames', 'scheduler', 'launcher', 'access',
                 'mpi_stacks', 'partitions'],
    'properties': {
        'name': _TEXT, 'descr': _TEXT,
        'slurm_cluster': {'type': 'string'}, 'slurm_version': {'type': 'string'},
        'login_node': {'type': 'string'},
        'hostnames': {'type': 'array', 'items': _TEXT},
        'scheduler': _TEXT, 'launcher': _TEXT,
        'mpi_plugins': {'type': 'array', 'items': {'type': 'string'}},
        'nodes_share_hosts': {'type': 'boolean'},
        'access': {'type': 'array', 'items': {'type': 'string'}},
        'mpi_stacks': {'type': 'array', 'items': _TEXT},
        'mpi_prefixes': {'type': ['object', 'null'], 'additionalProperties': _TEXT},
        'run_env': {'type': 'object', 'additionalProperties': {
            'type': 'object', 'additionalProperties': {'type': 'string'}}},
        'partitions': {'type': 'array', 'minItems': 1, 'items': {
            'type': 'object',
            'required': ['name', 'slurm_partition', 'descr', 'num_nodes', 'memory_bytes',
                         'clock_hz', 'flops_per_cycle', 'processor'],
            'properties': {
                'name': _TEXT, 'slurm_partition': _TEXT, 'descr': _TEXT,
                **{k: SCHEMA['properties'][k] for k in _SHARED},
                # Not known yet: new-system asks for it, and IOR refuses to run without it.
                'io_directory': {'type': ['string', 'null']},
                'processor': {'type': 'object', 'required': ['num_cpus']},
                'features': {'type': 'array', 'items': {'type': 'string'}},
                'gres': {'type': 'string'},
                # A node's GPUs, one entry per model: as its own tool named them (the
                # facts job), else as its GRES declared them (hpcbench.stack.
                # hpcbench.machine.gpus.gpu_groups).
                'gpus': {'type': 'array', 'items': {
                    'type': 'object',
                    'required': ['vendor', 'kind', 'model', 'arch', 'count', 'memory_bytes'],
                    'properties': {
                        'vendor': _TEXT, 'kind': _TEXT, 'model': _TEXT,
                        'arch': {'type': 'string'},
                        'count': {**_COUNT, 'maximum': 64},
                        'memory_bytes': _KNOWN_OR_0, 'power_limit_w': _KNOWN_OR_0,
                        'max_sm_clock_hz': _KNOWN_OR_0,
                        'driver_version': {'type': 'string'},
                        'source': _TEXT},
                    'additionalProperties': False}},
                'gpus_mixed': _TEXT,
                'gpus_stand_in': {'type': 'string'},
                # Nodes whose shape is not the one the partition is described by, and
                # nodes Slurm gives no job now: {node name: how, or why}.
                'nodes_of_another_shape': {'type': 'object',
                                           'additionalProperties': {'type': 'string'}},
                'nodes_out_of_service': {'type': 'object',
                                         'additionalProperties': {'type': 'string'}},
                # Each node's state (and Slurm's reason) when the system was described.
                'node_states': {'type': 'object', 'additionalProperties': {'type': 'string'}},
                'gpu_topology': gpu_topology.SCHEMA,
                'max_jobs': _COUNT,
            },
            'additionalProperties': False,
        }},
    },
    'additionalProperties': False,
}


# A size or a clock as a person writes it in a description file: bytes or `4 GiB`, hertz or
# `2.6 GHz` (paper_system converts them).
_SIZE = {'anyOf': [_BYTES, {'type': 'string', 'pattern': r'^[0-9]+(\.[0-9]+)? [KMGT]iB$'}]}
_CLOCK = {'anyOf': [_POSITIVE, {'type': 'string', 'pattern': r'^[0-9]+(\.[0-9]+)? [MG]Hz$'}]}
# A name ReFrame takes for a system, partition or environment (and that becomes a
# directory of its stage and perflogs): letters, digits, _ and -.
_NAME = {'type': 'string', 'pattern': f'^{slurm_cluster.PARTITION_NAME.pattern}$'}
# What a node of a paper's system can be: its processors become ReFrame's topology, a mask
# per core, cache and NUMA node, which every check's listing walks (a million cores took
# 24 GB, 10,000 took 110 s, 4096 CPUs 19 s here).
_AT_MOST = {'sockets': 16, 'cores_per_socket': 512, 'threads_per_core': 8,
            'numa_per_socket': 16, 'level': 4, 'shared_by_cores': 512}
MAX_NODE_CPUS = 2048
_STRUCTURE = {
    'name': _NAME, 'descr': _TEXT, 'processor': _TEXT,
    'num_nodes': {**_COUNT, 'maximum': slurm_cluster.NODE_LIMITS['TotalNodes']},
    'memory_bytes': _SIZE, 'clock_hz': _CLOCK, 'flops_per_cycle': _COUNT,
    'scheduler': _TEXT, 'launcher': _TEXT, 'access': {'type': 'array', 'items': _TEXT},
    'environs': {'type': 'array', 'items': _TEXT, 'minItems': 1},
    'io_stripe_size': _SIZE,
    'node_clocks': {'type': 'array', 'items': {
        'type': 'array', 'prefixItems': [_COUNT, _CLOCK], 'minItems': 2, 'maxItems': 2}},
    'accelerators': {'type': 'array', 'minItems': 1, 'items': {
        'type': 'object', 'required': ['vendor', 'kind', 'model', 'arch', 'memory_bytes']}},
}
# A paper's system (site-configs/<name>.yaml beside its three-line site config): what the
# paper says, in its words (`about`), its nodes' processors by recipe
# (hpcbench.rfm.paper_sites.processor), its partitions (each a description: SCHEMA's fields,
# and what `partition_defaults` gives every partition), and its MPI stacks.
PAPER_SYSTEM_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': "hpcbench description of a paper's system",
    'type': 'object',
    'required': ['name', 'descr', 'about', 'hostnames', 'processors', 'partitions',
                 'environments'],
    'properties': {
        'name': _NAME, 'descr': _TEXT, 'about': _TEXT,
        'hostnames': {'type': 'array', 'items': _TEXT, 'minItems': 1},
        **{k: _STRUCTURE[k] for k in ('scheduler', 'launcher', 'access', 'environs')},
        'processors': {'type': 'object', 'minProperties': 1, 'additionalProperties': {
            'type': 'object',
            'required': ['arch', 'model', 'sockets', 'cores_per_socket', 'caches'],
            'properties': {
                'arch': _TEXT, 'model': _TEXT,
                **{key: {**_COUNT, 'maximum': _AT_MOST[key]}
                   for key in ('sockets', 'cores_per_socket', 'threads_per_core',
                               'numa_per_socket')},
                'caches': {'type': 'array', 'maxItems': 8, 'items': {
                    'type': 'object', 'required': ['level', 'size'],
                    'properties': {'level': {**_COUNT, 'maximum': _AT_MOST['level']},
                                   'size': _SIZE,
                                   'shared_by_cores': {**_COUNT,
                                                       'maximum': _AT_MOST['shared_by_cores']},
                                   'linesize': _COUNT, 'associativity': _COUNT},
                    'additionalProperties': False}},
            },
            'additionalProperties': False}},
        # The description's fields every partition has unless it says otherwise.
        'partition_defaults': {'type': 'object', 'properties': _STRUCTURE},
        'partitions': {'type': 'array', 'minItems': 1, 'items': {
            'type': 'object', 'required': ['name', 'descr', 'processor', 'num_nodes'],
            'properties': _STRUCTURE}},
        'environments': {'type': 'array', 'minItems': 1, 'items': {
            'type': 'object', 'required': ['name', 'spack_mpi'],
            'properties': {
                'name': _NAME, 'spack_mpi': _TEXT, 'spack_blas': _TEXT, 'launcher': _TEXT,
                'env_vars': {'type': 'object', 'additionalProperties': {'type': 'string'}}},
            'additionalProperties': False}},
    },
    'additionalProperties': False,
}
_UNITS = {'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30, 'TiB': 1 << 40,
          'MHz': 1e6, 'GHz': 1e9}


def quantity(value):
    """A size or a clock as written (`4 GiB`, `2.6 GHz`, or a plain number) as a number:
    bytes as an integer; DescriptionError for what is none (`2.6 Ghz`)."""
    if not isinstance(value, str):
        return value
    number, _, unit = value.partition(' ')
    if unit not in _UNITS or not re.fullmatch(r'[0-9]+(\.[0-9]+)?', number):
        raise DescriptionError(f'{value[:40]!r} is no size or clock (a number and one of '
                               f'{", ".join(_UNITS)}, e.g. 4 GiB or 2.6 GHz)')
    scaled = float(number) * _UNITS[unit]
    return int(scaled) if unit.endswith('iB') else scaled


# Where a schema's `pattern` is checked, `$` is the end of the text: Python's `$` also
# matches before a final newline, so `^[A-Z0-9-]*$` took `HPL-NODE\n` (which then reached
# a drain line's reason and JUnit). Every grammar is checked whole.
_DOLLAR = re.compile(r'(?<!\\)\$')


@functools.lru_cache(maxsize=None)
def _whole(pattern):
    return re.compile(_DOLLAR.sub(r'\\Z', pattern))


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, 'string') and not _whole(pattern).search(instance):
        yield jsonschema.ValidationError(f'{instance!r} does not match {pattern!r}')


# The suite's JSON Schema validator: Draft 2020-12, `$` in a pattern the text's end.
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                         {'pattern': _pattern})


def check(data, schema):
    """jsonschema.validate with the suite's Validator: ValidationError, the first fault."""
    error = jsonschema.exceptions.best_match(Validator(schema).iter_errors(data))
    if error is not None:
        raise error


class DescriptionError(ValueError):
    """A description that is not one: one line naming its file and field."""


@dataclass(frozen=True)
class _At:
    """A field's place in a document, as a jsonschema error gives it (_field_path)."""
    absolute_path: tuple


def _non_finite(data, path=()):
    """(the path, the value) of the first number in `data` that is not finite; None."""
    if isinstance(data, float) and not math.isfinite(data):
        return path, data
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def _field_path(where, error, document):
    """`where` and the path of the field `error` is about: `.memory_bytes`, a list item by
    its `name` where it has one (`partitions[gpu]`), else by its index."""
    path, item = '', document
    for part in error.absolute_path:
        try:
            item = item[part]
        except (KeyError, IndexError, TypeError):
            item = None
        if isinstance(part, int):
            # A list item by its name (a partition) or its id (a contract's entry).
            named = (item.get('name') or item.get('id')) if isinstance(item, dict) else None
            # A name that is itself wrong (a newline in it, a page of text) by the index.
            plain = isinstance(named, str) and named.isprintable() and len(named) <= 80
            path += f'[{named}]' if plain else f'[{part}]'
        else:
            path += f' {part}' if not path and where.endswith(':') else f'.{part}'
    return f'{where}{path}' if path or not where.endswith(':') else where[:-1]


def validated(data, schema, where):
    """`data` checked against `schema`; the first fault a DescriptionError naming `where`
    and the field (`where` ending in a colon: the fields follow it as `file: field`)."""
    if not isinstance(data, dict):
        raise DescriptionError(f'{where.rstrip(":")}: {plain_yaml.shown(data)} is no mapping '
                               'of fields')
    # A number that is none (NaN compares false with every bound, so a schema's minimum
    # lets it through; an infinity meets any minimum): refused wherever it is, by its field.
    found = _non_finite(data)
    if found is not None:
        path, value = found
        raise DescriptionError(f'{_field_path(where, _At(path), data)}: {value} is not a '
                               'finite number')
    errors = sorted(Validator(schema).iter_errors(data),
                    key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        first = errors[0]
        if first.validator == 'additionalProperties':
            unknown = sorted(set(first.instance) - set(first.schema['properties']))
            raise DescriptionError(f'{_field_path(where, first, data)}: no such field '
                                   f'{", ".join(unknown)} (the fields: '
                                   f'{", ".join(first.schema["properties"])})')
        message = first.message.replace(repr(first.instance), plain_yaml.shown(first.instance))
        raise DescriptionError(f'{_field_path(where, first, data)}: '
                               f'{message[:2 * plain_yaml.SHOWN_CHARACTERS]}')


def cluster(data, where):
    """A described Slurm cluster (CLUSTER_SCHEMA), checked; DescriptionError naming
    `where` (its file) and the field: `<file>: partitions[gpu].num_nodes: 'two' is not of
    type 'integer'`."""
    validated(data, CLUSTER_SCHEMA, f'{where}:')
    return data


def paper_system(data, where):
    """A paper's system description (PAPER_SYSTEM_SCHEMA), checked: DescriptionError naming
    `where` (its file) and the field. Each partition's description fields are checked when
    it becomes a partition (SCHEMA)."""
    validated(data, PAPER_SYSTEM_SCHEMA, f'{where}:')
    for key, recipe in data['processors'].items():
        cpus = recipe['sockets'] * recipe['cores_per_socket'] * recipe.get('threads_per_core', 1)
        if cpus > MAX_NODE_CPUS:
            raise DescriptionError(f'{where}: processors.{key}: {cpus} CPUs a node (sockets x '
                                   f'cores_per_socket x threads_per_core), more than '
                                   f'{MAX_NODE_CPUS}: no node is described so')
    for entry in data['partitions']:
        if entry['processor'] not in data['processors']:
            raise DescriptionError(f'{where}: partitions[{entry["name"]}].processor: no '
                                   f'processor {entry["processor"]!r} (the processors: '
                                   f'{", ".join(sorted(data["processors"]))})')
    return data
