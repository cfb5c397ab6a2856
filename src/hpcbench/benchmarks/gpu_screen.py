"""The GPU screen: each GPU node's GPUs as its nvidia-smi reports them at idle, against the
partition's description, and a short DGEMM on each GPU to name a slow one.

A node passes when it has the described count of GPUs, each of the described model with at
least the described memory, the described power limit (a lower one caps every figure the GPU
gives), at least the described maximum SM clock, ECC as described, and, idle, no clocks event
reason of power or heat (hpcbench.benchmarks.gpu_power.LIMITING: a GPU slowed while idle is
broken or overheating). A GPU whose DGEMM is more than the threshold below the median of the
node's GPUs is named slow (T2K's screening of nodes, hpcbench.benchmarks.hpl_output, applied
to GPUs); `hpcbench screen-nodes` compares the nodes.

Standard library only.
"""
from hpcbench.benchmarks import gpu_power, hpl_output
from hpcbench.core import accelerators
from hpcbench.benchmarks.reports import Reports

# What the job asks nvidia-smi for its idle reasons, beside its description's query.
REASON_FIELDS = ('index', 'clocks_event_reasons.active')
# Memory a GPU may show below its description: the driver reserves a little, varying with
# its version (the H200's 143771 MiB of 144 GB).
MEMORY_SLACK = 0.01
SLOW_PERCENT = 5.0
# A short DGEMM per GPU: enough calls at the order gpu_plan gives to tell a slow GPU (about
# 2 s at an H200's peak).
REPEATS = 10
# Its performance variables: the node's slowest GPU, and how far below the node's median.
VARIABLES = ('slowest_gpu_tflops', 'slowest_gpu_below_median')


class ScreenOutputError(ValueError):
    pass


def idle_reasons(text):
    """{GPU index: clocks event reason mask} of the reasons query."""
    reasons = {}
    for line, cell in accelerators.smi_csv(text, REASON_FIELDS, ScreenOutputError):
        try:
            reasons[int(cell['index'])] = int(cell['clocks_event_reasons.active'], 16)
        except ValueError:
            raise ScreenOutputError(f'line {line}: {",".join(cell.values())}: no index and '
                                    'bit mask') from None
    return reasons


def _who(gpu):
    return f'GPU {gpu.index} ({gpu.pci_bus_id or gpu.uuid})'


def problems(described, found, reasons):
    """What is wrong with a node whose GPUs are `found` (hpcbench.core.accelerators), idle
    with `reasons` ({index: mask}), against the partition's `described` accelerators
    (its description): one line per fault, naming the GPU; [] for a good node."""
    said = []
    if len(found) != described['count']:
        said.append(f'{len(found)} GPU(s), the partition describes {described["count"]}')
    for gpu in found:
        who = _who(gpu)
        if gpu.model != described['model']:
            said.append(f'{who} is a {gpu.model}, the partition\'s are {described["model"]}')
            continue
        if gpu.memory_bytes < described['memory_bytes'] * (1 - MEMORY_SLACK):
            said.append(f'{who} has {gpu.memory_bytes >> 20} MiB, the partition\'s '
                        f'{described["memory_bytes"] >> 20} MiB')
        # Limits the description does not know (a partition described from its scheduler)
        # are not judged.
        if described['power_limit_w'] and abs(gpu.power_limit_w - described['power_limit_w']) > 1:
            said.append(f'{who} is limited to {gpu.power_limit_w:g} W, the partition\'s to '
                        f'{described["power_limit_w"]:g} W')
        if gpu.max_sm_clock_hz < (described['max_sm_clock_hz'] or 0):
            said.append(f'{who} clocks at most {gpu.max_sm_clock_hz / 1e6:g} MHz, the '
                        f'partition\'s {described["max_sm_clock_hz"] / 1e6:g} MHz')
        if described.get('ecc_enabled') not in (None, gpu.ecc_enabled):
            said.append(f'{who} has ECC {"on" if gpu.ecc_enabled else "off"}, the partition\'s '
                        f'{"on" if described["ecc_enabled"] else "off"}')
        if gpu.index not in reasons:
            said.append(f'{who}: no idle clocks event reasons reported')
            continue
        limiting = [r for r in gpu_power.reasons_of(reasons[gpu.index])
                    if r in gpu_power.LIMITING]
        if limiting:
            said.append(f'{who} is slowed while idle: {", ".join(limiting)}')
    return said


def slow_gpus(rates, threshold_percent=SLOW_PERCENT):
    """hpl_output.Screening of the node's GPUs ({GPU: TFLOP/s}): those more than
    `threshold_percent` below their median."""
    return hpl_output.screen_nodes(rates, threshold_percent)

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'GpuNodeScreen': Reports('GPU DGEMM', VARIABLES, {
    'slowest_gpu_tflops': 'TFLOP/s', 'slowest_gpu_below_median': '%'})}
