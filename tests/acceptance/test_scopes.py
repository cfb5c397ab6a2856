"""A scope is one object (hpcbench.acceptance.scopes): a new one is added by nothing but an
object, and the contract, plan, judgement, page, outputs and drafts handle it. The toy here
is a rack: one verdict per rack of nodes (two nodes a rack, by their number), from its
nodes' runs, judged on the testbed's real screen (HplNodeScreen on n1..n3 of `batch`)."""
import json
import re

import pytest

from hpcbench.acceptance import contract, drafts, judgement, outputs, plan, scopes
from hpcbench.machine import description_schema
from hpcbench.report import acceptance_page
from test_judgement import SCREEN, _entry, _screen


class Rack(scopes.Scope):
    """The rack of a node named <letter><number>: two nodes a rack (n1 and n2 in r1)."""

    @staticmethod
    def rack(node):
        return f'r{(int(re.sub(r"^[a-z]+", "", node)) + 1) // 2}'

    def case_unit(self, case):
        return self.unit(case.partition, self.rack(case.nodes[0])) \
            if len(case.nodes) == 1 else None

    def failed_unit(self, run):
        return self.unit(run.partition, self.rack(run.nodes[0])) \
            if len(run.nodes) == 1 else None

    def expected(self, partition, system, node_pairs):
        return {self.unit(partition.name, self.rack(n)) for n in partition.nodes}

    def recognises(self, case):
        return len(case.nodes) == 1


RACK = Rack('rack', 'per_node', 'rack')


@pytest.fixture
def with_racks(monkeypatch):
    # Tried first by a draft: it takes every single-node case for a rack's.
    monkeypatch.setattr(scopes, 'SCOPES', {'rack': RACK, **scopes.SCOPES})


def test_a_scope_the_suite_does_not_know_is_refused_never_a_fall_through():
    with pytest.raises(contract.ContractError, match=r"scope: 'rack' is not one of "
                                                     r"\['node', 'gpu', 'gpu_pair', "):
        _entry('HplNodeScreen', 'gflops', 'rack', 50.0, 'GFLOP/s')
    with pytest.raises(scopes.UnknownScope, match=r"^'rack' is no scope \(the scopes: node, "):
        scopes.Unit('rack', 'batch', 'r1')


def test_a_new_scope_is_one_object_that_plan_judgement_page_and_drafts_handle(with_racks):
    entry = _entry('HplNodeScreen', 'gflops', 'rack', 60.0, 'GFLOP/s', median_of=1,
                   partitions=['batch'])
    assert entry.scope is RACK
    (group,) = plan.run_groups(contract.Contract('x', (entry,)))
    assert group.kind == 'per_node'         # reached by a run on each node
    batch = plan.PartitionNodes('batch', ('n1', 'n2', 'n3', 'n4'))
    expected = plan.expected_units(entry, [batch], 'x')
    assert expected == {scopes.Unit('rack', 'batch', 'r1'), scopes.Unit('rack', 'batch', 'r2')}

    # n2 at half its rate: rack r1 holds n1's and n2's runs, r2 n3's; n4 never ran.
    judged = judgement.judge_entry(entry, _screen('n2'), expected)
    units = {u.unit.key: u for u in judged.units}
    assert sorted(units) == ['r1', 'r2'] and len(units['r1'].values) == 2
    assert len(units['r2'].values) == 1 and units['r2'].verdict == 'PASS'
    assert str(units['r1'].unit) == 'rack r1' and units['r1'].unit.node is None

    document = outputs.as_json('x', [judged])
    description_schema.check(json.loads(json.dumps(document)), outputs.JSON_SCHEMA)
    assert document['entries'][0]['scope'] == 'rack'
    page = acceptance_page.texts(acceptance_page.build(
        contract.Contract('x', (entry,)), [judged], {}, 'now'))[acceptance_page.MARKDOWN]
    assert '| rack r1 |' in page and '| rack r2 |' in page

    # A draft of the real screen: a rack's entry of each figure of each partition, which
    # is a contract.
    drafted = drafts.from_session('x', json.loads(SCREEN.read_text()))
    assert {e['scope'] for e in drafted} == {'rack'}
    assert all(e['fault']['action'].startswith('rerun HplNodeScreen on the rack')
               for e in drafted)
    contract.from_data({'system': 'x', 'entries': drafted}, 'draft.yaml')


def test_a_network_port_s_figures_are_its_units_and_no_gpu_s():
    """A node's run holding figures of one GPU and of two RDMA ports (device keys): the nic
    scope takes the ports', the GPU scope the GPU's; a port is expected only where a run
    listed it (a description names no ports)."""
    from hpcbench.core import device_keys
    from hpcbench.results.measured import DeviceFigures, MeasuredCase
    case = MeasuredCase('NodeFactsCheck', 'testbed', 'srun', 'builtin', {}, {}, nodes=('n7',),
                        devices=(DeviceFigures(device_keys.Gpu('n7', '0'), {'width': 16.0}),
                                 DeviceFigures(device_keys.Nic('n7', 'mlx5_0', 1),
                                               {'width': 4.0}),
                                 DeviceFigures(device_keys.Nic('n7', 'mlx5_1', 1),
                                               {'width': 2.0})))
    ports = scopes.NIC.case_units(case, 'width')
    assert {str(u): v for u, v in ports.items()} == {'port 1 of mlx5_0 of n7': 4.0,
                                                     'port 1 of mlx5_1 of n7': 2.0}
    assert {u.node for u in ports} == {'n7'}
    assert list(scopes.GPU.case_units(case, 'width').values()) == [16.0]
    assert scopes.of_device(device_keys.Nic('n7', 'mlx5_0', 1)) is scopes.NIC
    assert scopes.NIC.expected(plan.PartitionNodes('srun', ('n7',)), 'testbed', ()) == set()
