"""The testbed's emulated nodes as the checks size their inputs (hpcbench.stack.testbed_system):
each a share of the one host, its memory and the memory its one OS keeps."""
import pytest

from hpcbench.benchmarks import hpl
from hpcbench.core import node
from hpcbench.stack import testbed_system

PROCESSOR = {'num_cpus': 2, 'num_cpus_per_core': 1, 'num_sockets': 1,
             'topology': {'cores': ['0x1', '0x2'], 'numa_nodes': ['0x3'],
                          'caches': [{'type': 'L3', 'size': 32 << 20, 'cpusets': ['0x3']}]}}


@pytest.mark.parametrize('nodes', [3, 32, 64])
def test_every_emulated_node_sizes_an_hpl_that_fits_its_share_of_the_host(nodes):
    facts = testbed_system.node_facts(nodes)
    emulated = node.from_partition(PROCESSOR, facts, f'testbed of {nodes}')
    assert emulated.os_reserve_bytes * nodes <= node.DEFAULT_OS_RESERVE_BYTES
    assert emulated.memory_bytes * nodes <= testbed_system.node_memory_bytes(1)
    planned = hpl.plan(emulated, 1, 1, sizing='tuning')
    assert planned.memory_bytes <= emulated.memory_bytes - emulated.os_reserve_bytes
