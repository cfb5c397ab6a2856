"""The GPU topology of a node (hpcbench.core.gpu_topology) read from real `nvidia-smi topo -m`
outputs (tests/fixtures/gpu/topology: the H200 node lent to this project, a published 8 x
A100 node; ci/testbed/gpu-node-topology.txt: a published 8 x H100 node) and from broken
copies of them; the bandwidth of each link from the datasheets; a rank placed away from its
GPU."""
import stat

import pytest

from conftest import FIXTURES, ROOT
from hpcbench.machine import gpus as machine_gpus
from hpcbench.core import accelerators, gpu_topology
from hpcbench.machine import datasheets

TOPOLOGY = FIXTURES / 'gpu' / 'topology'
# The published 8 x H100 node's, which the testbed's GPU nodes are described with.
DGX_H100 = ROOT / 'ci' / 'testbed' / 'gpu-node-topology.txt'


def _text(name):
    return (DGX_H100 if name == 'dgx-h100-published.txt' else TOPOLOGY / name).read_text()


def _sheet(model):
    return datasheets.find(model)


def test_the_h200_node_s_one_gpu_and_its_cpus():
    topology = gpu_topology.parse(_text('h200-one-gpu.txt'))
    assert topology.gpus == (gpu_topology.GpuPlace(0, '0-15', 0),)
    assert topology.links == (('X',),) and topology.nics == {}


def test_an_8_gpu_h100_node_every_pair_18_nvlinks_two_numa_nodes():
    topology = gpu_topology.parse(_text('dgx-h100-published.txt'))
    assert len(topology.gpus) == 8
    assert {topology.link(i, j) for i in range(8) for j in range(8) if i != j} == {'NV18'}
    assert [g.numa for g in topology.gpus] == [0] * 4 + [1] * 4
    assert topology.gpus[5].cpus == '52-103' and len(topology.gpus[5].cpu_set()) == 52


def test_the_nics_and_their_paths_to_each_gpu_by_their_legend_s_names():
    """No real output with network cards could be cited: the published 8 x A100 matrix with
    two NIC columns and rows added as nvidia-smi prints them (its `NIC Legend`)."""
    lines = _text('dgx-a100-published.txt').splitlines()
    near = ['PXB'] * 4 + ['SYS'] * 4
    far = ['SYS'] * 4 + ['PXB'] * 4
    header = lines[0].replace('  CPU Affinity', '  NIC0  NIC1  CPU Affinity')
    rows = [line.replace(f'{cpus}', f'{a}  {b}  {cpus}', 1)
            for line, a, b, cpus in zip(lines[1:], near, far,
                                        ['0-23'] * 4 + ['24-47'] * 4)]
    nic_rows = ['NIC0  ' + '  '.join(near) + '   X    SYS',
                'NIC1  ' + '  '.join(far) + '  SYS    X ']
    text = '\n'.join([header, *rows, *nic_rows, '', 'NIC Legend:', '', '  NIC0: mlx5_0',
                      '  NIC1: mlx5_1', ''])
    topology = gpu_topology.parse(text)
    assert topology.nics == {'mlx5_0': tuple(near), 'mlx5_1': tuple(far)}
    assert topology.gpus[5] == gpu_topology.GpuPlace(5, '24-47', 1)
    assert gpu_topology.from_description(topology.to_description()) == topology


def test_the_description_keeps_the_topology_whole():
    topology = gpu_topology.parse(_text('dgx-a100-published.txt'))
    assert gpu_topology.from_description(topology.to_description()) == topology


@pytest.mark.parametrize('fixture, model, each_way', [
    ('dgx-h100-published.txt', 'NVIDIA H100 80GB HBM3', 450e9),
    ('dgx-a100-published.txt', 'NVIDIA A100-SXM4-80GB', 300e9),
])
def test_a_pair_s_link_carries_what_the_datasheet_s_nvlinks_do(fixture, model, each_way):
    topology = gpu_topology.parse(_text(fixture))
    rate, what = gpu_topology.pair_bandwidth(topology.link(0, 7), _sheet(model))
    assert rate == pytest.approx(each_way) and 'at 25 GB/s each way' in what


def test_a_pcie_pair_meets_at_the_host_link_and_an_unknown_one_says_why():
    sheet = _sheet('NVIDIA H200')
    assert gpu_topology.pair_bandwidth('SYS', sheet)[0] == 64e9
    assert gpu_topology.pair_bandwidth('NV2', sheet)[0] == pytest.approx(50e9)
    clearspeed = _sheet('ClearSpeed Advance')
    assert gpu_topology.pair_bandwidth('NV4', clearspeed) == \
        (None, 'NV4: the datasheet gives no NVLink rate')


def test_a_rank_on_the_far_socket_is_named_and_a_near_one_is_not():
    topology = gpu_topology.parse(_text('dgx-h100-published.txt'))
    assert gpu_topology.misplaced(topology, 2, '8-15') is None
    said = gpu_topology.misplaced(topology, 2, '60-67')
    assert said == ('its CPUs 60-67 are not all next to GPU 2, whose CPUs are 0-51 '
                    '(NUMA node 0)')
    # No topology, or one that names no CPUs: nothing to judge.
    assert gpu_topology.misplaced(None, 2, '60-67') is None


def _broken(name, old, new):
    text = _text(name)
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize('text, said', [
    ('', 'no matrix'),
    (_broken('dgx-h100-published.txt', 'GPU3  NV18  NV18  NV18   X ',
             'GPU3  NV18  NV18  NV4    X '), 'GPU2 to GPU3 is NV18 but GPU3 to GPU2 NV4'),
    (_broken('dgx-h100-published.txt', 'GPU1  NV18   X ', 'GPU1  NVL    X '),
     "GPU1 to GPU0: 'NVL' is no path"),
    (_broken('dgx-h100-published.txt', 'GPU4  NV18  NV18  NV18  NV18   X    NV18  NV18  NV18'
             '  52-103        1\n', ''), 'no row of GPU4'),
    (_broken('dgx-a100-published.txt', '24-47         1\nGPU6', 'all           1\nGPU6'),
     "GPU5: CPU affinity 'all' is no list of CPUs"),
    (_broken('h200-one-gpu.txt', ' X ', ' NV1 '), "GPU0 to itself is 'NV1', not X"),
])
def test_a_broken_matrix_is_one_message(text, said):
    with pytest.raises(gpu_topology.TopologyError, match='nvidia-smi topo -m: ') as err:
        gpu_topology.parse(text)
    assert said in str(err.value)


def test_detect_asks_the_tool_and_says_when_it_fails(tmp_path):
    tool = tmp_path / 'nvidia-smi'
    tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "topo -m" ] && cat "{TOPOLOGY}/h200-one-gpu.txt"'
                    ' && exit 0\necho "NVML: driver not loaded"; exit 9\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert gpu_topology.detect(str(tool)).gpus[0].cpus == '0-15'
    tool.write_text('#!/bin/sh\necho "NVML: driver not loaded"; exit 9\n')
    with pytest.raises(gpu_topology.TopologyError, match='exited with 9: NVML: driver not'):
        gpu_topology.detect(str(tool))


def test_the_partition_s_description_carries_the_topology_and_refuses_another_node_s():
    (gpu,) = accelerators.from_query_csv(
        (FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-query.csv').read_text())
    one = gpu_topology.parse(_text('h200-one-gpu.txt'))
    facts = machine_gpus.partition_facts([gpu], one, datasheets.find(gpu.model))['accelerators']
    assert facts['topology'] == {'gpus': [{'index': 0, 'cpus': '0-15', 'numa': 0}],
                                 'links': [['X']]}
    assert facts['datasheet']['nvlink_links'] == 18
    eight = gpu_topology.parse(_text('dgx-h100-published.txt'))
    with pytest.raises(accelerators.AcceleratorError, match='shows 8 GPUs, its query 1'):
        machine_gpus.partition_facts([gpu], eight)


def test_a_topology_beyond_any_node_is_refused_at_once():
    """Issue 60, item 11: a CPU list 0-999999999 (a MemoryError building its set) and a
    matrix of 3000 GPUs (over 30 s before the count was compared) are refused in one line,
    at once; the description's schema holds the same bounds."""
    import time
    import jsonschema
    with pytest.raises(gpu_topology.TopologyError, match='no list of CPUs'):
        gpu_topology.cpu_set('0-999999999')
    with pytest.raises(gpu_topology.TopologyError, match='names CPUs beyond 65536'):
        gpu_topology.cpu_set('0-99999')
    # Issue 70, item 18: thousands of ranges on one line (seconds to minutes to expand).
    with pytest.raises(gpu_topology.TopologyError, match=r'characters, more than 4096'):
        gpu_topology.cpu_set(','.join(['0-65535'] * 10000))
    with pytest.raises(gpu_topology.TopologyError, match='lists more than 65536 CPUs'):
        gpu_topology.cpu_set(','.join(['0-65535'] * 400))
    with pytest.raises(gpu_topology.TopologyError, match=r'line 2 is more than 65536 '
                                                         'characters'):
        gpu_topology.parse('\tGPU0\tCPU Affinity\nGPU0\t X \t' + '0-3,' * 20000 + '0\n')
    # Digits of other scripts: Python's \\d and int() take them.
    with pytest.raises(gpu_topology.TopologyError, match='no list of CPUs'):
        gpu_topology.cpu_set('0-\u0663')
    assert list(jsonschema.Draft202012Validator(gpu_topology.SCHEMA).iter_errors(
        {'gpus': [{'index': 0, 'cpus': '0-\u0663'}], 'links': [['X']]}))
    started = time.monotonic()
    header = '\t' + '\t'.join(f'GPU{i}' for i in range(3000)) + '\tCPU Affinity\n'
    with pytest.raises(gpu_topology.TopologyError, match='3000 devices, more than a node has'):
        gpu_topology.parse(header + 'GPU0\tX\n')
    described = {'gpus': [{'index': i, 'cpus': ''} for i in range(3000)],
                 'links': [['X']] * 3000}
    errors = list(jsonschema.Draft202012Validator(gpu_topology.SCHEMA).iter_errors(described))
    assert any('is too long' in e.message for e in errors)
    assert time.monotonic() - started < 10
