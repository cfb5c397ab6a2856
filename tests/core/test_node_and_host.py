import json

import pytest

from hpcbench.core import node
from hpcbench.machine import host
from conftest import FIXTURES


def _processor():
    return json.loads((FIXTURES / 'reframe' / 'local-processor.json').read_text())


EXTRAS = {'memory_bytes': 24 * 2**30, 'clock_hz': 2.596e9, 'flops_per_cycle': 32}


def test_node_from_detected_processor():
    n = node.from_partition(_processor(), EXTRAS)
    assert (n.num_cores, n.num_sockets, n.num_numa_nodes) == (2, 1, 1)
    assert n.llc_bytes_total == 32 * 2**20
    assert n.peak_flops == pytest.approx(2 * 2.596e9 * 32)


def test_llc_total_sums_instances():
    topology = {'caches': [{'type': 'L2', 'size': 2**20, 'cpusets': ['0x1', '0x2']},
                           {'type': 'L3', 'size': 16 * 2**20, 'cpusets': ['0xf', '0xf0']}]}
    assert node.last_level_cache_total(topology) == 32 * 2**20


@pytest.mark.parametrize('processor, extras, message', [
    ({}, EXTRAS, 'no processor description'),
    (_processor(), {'clock_hz': 1e9}, 'memory_bytes, flops_per_cycle'),
    ({**_processor(), 'topology': {'cores': ['0x1']}}, EXTRAS, 'no caches'),
])
def test_incomplete_descriptions_are_refused(processor, extras, message):
    with pytest.raises(node.NodeDescriptionError, match=message):
        node.from_partition(processor, extras, 'sys:part')


def test_a_partition_of_mixed_clocks_counts_each_node_at_its_own(tmp_path):
    mixed = node.from_partition(_processor(), {**EXTRAS, 'node_clocks': [[2, 3e9]]}, 'p')
    per_node = mixed.peak_flops
    assert mixed.peak_flops_of(1) == pytest.approx(per_node * 3e9 / mixed.clock_hz)
    assert mixed.peak_flops_of(5) == pytest.approx(per_node * (2 * 3e9 / mixed.clock_hz + 3))
    for bad in ([[0, 3e9]], [[2]], [['two', 3e9]], [[2, -1]]):
        with pytest.raises(node.NodeDescriptionError, match='node_clocks'):
            node.from_partition(_processor(), {**EXTRAS, 'node_clocks': bad}, 'p')


def test_host_facts_from_proc_files(tmp_path):
    cpuinfo = FIXTURES / 'host-cpuinfo.txt'
    assert host.flops_per_cycle(cpuinfo) == 32          # avx512f here
    assert host.clock_hz(cpuinfo, tmp_path / 'none') == pytest.approx(2596.13e6)
    assert host.memory_bytes(FIXTURES / 'host-meminfo.txt') > 2**30


def test_the_clock_is_the_best_the_machine_reveals_and_says_where_it_comes_from(
        tmp_path, monkeypatch):
    """This VM's /proc/cpuinfo (2.596 GHz, "AMD EPYC", no cpufreq) gives its base clock,
    said to be possibly so; a cpufreq maximum (the highest of the CPUs), a documented
    boost of the model, or the site's HPCBENCH_CLOCK_HZ are better, in that order."""
    monkeypatch.delenv(host.CLOCK_VARIABLE, raising=False)
    cpuinfo, cpufreq = FIXTURES / 'host-cpuinfo.txt', tmp_path / 'cpu'
    hz, source = host.clock(cpuinfo, cpufreq)
    assert hz == pytest.approx(2596.13e6) and 'possibly the base clock' in source
    epyc = tmp_path / 'cpuinfo'
    epyc.write_text(cpuinfo.read_text().replace(
        'model name\t: AMD EPYC\n', 'model name\t: AMD EPYC 7763 64-Core Processor\n'))
    assert host.clock(epyc, cpufreq) == (3.5e9, 'documented boost of EPYC 7763')
    for cpu, khz in (('cpu0', '2450000'), ('cpu1', '3525000'), ('cpufreq', 'x')):
        (cpufreq / cpu / 'cpufreq').mkdir(parents=True)
        (cpufreq / cpu / 'cpufreq' / 'cpuinfo_max_freq').write_text(khz + '\n')
    assert host.clock(epyc, cpufreq) == (3.525e9, 'cpufreq maximum')
    monkeypatch.setenv(host.CLOCK_VARIABLE, '3.7e9')
    assert host.clock(epyc, cpufreq) == (3.7e9, host.CLOCK_VARIABLE)
    for bad in ('fast', '0', 'nan', '-1e9'):
        monkeypatch.setenv(host.CLOCK_VARIABLE, bad)
        with pytest.raises(RuntimeError, match=f'{host.CLOCK_VARIABLE}=.*in Hz'):
            host.clock(epyc, cpufreq)


def test_flops_per_cycle_follows_the_widest_fma(tmp_path):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text('flags\t\t: fpu sse2 avx fma avx2\n')
    assert host.flops_per_cycle(cpuinfo) == 16
    cpuinfo.write_text('flags\t\t: fpu sse sse2\n')
    assert host.flops_per_cycle(cpuinfo) == 4
