"""Nodes described by hand (hpcbench.rfm.paper_sites): the topology the checks derive inputs
from."""
from hpcbench.core import layout, node
from hpcbench.rfm import paper_sites


def test_a_knights_landing_node_has_68_cores_of_4_threads_and_a_tile_l2():
    knl = paper_sites.processor(
        arch='mic_knl', model='Xeon Phi 7250', sockets=1, cores_per_socket=68,
        threads_per_core=4,
        caches=[paper_sites.cache(1, 32 * paper_sites.KIB, associativity=8),
                paper_sites.cache(2, paper_sites.MIB, shared_by_cores=2)])
    assert knl['num_cpus'] == 272
    # Linux numbers the hardware threads of core c as c, c + 68, c + 136, c + 204.
    assert layout.cpus_of_mask(knl['topology']['cores'][1]) == [1, 69, 137, 205]
    l2 = knl['topology']['caches'][1]
    assert len(l2['cpusets']) == 34 and layout.cpus_of_mask(l2['cpusets'][0])[:2] == [0, 1]
    described = node.from_partition(knl, {'memory_bytes': 96 << 30, 'clock_hz': 1.4e9,
                                          'flops_per_cycle': 32})
    assert (described.num_cores, described.llc_bytes_total) == (68, 34 << 20)
    assert round(described.peak_flops / 1e9, 1) == 3046.4     # the slides' "3+ TFLOPS"


def test_t2k_sockets_share_their_l3_and_make_four_numa_domains():
    t2k = paper_sites.processor(
        arch='k10', model='Opteron 8356', sockets=4, cores_per_socket=4,
        caches=[paper_sites.cache(2, 512 * paper_sites.KIB),
                paper_sites.cache(3, 2 * paper_sites.MIB, shared_by_cores=4)])
    described = node.from_partition(t2k, {'memory_bytes': 32 << 30, 'clock_hz': 2.3e9,
                                          'flops_per_cycle': 4})
    assert described.llc_bytes_total == 8 << 20 and described.num_numa_nodes == 4
    assert round(described.peak_flops / 1e9, 1) == 147.2        # Table 1 of the T2K paper
    assert layout.distinct_layouts(t2k)[0]['per-socket'].cpus[1] == (4, 5, 6, 7)
