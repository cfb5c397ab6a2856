"""A contract as data (hpcbench.acceptance.contract): every wrong field one message naming
the file, the entry and the field; what the schema cannot see refused before anything
runs."""
import copy

import pytest

from hpcbench.acceptance import contract

ENTRY = {
    'id': 'hpl-node', 'check': 'HplNodeScreen', 'figure': 'gflops', 'scope': 'node',
    'partitions': ['batch'],
    'committed': {'value': 70.0, 'unit': 'GFLOP/s', 'direction': 'at_least',
                  'tolerance': 0.05},
    'statistic': {'median_of': 3}, 'rule': {'every': True},
    'run_rules': {'repeats': 3},
    'source': {'kind': 'baseline', 'cite': 'session 4f1c2a0e of 2026-11-27', 'figure': 78.4,
               'factor': 0.9},
    'fault': {'code': 'HPL-NODE', 'action': 'drain the node; run its DIMM and clock checks'},
}
PAIRS = {**ENTRY, 'id': 'pair-link', 'check': 'DeviceBufferPairCheck',
         'figure': 'link_efficiency', 'scope': 'gpu_pair', 'partitions': ['gpu'],
         'committed': {'value': 80.0, 'unit': '%', 'direction': 'at_least'}}
PARTITIONS = {'batch': False, 'gpu': True}


def _contract(*entries, system='testbed'):
    return {'system': system, 'entries': [copy.deepcopy(e) for e in entries]}


def test_a_contract_reads_as_typed_entries():
    read = contract.from_data(_contract(ENTRY, PAIRS), 'contracts/testbed.yaml', 'testbed',
                              PARTITIONS)
    hpl, pairs = read.entries
    assert (hpl.committed.value, hpl.committed.words(), hpl.median_of) == (
        70.0, 'at least 70 GFLOP/s', 3)
    assert hpl.source.words() == 'baseline: session 4f1c2a0e of 2026-11-27; 0.9 x 78.4'
    assert pairs.rule == ('every', True) and pairs.median_of == contract.DEFAULT_MEDIAN_OF


@pytest.mark.parametrize('change, said', [
    (lambda e: e['committed'].update(value=0),
     "entries[hpl-node].committed.value: 0 is less than or equal to the minimum of 0"),
    (lambda e: e['committed'].update(value=-3.5),
     "entries[hpl-node].committed.value: -3.5 is less than or equal to the minimum of 0"),
    (lambda e: e.update(scope='rack'), "entries[hpl-node].scope: 'rack' is not one of"),
    (lambda e: e['committed'].update(direction='above'),
     "entries[hpl-node].committed.direction: 'above' is not one of"),
    (lambda e: e.update(statistic={'median_of': 0}),
     'entries[hpl-node].statistic.median_of: 0 is less than the minimum of 1'),
    (lambda e: e.update(colour='red'), 'entries[hpl-node]: no such field colour'),
    (lambda e: e.pop('fault'), "entries[hpl-node]: 'fault' is a required property"),
    (lambda e: e.update(check='HplCheckk'),
     "entries[hpl-node].check: the suite has no check 'HplCheckk'"),
    (lambda e: e.update(figure='gflop'),
     "entries[hpl-node].figure: HplNodeScreen reports no 'gflop' (it reports: efficiency, "
     "gflops)"),
    (lambda e: e.update(partitions=['compute']),
     'entries[hpl-node].partitions: testbed has no partition compute'),
    (lambda e: e.update(scope='gpu_pair', check='DeviceBufferPairCheck',
                        figure='link_efficiency', committed={**e['committed'], 'unit': '%'}),
     'entries[hpl-node].scope: gpu_pair on partition(s) without GPUs: batch'),
    # The unit the check reports its figure in, and no other (a rate in MB/s for GFLOP/s; an
    # IMB PingPong latency in ms, the unit following the benchmark its parameters name).
    (lambda e: e['committed'].update(unit='MB/s'),
     "entries[hpl-node].committed.unit: 'MB/s' is not the unit of HplNodeScreen gflops, "
     "'GFLOP/s'"),
    (lambda e: e.update(check='ImbPairCheck', figure='latency',
                        parameters={'benchmark': 'PingPong'},
                        committed={**e['committed'], 'unit': 'ms'}),
     "entries[hpl-node].committed.unit: 'ms' is not the unit of ImbPairCheck latency, 'us'"),
    # Parameters reach ReFrame's command line: plain values only.
    (lambda e: e.update(parameters={'num_nodes': '1 }'}),
     'entries[hpl-node].parameters.num_nodes:'),
    (lambda e: e.update(run_rules={'settings': {'memory fraction': 0.1}}),
     'entries[hpl-node].run_rules.settings'),
    # Issue 70, item 4: numbers that are none (NaN passes every bound; an infinity passes a
    # minimum): each refused by its field, wherever it is.
    (lambda e: e['committed'].update(value=float('nan')),
     'entries[hpl-node].committed.value: nan is not a finite number'),
    (lambda e: e.update(rule={'fraction': float('nan')}),
     'entries[hpl-node].rule.fraction: nan is not a finite number'),
    (lambda e: e['committed'].update(tolerance=float('nan')),
     'entries[hpl-node].committed.tolerance: nan is not a finite number'),
    (lambda e: e.update(run_rules={'minimum_seconds': float('inf')}),
     'entries[hpl-node].run_rules.minimum_seconds: inf is not a finite number'),
    (lambda e: e['source'].update(factor=float('nan')),
     'entries[hpl-node].source.factor: nan is not a finite number'),
    (lambda e: e['committed'].update(value=float('-inf')),
     'entries[hpl-node].committed.value: -inf is not a finite number'),
    (lambda e: e.update(run_rules={'settings': {'n': float('nan')}}),
     'entries[hpl-node].run_rules.settings.n: nan is not a finite number'),
    # Item 5: bounds above (2,000 repeats made a dry run of 2,001 test cases).
    (lambda e: e.update(run_rules={'repeats': 2000}),
     'entries[hpl-node].run_rules.repeats: 2000 is greater than the maximum of 100'),
    (lambda e: e.update(statistic={'median_of': 10 ** 30}),
     'entries[hpl-node].statistic.median_of: 1000000000000000000000000000000 is greater than '
     'the maximum of 100'),
    (lambda e: e.update(run_rules={'minimum_seconds': 1e12}),
     'entries[hpl-node].run_rules.minimum_seconds: 1000000000000.0 is greater than the '
     'maximum of 604800'),
    # Item 13: a grammar is the whole text: a newline after it is refused (Python's `$`
    # matched before it).
    (lambda e: e['fault'].update(code='HPL-NODE\n'),
     "entries[hpl-node].fault.code: 'HPL-NODE\\n' does not match"),
    (lambda e: e.update(parameters={'num_nodes': '1\n'}),
     'entries[hpl-node].parameters.num_nodes:'),
    (lambda e: e.update(run_rules={'settings': {'n\n': 1}}),
     'entries[hpl-node].run_rules.settings:'),
    (lambda e: e.update(environ='openmpi\n'),
     "entries[hpl-node].environ: 'openmpi\\n' does not match"),
])
def test_each_wrong_field_is_one_message_naming_file_entry_and_field(change, said):
    entry = copy.deepcopy(ENTRY)
    change(entry)
    with pytest.raises(contract.ContractError) as raised:
        contract.from_data(_contract(entry, PAIRS), 'contracts/testbed.yaml', 'testbed',
                           PARTITIONS)
    assert str(raised.value).startswith('contracts/testbed.yaml: '), raised.value
    assert said in str(raised.value), raised.value


def test_an_id_ending_in_a_newline_is_refused():
    with pytest.raises(contract.ContractError, match=r"entries\[0\]\.id: 'hpl-node\\n' does "
                                                     'not match'):
        contract.from_data(_contract({**ENTRY, 'id': 'hpl-node\n'}), 'c.yaml', 'testbed')


def test_two_entries_of_one_id_and_a_contract_of_another_system_are_refused():
    with pytest.raises(contract.ContractError, match=r"entries\[hpl-node\]\.id: two entries "
                                                     r"are called 'hpl-node'"):
        contract.from_data(_contract(ENTRY, ENTRY), 'c.yaml', 'testbed', PARTITIONS)
    with pytest.raises(contract.ContractError, match=r"^c.yaml: system: 'tsubame': a contract "
                                                     r"of another system than 'testbed'"):
        contract.from_data(_contract(ENTRY, system='tsubame'), 'c.yaml', 'testbed')


def test_a_contract_file_that_is_no_yaml_is_one_message(tmp_path):
    path = tmp_path / 'testbed.yaml'
    path.write_text('system: testbed\nentries: [\n')
    with pytest.raises(contract.ContractError, match=r'testbed.yaml: not valid YAML: line 3'):
        contract.load(path, 'testbed')
    with pytest.raises(contract.ContractError, match=r'missing.yaml'):
        contract.load(tmp_path / 'missing.yaml')


@pytest.mark.parametrize('text, said', [
    # Issue 70, item 6: tracebacks ("unhashable type", Python's int-string limit, a
    # RecursionError), each one line naming the place.
    ('system: testbed\n? [a, b]\n: 1\nentries: []\n', 'a key that is a list or a mapping'),
    ('system: testbed\nentries:\n- id: x\n  committed: {value: ' + '9' * 5000 + '}\n',
     'an integer of 5000 digits'),
    ('system: testbed\nentries: ' + '[' * 5000 + ']' * 5000 + '\n',
     'nested more than 64 levels deep'),
    ('system: testbed\nentries:\n- committed: {value: .nan}\n', "'.nan' is not a finite number"),
])
def test_a_contract_file_of_hostile_yaml_is_one_line(tmp_path, text, said):
    path = tmp_path / 'testbed.yaml'
    path.write_text(text)
    with pytest.raises(contract.ContractError) as raised:
        contract.load(path, 'testbed')
    assert str(raised.value).startswith(f'{path}: not valid YAML: line ') and \
        said in str(raised.value) and '\n' not in str(raised.value), raised.value
