"""A site's own Slurm cluster described for the suite: `hpcbench new-system NAME`, run on a
login node, asks the controller (hpcbench.machine.slurm_query) and one short job on a node of
each partition (its processor by ReFrame's own detector, its clock and flop per cycle as
`local` reads them: hpcbench.machine.host), and writes, for review:

- `site-configs/NAME.yaml`: the description, data (read by hpcbench.rfm.described_site);
- `site-configs/NAME.py`: the site config that reads it (three lines);
- `spack-envs/NAME/spack.yaml`: the pinned stack over the login node's externals, the same
  specs as the testbed's environment (host.yaml, written by `hpcbench setup`, holds them);
  its MPI stacks are those the login node has as `local` finds them, each replaced by an
  install the user names with `--mpi PREFIX` (a module's Open MPI, MPICH or MVAPICH2:
  `mpi_prefixes` in the description; hpcbench.stack.mpi_stacks.InstalledMpi);
- `references/NAME.yaml`: no figures yet (`make baseline` fills it after the first runs).

What it cannot know it asks for, once, in its output, naming the field to set (the IO
directory for IOR, a clock that is not the cores' nominal one). It writes nothing when any
step fails, and overwrites only a system it wrote itself, and only with `--force`.
"""
import datetime
import json
import re
import socket
import sys
import textwrap
from pathlib import Path

import yaml

from hpcbench.core import accelerators, gpu_topology, paths
from hpcbench.core.node import NodeDescriptionError, from_partition
from hpcbench.core import slurm_cluster
from hpcbench.core.slurm_cluster import SlurmDescriptionError
from hpcbench.machine import description as description_schema
from hpcbench.machine import host, plain_yaml, slurm_query
from hpcbench.results import references_text
from hpcbench.stack import mpi_stacks

# The first line of every description this command writes: what --force may overwrite.
HEADER = '# Written by `hpcbench new-system'
NAME = re.compile(r'^[a-z][a-z0-9-]{0,30}$')
# Clock sources that are the cores' nominal clock (host.clock); any other is asked about.
NOMINAL_CLOCK_SOURCES = ('cpufreq maximum', host.CLOCK_VARIABLE)
# What a node of the partition prints about itself (print_node_facts), as one JSON line.
NODE_FACTS_CODE = ('from hpcbench.stack import site_description; '
                   'site_description.print_node_facts()')
NODE_FACTS_MARK = 'hpcbench-node-facts: '


class NewSystemError(RuntimeError):
    pass


# A description that is not one: hpcbench.machine.description's, one message naming its
# file and field.
DescriptionError = description_schema.DescriptionError


class _Dumper(yaml.SafeDumper):
    # Each partition's processor written out in full, not as an alias of another's.
    def ignore_aliases(self, data):
        return True


def load(path):
    """The description in `path`, its fields checked."""
    path = Path(path)
    try:
        description = plain_yaml.load(path)
    except plain_yaml.PlainYamlError as err:
        raise DescriptionError(str(err)) from None
    description_schema.cluster(description, str(path))
    for entry in description['partitions']:
        where = f'{path}: partitions[{entry["name"]}]'
        if not slurm_cluster.PARTITION_NAME.fullmatch(entry['name']):
            raise DescriptionError(f'{where}.name: a partition name has letters, digits, _ and '
                                   '- only (starting with a letter or _, at most 64)')
        if not 1 <= entry['num_nodes'] <= slurm_cluster.NODE_LIMITS['TotalNodes']:
            raise DescriptionError(f'{where}.num_nodes: {entry["num_nodes"]} is no count of '
                                   'nodes')
        try:
            from_partition(entry['processor'], entry, where)
            gpus = accelerators.from_gres(entry.get('gres', ''))
        except NodeDescriptionError as err:
            raise DescriptionError(str(err)) from None
        except accelerators.AcceleratorError as err:
            raise DescriptionError(f'{where}.gres: {err}') from None
        linked = len((entry.get('gpu_topology') or {}).get('gpus', []))
        if entry.get('gpu_topology') and linked != len(gpus):
            raise DescriptionError(f'{where}.gpu_topology: {linked} GPUs, its GRES '
                                   f'{entry.get("gres") or "none"} declares {len(gpus)}')
    return description


def stacks_of(system, path):
    """The MPI stacks (hpcbench.stack.mpi_stacks) the description names, in its order: the
    login node's own, or the install its `mpi_prefixes` names; one that is not there is an
    error."""
    known = {s.name: s for s in mpi_stacks.local_stacks()}
    for name, prefix in (system.get('mpi_prefixes') or {}).items():
        try:
            known[name] = mpi_stacks.installed_mpi(prefix)
        except mpi_stacks.InstalledMpiError as err:
            raise DescriptionError(f'{path}: mpi_prefixes.{name}: {err}') from None
        if known[name].name != name:
            raise DescriptionError(f'{path}: mpi_prefixes.{name}: {prefix} holds '
                                   f'{known[name].name}, not {name}')
    missing = [name for name in system['mpi_stacks'] if name not in known]
    if missing:
        raise DescriptionError(f'{path}: mpi_stacks: {", ".join(missing)} not found on this '
                               f'node (it has {", ".join(known) or "none"}; an install of '
                               'its own goes in mpi_prefixes)')
    return [known[name] for name in system['mpi_stacks']]


def login_node_stacks(prefixes=(), environ=None):
    """(the MPI stacks, {name: prefix} of those named, what to ask): those of this login node
    (mpi_stacks.local_stacks) it has or the set-up installs, each replaced by the install of
    the same MPI at one of `prefixes` (the user's `--mpi`); the others named last."""
    named = {}
    for prefix in prefixes:
        try:
            stack = mpi_stacks.installed_mpi(prefix)
        except mpi_stacks.InstalledMpiError as err:
            raise NewSystemError(f'--mpi {err}') from None
        if stack.name in named:
            raise NewSystemError(
                f'--mpi {named[stack.name].prefix} and --mpi {stack.prefix} are both '
                f'{stack.name}: a system builds each benchmark once per MPI package; name one')
        named[stack.name] = stack
    stacks, absent, others = [], [], dict(named)
    for stack in mpi_stacks.local_stacks(*([environ] if environ is not None else [])):
        if stack.name in others:
            stacks.append(others.pop(stack.name))
        elif stack.available():
            stacks.append(stack)
        else:
            absent.append(stack.name)
    asks = [f'mpi_stacks: no {", ".join(absent)} on this login node; name the cluster\'s '
            'own installs with --mpi PREFIX (repeatable: the prefix whose bin/ holds its '
            'mpicc; Open MPI, MPICH, MVAPICH2)'] if absent else []
    return stacks + list(others.values()), {n: s.prefix for n, s in named.items()}, asks


def description_of(system):
    """(the description, its path) of described system `system`."""
    path = paths.SITE_CONFIGS_DIR / f'{system}.yaml'
    return load(path), path


def nodes_share_hosts(system):
    """Whether the Slurm nodes of described system `system` are processes of shared hosts."""
    return system in described_systems() and \
        bool(description_of(system)[0].get('nodes_share_hosts'))


def described_systems(site_configs=None):
    """The systems this command described (site-configs/<name>.yaml it wrote), by name."""
    return sorted(p.stem for p in Path(site_configs or paths.SITE_CONFIGS_DIR).glob('*.yaml')
                  if p.read_text().startswith(HEADER))


def print_node_facts():
    """Run on a compute node: its processor (ReFrame's detector, as ReFrame's own remote
    detection runs it), clock, double-precision flop per cycle, how many GPUs its nvidia-smi
    shows and how they are linked (`nvidia-smi topo -m`: hpcbench.core.gpu_topology), as
    one JSON line."""
    from reframe.utility.cpuinfo import cpuinfo
    hz, source = host.clock()
    gpus = host.accelerators()
    topology = host.gpu_topology(gpus)
    print(NODE_FACTS_MARK + json.dumps({
        'hostname': socket.gethostname(), 'processor': cpuinfo(), 'clock_hz': hz,
        'clock_source': source, 'flops_per_cycle': host.flops_per_cycle(),
        'gpus_seen': len(gpus),
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
        'clock_hz': description_schema.SCHEMA['properties']['clock_hz'],
        'clock_source': {'type': 'string'},
        'flops_per_cycle': description_schema.SCHEMA['properties']['flops_per_cycle'],
        'gpus_seen': {'type': 'integer', 'minimum': 0},
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


def _launcher(cluster):
    # srun starts MPI ranks where Slurm offers a PMI the MPIs speak; else each MPI's mpirun.
    return 'srun' if {'pmix', 'pmi2'} & set(cluster.mpi_plugins) else 'mpirun'


def partition_description(partition, facts, io_directory, shares_hosts):
    """One partition's entry, and what to ask about it ([str])."""
    node = partition.smallest
    asks = []
    # The clock's source as `local` says it names how to set it there (HPCBENCH_CLOCK_HZ);
    # here that is the field.
    clock_source = re.sub(r' \(set \w+\)$', '', facts['clock_source'])
    entry = {
        'name': partition.name,
        'slurm_partition': partition.name,
        'descr': (f'{len(partition.nodes)} nodes of {node.cpus} CPUs ({node.sockets} '
                  f'socket(s) x {node.cores_per_socket} cores x {node.threads_per_core} '
                  f'threads), {node.memory_mb} MB' + (f', GRES {node.gres}' if node.gres else '')),
        'num_nodes': len(partition.nodes),
        'memory_bytes': node.memory_mb << 20,
        'clock_hz': facts['clock_hz'],
        'clock_source': clock_source,
        'flops_per_cycle': facts['flops_per_cycle'],
        'features': list(partition.features),
        'gres': node.gres,
        'io_directory': io_directory,
        'max_jobs': 1 if shares_hosts else 100,
        'processor': facts['processor'],
    }
    if shares_hosts:
        # Nodes that are one host (the testbed's): the others' jobs and daemons always
        # load it, so no quiet-node check; the node's launch lock still runs one at a time.
        entry['quiet_node'] = {'action': 'off'}
    declared = len(partition.accelerators)
    if declared and not facts.get('gpus_seen'):
        # GPUs Slurm allocates but no driver answers for (the testbed's stand-in devices, a
        # node whose driver is not loaded): the GPU checks write their jobs, a run skips them.
        entry['gpus_stand_in'] = (f'its GRES declares {declared} GPU(s) but nvidia-smi on '
                                  f'{facts["hostname"]} shows none')
        asks.append(f'partitions[{partition.name}].gpus_stand_in: {entry["gpus_stand_in"]}; '
                    'the GPU checks skip it until the nodes\' GPUs answer (then remove it)')
    counted = node.sockets * node.cores_per_socket * node.threads_per_core
    if counted != node.cpus:
        # Slurm's counts disagree with each other (a cloud node's vCPUs each called a socket, a
        # node declared by hand): the checks are sized by the node's own processor.
        asks.append(f'partitions[{partition.name}]: Slurm says {node.name} has CPUTot='
                    f'{node.cpus} but Sockets={node.sockets} x CoresPerSocket='
                    f'{node.cores_per_socket} x ThreadsPerCore={node.threads_per_core} = '
                    f'{counted}; its processor is described as the node printed it: check '
                    'that it is the node\'s')
    if facts.get('gpu_topology'):
        # How the node's GPUs are linked, as its nvidia-smi said: the ranks are placed by it.
        entry['gpu_topology'] = facts['gpu_topology']
    if partition.differing:
        entry['nodes_of_another_shape'] = {name: ', '.join(how)
                                           for name, how in partition.differing.items()}
        asks.append(f'partitions[{partition.name}]: its nodes differ; it is described by its '
                    f'smallest, {node.name}: ' + '; '.join(
                        f'{name}: {", ".join(how)}' for name, how in partition.differing.items()))
    if not clock_source.startswith(NOMINAL_CLOCK_SOURCES):
        asks.append(f'partitions[{partition.name}].clock_hz: {facts["clock_hz"] / 1e9:.3f} GHz '
                    f'comes from {clock_source}; set the cores\' nominal clock (the peak the '
                    'checks compare with is built on it)')
    if not io_directory:
        asks.append(f'partitions[{partition.name}].io_directory: a directory on the parallel '
                    'file system every node mounts, for IOR (or give --io-directory)')
    return entry, asks


def describe(name, cluster, facts, login_node, stacks, access=(), io_directory=None,
             mpi_prefixes=None):
    """(the description, [what to ask]) of `cluster` (hpcbench.core.slurm_cluster) as system
    `name`: `facts` {partition: node_facts()}, `stacks` the login node's MPI stack names,
    `mpi_prefixes` {stack name: prefix} of those the user named."""
    shares_hosts = slurm_cluster.nodes_share_hosts(cluster.partitions)
    launcher = _launcher(cluster)
    partitions, asks = [], []
    for partition in cluster.partitions:
        entry, asked = partition_description(partition, facts[partition.name], io_directory,
                                             shares_hosts)
        partitions.append(entry)
        asks += asked
    if not cluster.accounting:
        asks.append('scheduler: the cluster keeps no job accounting (AccountingStorageType '
                    'none): ReFrame polls squeue, and a job\'s end state is not kept')
    description = {
        'name': name,
        'descr': f'Slurm cluster {cluster.name!r} ({len(cluster.partitions)} partition(s))',
        'slurm_cluster': cluster.name,
        'slurm_version': cluster.version,
        'login_node': login_node,
        'hostnames': [f'^{re.escape(login_node)}$'],
        'scheduler': 'slurm' if cluster.accounting else 'squeue',
        'launcher': launcher,
        'mpi_plugins': list(cluster.mpi_plugins),
        # Several Slurm nodes on one host (an emulated cluster): a run starts one job at a
        # time (hpcbench.rfm.site_config.execution_options).
        'nodes_share_hosts': shares_hosts,
        'access': list(access),
        'mpi_stacks': list(stacks),
        # MPIs installed in prefixes of their own, named with --mpi (the others: the login
        # node's, as `local` finds them).
        'mpi_prefixes': {name: str(prefix) for name, prefix in (mpi_prefixes or {}).items()},
        # Each stack's run-time variables here (hpcbench.stack.mpi_stacks.slurm_run_env).
        'run_env': mpi_stacks.slurm_run_env(stacks, launcher == 'srun',
                                            shares_hosts),
        'partitions': partitions,
    }
    return description, asks


def _files(name, root):
    root = Path(root)
    return {'description': root / 'site-configs' / f'{name}.yaml',
            'site_config': root / 'site-configs' / f'{name}.py',
            'spack_env': root / 'spack-envs' / name / 'spack.yaml',
            'references': root / 'references' / f'{name}.yaml'}


def check_name(name, root=paths.PROJECT_ROOT, force=False):
    """Refuse a name that is no system name, or one that exists (any of its files) unless
    --force and this command wrote it."""
    if not NAME.match(name):
        raise NewSystemError(f'{name!r} is not a system name: lower-case letters, digits and '
                             "'-', starting with a letter")
    files = _files(name, root)
    existing = [str(p.relative_to(root)) for p in files.values() if p.exists()]
    if not existing:
        return
    ours = files['description'].exists() and \
        files['description'].read_text().startswith(HEADER)
    if not force or not ours:
        raise NewSystemError(
            f'a system {name!r} exists ({", ".join(existing)}): choose another name' +
            (', or --force to describe it again' if ours else
             '; it was not written by `hpcbench new-system`, so --force does not replace it'))


def _texts(name, description, asks, testbed_env):
    today = datetime.date.today().isoformat()
    ask_lines = ''.join(textwrap.fill(a, 96, initial_indent='#   - ',
                                      subsequent_indent='#     ') + '\n'
                        for a in asks) or '#   (nothing)\n'
    head = (f'{HEADER} {name}` on {today}, on login node {description["login_node"]}, from '
            f'the Slurm\n# controller of {description["slurm_cluster"]!r} (Slurm '
            f'{description["slurm_version"]}) and one job on a node of each partition.\n'
            '# Review and correct it here; then `make dry-run SYSTEM=' + name + '`.\n'
            '# To set by hand:\n' + ask_lines)
    site_config = (f'"""{name}: a Slurm cluster described by `hpcbench new-system {name}`. '
                   'The description is\ndata: site-configs/' + name + '.yaml (review and '
                   'correct it there)."""\nfrom hpcbench.rfm import described_site\n\n'
                   'site_configuration = described_site.site_configuration(__file__)\n')
    specs = testbed_env.read_text()
    specs = specs[specs.index('spack:'):]
    spack_env = (f'# The `{name}` system, described by `hpcbench new-system`: it builds what '
                 '`local` builds\n# (../this-machine.yaml) with its login node\'s externals; '
                 'host.yaml, written by\n# `hpcbench setup`, describes them. Concretized on '
                 'the cluster, so its lock is not committed\n# until its externals are '
                 'fixed.\n' + specs)
    # In the one form every references file has, as `make baseline` writes it again.
    references = references_text.to_text({
        'system': name,
        'about': f'{name}: no figures yet; `make baseline SYSTEM={name}` records them from '
                 'its first runs, and cited vendor or procurement figures may be added.',
        'sources': {}, 'figures': []}, f'references/{name}.yaml')
    return {'description': head + yaml.dump(description, Dumper=_Dumper, sort_keys=False,
                                            width=96),
            'site_config': site_config, 'spack_env': spack_env, 'references': references}


def write(name, description, asks, root=paths.PROJECT_ROOT, force=False):
    """Write the system's four files (all or none); the paths written."""
    check_name(name, root, force)
    files = _files(name, root)
    texts = _texts(name, description, asks, Path(root) / 'spack-envs' / 'testbed' / 'spack.yaml')
    staged = []
    try:
        for key, path in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f'.{path.name}.new')
            temporary.write_text(texts[key])
            staged.append((temporary, path))
    except OSError as err:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        raise NewSystemError(f'cannot write {path}: {err.strerror}') from None
    for temporary, path in staged:
        temporary.replace(path)
    return list(files.values())


def new_system(name, root=paths.PROJECT_ROOT, force=False, access=(), io_directory=None,
               env=None, timeout=600, mpi_prefixes=()):
    """Describe the cluster this login node's Slurm reaches as system `name` and write it:
    (paths written, [what to ask])."""
    check_name(name, root, force)
    stacks, named, mpi_asks = login_node_stacks(mpi_prefixes)
    try:
        cluster = slurm_query.running_cluster(env)
        facts = {p.name: node_facts(p.name, access, env, timeout) for p in cluster.partitions}
    except SlurmDescriptionError as err:
        raise NewSystemError(str(err)) from None
    description, asks = describe(name, cluster, facts, socket.gethostname(),
                                 [s.name for s in stacks], access, io_directory, named)
    asks += mpi_asks
    return write(name, description, asks, root, force), asks
