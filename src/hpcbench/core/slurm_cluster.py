"""A Slurm cluster as its controller describes it: its partitions, the shape of their nodes
(CPUs, sockets, cores, threads, memory), their features and GRES (GPUs), and the MPI plugins
its srun offers, read from what `scontrol show partition -o`, `scontrol show node -o` and
`srun --mpi=list` print. The first step of describing a site's own cluster (issue 41): what
the scheduler already knows is read, never guessed.

A partition's nodes are the node records naming it (their `Partitions=`), so no host list
(`n[1-3]`) is expanded here, and its node count is checked against the partition's own
`TotalNodes`. Nodes of one partition that differ in shape are said, node by node, and the
partition is described by its smallest node (fewest CPUs, then least memory): a check sized
for it fits every node it may get.
"""
import re
from dataclasses import dataclass

from hpcbench.core import gres
from hpcbench.core import accelerators


class SlurmDescriptionError(ValueError):
    pass


# A key of `scontrol show ... -o`: a word followed by '=' at the start of the line or after
# a blank (values may hold blanks, `OS=Linux 6.1 #1 SMP`, and '=', `TRES=cpu=6,mem=24105M`).
_KEY = re.compile(r'(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=')
_NONE = ('', '(null)', 'N/A')


def natural_key(name):
    """A node name's sort key in Slurm's order: its numbers as numbers (n2 before n10)."""
    return [(0, int(part), '') if part.isdigit() else (1, 0, part)
            for part in re.split(r'(\d+)', name)]


def records(text, kind):
    """The records of `scontrol show <kind>` (kind 'Partition' or 'Node'): one dict per
    record, its keys as printed, values stripped. A record is one line (`-o`, as this suite
    asks) or, as `scontrol show node` prints it without `-o`, its first line and the lines
    under it (indented, or as a page published them without their indentation: lines of
    other keys). Anything else is one error saying so."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        # A record's later lines: indented, or (a record pasted without its indentation)
        # starting with another key than the record's name.
        first = _KEY.match(line.strip())
        continued = line[:1].isspace() or (first and first.group(1) != f'{kind}Name')
        if continued and lines:
            lines[-1] = (lines[-1][0], f'{lines[-1][1]} {line.strip()}')
        else:
            lines.append((number, line.strip()))
    found = []
    for number, line in lines:
        keys = list(_KEY.finditer(line))
        if not keys or keys[0].start() != 0 or keys[0].group(1) != f'{kind}Name':
            raise SlurmDescriptionError(
                f'line {number} is not a record of `scontrol show {kind.lower()} -o` '
                f'(it starts {line[:40]!r}, not {kind}Name=)')
        record = {}
        for key, after in zip(keys, [*keys[1:], None]):
            record[key.group(1)] = line[key.end():after.start() if after else None].strip()
        found.append(record)
    if not found:
        raise SlurmDescriptionError(f'`scontrol show {kind.lower()} -o` printed no record')
    return found


# What one node can have, as Slurm counts it: anything outside is a broken or hostile
# controller's output, refused in one message before anything is sized from it (a GRES of
# 10^11 GPUs took minutes and gigabytes). The largest nodes today: a few thousand hardware
# threads, tens of TB of memory (a shared-memory system's single image), 8 to 16 sockets.
NODE_LIMITS = {'CPUTot': 1 << 16, 'Sockets': 1 << 10, 'CoresPerSocket': 1 << 12,
               'ThreadsPerCore': 64, 'RealMemory': 1 << 28, 'TotalNodes': 1 << 20}
# A partition's name as ReFrame takes one (its schema's alphanum_ext_string): it names the
# partition's directories and reaches job scripts.
PARTITION_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_-]{0,63}')
# A node's name as hostnames and Slurm's NodeName have it: what reaches a key of its figures
# (hpcbench.core.device_keys) and a drain line (hpcbench.acceptance.outputs).
NODE_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,127}')


# The most nodes a node list may expand to (Slurm's largest clusters have tens of
# thousands): `n[1-999999999]` is no cluster's, and expanded it filled the memory.
MAX_LISTED_NODES = 1 << 16
_BRACKETS = re.compile(r'\[([^\[\]]*)\]')
_RANGE = re.compile(r'([0-9]{1,9})(?:-([0-9]{1,9}))?')


def expand_hostlist(listed):
    """The node names of a node list as Slurm abbreviates it (`n[10-11],gpu[01-02]-a`,
    zero padding kept), counted before they are expanded: SlurmDescriptionError where it
    is none or names more than MAX_LISTED_NODES."""
    items, depth, start = [], 0, 0
    for at, char in enumerate(listed + ','):
        depth += {'[': 1, ']': -1}.get(char, 0)
        if depth not in (0, 1):
            raise SlurmDescriptionError(f'{listed[:200]!r}: brackets inside brackets')
        if char == ',' and depth == 0:
            items.append(listed[start:at])
            start = at + 1
    names = []
    for item in items:
        literals = _BRACKETS.split(item)    # literal, ranges, literal, ranges, ..., literal
        if not item or any(c in part for part in literals[::2] for c in '[],'):
            raise SlurmDescriptionError(f'{listed[:200]!r}: {item[:80]!r} is no node list '
                                        'item')
        choices, count = [], 1
        for i, part in enumerate(literals):
            if i % 2 == 0:
                choices.append([part])
                continue
            numbers = []
            for piece in part.split(','):
                found = _RANGE.fullmatch(piece)
                if not found:
                    raise SlurmDescriptionError(f'{listed[:200]!r}: [{part[:80]}] is no '
                                                'range of node numbers')
                low, high = found.group(1), found.group(2) or found.group(1)
                if int(high) < int(low) or int(high) - int(low) >= MAX_LISTED_NODES:
                    raise SlurmDescriptionError(f'{listed[:200]!r}: [{part[:80]}] is no '
                                                'range of a cluster\'s nodes')
                numbers.append((low, high))
            count *= sum(int(h) - int(lo) + 1 for lo, h in numbers)
            if count + len(names) > MAX_LISTED_NODES:
                raise SlurmDescriptionError(f'{listed[:200]!r}: more than {MAX_LISTED_NODES} '
                                            'nodes')
            choices.append([str(n).zfill(len(lo)) for lo, h in numbers
                            for n in range(int(lo), int(h) + 1)])
        expanded = ['']
        for options in choices:
            expanded = [done + option for done in expanded for option in options]
        names += expanded
    return names


def _number(record, key, what):
    """The count `key` of `record`, from 1 to NODE_LIMITS[key]; else one error naming it."""
    if key not in record:
        raise SlurmDescriptionError(f'{what}: no {key}= in its record')
    text = record[key]
    # Digits as Slurm prints them: Python's int() also takes '٣' and '２'.
    if not re.fullmatch(r'-?[0-9]{1,20}', text):
        raise SlurmDescriptionError(f'{what}: {key}={text[:40]!r} is not a number')
    value = int(text)
    if not 1 <= value <= NODE_LIMITS[key]:
        raise SlurmDescriptionError(f'{what}: {key}={value} is no count a node has (from 1 to '
                                    f'{NODE_LIMITS[key]})')
    return value


def _names(value):
    return tuple(v for v in (value or '').split(',') if v and v not in _NONE)


# A node's state as `scontrol show node` prints it: a base state and flags joined by '+'
# (`IDLE+CLOUD+POWERED_DOWN`, `DOWN*+DRAIN`, `MIXED+DRAIN`), '*' on a node that does not
# respond, and the suffixes of sinfo's short form ('~' powered down, '#' powering up, '%'
# powering down, '$' maintenance, '@' reboot). The flags that keep a job off the node, each
# with what it means: a node with any cannot run a benchmark now.
OUT_OF_SERVICE = {
    'DOWN': 'down', 'DRAIN': 'drained', 'DRAINED': 'drained', 'DRAINING': 'draining',
    'FAIL': 'failing', 'FAILING': 'failing', 'ERROR': 'in error', 'FUTURE': 'not yet in service',
    'NOT_RESPONDING': 'not responding', 'UNKNOWN': 'of unknown state',
    'REBOOT_REQUESTED': 'to reboot', 'REBOOT_ISSUED': 'rebooting', 'RESERVED': 'reserved',
    'MAINT': 'in maintenance', 'MAINTENANCE': 'in maintenance', 'INVALID_REG': 'registered unlike slurm.conf declares it',
    'INVALID': 'registered unlike slurm.conf declares it',
    # sinfo's short names of the same states
    'DRNG': 'draining', 'FUTR': 'not yet in service', 'UNK': 'of unknown state',
    'RESV': 'reserved', 'INVAL': 'registered unlike slurm.conf declares it',
}
# Power saving is no reason a node cannot run: Slurm boots a powered-down node for the job
# that needs it (a cloud node is powered down whenever idle); its first job waits minutes.
POWER_SAVED = ('POWERED_DOWN', 'POWER_DOWN', 'POWERING_DOWN', 'POWERING_UP')
_SUFFIXES = {'*': 'NOT_RESPONDING', '~': 'POWERED_DOWN', '#': 'POWERING_UP',
             '%': 'POWERING_DOWN', '!': 'POWERING_DOWN', '$': 'MAINT', '@': 'REBOOT_REQUESTED',
             '^': 'REBOOT_ISSUED', '-': 'PLANNED'}


def state_flags(state):
    """The flags of a node state ('DOWN*+DRAIN' -> ('DOWN', 'NOT_RESPONDING', 'DRAIN')),
    upper case, each suffix spelled as its flag after the state it ends."""
    flags = []
    for part in (state or '').upper().split('+'):
        part, suffixes = part.strip(), []
        while part and part[-1] in _SUFFIXES:
            suffixes.insert(0, _SUFFIXES[part[-1]])
            part = part[:-1]
        flags += ([part] if part else []) + suffixes
    return tuple(dict.fromkeys(flags))


# What a node in a reservation shows (some Slurm versions print a MAINT reservation's
# nodes so): no reason a job inside that reservation cannot run.
RESERVATION_FLAGS = ('RESERVED', 'RESV', 'MAINT', 'MAINTENANCE')


def why_out(state, reason='', in_reservation=False):
    """Why a node in `state` (with Slurm's `reason`) cannot run a benchmark now, or ''; for a
    job in a reservation (`in_reservation`), its node reserved is none."""
    out = [OUT_OF_SERVICE[f] for f in state_flags(state) if f in OUT_OF_SERVICE
           and not (in_reservation and f in RESERVATION_FLAGS)]
    if not out:
        return ''
    said = f'{state}: {", ".join(dict.fromkeys(out))}'
    return f'{said} ({reason})' if reason and reason not in _NONE else said


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mb: int          # RealMemory: what Slurm lets jobs have
    features: tuple         # AvailableFeatures
    gres: str               # '' without any
    partitions: tuple
    host: str = ''          # NodeHostName: the machine the node is (several: emulated nodes)
    state: str = ''         # State, as printed: 'IDLE', 'DOWN*+DRAIN', 'IDLE+CLOUD+POWERED_DOWN'
    reason: str = ''        # Reason, where Slurm keeps one ('Not responding [root@...]')

    @property
    def out_of_service(self):
        """Why the node cannot run a benchmark now ('' when it can): down, drained, not
        responding, reserved, in maintenance."""
        return why_out(self.state, self.reason)

    @property
    def powered_down(self):
        """Whether Slurm has it powered down (it boots it for a job)."""
        return any(flag in POWER_SAVED for flag in state_flags(self.state))

    @property
    def shape(self):
        """What a check is sized by: CPUs, sockets, cores per socket, threads per core,
        memory and GRES."""
        return (self.cpus, self.sockets, self.cores_per_socket, self.threads_per_core,
                self.memory_mb, self.gres)

    def differences(self, other):
        """How this node's shape differs from `other`'s, in Slurm's words."""
        fields = ('CPUTot', 'Sockets', 'CoresPerSocket', 'ThreadsPerCore', 'RealMemory',
                  'Gres')
        return [f'{field}={mine or "(null)"} (not {theirs or "(null)"})'
                for field, mine, theirs in zip(fields, self.shape, other.shape)
                if mine != theirs]


def node_from_record(record):
    name = record['NodeName']
    what = f'node {name}'
    return SlurmNode(name=name, cpus=_number(record, 'CPUTot', what),
                     sockets=_number(record, 'Sockets', what),
                     cores_per_socket=_number(record, 'CoresPerSocket', what),
                     threads_per_core=_number(record, 'ThreadsPerCore', what),
                     memory_mb=_number(record, 'RealMemory', what),
                     features=_names(record.get('AvailableFeatures')),
                     gres='' if record.get('Gres', '') in _NONE else record['Gres'],
                     partitions=_names(record.get('Partitions')),
                     host=record.get('NodeHostName') or name,
                     state=record.get('State', ''),
                     reason='' if record.get('Reason', '') in _NONE else record['Reason'])


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: tuple            # SlurmNode, in the controller's order
    default: bool

    @property
    def in_service(self):
        """The nodes that can run a benchmark now, in the controller's order."""
        return tuple(n for n in self.nodes if not n.out_of_service)

    @property
    def out_of_service(self):
        """{node name: why it cannot run now} (hpcbench.core.slurm_cluster.why_out)."""
        return {n.name: n.out_of_service for n in self.nodes if n.out_of_service}

    @property
    def smallest(self):
        """The node the partition is described by: fewest CPUs, then least memory, of those
        in service (a node never booted reports RealMemory=1); of all where none is."""
        return min(self.in_service or self.nodes, key=lambda n: (n.cpus, n.memory_mb))

    @property
    def differing(self):
        """{node name: [how its shape differs from the smallest node's]} of the nodes in
        service that are not the smallest's shape."""
        smallest = self.smallest
        return {n.name: n.differences(smallest) for n in self.in_service or self.nodes
                if n.shape != smallest.shape}

    @property
    def features(self):
        """The features every node of the partition has (a job asking for one of them may
        land on any node)."""
        common = set(self.nodes[0].features)
        for node in self.nodes[1:]:
            common &= set(node.features)
        return tuple(f for f in self.nodes[0].features if f in common)

    @property
    def gres_gpus(self):
        """The GPU items of the smallest node's GRES (hpcbench.core.gres.GresGpus:
        label, count, binding; () without)."""
        try:
            return gres.gres_gpus(self.smallest.gres)
        except accelerators.AcceleratorError as err:
            raise SlurmDescriptionError(f'partition {self.name}, node {self.smallest.name}: '
                                        f'{err}') from None


def read_cluster(partition_output, node_output):
    """[SlurmPartition] from `scontrol show partition -o` and `scontrol show node -o`, in the
    controller's order. A partition without nodes, whose node records do not add up to its
    TotalNodes, or whose GRES is no node's (hpcbench.core.gres.gres_gpus), is one
    error naming it."""
    nodes = [node_from_record(r) for r in records(node_output, 'Node')]
    partitions = []
    for record in records(partition_output, 'Partition'):
        name = record['PartitionName']
        if not PARTITION_NAME.fullmatch(name):
            raise SlurmDescriptionError(
                f'partition {name[:80]!r}{"..." if len(name) > 80 else ""}: a name ReFrame '
                'takes has letters, digits, _ and - only (starting with a letter or _, at most '
                '64): describe it under another name by hand, or rename it in Slurm')
        members = tuple(n for n in nodes if name in n.partitions)
        if not members:
            raise SlurmDescriptionError(
                f'partition {name} has no nodes (Nodes={record.get("Nodes", "")}): nothing '
                'to describe it by')
        total = _number(record, 'TotalNodes', f'partition {name}')
        if len(members) != total:
            raise SlurmDescriptionError(
                f'partition {name}: {len(members)} node records name it, its TotalNodes is '
                f'{total} (nodes hidden from this user?)')
        partition = SlurmPartition(name, members, record.get('Default') == 'YES')
        partition.gres_gpus             # a GRES that is no node's: said now
        partitions.append(partition)
    return partitions


def mpi_plugins(srun_mpi_list):
    """The MPI plugins `srun --mpi=list` offers, in its order, without `none` (no PMI at
    all): ('pmix', 'cray_shasta', 'pmi2') on the testbed's Slurm 22.05."""
    lines = srun_mpi_list.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('MPI plugin types')),
                 None)
    if start is None:
        raise SlurmDescriptionError('`srun --mpi=list` did not list its MPI plugin types')
    plugins = []
    for line in lines[start + 1:]:
        if not line[:1].isspace():
            break
        if line.strip() != 'none':
            plugins.append(line.strip())
    return tuple(plugins)


def config_values(scontrol_show_config):
    """{key: value} of `scontrol show config` ('Key = Value' lines)."""
    values = {}
    for line in scontrol_show_config.splitlines():
        key, sep, value = line.partition(' = ')
        if sep and key.strip() and ' ' not in key.strip():
            values[key.strip()] = value.strip()
    if 'ClusterName' not in values:
        raise SlurmDescriptionError('`scontrol show config` printed no ClusterName')
    return values


def nodes_share_hosts(partitions):
    """Whether several Slurm nodes are one machine (the same NodeHostName: the testbed's
    emulated nodes), so that their jobs would share it."""
    nodes = {n.name: n.host for p in partitions for n in p.nodes}
    return len(set(nodes.values())) < len(nodes)


@dataclass(frozen=True)
class SlurmCluster:
    name: str               # ClusterName
    version: str            # SLURM_VERSION
    partitions: tuple       # SlurmPartition
    mpi_plugins: tuple      # srun --mpi=list, without none
    mpi_default: str        # MpiDefault
    accounting: bool        # an accounting storage: sacct answers for finished jobs


def cluster_from(config_output, partition_output, node_output, mpi_list_output):
    """The cluster from what its controller printed (hpcbench.machine.slurm_query asks)."""
    config = config_values(config_output)
    storage = config.get('AccountingStorageType', 'accounting_storage/none')
    return SlurmCluster(config['ClusterName'], config.get('SLURM_VERSION', ''),
                        tuple(read_cluster(partition_output, node_output)),
                        mpi_plugins(mpi_list_output), config.get('MpiDefault', 'none'),
                        storage not in ('', 'accounting_storage/none', '(null)'))
