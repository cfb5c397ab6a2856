"""A Slurm cluster read from its controller (hpcbench.core.slurm_cluster), on what the
testbed's Slurm 22.05 printed (tests/fixtures/slurm): as it starts (`testbed/`, with the
slurm.conf it ran from), and with a partition of no nodes and features on one node
(`testbed-varied/`, made with `scontrol create partition` and `scontrol update`)."""
import re

import pytest

from conftest import FIXTURES, slurm_conf_nodes
from hpcbench.core import gres
from hpcbench.core import slurm_cluster

TESTBED = FIXTURES / 'slurm' / 'testbed'
VARIED = FIXTURES / 'slurm' / 'testbed-varied'
PARTITIONS = (TESTBED / 'scontrol-show-partition.txt').read_text()
NODES = (TESTBED / 'scontrol-show-node.txt').read_text()


def test_the_testbed_is_read_as_its_slurm_conf_declares_it():
    batch, gpu = slurm_cluster.read_cluster(PARTITIONS, NODES)
    declared = slurm_conf_nodes((TESTBED / 'slurm.conf').read_text())
    assert (batch.name, batch.default, [n.name for n in batch.nodes]) == (
        'batch', True, ['n1', 'n2', 'n3'])
    assert (gpu.name, gpu.default, [n.name for n in gpu.nodes]) == ('gpu', False, ['g1', 'g2'])
    for partition in (batch, gpu):
        assert partition.differing == {} and partition.features == ()
        for node in partition.nodes:
            assert node.shape == declared[node.name], node.name
    assert batch.gres_gpus == ()
    assert gpu.gres_gpus == (gres.GresGpus('h200', 2),)


def test_nodes_that_are_one_host_are_told_apart_from_a_cluster_s():
    partitions = slurm_cluster.read_cluster(PARTITIONS, NODES)
    assert {n.host for p in partitions for n in p.nodes} == {'vm'}
    assert slurm_cluster.nodes_share_hosts(partitions)
    own_hosts = re.sub(r'NodeName=(\w+) (.*?)NodeHostName=vm ', r'NodeName=\1 \2NodeHostName=\1 ',
                       NODES)
    assert not slurm_cluster.nodes_share_hosts(slurm_cluster.read_cluster(PARTITIONS,
                                                                          own_hosts))


def test_values_with_blanks_and_equals_signs_are_kept_whole():
    node = slurm_cluster.records(NODES, 'Node')[0]
    assert node['OS'] == 'Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0'
    assert node['CfgTRES'] == 'cpu=2,mem=8035M,billing=2' and node['AllocTRES'] == ''
    partition = slurm_cluster.records(PARTITIONS, 'Partition')[0]
    assert partition['TRES'] == 'cpu=6,mem=24105M,node=3,billing=6'


def test_a_partition_without_nodes_is_one_message_naming_it():
    with pytest.raises(slurm_cluster.SlurmDescriptionError,
                       match=r'^partition empty has no nodes \(Nodes=\(null\)\)'):
        slurm_cluster.read_cluster((VARIED / 'scontrol-show-partition.txt').read_text(),
                                   (VARIED / 'scontrol-show-node.txt').read_text())


def test_a_feature_of_some_nodes_is_not_the_partition_s():
    partitions = ''.join(line for line in
                         (VARIED / 'scontrol-show-partition.txt').read_text().splitlines(True)
                         if not line.startswith('PartitionName=empty '))
    batch, _ = slurm_cluster.read_cluster(partitions,
                                          (VARIED / 'scontrol-show-node.txt').read_text())
    assert [n.features for n in batch.nodes] == [(), (), ('bigmem', 'ib')]
    assert batch.features == () and batch.differing == {}


def test_nodes_of_another_shape_are_said_and_the_smallest_describes_the_partition():
    smaller = re.sub(r'(NodeName=n2 .*?)CPUTot=2 (.*?)RealMemory=8035 ',
                     r'\1CPUTot=1 \2RealMemory=4000 ', NODES)
    batch, gpu = slurm_cluster.read_cluster(PARTITIONS, smaller)
    assert batch.smallest.name == 'n2' and batch.smallest.shape[0] == 1
    assert batch.differing == {name: ['CPUTot=2 (not 1)', 'RealMemory=8035 (not 4000)']
                               for name in ('n1', 'n3')}
    assert gpu.differing == {}


@pytest.mark.parametrize('nodes, partitions, said', [
    (re.sub(r'(?m)^NodeName=n3 .*\n', '', NODES), PARTITIONS,
     'partition batch: 2 node records name it, its TotalNodes is 3'),
    (NODES.replace('RealMemory=8035', 'RealMemory=lots', 1), PARTITIONS,
     "node g1: RealMemory='lots' is not a number"),
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:40,gpu:a100:40'), PARTITIONS,
     r"partition gpu, node g1: GRES 'gpu:a100:40': 80 GPUs are not what a node has"),
    ('slurm_load_node error: Unable to contact slurm controller (connect failure)\n',
     PARTITIONS, r'line 1 is not a record of `scontrol show node -o`'),
    (NODES, '', r'`scontrol show partition -o` printed no record'),
    # Issue 60, items 12, 15 and 16: digits of other scripts, a count of 5000 digits, a GRES
    # of 600,000 characters (its split took 104 s).
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:\u0663'), PARTITIONS,
     r"GRES 'gpu:h200:\u0663' is not gpu\[:TYPE\]:COUNT"),
    (NODES.replace('CPUTot=2', 'CPUTot=\uff12', 1), PARTITIONS, "CPUTot='\uff12' is not a number"),
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:' + '9' * 4000), PARTITIONS,
     r"GRES 'gpu:h200:9999.* is not gpu\[:TYPE\]:COUNT"),
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:' + '9' * 5000), PARTITIONS,
     r"GRES of 5009 characters"),
    (NODES.replace('RealMemory=8035', 'RealMemory=' + '9' * 5000, 1), PARTITIONS,
     "RealMemory='9999999.* is not a number"),
    (NODES.replace('Gres=gpu:h200:2', 'Gres=' + 'gpu:h100:4,' * 60000), PARTITIONS,
     r'GRES of 660000 characters .*: no node.s \(at most 4096\)'),
])
def test_bad_output_of_the_controller_is_one_message(nodes, partitions, said):
    with pytest.raises(slurm_cluster.SlurmDescriptionError, match=said):
        slurm_cluster.read_cluster(partitions, nodes)


def test_srun_s_mpi_plugins_are_read_without_none():
    listed = (TESTBED / 'srun-mpi-list.txt').read_text()
    assert slurm_cluster.mpi_plugins(listed) == ('pmix', 'cray_shasta', 'pmi2')
    with pytest.raises(slurm_cluster.SlurmDescriptionError, match='did not list'):
        slurm_cluster.mpi_plugins('srun: error: invalid MPI type list\n')


def test_the_cluster_s_configuration_says_its_accounting_and_mpi_default():
    config = (TESTBED / 'scontrol-show-config.txt').read_text()
    cluster = slurm_cluster.cluster_from(config, PARTITIONS, NODES,
                                         (TESTBED / 'srun-mpi-list.txt').read_text())
    assert (cluster.name, cluster.version, cluster.mpi_default, cluster.accounting) == (
        'testbed', '22.05.8', 'pmix', True)
    assert [p.name for p in cluster.partitions] == ['batch', 'gpu']
    without = config.replace('accounting_storage/slurmdbd', 'accounting_storage/none')
    assert not slurm_cluster.cluster_from(without, PARTITIONS, NODES,
                                          'MPI plugin types are...\n\tpmi2\n').accounting
    with pytest.raises(slurm_cluster.SlurmDescriptionError, match='no ClusterName'):
        slurm_cluster.config_values(PARTITIONS)


@pytest.mark.parametrize('state, out', [
    ('IDLE', ''), ('MIXED', ''), ('ALLOCATED', ''),
    # Power saving: Slurm boots the node for a job (a cloud node is powered down when idle).
    ('IDLE+CLOUD+POWERED_DOWN', ''), ('IDLE+DYNAMIC_NORM+POWERED_DOWN', ''), ('idle~', ''),
    ('alloc#', ''),
    ('DOWN*+DRAIN', 'DOWN*+DRAIN: down, not responding, drained'),
    ('MIXED+DRAIN', 'MIXED+DRAIN: drained'), ('drng', 'drng: draining'),
    ('resv', 'resv: reserved'),
    ('IDLE+CLOUD+DYNAMIC_NORM+NOT_RESPONDING+POWERING_UP',
     'IDLE+CLOUD+DYNAMIC_NORM+NOT_RESPONDING+POWERING_UP: not responding'),
    ('IDLE+NOT_RESPONDING', 'IDLE+NOT_RESPONDING: not responding'),
    ('RESERVED', 'RESERVED: reserved'), ('idle$', 'idle$: in maintenance'),
    ('FUTURE', 'FUTURE: not yet in service'), ('DOWN+FAIL', 'DOWN+FAIL: down, failing'),
])
def test_a_node_s_state_says_whether_it_can_run_a_benchmark(state, out):
    assert slurm_cluster.why_out(state) == out


@pytest.mark.parametrize('state, out', [
    ('IDLE+MAINT+RESERVED', ''), ('idle$', ''), ('resv', ''),
    ('IDLE+RESERVED+DRAIN', 'IDLE+RESERVED+DRAIN: drained'),
    ('IDLE+MAINT+NOT_RESPONDING', 'IDLE+MAINT+NOT_RESPONDING: not responding')])
def test_a_job_inside_a_reservation_may_run_on_its_reserved_nodes_and_no_other_out(state,
                                                                                  out):
    assert slurm_cluster.why_out(state, in_reservation=True) == out


def test_records_of_scontrol_s_default_form_are_read_as_its_one_line_records():
    """`scontrol show node` without -o (a record's first line, then indented lines) is read
    as the same records; the testbed's records, re-printed that way, give the same cluster."""
    multi = ''.join(
        re.sub(r' (?=(?:CPUAlloc|AvailableFeatures|Gres|NodeAddr|OS|RealMemory|State|'
               r'Partitions|BootTime|CfgTRES)=)', '\n   ', line) + '\n'
        for line in NODES.splitlines())
    assert multi.count('\n') > 5 * NODES.count('\n')
    assert slurm_cluster.records(multi, 'Node') == slurm_cluster.records(NODES, 'Node')
    with pytest.raises(slurm_cluster.SlurmDescriptionError, match='line 1 is not a record'):
        slurm_cluster.records('   CPUAlloc=0 CPUTot=2\n' + NODES, 'Node')
