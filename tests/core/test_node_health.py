"""A node's own health (hpcbench.core.node_health) read from real EDAC trees of other sites'
servers (tests/fixtures/health/README.md), from this machine's own /sys and /proc (a virtual
machine: no EDAC, no governor: not read, never a pass), and from trees broken as a failing
DIMM or a hostile file would break them."""
import os
import platform
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from hpcbench.core import node_health
from hpcbench.core.node_health import NodeHealthError

HEALTH = FIXTURES / 'health'


def test_four_controllers_counted_per_rank_give_the_one_corrected_error():
    node = node_health.read_node(HEALTH / 'edac-utils-15')
    assert [c.name for c in node.controllers] == ['mc0', 'mc1', 'mc2', 'mc3']
    assert [c.ranks for c in node.controllers] == [4, 4, 4, 4]
    assert node.controllers[0].corrected == 1 and node.corrected == 1
    # The site printed no uncorrected counts: not read, not zero.
    assert node.uncorrected is None


def test_the_older_layout_of_chip_select_rows_reads_its_zeros():
    node = node_health.read_node(HEALTH / 'netdata-1508')
    (mc0,) = node.controllers
    assert (mc0.corrected, mc0.uncorrected, mc0.ranks) == (0, 0, 4)
    assert (node.corrected, node.uncorrected) == (0, 0)


def test_this_machine_says_what_it_has_and_nothing_it_has_not():
    node = node_health.read_node('/')
    here = Path('/')
    assert node.online_cpus == (os.cpu_count()
                                if (here / node_health.CPU / 'online').exists() else None)
    if (here / 'proc/meminfo').exists():
        assert node.kernel == platform.release() and node.memory_kib > 0
    assert node.transparent_hugepages in ('always', 'madvise', 'never', None)
    if not (here / node_health.EDAC).is_dir():
        assert node.controllers is None and node.corrected is None
    boost = here / node_health.CPU / 'cpufreq' / 'boost'
    no_turbo = here / node_health.CPU / 'intel_pstate' / 'no_turbo'
    assert node.boost == (boost.read_text().strip() == '1' if boost.exists() else
                          no_turbo.read_text().strip() == '0' if no_turbo.exists() else None)


def test_an_uncorrected_error_and_a_new_kernel_tree_read_as_they_are(tmp_path):
    root = tmp_path / 'n7'
    shutil.copytree(HEALTH / 'netdata-1508', root)
    (root / node_health.EDAC / 'mc0' / 'ue_count').write_text('1\n')
    cpu = root / node_health.CPU
    (cpu / 'cpu0' / 'cpufreq').mkdir(parents=True)
    (cpu / 'online').write_text('0-63,128-191\n')
    (cpu / 'cpu0' / 'cpufreq' / 'scaling_governor').write_text('powersave\n')
    (cpu / 'cpu0' / 'cpufreq' / 'cpuinfo_max_freq').write_text('3700000\n')
    node = node_health.read_node(root)
    assert (node.uncorrected, node.online_cpus, node.governor, node.max_khz) == \
        (1, 128, 'powersave', 3700000)
    assert node.kernel is None and node.bios is None and node.memory_kib is None
    assert node.boost is None                   # neither file: not read, not "no boost"


@pytest.mark.parametrize('name, value, boost', [
    ('cpufreq/boost', '1', True), ('cpufreq/boost', '0', False),
    ('intel_pstate/no_turbo', '1', False), ('intel_pstate/no_turbo', '0', True)])
def test_boost_reads_as_cpufreq_and_intel_pstate_define_it(tmp_path, name, value, boost):
    """cpufreq's global `boost` (1: the CPUs may boost; Documentation/admin-guide/pm/
    cpufreq.rst) and intel_pstate's `no_turbo` (1: they may not; intel_pstate.rst)."""
    path = tmp_path / node_health.CPU / name
    path.parent.mkdir(parents=True)
    path.write_text(f'{value}\n')
    assert node_health.read_node(tmp_path).boost is boost


@pytest.mark.parametrize('name, data, said', [
    ('sys/devices/system/edac/mc/mc0/ce_count', b'-1\n', 'no count'),
    ('sys/devices/system/edac/mc/mc0/ce_count', b'\xff\n', 'not UTF-8'),
    ('sys/devices/system/edac/mc/mc0/ce_count', b'9' * 70000, 'more than'),
    ('sys/devices/system/cpu/online', b'7-3\n', 'no CPU list'),
    ('sys/devices/system/cpu/online', b'0-99999999\n', 'more CPUs'),
    ('sys/kernel/mm/transparent_hugepage/enabled', b'always madvise never\n', 'no one choice'),
    ('proc/meminfo', b'MemFree: 12 kB\n', 'MemTotal'),
    ('sys/devices/system/cpu/cpufreq/boost', b'on\n', 'neither 0 nor 1'),
])
def test_a_file_out_of_shape_is_refused_naming_it(tmp_path, name, data, said):
    root = tmp_path / 'n7'
    shutil.copytree(HEALTH / 'netdata-1508', root)
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(data)
    with pytest.raises(NodeHealthError, match=f'{name}: .*{said}|{name}: {said}'):
        node_health.read_node(root)


def test_rasdaemon_s_record_reads_its_dimms_counts_and_what_it_has_none_of():
    """ras-mc-ctl's outputs of two sites (mchehab/rasdaemon issues 121 and 95): four DIMM
    labels, no error on any; a summary with one corrected machine check and none of five
    kinds; one with none of four."""
    health = FIXTURES / 'health'
    counts = node_health.parse_ras_error_count(
        (health / 'ras-mc-ctl-error-count-rasdaemon-121.txt').read_text())
    assert counts == (('mc#0csrow#3channel#0', 0, 0), ('mc#0csrow#2channel#1', 0, 0),
                      ('mc#0csrow#2channel#0', 0, 0), ('mc#0csrow#3channel#1', 0, 0))
    summary = node_health.parse_ras_summary(
        (health / 'ras-mc-ctl-summary-rasdaemon-121.txt').read_text())
    assert summary.none_of == ('Memory', 'PCIe AER', 'ARM processor', 'Extlog', 'devlink',
                               'disk')
    assert summary.machine_checks == ((1, 'Corrected error, no action required.'),)
    assert node_health.parse_ras_summary(
        (health / 'ras-mc-ctl-summary-rasdaemon-95.txt').read_text()) == \
        node_health.RasSummary(('Memory', 'PCIe AER', 'Extlog', 'MCE'))
    assert (summary.memory('corrected'), summary.memory('uncorrected', 'fatal')) == (0, 0)


def test_rasdaemon_s_record_of_an_uncorrected_memory_error_is_read_with_its_dimm():
    """An Alibaba server's summary (linux-acpi, 2025-07-15): one uncorrected error on one
    DIMM, and PCIe, ARM processor, disk and memory-failure counts that are no DIMM's."""
    summary = node_health.parse_ras_summary(
        (FIXTURES / 'health' / 'ras-mc-ctl-summary-lkml-ghes-2025.txt').read_text())
    assert summary.memory_events == (
        ('Uncorrected', 'SOCKET 1 CHANNEL 1 DIMM 0 DIMM1', '0:18:-1:-1', 1),)
    assert (summary.memory('corrected'), summary.memory('uncorrected', 'fatal')) == (0, 1)
    assert summary.none_of == ('devlink',)
    sections = {}
    for section, count, _ in summary.other_events:
        sections[section] = sections.get(section, 0) + count
    assert sections == {'PCIe AER events': 2, 'ARM processor events': 9,
                        'Disk errors': 2229, 'Memory failure events': 24}
    # Each count where its line puts it, whatever it counts: a disk named by digits alone,
    # an extlog's count first.
    counted = node_health.parse_ras_summary(
        'Disk errors summary:\n\t8 has 3 errors\nExtlog records summary:\n\t12 2 errors\n')
    assert counted.other_events == (('Disk errors', 3, '8'), ('Extlog records', 12, '2'))
    # A summary with no word on memory (another version's sections only): not read, not 0.
    assert node_health.parse_ras_summary('No PCIe AER errors.\n').memory('fatal') is None


@pytest.mark.parametrize('reader, text, said', [
    ('parse_ras_error_count', 'DIMM errors\n', 'no "Label CE UE" heading'),
    ('parse_ras_error_count', 'Label CE UE\nmc#0 one 0\n', "line 2 \\('mc#0 one 0'\\)"),
    ('parse_ras_summary', 'Memory controller events summary:\n\tCorrected on DIMM\n',
     "line 2 \\('Corrected on DIMM'\\)"),
    ('parse_ras_summary', "Memory controller events summary:\n\tCorrected on DIMM Label(s): "
     "'A1' location: 0:0 errors: many\n", 'line 2'),
    ('parse_ras_summary', 'Disk errors summary:\n\t0:0 has -1 errors\n', 'line 2'),
    ('parse_ras_summary', '', 'no line of it'),
    ('parse_ras_summary', 'No Memory errors.\n' * 2_000_000, 'not its output'),
])
def test_a_rasdaemon_output_that_is_none_is_refused(reader, text, said):
    with pytest.raises(NodeHealthError, match=said):
        getattr(node_health, reader)(text)
