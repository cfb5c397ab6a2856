"""Fact entries of a draft contract (`hpcbench contract init`, issue 73): what the nodes
themselves read around the baseline's jobs (hpcbench.rfm.hardware_facts), each fact
expected as most units of a partition have it ("PCIe x16 on every GPU", "8 GPUs", "4X on
every port"), and the errors that must not grow during a job; every value with where it
was read, every fault with what to do.

A fact on which the units of a partition disagree (no value held by MAJORITY of them) is
not drafted: what most nodes have is no expectation there, and the site writes it."""
import statistics

from hpcbench.acceptance import scopes
from hpcbench.core import fact_figures
from hpcbench.results import measured

# Of the units of a partition, the share a value must hold to be drafted as expected.
MAJORITY = 2 / 3
# Memory a node may lack beside most of its partition's and still meet its draft (kernels
# reserve a little more or less: crash kernels, firmware tables).
MEMORY_SHARE = 0.99

_XID_ACTION = ('read the XID\'s code in the kernel log and do what NVIDIA\'s XID catalogue '
               '(docs.nvidia.com/deploy/xid-errors) says of it: 79 (fallen off the bus) '
               'reseat or replace; 48, 63, 64, 94, 95 (memory errors) reset the GPU; 119, '
               '120 (GSP) reset the GPU, and replace it where it recurs')
# What a draft expects of each fact, by scope: ('same', None) as most units read it;
# ('at_least_most', share) at least that share of what most read; (kind, value) as given.
# With the fault code and the action of a unit that misses it. A name of FACT_OF is a
# second expectation of its fact.
DRAFTED = {
    'node': {
        'online_cpus': ('same', None, 'NODE-CPUS', 'check the BIOS (SMT, cores disabled) '
                        'and the kernel\'s command line (maxcpus, isolcpus)'),
        'memory_gib': ('at_least_most', MEMORY_SHARE, 'NODE-MEMORY', 'reseat the DIMMs '
                       'the BIOS does not see; replace a failed one'),
        'dimm_ranks': ('same', None, 'NODE-DIMMS', 'reseat or replace the DIMM EDAC no '
                       'longer sees'),
        'gpus': ('same', None, 'NODE-GPUS', 'a GPU the driver does not list: reseat it; '
                 'check the kernel log for it falling off the bus'),
        'pci_gpus': ('same', None, 'NODE-PCI-GPUS', 'a GPU gone from the PCI bus: reseat '
                     'it; check the kernel log for it falling off the bus'),
        'kernel': ('same', None, 'NODE-KERNEL', 'boot the kernel the partition\'s other '
                   'nodes run'),
        'bios': ('same', None, 'NODE-BIOS', 'flash the BIOS the partition\'s other nodes '
                 'have, and set it as theirs'),
        'governor': ('same', None, 'NODE-GOVERNOR', 'set the CPU frequency governor the '
                     'partition\'s other nodes have (cpupower frequency-set -g)'),
        'cpu_boost': ('same', None, 'NODE-BOOST', 'set CPU boost (turbo) as the '
                      'partition\'s other nodes have it: the BIOS, or cpufreq\'s boost '
                      '(intel_pstate\'s no_turbo)'),
        'transparent_hugepages': ('same', None, 'NODE-THP', 'set transparent huge pages as '
                                  'the partition\'s other nodes have them'),
        'rdma_ports': ('same', None, 'NODE-PORTS', 'an RDMA device missing: check its '
                       'driver and firmware, reseat the adapter'),
        'edac_uncorrected': ('increase_at_most', 0, 'NODE-MEMORY-UE', 'an uncorrected '
                             'memory error during a job: drain the node and replace the '
                             'DIMM EDAC names'),
        'edac_uncorrected_since_boot': ('at_most', 0, 'NODE-MEMORY-UE', 'an uncorrected '
                                        'memory error since boot: drain the node and '
                                        'replace the DIMM EDAC names'),
        'ras_uncorrected': ('increase_at_most', 0, 'NODE-MEMORY-UE', 'an uncorrected '
                            'memory error rasdaemon recorded during a job: drain the node and '
                            'replace the DIMM its record names (ras-mc-ctl --summary)'),
        'ras_uncorrected_recorded': ('at_most', 0, 'NODE-MEMORY-UE', 'an uncorrected '
                                     'memory error in rasdaemon\'s record, kept across '
                                     'reboots: replace the DIMM it names (ras-mc-ctl '
                                     '--summary), then clear its record'),
        'xid': ('increase_at_most', 0, 'GPU-XID', _XID_ACTION),
    },
    'gpu': {
        'pcie_generation': ('same', None, 'GPU-PCIE-GEN', 'the GPU trained below its '
                            'link\'s generation: reseat it and its riser; check the BIOS\'s '
                            'PCIe settings'),
        'pcie_width': ('same', None, 'GPU-PCIE-WIDTH', 'the GPU trained on fewer lanes: '
                       'reseat it and its riser, else replace them'),
        'ecc_uncorrected_volatile': ('at_most', 0, 'GPU-ECC-UE', 'reset the GPU; replace '
                                     'it where uncorrected errors recur'),
        'retirement_pending': ('at_most', 0, 'GPU-RETIREMENT', 'reset the GPU so that its '
                               'pending pages are retired'),
        'row_remap_pending': ('at_most', 0, 'GPU-REMAP-PENDING', 'reset the GPU so that its '
                              'pending rows are remapped (AWS: such a GPU kept corrupting '
                              'jobs until reset)'),
        'row_remap_failed': ('at_most', 0, 'GPU-REMAP-FAILED', 'a row remap failed: replace '
                             'the GPU'),
        'xid': ('increase_at_most', 0, 'GPU-XID', _XID_ACTION),
        'driver': ('same', None, 'GPU-DRIVER', 'install the NVIDIA driver the partition\'s '
                   'other nodes run'),
        'vbios': ('same', None, 'GPU-VBIOS', 'flash the VBIOS the partition\'s other GPUs '
                  'have (the vendor\'s firmware bundle)'),
        'nvlinks': ('same', None, 'GPU-NVLINKS', 'NVLinks missing from the GPU\'s list: check '
                    'the fabric manager and the GPU\'s baseboard'),
        'nvlinks_inactive': ('at_most', 0, 'GPU-NVLINK-INACTIVE', 'an NVLink down (Azure\'s '
                             'NHC2016): reset the GPU; reseat or replace the baseboard where '
                             'it stays down'),
    },
    'nic': {
        'rate_gbps': ('same', None, 'PORT-RATE', 'the port trained below its rate: reseat '
                      'or replace the cable, then the transceiver'),
        'width': ('same', None, 'PORT-WIDTH', 'the port trained on fewer lanes: reseat or '
                  'replace the cable'),
        'firmware': ('same', None, 'PORT-FIRMWARE', 'flash the adapter firmware the '
                     'partition\'s other ports have (mlxfwmanager)'),
        'active': ('same', None, 'PORT-STATE', 'the port is not ACTIVE: check the cable, '
                   'the switch port and the subnet manager'),
        'symbol_error': ('increase_at_most', 0, 'PORT-SYMBOL-ERRORS', 'symbol errors grew '
                         'during a job: reseat or replace the cable'),
        'link_downed': ('increase_at_most', 0, 'PORT-LINK-DOWNED', 'the link went down '
                        'during a job: reseat or replace the cable'),
        'port_rcv_errors': ('increase_at_most', 0, 'PORT-RCV-ERRORS', 'receive errors grew '
                            'during a job: reseat or replace the cable'),
        'excessive_buffer_overrun_errors': ('increase_at_most', 0, 'PORT-OVERRUNS', 'buffer '
                                            'overruns grew during a job: check the link\'s '
                                            'flow control and the cable'),
    },
}

# A node that survived an uncorrected memory error still has the DIMM that made it: its
# count since boot is expected 0 as well as its increase during a job.
FACT_OF = {'edac_uncorrected_since_boot': 'edac_uncorrected',
           'ras_uncorrected_recorded': 'ras_uncorrected'}


def _port(unit):
    return f'{unit.key.device}/{unit.key.port}'


def _groups(scope, kind, read):
    """[(port names or (), {unit: value})]: the units a draft expects one value of. A
    node's ports differ by role (an InfiniBand port at 400 Gb/s, an Ethernet one at 100),
    so a port's expected value is its name's on most nodes; ports whose names share it are
    one entry."""
    if scope != scopes.NIC or kind in ('increase_at_most', 'at_most'):
        return [((), read)]
    by_name = {}
    for unit, value in read.items():
        by_name.setdefault(_port(unit), {})[unit] = value
    by_value = {}
    for name, units in by_name.items():
        expect = _expectation(kind, None, list(units.values()))
        if expect is not None:
            key = tuple(sorted(expect.items()))
            names, units_of = by_value.setdefault(key, ([], {}))
            names.append(name)
            units_of.update(units)
    if len(by_value) == 1 and len(by_name) == len(next(iter(by_value.values()))[0]):
        return [((), read)]
    return [(tuple(sorted(names)), units) for names, units in by_value.values()]


# Facts a partition's description states ({fact: its name in `described`}): expected as
# described, not as most nodes read them (a partition whose nodes all lost SMT to a BIOS
# update reads the same wrong count on every node).
DESCRIBED = {'online_cpus': ('cpus', "its processor's num_cpus")}


def sessions_cite(system, sessions):
    """A baseline's source: the stored `sessions` it was drawn from, each with the day it
    started (`stored session(s) 4f1c2a0e-... (2026-11-27) of testbed`): what the entries
    drawn from them cite alike, each saying what it took of them in its clause."""
    return 'stored session(s) ' + ', '.join(
        s['session_info']['uuid'] + (f' ({s["session_info"]["time_start"][:10]})'
                                     if s['session_info'].get('time_start') else '')
        for s in sessions) + f' of {system}'


def from_sessions(system, sessions, described=None):
    """Fact entries (data, as a contract holds them) of the facts the stored `sessions`'
    jobs read, by partition; `described`: {partition: {'cpus': logical CPUs of a node}} of
    the system's description (ReFrame's processor), where it states them."""
    described = described or {}
    cited = f'read around the jobs of {sessions_cite(system, sessions)}'
    cases = [c for s in sessions for c in measured.measured_runs(s)]
    entries = []
    for scope_name, facts in DRAFTED.items():
        scope = scopes.named(scope_name)
        for name, (kind, given, code, action) in facts.items():
            fact = FACT_OF.get(name, name)
            figure, unit = fact_figures.fact_figure(scope, fact, kind == 'increase_at_most')
            for partition in sorted({c.partition for c in cases}):
                # A unit's last read: what it is now (an increase's worst is judged, not
                # drafted).
                read = {}
                for case in (c for c in cases if c.partition == partition):
                    read.update(scope.case_fact_units(case, figure))
                key, stated_as = DESCRIBED.get(name, (None, ''))
                stated = (described.get(partition) or {}).get(key)
                for devices, units in _groups(scope, kind, read):
                    if stated and units:
                        expect = {'equal': float(stated)}
                        said = _as_described(system, partition, units, (stated, stated_as),
                                             unit, scope)
                    else:
                        expect = _expectation(kind, given, list(units.values())) if units \
                            else None
                        if expect is None:
                            continue
                        said = _where(kind, units, expect, unit, scope, partition)
                    named = '-'.join(d.replace('/', '-') for d in devices)
                    entries.append({
                        'id': '-'.join(filter(None, ('fact', name.replace('_', '-'),
                                                     scope_name, partition, named))),
                        'fact': fact, 'scope': scope_name, 'partitions': [partition],
                        **({'devices': list(devices)} if devices else {}),
                        'expect': expect,
                        'source': {'kind': 'description' if stated else 'baseline',
                                   'cite': cited, 'clause': said},
                        'fault': {'code': code, 'action': action}})
    return entries


def _as_described(system, partition, read, stated, unit, scope):
    """Where an expectation the description states came from (`stated`: its value and
    where the description says it), and how many units read it."""
    value, where = stated
    held = sum(v == value for v in read.values())
    return (f'{value:g} {unit} as the description of {system}\'s partition {partition} '
            f'states ({where}); {held} of {len(read)} {scope.words}(s) read it')


def _expectation(kind, given, values):
    """{kind: value} a draft expects of values most units read; None where they disagree."""
    if kind in ('increase_at_most', 'at_most'):
        return {kind: given}
    most = statistics.multimode(values)[0]
    if sum(v == most for v in values) < MAJORITY * len(values):
        return None
    if kind == 'at_least_most':
        return {'at_least': float(f'{most * given:.6g}')}
    return {'equal': most}


def _where(kind, read, expect, unit, scope, partition):
    """Where the value was read, in words: `32 of 32 GPUs of gpu read 16 lanes`."""
    if kind in ('increase_at_most', 'at_most'):
        return f'{len(read)} {scope.words}(s) of {partition} read'
    (_, value), = expect.items()
    most = statistics.multimode(list(read.values()))[0]
    held = sum(v == most for v in read.values())
    said = most if fact_figures.is_text(most) else f'{most:g} {unit}'
    return f'{held} of {len(read)} {scope.words}(s) of {partition} read {said}' + (
        '' if value == most else f', expected at least {value:g}')
