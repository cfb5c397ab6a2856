"""The site configs of the papers' systems: each is a description file,
site-configs/<name>.yaml (hpcbench.machine.description_schema.PAPER_SYSTEM_SCHEMA: the paper's
words in `about`, its nodes, partitions and MPI stacks, the paper's settings cited as
references cite their figures), read by a three-line site-configs/<name>.py
(`site_configuration(__file__)`).

The papers give sockets, cores, clock, flop/cycle and memory; `processor()` turns that into
the ReFrame processor description (with the topology ReFrame would detect: CPU masks of
cores, NUMA nodes and sockets, caches) that the checks derive their inputs from, and
each partition gets what ReFrame's schema has no field for (the partition's description,
hpcbench.machine.description: memory, clock, flop/cycle, node count, binding, I/O
directory, the paper's settings). CPUs are numbered as Linux numbers them:
cores socket by socket, hardware threads after all cores (CPU c + k * cores).
"""
import importlib
import shlex
import sys
from pathlib import Path

from hpcbench.core import paths
from hpcbench.core.accelerators import Accelerator
from hpcbench.machine import description_schema, plain_yaml
from hpcbench.rfm import site_config, site_environments, site_partitions

# Imported for its effect: it registers the sites' schedulers and launchers with ReFrame.
importlib.import_module('hpcbench.rfm.backends')

KIB, MIB = 1 << 10, 1 << 20


def _mask(cpus):
    return hex(sum(1 << c for c in cpus))


def cache(level, size, shared_by_cores=1, linesize=64, associativity=16):
    """A cache level: `shared_by_cores` consecutive cores share one instance
    (1: private; the cores of a socket: an L3; 2: a Knights Landing tile's L2)."""
    return {'level': level, 'size': size, 'shared_by_cores': shared_by_cores,
            'linesize': linesize, 'associativity': associativity}


def processor(arch, model, sockets, cores_per_socket, caches, threads_per_core=1,
              numa_per_socket=1):
    cores = sockets * cores_per_socket
    siblings = [[c + k * cores for k in range(threads_per_core)] for c in range(cores)]

    def cpus_of(core_ids):
        return sorted(cpu for c in core_ids for cpu in siblings[c])

    per_numa = cores_per_socket // numa_per_socket
    socket_cores = [range(s * cores_per_socket, (s + 1) * cores_per_socket)
                    for s in range(sockets)]
    numa_cores = [range(n * per_numa, (n + 1) * per_numa) for n in range(sockets * numa_per_socket)]
    topology_caches = []
    for c in caches:
        shared = c['shared_by_cores']
        groups = [range(i, i + shared) for i in range(0, cores, shared)]
        topology_caches.append({
            'type': f'L{c["level"]}', 'size': c['size'], 'linesize': c['linesize'],
            'associativity': c['associativity'], 'num_cpus': shared * threads_per_core,
            'cpusets': [_mask(cpus_of(g)) for g in groups],
        })

    return {
        'arch': arch, 'model': model,
        'num_cpus': cores * threads_per_core, 'num_cpus_per_core': threads_per_core,
        'num_cpus_per_socket': cores_per_socket * threads_per_core, 'num_sockets': sockets,
        'topology': {
            'numa_nodes': [_mask(cpus_of(g)) for g in numa_cores],
            'sockets': [_mask(cpus_of(g)) for g in socket_cores],
            'cores': [_mask(siblings[c]) for c in range(cores)],
            'caches': topology_caches,
        },
    }


# What a partition's entry takes from the system, where it does not say; every field the
# entry has beside these and ReFrame's own (name, descr, processor) is its description's
# (hpcbench.machine.description_schema.SCHEMA).
_REFRAME_FIELDS = ('scheduler', 'launcher', 'access', 'environs')
# Fields written as `4 GiB` or `2.6 GHz` (hpcbench.machine.description_schema.quantity).
_QUANTITIES = ('memory_bytes', 'clock_hz', 'io_stripe_size')


def _partition(where, system, entry, processors):
    """ReFrame's partition of a description's entry: its nodes identical, its processor
    one of `processors`, the system's partition_defaults under it."""
    fields = {**system.get('partition_defaults', {}), **entry}
    reframe = {key: fields.pop(key, system.get(key)) for key in _REFRAME_FIELDS}
    name, descr = fields.pop('name'), fields.pop('descr')
    processor_ = processors[fields.pop('processor')]

    def quantity(value, field):
        try:
            return description_schema.quantity(value)
        except description_schema.DescriptionError as err:
            raise description_schema.DescriptionError(f'{where}: partitions[{name}].{field}: {err}') \
                from None

    for key in _QUANTITIES:
        if key in fields:
            fields[key] = quantity(fields[key], key)
    if 'node_clocks' in fields:
        fields['node_clocks'] = [[n, quantity(hz, 'node_clocks')]
                                 for n, hz in fields['node_clocks']]
    accelerators = [Accelerator(**{**a, 'memory_bytes': quantity(a['memory_bytes'],
                                                                 'accelerators')})
                    for a in fields.pop('accelerators', [])]
    settings, accelerator_fields = site_partitions.accelerator_settings(accelerators,
                                                                    system=system['name'])
    return site_partitions.reframe_partition(
        where, system['name'], name, {**fields, **accelerator_fields},
        descr=descr, scheduler=reframe['scheduler'], launcher=reframe['launcher'],
        access=list(reframe['access'] or ()), environs=list(reframe['environs']),
        max_jobs=100, processor=processor_, **settings)


def _environment(where, system, env):
    """One MPI stack of a site, built by the system's Spack environment: its compiler
    wrappers come from `spack load` of the MPI; `launcher` (hpcbench.rfm.backends or
    ReFrame's) replaces the partition's for this stack; `env_vars`: its run-time tuning;
    `spack_blas`: the BLAS its builds name, where the environment builds with more than
    one."""
    name, spack_mpi = env['name'], env['spack_mpi']
    extras = site_partitions.stack_extras(f'{where}: environment {name}', spack_mpi=spack_mpi,
                                      spack_blas=env.get('spack_blas'),
                                      launcher=env.get('launcher'))
    env_dir = shlex.quote(str(site_partitions.spack_env_dir(system)))
    return {
        'name': name, 'target_systems': [system],
        'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpif90',
        'features': ['mpi', 'openmp', name, site_environments.BUILDS_FROM_SPACK],
        'prepare_cmds': [f'eval "$(spack -e {env_dir} load --sh {shlex.quote(spack_mpi)})"'],
        'env_vars': [list(kv) for kv in (env.get('env_vars') or {}).items()],
        'extras': extras,
    }


def site_configuration(site_config_file):
    """ReFrame's configuration of the paper's system described beside `site_config_file`
    (site-configs/<name>.py: site-configs/<name>.yaml). A description that is not one
    stops here with one message naming the file and the field."""
    path = Path(site_config_file).with_suffix('.yaml')
    where = paths.shown(path)
    try:
        system = description_schema.paper_system(plain_yaml.load(path, where), where)
        processors = {key: processor(**{**recipe, 'caches': [
            cache(**{**c, 'size': description_schema.quantity(c['size'])}) for c in recipe['caches']]})
            for key, recipe in system['processors'].items()}
        partitions = [_partition(where, system, entry, processors)
                      for entry in system['partitions']]
    except (plain_yaml.PlainYamlError, description_schema.DescriptionError) as err:
        sys.exit(f'error: {err}')
    return site_config.site(
        systems=[{'name': system['name'], 'descr': system['descr'],
                  'hostnames': system['hostnames'], 'modules_system': 'nomod',
                  'partitions': partitions}],
        environments=[_environment(where, system['name'], env)
                      for env in system['environments']])
