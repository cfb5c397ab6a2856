"""A compute node as the checks see it: cores, caches, memory and nominal peak.

Built from a ReFrame partition: the processor description (detected or hand-written in the
site config) plus the partition's ``extras`` for what ReFrame's processor schema has no field
for (node memory, core clock, double-precision flop per cycle per core).
"""
from dataclasses import dataclass


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

    @property
    def core_peak_flops(self):
        return self.clock_hz * self.flops_per_cycle

    @property
    def peak_flops(self):
        return self.num_cores * self.core_peak_flops


def last_level_cache_total(topology):
    """Bytes of the highest cache level, summed over its instances (one per cpuset)."""
    caches = (topology or {}).get('caches') or []
    if not caches:
        raise NodeDescriptionError('the processor description lists no caches')

    llc = max(caches, key=lambda c: int(c['type'].lstrip('Ll')))
    instances = len(llc.get('cpusets') or [None])
    return int(llc['size']) * instances


REQUIRED_EXTRAS = ('memory_bytes', 'clock_hz', 'flops_per_cycle')


def from_partition(processor, extras, where='partition'):
    """Node from a ReFrame processor dict (``partition.processor.info``) and partition extras."""
    missing = [k for k in REQUIRED_EXTRAS if not (extras or {}).get(k)]
    if not processor or not processor.get('num_cpus'):
        raise NodeDescriptionError(f'{where}: no processor description (detect it or set it)')

    if missing:
        raise NodeDescriptionError(f'{where}: extras lack {", ".join(missing)}')

    topology = processor.get('topology') or {}
    cores = len(topology.get('cores') or []) or (
        processor['num_cpus'] // processor.get('num_cpus_per_core', 1))
    return Node(
        num_cores=cores,
        num_sockets=processor.get('num_sockets') or len(topology.get('sockets') or [1]),
        num_numa_nodes=len(topology.get('numa_nodes') or [1]),
        llc_bytes_total=last_level_cache_total(topology),
        memory_bytes=int(extras['memory_bytes']),
        clock_hz=float(extras['clock_hz']),
        flops_per_cycle=int(extras['flops_per_cycle']),
    )
