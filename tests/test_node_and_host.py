import json

import pytest

from hpcbench import host, node
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


def test_host_facts_from_proc_files(tmp_path):
    cpuinfo = FIXTURES / 'host-cpuinfo.txt'
    assert host.flops_per_cycle(cpuinfo) == 32          # avx512f here
    assert host.clock_hz(cpuinfo, tmp_path / 'none') == pytest.approx(2596.13e6)
    assert host.memory_bytes(FIXTURES / 'host-meminfo.txt') > 2**30


def test_flops_per_cycle_follows_the_widest_fma(tmp_path):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text('flags\t\t: fpu sse2 avx fma avx2\n')
    assert host.flops_per_cycle(cpuinfo) == 16
    cpuinfo.write_text('flags\t\t: fpu sse sse2\n')
    assert host.flops_per_cycle(cpuinfo) == 4
