"""A node's health facts at one moment, read together (issue 73): its kernel's (memory
errors, CPUs, governor, memory: hpcbench.core.node_health), its GPUs' as their driver says
(nvidia-smi -q -x: hpcbench.core.gpu_health; every maker's GPUs' PCIe links as the kernel
reads them: hpcbench.core.pci_links), its RDMA ports' (state, rate, error counters:
hpcbench.core.nic_health) and the XID events its kernel log holds (hpcbench.core.
kernel_log); and what two such reads, before and after a job, say of the job's window
(changes(); as figures: hpcbench.core.fact_figures).

Where the facts come from: the node's / (sysfs, procfs) and four commands, `nvidia-smi -q
-x`, where it lists GPUs `nvidia-smi nvlink -s` (hpcbench.core.nvlink), `dmesg` and
rasdaemon's `ras-mc-ctl --summary` (its record of memory errors, kept across reboots), each
run with a time limit. A tree standing in for a node (the testbed's emulated nodes: a
directory of their own, its faults injected there) holds the commands' outputs as files
under SOURCES (`hpcbench-facts/nvidia-smi-q-x.xml`, `.../nvidia-smi-nvlink-s.txt`,
`.../dmesg.txt`, `.../ras-mc-ctl-summary.txt`), and the commands are not run. What cannot
be read is said (`unread`: what, and why), never taken for healthy: no nvidia-smi on a
node is "no NVIDIA GPU driver here", not "no GPU errors".

A read is bounded: each command gets COMMAND_SECONDS (nvidia-smi the site's bound,
hpcbench.core.accelerators.tool_timeout), and a read that takes longer than
READ_SECONDS in all says so. Run by path with the node's python3 (standard library only,
as hpcbench.core.quiet_node), it writes the facts as JSON to a file:

    python3 node_facts.py --root / --output facts-before.json
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ''):
    # Run by path with the node's python3 (a job's line), outside the venv: the package it
    # belongs to is the checkout's.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from hpcbench.core import (accelerators, gpu_health, kernel_log, nic_health,  # noqa: E402
                           node_health, nvlink, paths, pci_links)

FORMAT = 1
# The commands' outputs in a tree standing in for a node (its root).
SOURCES = Path('hpcbench-facts')
SMI_FILE = 'nvidia-smi-q-x.xml'
NVLINK_FILE = 'nvidia-smi-nvlink-s.txt'
DMESG_FILE = 'dmesg.txt'
RAS_FILE = 'ras-mc-ctl-summary.txt'
# nvidia-smi -q -x answers in about a second on an 8-GPU node; a hung driver never does.
COMMAND_SECONDS = 20
READ_SECONDS = 2.0
MAX_FACTS_BYTES = 16 << 20


class NodeFactsError(ValueError):
    pass


@dataclass(frozen=True)
class NodeFacts:
    """What one node said of its health at one moment (`read_at`, epoch seconds), with the
    seconds the read took and what it could not read: ((what, why), ...)."""
    node: str
    read_at: float
    seconds: float
    health: node_health.NodeHealth
    gpus: tuple = ()            # GpuHealth, in nvidia-smi's order
    ports: tuple = ()           # PortHealth, by device and port
    xids: tuple = ()            # Xid, in the log's order
    unread: tuple = ()          # ((what, why), ...)
    pci_gpus: tuple = ()        # PciGpu, by PCI address: every maker's (the kernel's word)
    nvlinks: tuple = ()         # GpuLinks, by nvidia-smi's index
    # Memory errors rasdaemon recorded (`ras-mc-ctl --summary`: kept across reboots, which
    # EDAC's counts since boot are not); None where not read.
    ras_corrected: int = None
    ras_uncorrected: int = None

    def to_data(self):
        return {'format': FORMAT, **asdict(self)}

    @classmethod
    def from_data(cls, data):
        """The NodeFacts of to_data()'s output (as JSON gave it back); NodeFactsError where it
        is none."""
        try:
            if data.get('format') != FORMAT:
                raise NodeFactsError(f'facts of format {data.get("format")!r}, not {FORMAT}')
            health = dict(data['health'])
            if health['controllers'] is not None:
                health['controllers'] = tuple(node_health.MemoryController(**c)
                                              for c in health['controllers'])
            gpus = tuple(gpu_health.GpuHealth(**{
                **g, 'link': gpu_health.PcieLink(**g['link']),
                'clock_events': tuple(g['clock_events']),
                'clock_event_us': tuple(tuple(p) for p in g['clock_event_us'])})
                for g in data['gpus'])
            ports = tuple(nic_health.PortHealth(**{**p, 'counters': tuple(
                tuple(c) for c in p['counters'])}) for p in data['ports'])
            pci_gpus = tuple(pci_links.PciGpu(**{**g, 'link': gpu_health.PcieLink(**g['link'])})
                             for g in data.get('pci_gpus', ()))
            nvlinks = tuple(nvlink.GpuLinks(g['index'], g['model'],
                                            tuple(tuple(link) for link in g['links']))
                            for g in data.get('nvlinks', ()))
            ras = [data.get(f'ras_{k}') for k in ('corrected', 'uncorrected')]
            return cls(str(data['node']), float(data['read_at']), float(data['seconds']),
                       node_health.NodeHealth(**health), gpus, ports,
                       tuple(kernel_log.Xid(**x) for x in data['xids']),
                       tuple(tuple(u) for u in data['unread']), pci_gpus, nvlinks,
                       *(None if v is None else int(v) for v in ras))
        except NodeFactsError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise NodeFactsError(f'no node facts ({type(err).__name__}: {str(err)[:200]})'
                                 ) from None


def load(path):
    """The NodeFacts a file holds (written by main()); NodeFactsError naming it."""
    path = Path(path)
    try:
        raw = paths.read_regular(path, MAX_FACTS_BYTES, 'a node\'s facts')
    except paths.UnreadableFileError as err:
        raise NodeFactsError(str(err)) from None
    except OSError as err:
        raise NodeFactsError(f'{path}: {err.strerror}') from None
    try:
        return NodeFacts.from_data(json.loads(raw.decode('utf-8')))
    except (UnicodeDecodeError, ValueError) as err:
        raise NodeFactsError(f'{path}: {err}') from None


def _command_output(argv, file, root, unread, max_bytes, seconds=COMMAND_SECONDS):
    """The output of `argv` on a real node (root '/'), or of the file standing for it in a
    tree; None with why in `unread` where there is none."""
    what = ' '.join(argv)
    if Path(root) != Path('/'):
        path = Path(root) / SOURCES / file
        try:
            return paths.read_regular(path, max_bytes, f'the output of {what}')
        except paths.UnreadableFileError as err:
            unread.append((what, str(err)))
        except FileNotFoundError:
            unread.append((what, f'not in the tree (no {path})'))
        except OSError as err:
            unread.append((what, f'{path}: {err.strerror}'))
        return None
    if shutil.which(argv[0]) is None:
        unread.append((what, f'no {argv[0]} on this node'))
        return None
    try:
        done = subprocess.run(argv, capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        unread.append((what, f'no answer within {seconds} s'))
        return None
    except OSError as err:
        unread.append((what, err.strerror))
        return None
    if len(done.stdout) > max_bytes:
        unread.append((what, f'{len(done.stdout)} bytes, more than the {max_bytes} it prints'))
        return None
    if done.returncode:
        said = done.stderr.decode('utf-8', 'replace').strip().splitlines()
        unread.append((what, f'exit {done.returncode}' + (f': {said[-1][:200]}' if said
                                                           else '')))
        return None
    return done.stdout


def read(root='/', node=None, clock=time.time):
    """The NodeFacts of the node whose / is `root` (`node`: its name; this host's where
    not given). A reader that refuses what it finds puts it in `unread`, and the rest is
    read."""
    started, unread = time.monotonic(), []
    read_at = clock()
    try:
        health = node_health.read_node(root)
    except node_health.NodeHealthError as err:
        unread.append(('node health', str(err)))
        health = node_health.NodeHealth()
    try:
        ports = nic_health.read_ports(Path(root) / 'sys')
    except nic_health.NicHealthError as err:
        unread.append(('RDMA ports', str(err)))
        ports = ()
    try:
        pci_gpus = pci_links.read_gpus(Path(root) / 'sys')
    except pci_links.PciLinkError as err:
        unread.append(('PCI bus', str(err)))
        pci_gpus = ()
    if pci_gpus is None:
        unread.append(('PCI bus', f'no {Path(root) / "sys" / pci_links.DEVICES}'))
        pci_gpus = ()
    gpus, nvlinks = _nvidia_gpus(root, unread)
    xids = ()
    log = _command_output(['dmesg'], DMESG_FILE, root, unread, kernel_log.MAX_LOG_BYTES)
    if log is not None:
        try:
            xids = tuple(kernel_log.xids(log))
        except kernel_log.KernelLogError as err:
            unread.append(('dmesg', str(err)))
    ras = _command_output(['ras-mc-ctl', '--summary'], RAS_FILE, root, unread,
                          node_health.MAX_RAS_BYTES)
    ras_corrected = ras_uncorrected = None
    if ras is not None:
        try:
            summary = node_health.parse_ras_summary(ras.decode('utf-8'))
            ras_corrected = summary.memory('corrected')
            ras_uncorrected = summary.memory('uncorrected', 'fatal')
        except (UnicodeDecodeError, node_health.NodeHealthError) as err:
            unread.append(('ras-mc-ctl --summary', str(err)[:300]))
    seconds = time.monotonic() - started
    if seconds > READ_SECONDS:
        unread.append(('time', f'the read took {seconds:.1f} s, more than the '
                               f'{READ_SECONDS:g} s it should'))
    return NodeFacts(node or node_name(), read_at, seconds, health,
                     gpus, ports, xids, tuple(unread), pci_gpus, nvlinks, ras_corrected,
                     ras_uncorrected)


def _nvidia_gpus(root, unread):
    """(GpuHealth of each GPU nvidia-smi lists, GpuLinks of their NVLinks), () each where
    not read (why in `unread`)."""
    gpus = ()
    try:
        seconds = accelerators.tool_timeout()     # the site's bound, as the host's query
    except accelerators.ToolTimeoutError as err:
        unread.append(('nvidia-smi -q -x', str(err)))
        return gpus, ()
    smi = _command_output(['nvidia-smi', '-q', '-x'], SMI_FILE, root, unread,
                          gpu_health.MAX_XML_BYTES, seconds)
    if smi is not None:
        try:
            gpus = gpu_health.from_smi_xml(smi)
        except gpu_health.GpuHealthError as err:
            unread.append(('nvidia-smi -q -x', str(err)))
    if not gpus:
        return gpus, ()
    said = _command_output(['nvidia-smi', 'nvlink', '-s'], NVLINK_FILE, root, unread,
                           nvlink.MAX_BYTES, seconds)
    if said is None:
        return gpus, ()
    try:
        return gpus, nvlink.parse(said)
    except nvlink.NvlinkError as err:
        unread.append(('nvidia-smi nvlink -s', str(err)))
        return gpus, ()


@dataclass(frozen=True)
class Changes:
    """What a node's facts did over a job's window: each port's error counters' Increase,
    the XIDs the log gained, each GPU's clock event time gained (us, by reason), the
    memory errors gained; None where either read lacks it."""
    ports: dict = field(default_factory=dict)   # {port name: (Increase, ...)}
    xids: tuple = ()
    clock_event_us: dict = field(default_factory=dict)  # {GPU UUID or bus: {reason: us}}
    corrected: int = None
    uncorrected: int = None
    unread: tuple = ()          # ((what, why), ...)
    ras_uncorrected: int = None     # uncorrected memory errors rasdaemon recorded meanwhile


def _gain(before, after):
    if before is None or after is None or after < before:
        return None
    return after - before


def changes(before, after):
    """The Changes of a node from its facts `before` a job to those `after` it."""
    if before.node != after.node:
        raise NodeFactsError(f'facts of {before.node} before the job, of {after.node} after: '
                             'not one node')
    unread = []
    ports = {}
    first = {p.name: p for p in before.ports}
    for port in after.ports:
        if port.name in first:
            ports[port.name] = nic_health.increase(first[port.name], port)
        else:
            unread.append((f'port {port.name}', 'not there before the job'))
    # The XIDs after the job that the read before lacked, each counted (the same event
    # printed again is new); the ring may have dropped old lines, never new ones.
    seen = {}
    for xid in before.xids:
        seen[xid] = seen.get(xid, 0) + 1
    gained = []
    for xid in after.xids:
        if seen.get(xid):
            seen[xid] -= 1
        else:
            gained.append(xid)
    clocks = {}
    earlier = {g.uuid or g.bus_id: dict(g.clock_event_us) for g in before.gpus}
    for gpu in after.gpus:
        then = earlier.get(gpu.uuid or gpu.bus_id)
        if then is None:
            unread.append((f'GPU {gpu.bus_id}', 'not there before the job'))
            continue
        clocks[gpu.uuid or gpu.bus_id] = {reason: _gain(then.get(reason), us)
                             for reason, us in gpu.clock_event_us}
    return Changes(ports, tuple(gained), clocks,
                   _gain(before.health.corrected, after.health.corrected),
                   _gain(before.health.uncorrected, after.health.uncorrected), tuple(unread),
                   _gain(before.ras_uncorrected, after.ras_uncorrected))


# Slurm's word for a node's name in its file patterns (the job script exports the facts'
# root unquoted: it holds no braces).
NODE_PATTERN = '%n'
# What a job writes beside its output (its stage directory), before and after all it does:
# one file a node of the job, `%n` its name.
BEFORE = f'hpcbench-facts-before-{NODE_PATTERN}.json'
AFTER = f'hpcbench-facts-after-{NODE_PATTERN}.json'
# Where a node's facts come from, where not its / (the testbed's trees): `%n` in it is
# the node's name.
ROOT_ENV = 'HPCBENCH_FACTS_ROOT'
# Once on each node of a Slurm job of several: one task a node, beside the job's own steps
# (--overlap); a job of one node reads where its script runs.
SLURM_EVERY_NODE = ('srun --overlap --nodes="$SLURM_JOB_NUM_NODES" '
                    '--ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1')


def node_name():
    """This node's name as its scheduler calls it (Slurm's SLURMD_NODENAME: the testbed's
    emulated nodes share one host), else its host name."""
    return os.environ.get('SLURMD_NODENAME') or socket.gethostname().split('.')[0]


def job_line(command, output, slurm=False):
    """The job script's line that reads the node's facts into `output` (`%n` in it the
    node's name) with `command` (the shell words that run this module); with `slurm`, every
    node's where the job has several (SLURM_EVERY_NODE). A read that fails says so and the
    job goes on: no fact read is a verdict of the benchmark's. The status the line found
    ($?: the launch's, after it) is the one it leaves, so that a job still ends as its
    benchmark did."""
    read = f'{command} --root "${{{ROOT_ENV}:-/}}" --output {output}'
    if slurm:
        # Through env: the command may begin with the variables it runs with (PYTHONPATH=),
        # which srun would take for the program.
        read = (f'if [ "${{SLURM_JOB_NUM_NODES:-1}}" -gt 1 ]; then {SLURM_EVERY_NODE} env '
                f'{read}; else {read}; fi')
    return (f'hpcbench_status=$?; {read} || '
            f'echo "hpcbench facts: not read into {output} (exit $?)" >&2; '
            '(exit $hpcbench_status)')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--root', default='/', help='the node\'s / (a tree standing in for '
                        'it; %%n in it is its name)')
    parser.add_argument('--node', help='its name (its scheduler\'s, else its host name)')
    parser.add_argument('--output', required=True, help='the JSON file to write (%%n in it '
                        'is the node\'s name)')
    args = parser.parse_args(argv)
    node = args.node or node_name()
    facts = read(args.root.replace(NODE_PATTERN, node), node)
    text = json.dumps(facts.to_data(), sort_keys=True)
    output = args.output.replace(NODE_PATTERN, node)
    partial = f'{output}.partial'
    with open(partial, 'w', encoding='utf-8') as handle:
        handle.write(text + '\n')
    os.replace(partial, output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
