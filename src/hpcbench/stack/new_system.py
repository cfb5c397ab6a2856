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
import re
import socket
import textwrap
from pathlib import Path

import yaml

from hpcbench.core import accelerators, paths, slurm_cluster
from hpcbench.core.slurm_cluster import SlurmDescriptionError
from hpcbench.machine import datasheets, host, plain_yaml, slurm_query
from hpcbench.machine.described_system import HEADER, DescriptionError, checked
from hpcbench.machine.gpus import gpu_groups, node_gpus, tool_of
from hpcbench.machine.node_facts import node_facts
from hpcbench.results import references_text
from hpcbench.stack import slurm_run_env
from hpcbench.stack.described_stacks import NewSystemError, login_node_stacks

NAME = re.compile(r'^[a-z][a-z0-9-]{0,30}$')
# Clock sources that are the cores' nominal clock (host.clock); any other is asked about.
NOMINAL_CLOCK_SOURCES = ('cpufreq maximum', host.CLOCK_VARIABLE)


class _Dumper(yaml.SafeDumper):
    # Each partition's processor written out in full, not as an alias of another's.
    def ignore_aliases(self, data):
        return True


def _launcher(cluster):
    # srun starts MPI ranks where Slurm offers a PMI the MPIs speak; else each MPI's mpirun.
    return 'srun' if {'pmix', 'pmi2'} & set(cluster.mpi_plugins) else 'mpirun'


# RealMemory below this is no node's memory: Slurm's placeholder for a node never booted
# (RealMemory=1, cloud nodes) or gigabytes typed into the megabyte field.
LEAST_REAL_MEMORY_MB = 1024


def _processor_asks(partition, facts, shares_hosts):
    """What to ask where Slurm's counts of a node's processor are not the node's own (not
    where Slurm nodes are slices of one host: there the host's processor is not a node's)."""
    node, where = partition.smallest, f'partitions[{partition.name}]'
    asks = []
    counted = node.sockets * node.cores_per_socket * node.threads_per_core
    if counted != node.cpus:
        # Slurm's counts disagree with each other (a node declared by hand).
        asks.append(f'{where}: Slurm says {node.name} has CPUTot={node.cpus} but Sockets='
                    f'{node.sockets} x CoresPerSocket={node.cores_per_socket} x '
                    f'ThreadsPerCore={node.threads_per_core} = {counted}; its processor is '
                    'described as the node printed it: check that it is the node\'s')
    processor = facts['processor']
    if shares_hosts:
        return asks
    # Counted as hpcbench.core.node counts them: cores from the topology, else CPUs over
    # threads per core.
    threads = processor.get('num_cpus_per_core') or 1
    sockets = processor.get('num_sockets') or 1
    cores = len((processor.get('topology') or {}).get('cores') or []) or \
        processor['num_cpus'] // threads
    own = (sockets, cores // sockets, threads)
    if own != (node.sockets, node.cores_per_socket, node.threads_per_core):
        # A cloud node's vCPUs each called a socket (Sockets=32 CoresPerSocket=1): the
        # checks are laid out by the node's own processor, not by Slurm's counts.
        asks.append(f'{where}: Slurm counts {node.name} as Sockets={node.sockets} x '
                    f'CoresPerSocket={node.cores_per_socket} x ThreadsPerCore='
                    f'{node.threads_per_core}; the node ({facts["hostname"]}, ReFrame\'s '
                    f'detector) has {own[0]} socket(s) x {own[1]} cores x {own[2]} threads: '
                    'ranks are laid out by the node\'s; correct slurm.conf\'s NodeName line')
    return asks


def _memory(partition, facts, shares_hosts):
    """(the memory a node of `partition` is described with, [what to ask]): Slurm's
    RealMemory, unless it is a placeholder (under 1 GiB) or, on a node that is its own host,
    under half of what the node has: then the node's own, said."""
    node, where = partition.smallest, f'partitions[{partition.name}]'
    slurm_bytes, own = node.memory_mb << 20, facts.get('memory_bytes')
    if own and (node.memory_mb < LEAST_REAL_MEMORY_MB
                or (not shares_hosts and slurm_bytes < own // 2)):
        return own, [f'{where}.memory_bytes: Slurm says {node.name} has RealMemory='
                     f'{node.memory_mb} (MB), the node ({facts["hostname"]}) {own >> 20} MiB: '
                     'described with the node\'s; set RealMemory in slurm.conf (jobs that ask '
                     'for memory are refused beyond it)']
    return slurm_bytes, []


def _node_states(partition, entry, shares_hosts):
    """Each node's state as the controller printed it into `entry`, the nodes out of
    service and a host's shared nodes; what to ask about them."""
    asks = []
    entry['node_states'] = {n.name: n.state + (f' ({n.reason})' if n.reason else '')
                            for n in partition.nodes}
    powered_down = [n.name for n in partition.in_service if n.powered_down]
    if powered_down:
        asks.append(f'partitions[{partition.name}]: {len(powered_down)} of its nodes are '
                    f'powered down ({", ".join(powered_down[:8])}'
                    f'{", ..." if len(powered_down) > 8 else ""}): Slurm boots them for a job, '
                    'whose start then waits for the boot')
    out = partition.out_of_service
    if out:
        # Nodes Slurm will not give a job now: a run and a screen expect the others only.
        entry['nodes_out_of_service'] = dict(out)
        asks.append(f'partitions[{partition.name}]: {len(out)} of its {len(partition.nodes)} '
                    'nodes cannot run now, ' + '; '.join(f'{n}: {why}' for n, why in out.items())
                    + (f'; a run expects the other {len(partition.in_service)}'
                       if partition.in_service else
                       '; none can: it is described as if they could, run it when they are back'))
    if shares_hosts:
        # Nodes that are one host (the testbed's): the others' jobs and daemons always
        # load it, so no quiet-node check; the node's launch lock still runs one at a time.
        entry['quiet_node'] = {'action': 'off'}
    return asks


def _gpus(partition, facts, entry, known, entries):
    """(the node's GPUs, what to ask): their groups into `entry`, a mix of models or GPUs
    no tool named or no driver answers for said."""
    node, asks = partition.smallest, []
    gpus, gpu_asks = node_gpus(partition, facts, known, entries)
    asks += gpu_asks
    if gpus:
        entry['gpus'] = gpu_groups(gpus, f'{tool_of(gpus)} on {facts["hostname"]}'
                                   if facts.get('gpus') else f'GRES {node.gres}')
        if len(entry['gpus']) > 1:
            entry['gpus_mixed'] = (
                'one node has ' + ', '.join(f'{g["count"]} x {g["model"]}' for g in entry['gpus'])
                + ': the GPU checks measure one model per partition')
            asks.append(f'partitions[{partition.name}].gpus_mixed: {entry["gpus_mixed"]}; its '
                        'GPU checks are not run: describe each model as a partition of its own '
                        '(a copy of this entry with that model\'s gpus and CUDA_VISIBLE_DEVICES)')
        elif gpus[0].vendor == accelerators.UNKNOWN_VENDOR:
            asks.append(f'partitions[{partition.name}].gpus: {gpus[0].model}: no tool on '
                        f'{facts["hostname"]} named its model; its GPU checks are not run until '
                        'one does (or set the model, vendor and arch here)')
    if gpus and not facts.get('gpus_seen'):
        # GPUs Slurm allocates but no driver answers for (the testbed's stand-in devices, a
        # node whose driver is not loaded): the GPU checks write their jobs, a run skips them.
        entry['gpus_stand_in'] = (f'its GRES declares {len(gpus)} GPU(s) but nvidia-smi on '
                                  f'{facts["hostname"]} shows none')
        asks.append(f'partitions[{partition.name}].gpus_stand_in: {entry["gpus_stand_in"]}; '
                    'the GPU checks skip it until the nodes\' GPUs answer (then remove it)')
    return gpus, asks


def _topology_and_shape(partition, facts, entry, gpus):
    """How the node's GPUs are linked, and the nodes of another shape than the smallest,
    into `entry`; what to ask about them."""
    node, asks = partition.smallest, []
    linked = len((facts.get('gpu_topology') or {}).get('gpus', []))
    if linked and len(entry.get('gpus', [])) == 1 and linked == len(gpus):
        # How the node's GPUs are linked, as its nvidia-smi said: the ranks are placed by it.
        entry['gpu_topology'] = facts['gpu_topology']
    elif linked:
        asks.append(f'partitions[{partition.name}].gpu_topology: nvidia-smi topo -m on '
                    f'{facts["hostname"]} links {linked} GPU(s), the partition is described '
                    f'with {len(gpus)}: left out, ranks are not placed by it')
    if partition.differing:
        entry['nodes_of_another_shape'] = {name: ', '.join(how)
                                           for name, how in partition.differing.items()}
        asks.append(f'partitions[{partition.name}]: its nodes differ; it is described by its '
                    f'smallest, {node.name}: ' + '; '.join(
                        f'{name}: {", ".join(how)}' for name, how in partition.differing.items()))
    return asks


def partition_description(partition, facts, io_directory, shares_hosts, known=None,
                          entries=None):
    """One partition's entry, and what to ask about it ([str]); `known` names GRES labels
    (hpcbench.machine.datasheets.gres_model)."""
    node = partition.smallest
    asks = []
    # The clock's source as `local` says it names how to set it there (HPCBENCH_CLOCK_HZ);
    # here that is the field.
    clock_source = re.sub(r' \(set \w+\)$', '', facts['clock_source'])
    in_service = partition.in_service or partition.nodes
    memory_bytes, memory_asks = _memory(partition, facts, shares_hosts)
    entry = {
        'name': partition.name,
        'slurm_partition': partition.name,
        'descr': (f'{len(partition.nodes)} nodes of {node.cpus} CPUs ({node.sockets} '
                  f'socket(s) x {node.cores_per_socket} cores x {node.threads_per_core} '
                  f'threads), {node.memory_mb} MB' + (f', GRES {node.gres}' if node.gres else '')),
        'num_nodes': len(in_service),
        'memory_bytes': memory_bytes,
        'clock_hz': facts['clock_hz'],
        'clock_source': clock_source,
        'flops_per_cycle': facts['flops_per_cycle'],
        'features': list(partition.features),
        'gres': node.gres,
        'io_directory': io_directory,
        'max_jobs': 1 if shares_hosts else 100,
        'processor': facts['processor'],
    }
    asks += memory_asks
    asks += _node_states(partition, entry, shares_hosts)
    gpus, gpu_asks = _gpus(partition, facts, entry, known, entries)
    asks += gpu_asks
    asks += _processor_asks(partition, facts, shares_hosts)
    asks += _topology_and_shape(partition, facts, entry, gpus)
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
    try:
        entries = datasheets.table(name)
    except datasheets.DatasheetError as err:
        raise NewSystemError(str(err)) from None
    known = datasheets.gres_model(entries)
    for partition in cluster.partitions:
        entry, asked = partition_description(partition, facts[partition.name], io_directory,
                                             shares_hosts, known, entries)
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
        # time (hpcbench.rfm.run_modes.execution_options).
        'nodes_share_hosts': shares_hosts,
        'access': list(access),
        'mpi_stacks': list(stacks),
        # MPIs installed in prefixes of their own, named with --mpi (the others: the login
        # node's, as `local` finds them).
        'mpi_prefixes': {name: str(prefix) for name, prefix in (mpi_prefixes or {}).items()},
        # Each stack's run-time variables here (hpcbench.stack.slurm_run_env).
        'run_env': slurm_run_env.run_env(stacks, launcher == 'srun',
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
    if not NAME.fullmatch(name):
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
    # What is written is read back as every later command reads it, before anything is
    # written: a description its own readers refuse is never left.
    try:
        checked(plain_yaml.loads(texts['description'], str(files['description'])),
                str(files['description']))
    except (DescriptionError, plain_yaml.PlainYamlError) as err:
        raise NewSystemError(f'the description of {name} would not be read back: {err}') \
            from None
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


def from_slurm(name, root=paths.PROJECT_ROOT, force=False, access=(), io_directory=None,
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
