"""What an acceptance runs (hpcbench.acceptance.plan): the contract's entries grouped into
ReFrame runs, batches of nodes, the units each entry expects, node pairs paired and a
failing pair's nodes paired again with nodes that passed."""
import re

import pytest

from hpcbench.acceptance import contract, plan
from hpcbench.acceptance.judgement import Unit
from hpcbench.core import device_keys


def _entry(id, check, figure, scope, unit, **fields):
    return {'id': id, 'check': check, 'figure': figure, 'scope': scope,
            'committed': {'value': 1.0, 'unit': unit, 'direction': 'at_least'},
            'source': {'kind': 'procurement', 'cite': 'RFP annex B'},
            'fault': {'code': 'F', 'action': 'look'}, **fields}


CONTRACT = contract.from_data({'system': 'testbed', 'entries': [
    _entry('hpl', 'HpccCheck', 'hpl', 'node', 'GFLOP/s', partitions=['srun']),
    _entry('triad', 'HpccCheck', 'star_stream_triad', 'node', 'GB/s', partitions=['srun'],
           statistic={'median_of': 5}),
    _entry('hpl-4', 'HplCheck', 'gflops', 'partition', 'GFLOP/s',
           parameters={'num_nodes': 4, 'layout_name': 'per-socket'}),
    _entry('latency', 'ImbPairCheck', 'latency', 'node_pair', 'us',
           parameters={'benchmark': 'PingPong'}, environ='openmpi'),
    _entry('pairs', 'DeviceBufferPairCheck', 'bandwidth', 'gpu_pair', 'GB/s',
           partitions=['gpu']),
]}, 'contracts/testbed.yaml', 'testbed', {'srun': False, 'gpu': True})
PARTITIONS = [plan.PartitionNodes('srun', tuple(f'n{i}' for i in range(1, 8))),
              plan.PartitionNodes('gpu', ('g1', 'g2'), 8)]


def test_entries_of_one_check_and_case_run_together_with_the_repeats_the_most_needs():
    groups = plan.run_groups(CONTRACT)
    assert [(g.check, g.kind, g.entries, g.repeats) for g in groups] == [
        ('HpccCheck', 'per_node', ('hpl', 'triad'), 5),
        ('HplCheck', 'once', ('hpl-4',), 3),
        ('ImbPairCheck', 'node_pair', ('latency',), 3),
        ('DeviceBufferPairCheck', 'per_node', ('pairs',), 3)]


@pytest.mark.parametrize('display_name, selected', [
    ('HplCheck%layout_name=per-socket%num_nodes=4', True),
    ('HplCheck%num_nodes=4%layout_name=per-socket', True),
    ('HplCheck%layout_name=per-socket%num_nodes=40', False),
    ('HplCheck%layout_name=per-core%num_nodes=4', False),
    ('HplCheckX%layout_name=per-socket%num_nodes=4', False),
])
def test_a_group_selects_its_test_case_by_its_parameters_in_any_order(display_name, selected):
    """ReFrame's -n is a regular expression searched in the display name with its spaces
    taken out (reframe.frontend.filters)."""
    (hpl_4,) = [g for g in plan.run_groups(CONTRACT) if g.check == 'HplCheck']
    pattern = hpl_4.name_filter()
    assert '{' not in pattern and '}' not in pattern
    assert bool(re.search(pattern, display_name)) == selected


def test_per_node_runs_are_batches_of_the_nodes_in_service_that_lack_runs():
    hpcc = plan.run_groups(CONTRACT)[0]
    done = {('srun', 'n2'): 5, ('srun', 'n3'): 2}
    batches = plan.batches(hpcc, PARTITIONS, lambda p, u: done.get((p, u), 0),
                           out_of_service={'n5': 'drained'}, size=3)
    assert [b.nodes for b in batches] == [('n1', 'n3', 'n4'), ('n6', 'n7')]
    options = batches[0].reframe_options()
    # Each unit once: the acceptance runs passes (a unit's runs a pass apart). On its
    # partition: the port to ReFrame runs it there (hpcbench.rfm.reframe_port).
    assert batches[0].partition == 'srun'
    assert options[:4] == ['-n', hpcc.name_filter(), '--repeat', '1']
    assert options[-2:] == ['--distribute=all', '-J--nodelist=n1,n3,n4']
    # A partition whose nodes are unknown (a paper's system here): the check once, so that
    # its dry run writes the job.
    unknown = [plan.PartitionNodes('srun', ())]
    assert [(b.nodes, b.distribute) for b in plan.batches(hpcc, unknown, lambda p, u: 0)] == [
        ((), False)]


def test_node_pairs_are_disjoint_and_a_failing_pair_s_nodes_meet_nodes_that_passed():
    assert plan.disjoint_pairs(['n1', 'n2', 'n3', 'n4', 'n5']) == [
        ('n1', 'n2'), ('n3', 'n4'), ('n5', 'n1')]
    first = {('n1', 'n2'): True, ('n3', 'n4'): False, ('n5', 'n6'): True}
    again = plan.repairs(first, ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'])
    assert again == [('n1', 'n3'), ('n2', 'n4')]
    # n4 fails again beside a good node, n3 does not: n4 is to blame, n3 cleared.
    assert plan.blamed(first, {('n1', 'n3'): True, ('n2', 'n4'): False}) == ['n4']
    assert plan.blamed(first, {}) == ['n3', 'n4']
    assert plan.repairs({('n1', 'n2'): False}, ['n1', 'n2']) == []


def test_a_round_of_node_pairs_is_one_reframe_run_of_a_test_per_pair_in_batches():
    """Each pair a test pinned to its two nodes (ReFrame's -P on pinned_nodes), the pairs
    that lack runs in one run, as many pairs a run as the batch has nodes; a pair with a
    node out of service is not asked for."""
    (latency,) = [g for g in plan.run_groups(CONTRACT) if g.check == 'ImbPairCheck']
    pairs = {'srun': [('n1', 'n2'), ('n3', 'n4'), ('n5', 'n6'), ('n7', 'n1')]}
    done = {('srun', ('n1', 'n2')): 3}
    batches = plan.batches(latency, PARTITIONS, lambda p, u: done.get((p, u), 0),
                           {'n6': 'drained'}, pairs, size=32)
    assert [b.pairs for b in batches] == [(('n3', 'n4'), ('n7', 'n1'))]
    options = batches[0].reframe_options()
    assert options[options.index('-P') + 1] == 'ImbPairCheck.pinned_nodes=n3,n4;n7,n1'
    assert '--param-values-delim=;' in options and not any('nodelist' in o for o in options)
    assert batches[0].label.endswith('2 node pair(s): n3-n4, n7-n1')
    # Batches of two nodes: a pair a run.
    assert [b.pairs for b in plan.batches(latency, PARTITIONS, lambda p, u: 0, (), pairs,
                                          size=2)] == [(p,) for p in pairs['srun']]


def test_each_entry_expects_every_node_gpu_and_pair_of_its_scope():
    by_id = {e.id: e for e in CONTRACT.entries}
    assert len(plan.expected_units(by_id['hpl'], PARTITIONS, 'testbed')) == 7
    pairs = plan.expected_units(by_id['pairs'], PARTITIONS, 'testbed')
    assert len(pairs) == 2 * 28
    assert Unit('gpu_pair', 'gpu', device_keys.GpuPair('g2', 3, 7)) in pairs
    assert plan.expected_units(by_id['hpl-4'], PARTITIONS, 'testbed') == {
        Unit('partition', 'srun', 'srun'), Unit('partition', 'gpu', 'gpu')}
    latency = plan.expected_units(by_id['latency'], PARTITIONS, 'testbed',
                                  {'srun': [('n2', 'n1'), ('n3', 'n4')]})
    assert latency == {Unit('node_pair', 'srun', ('n1', 'n2')),
                       Unit('node_pair', 'srun', ('n3', 'n4'))}


def test_a_suspect_is_never_paired_again_with_its_first_partner():
    """Three nodes in service: n3, the odd one, meets n1 too. n1 and n2 fail together, n1
    passes beside n3: n2 alone is a suspect, and meets n3, not n1 again."""
    first = {('n1', 'n2'): False, ('n1', 'n3'): True}
    assert plan.repairs(first, ['n1', 'n2', 'n3']) == [('n2', 'n3')]
    assert plan.blamed(first, {('n2', 'n3'): False}) == ['n2']


def test_a_case_s_variables_are_set_and_its_parameters_named_and_conflicts_run_apart():
    """OFP's MPI start-up at 64 ranks a node (a variable: -S) on 128 and 256 nodes (a
    parameter: -n); the DIMMs of a node (a fact of the partition) select nothing. Two values
    of one variable never share a dry run: -S sets it for every test of the check."""
    read = contract.from_data({'system': 'x', 'entries': [
        _entry(f'startup-{n}-{r}', 'MpiStartupCheck', 'mpi_init', 'partition', 's',
               parameters={'num_nodes': n, 'ranks_per_node': r, 'memory_dimms': 4})
        for n, r in ((128, 64), (256, 64), (128, 32))]}, 'c.yaml')
    kinds = {'MpiStartupCheck': (frozenset({'num_nodes'}),
                                 frozenset({'ranks_per_node', 'launches'}))}
    groups = plan.run_groups(read, kinds)
    assert [g.selectors for g in groups] == [(('num_nodes', 128),), (('num_nodes', 256),),
                                             (('num_nodes', 128),)]
    assert [g.all_settings for g in groups] == [(('ranks_per_node', 64),)] * 2 + [
        (('ranks_per_node', 32),)]
    options = plan.Batch(groups[0], 'knl').reframe_options()
    assert '-SMpiStartupCheck.ranks_per_node=64' in options
    runs = plan.dry_runs(groups, [plan.PartitionNodes('knl', ())])
    assert [[g.entries for g in run.groups] for run in runs] == [
        [('startup-128-64',), ('startup-256-64',)], [('startup-128-32',)]]
