"""Facts about the machine we are on that ReFrame's topology detection does not give.

Used by ``site-configs/local.py`` to describe the ``local`` partition.
"""
import json
import os
import re
from pathlib import Path

from hpcbench import paths

# Double-precision flop per cycle per core from the widest FMA the ISA offers, assuming two
# FMA pipes (true of Intel since Haswell and of AMD Zen); a nominal figure, as Rpeak is.
# A site whose cores differ (one AVX-512 FMA unit, double-pumped 256-bit units) sets
# `flops_per_cycle` in its site config instead.
FLOPS_PER_CYCLE_BY_ISA = (
    ('avx512f', 32),
    ('fma', 16),
    ('avx', 8),
    ('sse2', 4),
)


def _read(path):
    try:
        return Path(path).read_text()
    except OSError:
        return ''


def memory_bytes(meminfo='/proc/meminfo'):
    match = re.search(r'^MemTotal:\s+(\d+) kB', _read(meminfo), re.M)
    if not match:
        raise RuntimeError(f'cannot read the memory size from {meminfo}')

    return int(match.group(1)) * 1024


def clock_hz(cpuinfo='/proc/cpuinfo',
             max_freq='/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq'):
    """Nominal core clock: cpufreq's maximum when exposed, else the first 'cpu MHz'."""
    khz = _read(max_freq).strip()
    if khz.isdigit():
        return int(khz) * 1e3

    match = re.search(r'^cpu MHz\s*:\s*([\d.]+)', _read(cpuinfo), re.M)
    if not match:
        raise RuntimeError(f'cannot read the core clock from {cpuinfo}')

    return float(match.group(1)) * 1e6


def flops_per_cycle(cpuinfo='/proc/cpuinfo'):
    match = re.search(r'^flags\s*:\s*(.*)$', _read(cpuinfo), re.M)
    flags = set(match.group(1).split()) if match else set()
    for flag, flops in FLOPS_PER_CYCLE_BY_ISA:
        if flag in flags:
            return flops

    return 2


def partition_extras():
    """The ``extras`` of a partition describing this host (see hpcbench.node)."""
    return {
        'memory_bytes': memory_bytes(),
        'clock_hz': clock_hz(),
        'flops_per_cycle': flops_per_cycle(),
    }


def io_extras():
    """Partition extras for IOR on this machine (local, and the testbed's nodes, which share
    its file system and page cache): the directory, and how reads avoid the page cache:
    dropping it as root, else data larger than the memory (hpcbench.ior)."""
    return {'io_directory': str(paths.io_directory()),
            'io_read_cache_policy': 'drop-caches' if os.geteuid() == 0 else 'size'}


def processor_info(system='local', partition='default'):
    """ReFrame's processor description of this host, cached where ReFrame caches it.

    ReFrame detects by itself only partitions whose launcher is `local` too; ours use
    mpirun, so the site config asks ReFrame's detector directly.
    """
    cached = paths.topology_file(system, partition)
    if cached.exists():
        return json.loads(cached.read_text())

    from reframe.utility.cpuinfo import cpuinfo
    info = cpuinfo()
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(info, indent=2))
    return info
