"""What one verdict is about: a contract entry's scope, one object per scope, each knowing
everything the acceptance asks of it, and nothing else anywhere does:

- the units of a measured case (a node's figure, each GPU's and GPU pair's under its key),
  and which unit a run that failed before its figures invalidates;
- the units expected on a partition (a unit expected and never measured is NOT_RUN);
- how its runs are reached and counted (RUNS: on each node, on each node pair, once);
- the nodes a unit is on, the one to blame, and its words on the page;
- how a draft contract recognises it in a stored case.

SCOPES holds them by name, in the order a draft tries them (the partition last: it takes
any case). A scope the code does not know is an error (UnknownScope), never a fall-through;
a new scope is one more object here (see tests/acceptance/test_scopes.py, which adds one
in a test and has plan, judgement, page and drafts handle it)."""
import functools
import itertools
from dataclasses import dataclass

from hpcbench.core import device_keys

# How a scope's units are reached: a run on each node (its GPUs' and pairs' figures come
# from that node's run: ReFrame's --distribute runs one test per node), a run pinned to each
# node pair, or one run of the partition.
RUNS = ('per_node', 'node_pair', 'once')


class UnknownScope(ValueError):
    """A scope the suite does not know: its name and the scopes it knows."""


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Scope:
    """One scope. Equal, hashed and sorted by its name (a unit's order: the scope's, then its
    partition's and key's); the rest is what it is."""
    name: str
    runs: str                   # one of RUNS
    words: str                  # on the page: 'node', 'GPU pair'
    needs_gpus: bool = False
    # Its units' nodes are blamed through the second round of pairs (assessment.pair_blame)
    # rather than one by one.
    blamed_in_pairs: bool = False
    # The rule a draft gives an entry of it over its units (contract's `rule`).
    draft_rule: tuple = ('every', True)

    def __eq__(self, other):
        return isinstance(other, Scope) and other.name == self.name

    def __lt__(self, other):
        return self.name < other.name if isinstance(other, Scope) else NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f'Scope({self.name!r})'

    def unit(self, partition, key):
        return Unit(self, partition, key)

    # What each scope answers; the base answers for a scope whose unit is a case's own
    # figure and which no draft recognises.

    def case_units(self, case, figure):
        """{Unit: value} of `figure` a measured case holds for this scope."""
        unit, value = self.case_unit(case), case.value(figure)
        return {unit: value} if unit is not None and value is not None else {}

    def case_unit(self, case):
        """The unit a case's own figure is of, or None (a case of another count of nodes;
        a GPU's, whose units are the case's devices)."""
        return None

    def case_fact_units(self, case, fact):
        """{Unit: value} of the fact figure `fact` a case's job read for this scope
        (hpcbench.rfm.plugins.HardwareFacts): none but a node's, a GPU's and a port's."""
        return {}

    def failed_unit(self, run):
        """The unit a run that failed before its figures invalidates, or None (a GPU's,
        which its node's run would have measured: expected, and so NOT_RUN)."""
        return None

    def expected(self, partition, system, node_pairs):
        """The units expected on `partition` (hpcbench.acceptance.plan.PartitionNodes)."""
        raise NotImplementedError

    def nodes(self, key):
        """The nodes a unit of this key is on."""
        return ()

    def node(self, key):
        """The node to blame for a unit of this key, where one is."""
        return None

    def unit_words(self, key):
        return f'{self.words} {key}'

    def recognises(self, case):
        """Whether a draft takes a case's own figure for this scope's."""
        return False

    def recognises_device(self, key):
        """Whether a draft takes a device's figure (device_keys.Gpu or GpuPair) for this
        scope's."""
        return False


class _Node(Scope):
    def case_unit(self, case):
        return self.unit(case.partition, case.nodes[0]) if len(case.nodes) == 1 else None

    def case_fact_units(self, case, fact):
        # Each node the job read, in its own word (a job of several nodes read every one);
        # a figure, or a text (a version).
        return {self.unit(case.partition, node): read[fact]
                for kept in (case.node_facts, case.node_texts)
                for node, read in kept.items() if fact in read}

    def failed_unit(self, run):
        return self.case_unit(run)

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, node) for node in partition.nodes}

    def nodes(self, key):
        return (key,)

    def node(self, key):
        return key

    def recognises(self, case):
        return len(case.nodes) <= 1


class _Device(Scope):
    """A GPU's, a GPU pair's or a network port's: the units are a node's run's devices."""
    key_type: type = None

    def case_units(self, case, figure):
        return {self.unit(case.partition, d.key): d.figures[figure]
                for d in case.devices
                if isinstance(d.key, self.key_type) and figure in d.figures}

    def case_fact_units(self, case, fact):
        found = {self.unit(case.partition, d.key): d.figures[fact]
                 for d in case.device_facts
                 if isinstance(d.key, self.key_type) and fact in d.figures}
        found.update({self.unit(case.partition, key): texts[fact]
                      for key, texts in case.device_texts.items()
                      if isinstance(key, self.key_type) and fact in texts})
        return found

    def nodes(self, key):
        return (key.node,)

    def node(self, key):
        return key.node

    def recognises_device(self, key):
        return isinstance(key, self.key_type)


class _Gpu(_Device):
    key_type = device_keys.Gpu

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, device_keys.Gpu(node, str(i)))
                for node in partition.nodes for i in range(partition.gpus_per_node)}

    def unit_words(self, key):
        return f'GPU {key.gpu} of {key.node}'


class _GpuPair(_Device):
    key_type = device_keys.GpuPair

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, device_keys.GpuPair(node, a, b))
                for node in partition.nodes
                for a, b in itertools.combinations(range(partition.gpus_per_node), 2)}

    def unit_words(self, key):
        return key.words()


class _Nic(_Device):
    """A port of a node's RDMA device. A partition's description names no ports: a port is
    expected where a node's run listed it, and a port missing altogether is a node's fact
    (its count of ports), judged on the node."""
    key_type = device_keys.Nic

    def expected(self, partition, system, node_pairs):
        return set()

    def unit_words(self, key):
        return key.words()


class _NodePair(Scope):
    def case_unit(self, case):
        return self.unit(case.partition, tuple(sorted(case.nodes))) \
            if len(case.nodes) == 2 else None

    def failed_unit(self, run):
        # A pair's run is its pinned pair's, wherever its job said it ran.
        nodes = run.pinned or run.nodes
        return self.unit(run.partition, tuple(sorted(nodes))) if len(nodes) == 2 else None

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, tuple(sorted(pair)))
                for pair in dict(node_pairs).get(partition.name, ())}

    def nodes(self, key):
        return tuple(key)

    def unit_words(self, key):
        return f'node pair {key[0]} and {key[1]}'

    def recognises(self, case):
        return len(case.nodes) == 2


class _Whole(Scope):
    """A partition's or the system's: one unit, keyed by its name, from any run on it."""

    def key(self, partition, system):
        raise NotImplementedError

    def case_unit(self, case):
        return self.unit(case.partition, self.key(case.partition, case.system))

    def failed_unit(self, run):
        return self.case_unit(run)

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, self.key(partition.name, system))}


class _Partition(_Whole):
    def key(self, partition, system):
        return partition

    def recognises(self, case):
        return True


class _System(_Whole):
    def key(self, partition, system):
        return system


NODE = _Node('node', 'per_node', 'node')
GPU = _Gpu('gpu', 'per_node', 'GPU', needs_gpus=True)
GPU_PAIR = _GpuPair('gpu_pair', 'per_node', 'GPU pair', needs_gpus=True)
NIC = _Nic('nic', 'per_node', 'network port')
NODE_PAIR = _NodePair('node_pair', 'node_pair', 'node pair', blamed_in_pairs=True)
PARTITION = _Partition('partition', 'once', 'partition', draft_rule=('median', True))
SYSTEM = _System('system', 'once', 'system')

# Every scope by name, in the order a draft tries them (the partition takes any case: last
# but the system, which no draft guesses).
SCOPES = {s.name: s for s in (NODE, GPU, GPU_PAIR, NIC, NODE_PAIR, PARTITION, SYSTEM)}


def named(name):
    """The scope called `name` (a Scope is itself); UnknownScope where none is."""
    if isinstance(name, Scope):
        return name
    try:
        return SCOPES[name]
    except (KeyError, TypeError):
        raise UnknownScope(f'{str(name)[:80]!r} is no scope (the scopes: '
                           f'{", ".join(SCOPES)})') from None


def of_case(case):
    """The scope a draft takes a case's own figure for: the first of SCOPES that
    recognises it."""
    return next(s for s in SCOPES.values() if s.recognises(case))


def of_device(key):
    """The scope a draft takes a device's figure for."""
    found = [s for s in SCOPES.values() if s.recognises_device(key)]
    if not found:
        raise UnknownScope(f'no scope is of a device keyed {key!r}')
    return found[0]


@dataclass(frozen=True, order=True)
class Unit:
    """What one verdict is about: its scope (a Scope, or its name), its partition and its key
    (a node's name, a device_keys.Gpu, GpuPair or Nic, a node pair, the partition's or
    system's name)."""
    scope: Scope
    partition: str
    key: object

    def __post_init__(self):
        object.__setattr__(self, 'scope', named(self.scope))

    def __str__(self):
        return self.scope.unit_words(self.key)

    @property
    def nodes(self):
        """The nodes the unit is on: a node's, a GPU's or GPU pair's node, a node pair's
        two; () for a partition or the system."""
        return self.scope.nodes(self.key)

    @property
    def node(self):
        """The node to blame, where one is: the unit's node, or a GPU's or pair's."""
        return self.scope.node(self.key)
