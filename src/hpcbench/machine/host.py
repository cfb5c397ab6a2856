"""Facts about the machine we are on that ReFrame's topology detection does not give.

Used by ``site-configs/local.py`` to describe the ``local`` partition.
"""
import json
import os
import re
import sys
from pathlib import Path

from hpcbench.core import accelerators as accelerator_facts
from hpcbench.core import gpu_topology as gpu_topology_facts
from hpcbench.core import paths
from hpcbench.machine.gpus import one_model

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


# The documented maximum boost clock (GHz) of CPU models seen in HPC nodes, by the model
# number in /proc/cpuinfo's model name (AMD's and Intel's product specification pages).
# Used where cpufreq gives no maximum: a VM's "cpu MHz" is its base clock, and a nominal
# peak from it is below what the cores do (this VM sustained 165.8 % of such a peak).
BOOST_GHZ_BY_MODEL = {
    'EPYC 7742': 3.4, 'EPYC 7H12': 3.3, 'EPYC 7763': 3.5, 'EPYC 9654': 3.7, 'EPYC 9754': 3.1,
    'Platinum 8380': 3.4, 'Platinum 8480+': 3.8, 'Gold 6148': 3.7,
}
# The site's own figure for this machine's clock wins (as a site config's clock_hz does).
CLOCK_VARIABLE = 'HPCBENCH_CLOCK_HZ'


def clock(cpuinfo='/proc/cpuinfo', cpufreq='/sys/devices/system/cpu'):
    """(Hz, where it comes from) of the best clock the machine reveals: HPCBENCH_CLOCK_HZ
    (the site's), else the highest cpufreq maximum of its CPUs, else the documented boost of
    its model (BOOST_GHZ_BY_MODEL), else /proc/cpuinfo's 'cpu MHz', said to be possibly the
    base clock: a nominal peak from it may be below what the cores sustain."""
    given = os.environ.get(CLOCK_VARIABLE)
    if given:
        try:
            hz = float(given)
        except ValueError:
            hz = float('nan')
        if not hz > 0 or hz == float('inf'):
            raise RuntimeError(f'{CLOCK_VARIABLE}={given!r}: the core clock in Hz, e.g. 3.5e9')
        return hz, f'{CLOCK_VARIABLE}'

    maxima = [int(t) for t in (_read(p).strip() for p in
                               sorted(Path(cpufreq).glob('cpu[0-9]*/cpufreq/cpuinfo_max_freq')))
              if t.isdigit()]
    if maxima:
        return max(maxima) * 1e3, 'cpufreq maximum'

    text = _read(cpuinfo)
    model = re.search(r'^model name\s*:\s*(.*)$', text, re.M)
    model = model.group(1).strip() if model else ''
    for name, ghz in BOOST_GHZ_BY_MODEL.items():
        if re.search(rf'(?<![\w+]){re.escape(name)}(?![\w+])', model):
            return ghz * 1e9, f'documented boost of {name}'

    match = re.search(r'^cpu MHz\s*:\s*([\d.]+)', text, re.M)
    if not match:
        raise RuntimeError(f'cannot read the core clock from {cpuinfo}')

    return float(match.group(1)) * 1e6, (
        f"/proc/cpuinfo's cpu MHz: no cpufreq maximum and no documented boost for "
        f"{model or 'this model'!r}, possibly the base clock (set {CLOCK_VARIABLE})")


def clock_hz(cpuinfo='/proc/cpuinfo', cpufreq='/sys/devices/system/cpu'):
    """The nominal core clock (clock())."""
    return clock(cpuinfo, cpufreq)[0]


def flops_per_cycle(cpuinfo='/proc/cpuinfo'):
    match = re.search(r'^flags\s*:\s*(.*)$', _read(cpuinfo), re.M)
    flags = set(match.group(1).split()) if match else set()
    for flag, flops in FLOPS_PER_CYCLE_BY_ISA:
        if flag in flags:
            return flops

    return 2


def partition_facts():
    """The facts of this host a partition's description holds (hpcbench.machine.description:
    memory, clock and where it comes from, flop per cycle)."""
    hz, source = clock()
    return {
        'memory_bytes': memory_bytes(),
        'clock_hz': hz,
        # Where the clock comes from: said with any ratio to the nominal peak it gives.
        'clock_source': source,
        'flops_per_cycle': flops_per_cycle(),
    }


def io_facts():
    """The description fields for IOR on this machine (local, and the testbed's nodes, which share
    its file system and page cache): the directory, and how reads avoid the page cache:
    dropping it as root, else data larger than the memory (hpcbench.benchmarks.ior)."""
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


# A node's recorded GPU tools (tests): the variable naming each.
GPU_TOOL_VARIABLES = {'nvidia-smi': 'HPCBENCH_NVIDIA_SMI', 'rocm-smi': 'HPCBENCH_ROCM_SMI',
                      'xpu-smi': 'HPCBENCH_XPU_SMI'}


def gpu_tools():
    """{tool: path} of the GPU tools the environment names in place of this host's."""
    return {tool: os.environ[variable] for tool, variable in GPU_TOOL_VARIABLES.items()
            if os.environ.get(variable)}


def gpu_tool_timeout():
    """The seconds a GPU tool may take (hpcbench.core.accelerators.tool_timeout: 20, or
    what HPCBENCH_GPU_TOOL_TIMEOUT says); SystemExit with its one message where that is no
    bound, before anything is described."""
    try:
        return accelerator_facts.tool_timeout()
    except accelerator_facts.ToolTimeoutError as err:
        sys.exit(f'error: {err}')


def accelerators():
    """This host's GPUs (hpcbench.core.accelerators.detect_any) from its nvidia-smi, else
    rocm-smi, else xpu-smi, or the tools HPCBENCH_NVIDIA_SMI, HPCBENCH_ROCM_SMI and
    HPCBENCH_XPU_SMI name (a node's recorded output, in tests); [] where there is none. A
    tool that fails, hangs or prints nonsense, and GPUs of several models, are said once,
    and the host is described without GPUs: its CPU checks still run."""
    try:
        found = accelerator_facts.detect_any(gpu_tools(), gpu_tool_timeout())
        if found:
            one_model(found)
        return found
    except (accelerator_facts.AcceleratorError, OSError) as err:
        print(f'warning: this host is described without its GPUs: {err}', file=sys.stderr)
        return []


def gpu_topology(gpus):
    """How this host's GPUs (`gpus`, from accelerators()) are linked, from `nvidia-smi topo
    -m` (hpcbench.core.gpu_topology; the tool HPCBENCH_NVIDIA_SMI names, in tests); None
    without GPUs. A tool that fails or prints no matrix of these GPUs is said once, and the
    GPUs are described without their topology: ranks are then not placed by it."""
    if not gpus:
        return None
    try:
        found = gpu_topology_facts.detect(os.environ.get('HPCBENCH_NVIDIA_SMI') or None,
                                          gpu_tool_timeout())
        if found is not None and len(found.gpus) != len(gpus):
            raise gpu_topology_facts.TopologyError(
                f'nvidia-smi topo -m shows {len(found.gpus)} GPUs, its query {len(gpus)}')
        return found
    except (gpu_topology_facts.TopologyError, OSError) as err:
        print(f'warning: this host\'s GPUs are described without their topology: {err}',
              file=sys.stderr)
        return None
