"""The hardware of the testbed's emulated nodes (issue 73): each node a tree of files
(var/testbed/facts/<node>/) shaped as a real node's / where hpcbench.core.node_facts reads
it, written healthy at every start, and faults injected into it for real (`testbed fault`):
a job on the node reads its facts there (site-configs/testbed.py names the tree in the
jobs' environment, HPCBENCH_FACTS_ROOT).

What a healthy node's tree holds, and where each part comes from:
- /proc and the CPUs: the host's own (kernel release, CPUs online, governor, clock and boost
  where it has cpufreq, transparent huge pages, BIOS version), and the node's MemTotal as Slurm's
  RealMemory declares it (its share of the host's: hpcbench.stack.testbed_system);
- memory controllers: a real server's EDAC, every count 0 (netdata/netdata issue 1508,
  tests/fixtures/health/netdata-1508: one controller, four chip-select rows);
- an InfiniBand HCA: a real ConnectX-3's sysfs (prometheus/procfs's fixture, tests/
  fixtures/health/procfs-sys: mlx4_0, two ports at 40 Gb/sec (4X QDR));
- the GPU nodes' `nvidia-smi -q -x`: the H100 lent to this project (tests/fixtures/gpu/h100),
  its one GPU printed once per GPU of the node (GPUS_PER_NODE), each at its place: its
  minor number, and a bus address and UUID made from that place (the H100's own, last
  digits replaced): the GPUs are stand-ins, so are their addresses;
- their `nvidia-smi nvlink -s`: each GPU's links as its datasheet counts them, each at its
  datasheet's rate (references/datasheets: 18 at 25 GB/s each way), all up;
- the PCI bus: the GPUs nvidia-smi lists, each a 3D controller of NVIDIA's at its address
  with the link nvidia-smi says (a CPU node's bus shows no GPU);
- the kernel log: empty;
- rasdaemon's record (`ras-mc-ctl --summary`): a real host's with no error of four kinds
  (mchehab/rasdaemon issue 95).

The faults (FAULTS), as they come on real nodes:
- `pcie-x8`: a GPU's link trained at x8 of its x16 (the sites' most common silent fault),
  in nvidia-smi's word and the kernel's;
- `port-half-rate`: an HCA port at half its width (2X of 4X: half the rate) whose symbol
  error counter rises while it runs: a process of the testbed's raises it every
  ERROR_SECONDS, as a bad cable does, until the node is mended or the testbed stops;
- `memory-uncorrected`: an uncorrected memory error on the node's controller (EDAC), and in
  rasdaemon's record.
`testbed mend NODE` writes the node's tree healthy again and ends its error process.
"""
import argparse
import copy
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

from hpcbench.core import node_facts, paths, pci_links
from hpcbench.devtools.testbed_processes import TestbedError, alive, spawn, start_time
from hpcbench.machine import datasheets

FIXTURES = paths.PROJECT_ROOT / 'tests' / 'fixtures'
EDAC_SOURCE = FIXTURES / 'health' / 'netdata-1508' / 'sys' / 'devices' / 'system' / 'edac'
HCA = 'mlx4_0'
HCA_SOURCE = FIXTURES / 'health' / 'procfs-sys' / 'class' / 'infiniband' / HCA
SMI_SOURCE = FIXTURES / 'gpu' / 'h100' / 'nvidia-smi-q.xml'
RAS_SOURCE = FIXTURES / 'health' / 'ras-mc-ctl-summary-rasdaemon-95.txt'
# The host's files a node's tree takes as they are (those the host has).
HOST_FILES = ('proc/sys/kernel/osrelease', 'sys/devices/system/cpu/online',
              'sys/devices/system/cpu/cpu0/cpufreq/scaling_governor',
              'sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq',
              'sys/devices/system/cpu/cpufreq/boost',
              'sys/devices/system/cpu/intel_pstate/no_turbo',
              'sys/kernel/mm/transparent_hugepage/enabled', 'sys/class/dmi/id/bios_version')
# Where a node's reader finds its commands' outputs in a tree (hpcbench.core.node_facts).
SMI_FILE = node_facts.SOURCES / node_facts.SMI_FILE
NVLINK_FILE = node_facts.SOURCES / node_facts.NVLINK_FILE
DMESG_FILE = node_facts.SOURCES / node_facts.DMESG_FILE
RAS_FILE = node_facts.SOURCES / node_facts.RAS_FILE
# A memory error as rasdaemon prints its record (ras-mc-ctl --summary's mc_event lines: its
# type, the DIMM's label, EDAC's default for csrow 0, and its location mc:top:mid:low).
RAS_MEMORY_EVENT = ("\tUncorrected on DIMM Label(s): 'mc#0csrow#0channel#0' location: "
                    '0:0:-1:-1 errors: {}')
PCI_DEVICES = pci_links.DEVICES
FAULTS = ('pcie-x8', 'port-half-rate', 'memory-uncorrected')
# A degraded link's symbol errors: one each second, about what the sites' reports show of
# a bad cable under load (thousands an hour).
ERROR_SECONDS = 1.0


class FactsError(TestbedError):
    pass


def tree(layout, node):
    return layout.facts / node


def write_trees(layout, nodes):
    """Every node's tree, healthy: `nodes` {name: (memory bytes, GPUs)}. Trees of nodes
    no longer configured are left alone (they are ours, and nothing reads them)."""
    layout.facts.mkdir(parents=True, exist_ok=True)
    for name, (memory_bytes, gpus) in nodes.items():
        write_tree(tree(layout, name), memory_bytes, gpus)


def write_tree(root, memory_bytes, gpus, host_root=Path('/')):
    """A healthy node's tree at `root` (anything there before replaced: it is ours)."""
    if root.exists():
        shutil.rmtree(root)
    for name in HOST_FILES:
        try:
            data = (host_root / name).read_bytes()
        except OSError:
            continue        # a fact this host has not, nor its nodes (a VM's cpufreq)
        _write(root / name, data)
    _write(root / 'proc' / 'meminfo', f'MemTotal:       {memory_bytes // 1024} kB\n')
    shutil.copytree(EDAC_SOURCE, root / 'sys' / 'devices' / 'system' / 'edac')
    shutil.copytree(HCA_SOURCE, root / 'sys' / 'class' / 'infiniband' / HCA)
    _write(root / DMESG_FILE, '')
    shutil.copy(RAS_SOURCE, root / RAS_FILE)
    (root / 'sys' / PCI_DEVICES).mkdir(parents=True)
    if gpus:
        xml = smi_xml(gpus)
        _write(root / SMI_FILE, xml)
        _write(root / NVLINK_FILE, nvlink_status(xml))
        for address, attributes in pci_functions(xml).items():
            for name, value in attributes.items():
                _write(root / 'sys' / PCI_DEVICES / address / name, f'{value}\n')


# A link's generation as the kernel prints its speed (hpcbench.core.pci_links).
_SPEEDS = {generation: f'{rate:.1f} GT/s PCIe'
           for rate, generation in pci_links.GENERATIONS.items()}


def nvlink_status(xml):
    """`nvidia-smi nvlink -s` of the GPUs an `nvidia-smi -q -x` lists: each its model's
    links (its datasheet's count; the node's topology links every pair by all of them) at
    its datasheet's rate a link, each direction, every one up."""
    lines = []
    for place, gpu in enumerate(ElementTree.fromstring(xml).findall('gpu')):
        model = gpu.findtext('product_name')
        sheet = datasheets.find(model)
        lines.append(f'GPU {place}: {model} (UUID: {gpu.findtext("uuid")})')
        rate = sheet.nvlink_bandwidth / sheet.nvlink_links / 1e9
        lines += [f'\t Link {link}: {rate:.3f} GB/s' for link in range(sheet.nvlink_links)]
    return '\n'.join(lines) + '\n'


def pci_functions(xml):
    """{address: {sysfs attribute: value}} of the GPUs an `nvidia-smi -q -x` lists, as the
    kernel would show them on the bus: a 3D controller of NVIDIA's, the link nvidia-smi
    says."""
    functions = {}
    for gpu in ElementTree.fromstring(xml).findall('gpu'):
        link = gpu.find('pci/pci_gpu_link_info')
        functions[gpu.get('id')[4:].lower()] = {
            'class': '0x030200', 'vendor': '0x10de',
            'device': f'0x{gpu.findtext("pci/pci_device_id")[:4].lower()}',
            'current_link_speed': _SPEEDS[int(link.findtext('pcie_gen/current_link_gen'))],
            'current_link_width': link.findtext('link_widths/current_link_width').rstrip('x'),
            'max_link_speed': _SPEEDS[int(link.findtext('pcie_gen/max_link_gen'))],
            'max_link_width': link.findtext('link_widths/max_link_width').rstrip('x')}
    return functions


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.write_atomically(path, data)


def smi_xml(gpus):
    """`nvidia-smi -q -x` of a node of `gpus` GPUs: the lent H100's record, its GPU once per
    place (module docstring)."""
    record = ElementTree.fromstring(SMI_SOURCE.read_bytes())
    model = record.find('gpu')
    record.remove(model)
    record.find('attached_gpus').text = str(gpus)
    uuid = model.findtext('uuid')
    for place in range(gpus):
        gpu = copy.deepcopy(model)
        bus = f'{place + 1:02X}'
        bus_id = f'00000000:{bus}:00.0'
        gpu.set('id', bus_id)
        gpu.find('pci/pci_bus_id').text = bus_id
        gpu.find('pci/pci_bus').text = bus
        gpu.find('minor_number').text = str(place)
        gpu.find('uuid').text = f'{uuid[:-2]}{place:02x}'
        record.append(gpu)
    return ElementTree.tostring(record, encoding='unicode', xml_declaration=True)


# The faults ------------------------------------------------------------------------------

def inject(layout, node, fault, gpu=0, port=1):
    """Inject `fault` (FAULTS) into `node`'s tree: into GPU `gpu` (its place), into port
    `port` of its HCA. Returns what was done, in words."""
    root = tree(layout, node)
    if not root.is_dir():
        raise FactsError(f'{node}: no such emulated node here ({root}: start the testbed)')
    if fault == 'pcie-x8':
        return _pcie_x8(root, node, gpu)
    if fault == 'port-half-rate':
        return _port_half_rate(layout, root, node, port)
    if fault == 'memory-uncorrected':
        return _memory_uncorrected(root, node)
    raise FactsError(f'no fault {fault!r}: the faults are {", ".join(FAULTS)}')


def _pcie_x8(root, node, gpu):
    path = root / SMI_FILE
    if not path.exists():
        raise FactsError(f'{node} has no GPUs ({path} is not there)')
    record = ElementTree.fromstring(path.read_bytes())
    gpus = record.findall('gpu')
    if not 0 <= gpu < len(gpus):
        raise FactsError(f'{node} has GPUs 0 to {len(gpus) - 1}, not {gpu}')
    gpus[gpu].find('pci/pci_gpu_link_info/link_widths/current_link_width').text = '8x'
    paths.write_atomically(path, ElementTree.tostring(record, encoding='unicode',
                                                      xml_declaration=True))
    # The kernel reads the same link register: its word agrees.
    address = gpus[gpu].get('id')[4:].lower()
    paths.write_atomically(root / 'sys' / PCI_DEVICES / address / 'current_link_width', '8\n')
    return f'{node}: GPU {gpu}\'s PCIe link at x8 of x16'


def _port_dir(root, node, port):
    here = root / 'sys' / 'class' / 'infiniband' / HCA / 'ports' / str(port)
    if not here.is_dir():
        raise FactsError(f'{node}\'s {HCA} has no port {port}')
    return here


def _port_half_rate(layout, root, node, port):
    here = _port_dir(root, node, port)
    paths.write_atomically(here / 'rate', '20 Gb/sec (2X QDR)\n')
    counter = here / 'counters' / 'symbol_error'
    marker = _marker(layout, node)
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        spawn(layout, f'faults-{node}', [sys.executable, '-m', __name__, 'raise', str(counter),
                                          str(ERROR_SECONDS)], pid_file=marker)
    return (f'{node}: {HCA} port {port} at 20 Gb/sec (2X QDR) of 40 (4X QDR), its symbol '
            f'errors rising one every {ERROR_SECONDS:g} s')


def _memory_uncorrected(root, node):
    controller = root / 'sys' / 'devices' / 'system' / 'edac' / 'mc' / 'mc0'
    for path in (controller / 'ue_count', controller / 'csrow0' / 'ue_count'):
        paths.write_atomically(path, f'{int(path.read_text()) + 1}\n')
    # rasdaemon records it too, in its summary's memory section (kept across reboots).
    errors = int((controller / 'csrow0' / 'ue_count').read_text())
    kept = [line for line in (root / RAS_FILE).read_text().splitlines()
            if line.strip() and line.strip() != 'No Memory errors.'
            and 'on DIMM Label(s)' not in line and 'Memory controller events' not in line]
    paths.write_atomically(root / RAS_FILE, '\n'.join([
        'Memory controller events summary:', RAS_MEMORY_EVENT.format(errors), '', *kept]) + '\n')
    return (f'{node}: an uncorrected memory error on mc0 (csrow 0), in EDAC and rasdaemon\'s '
            'record')


def _marker(layout, node):
    # The error process of a node, by PID and start time: run/faults/<node>.pid (not
    # run/*.pid, which are the cluster's daemons).
    return layout.run / 'faults' / f'{node}.pid'


def end_errors(layout, node):
    """End `node`'s error process (ours by PID and start time); True where one ran."""
    marker = _marker(layout, node)
    if not marker.exists():
        return False
    try:
        pid, started = (int(v) for v in marker.read_text().split()[:2])
    except ValueError:
        pid = started = None
    ran = pid is not None and alive(pid) and start_time(pid) == started
    if ran:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    marker.unlink()
    return ran


def end_all_errors(layout):
    for marker in sorted((layout.run / 'faults').glob('*.pid')) \
            if (layout.run / 'faults').is_dir() else []:
        end_errors(layout, marker.stem)


def mend(layout, node, memory_bytes, gpus):
    """`node`'s tree healthy again, its error process ended."""
    end_errors(layout, node)
    write_tree(tree(layout, node), memory_bytes, gpus)


def raise_errors(counter, seconds):
    """Raise the count in `counter` by one every `seconds`, as a driver would, until ended."""
    counter = Path(counter)
    while True:
        time.sleep(seconds)
        paths.write_atomically(counter, f'{int(counter.read_text()) + 1}\n')


def main(argv=None):
    parser = argparse.ArgumentParser(description='a degraded port\'s rising error counter')
    parser.add_argument('command', choices=['raise'])
    parser.add_argument('counter')
    parser.add_argument('seconds', type=float)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    raise_errors(args.counter, args.seconds)


if __name__ == '__main__':
    sys.exit(main())
