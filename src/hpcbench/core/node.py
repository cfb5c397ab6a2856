"""A compute node as the checks see it: cores, caches, memory and nominal peak.

Built from a ReFrame partition: the processor description (detected or hand-written in the
site config) plus the partition's facts ReFrame's processor schema has no field for (node
memory, core clock, double-precision flop per cycle per core: hpcbench.machine.description).
"""
from dataclasses import dataclass

# How a node's reads are kept from measuring the page cache its writes filled, a fact of
# its file system a partition's description may name (`io_read_cache_policy`; CHiC and OFP
# wrote more than memory or read on other nodes):
#   size:        each node writes more than its memory (hpcbench.benchmarks.ior.CACHE_FACTOR
#                times it; the default on one node);
#   reorder:     each task reads what a task of the next node wrote (-C; the default on
#                several nodes);
#   direct:      O_DIRECT for both phases (POSIX only);
#   drop-caches: write and keep the files, flush and drop the page cache (needs root),
#                then read in a second IOR run of the same job.
READ_CACHE_POLICIES = ('size', 'reorder', 'direct', 'drop-caches')


# Memory each node keeps for the kernel and ordinary processes unless its description says
# otherwise (T2K §4.5 left ~1 GB); emulated nodes sharing one host keep their share of it.
DEFAULT_OS_RESERVE_BYTES = 2**30


class NodeDescriptionError(ValueError):
    pass


@dataclass(frozen=True)
class Node:
    num_cores: int
    num_sockets: int
    num_numa_nodes: int
    llc_bytes_total: int        # all last-level cache instances of the node together
    memory_bytes: int
    clock_hz: float
    flops_per_cycle: int        # double precision, per core
    # A partition of mixed clocks (TSUBAME's grid: 16 nodes at 2.6 GHz among 2.4-GHz ones):
    # ((nodes, clock_hz), ...) in the order a run takes them; () when all run at clock_hz.
    node_clocks: tuple = ()
    # What a job cannot have of memory_bytes (the kernel, daemons, ordinary processes).
    os_reserve_bytes: int = DEFAULT_OS_RESERVE_BYTES

    @property
    def core_peak_flops(self):
        return self.clock_hz * self.flops_per_cycle

    @property
    def peak_flops(self):
        return self.num_cores * self.core_peak_flops

    def peak_flops_of(self, num_nodes):
        """The nominal peak of a run on `num_nodes` nodes: each at its own clock where the
        partition's clocks are mixed (node_clocks: the first groups first; nodes beyond
        them at clock_hz), else num_nodes x peak_flops."""
        total, left = 0.0, num_nodes
        for count, hz in self.node_clocks:
            taken = min(count, left)
            total += taken * self.num_cores * hz * self.flops_per_cycle
            left -= taken
        return total + left * self.peak_flops


def last_level_cache_total(topology):
    """Bytes of the highest cache level, summed over its instances (one per cpuset)."""
    caches = (topology or {}).get('caches') or []
    if not caches:
        raise NodeDescriptionError('the processor description lists no caches')

    llc = max(caches, key=lambda c: int(c['type'].lstrip('Ll')))
    instances = len(llc.get('cpusets') or [None])
    return int(llc['size']) * instances


REQUIRED_FACTS = ('memory_bytes', 'clock_hz', 'flops_per_cycle')


def from_partition(processor, facts, where='partition'):
    """Node from a ReFrame processor dict (``partition.processor.info``) and the partition's
    facts (REQUIRED_FACTS, node_clocks, os_reserve_bytes);
    NodeDescriptionError naming `where` for one that is not (fields missing, of another
    type, counts that are none)."""
    try:
        node = _from_partition(processor, facts, where)
    except NodeDescriptionError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise NodeDescriptionError(f'{where}: no processor ReFrame describes '
                                   f'({type(err).__name__}: {err})') from None
    for field in ('num_cores', 'num_sockets', 'llc_bytes_total', 'memory_bytes', 'clock_hz',
                  'flops_per_cycle'):
        if not 0 < getattr(node, field) < float('inf'):
            raise NodeDescriptionError(f'{where}: {field} {getattr(node, field)!r} is not a '
                                       'positive figure')
    return node


def _from_partition(processor, facts, where):
    missing = [k for k in REQUIRED_FACTS if not (facts or {}).get(k)]
    if not processor or not processor.get('num_cpus'):
        raise NodeDescriptionError(f'{where}: no processor description (detect it or set it)')

    if missing:
        raise NodeDescriptionError(f'{where}: the description lacks {", ".join(missing)}')

    topology = processor.get('topology') or {}
    cores = len(topology.get('cores') or []) or (
        processor['num_cpus'] // processor.get('num_cpus_per_core', 1))
    return Node(
        num_cores=cores,
        num_sockets=processor.get('num_sockets') or len(topology.get('sockets') or [1]),
        num_numa_nodes=len(topology.get('numa_nodes') or [1]),
        llc_bytes_total=last_level_cache_total(topology),
        memory_bytes=int(facts['memory_bytes']),
        clock_hz=float(facts['clock_hz']),
        flops_per_cycle=int(facts['flops_per_cycle']),
        node_clocks=_node_clocks(facts.get('node_clocks'), where),
        os_reserve_bytes=int(facts.get('os_reserve_bytes') or DEFAULT_OS_RESERVE_BYTES),
    )


def _node_clocks(groups, where):
    """node_clocks ([[nodes, clock_hz], ...]) as a tuple, each checked."""
    checked = []
    for group in groups or ():
        try:
            count, hz = group
            ok = int(count) == count and count > 0 and float(hz) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise NodeDescriptionError(f'{where}: node_clocks: {group!r} is no '
                                       '[nodes, clock_hz] pair of positive numbers')
        checked.append((int(count), float(hz)))
    return tuple(checked)
