"""The watch after the acceptance (hpcbench.acceptance.watch), cycle by cycle, given a fake
port to ReFrame that stores sessions of the real runs of the testbed's 32-node acceptance,
a node made slow by scaling its real runs' figures, and a fake controller that keeps each
node's state and reason and applies the drains it is given (tests/watch_fakes.py)."""
import json
import os
import re

import pytest
import yaml

from hpcbench.acceptance import directory as directories, drift, watch, watch_record, watch_rules
from hpcbench.acceptance.watch_rules import SeenNode
from hpcbench.core import slurm_cluster
from watch_fakes import ACCEPTED, CONTRACT, NODES, Clock, FakeReFrame, FakeSlurm, accept


@pytest.fixture
def accepted(tmp_path):
    return accept(tmp_path)


def _watch(tmp_path, accepted, port, slurm, clock, **options):
    contract, acceptance = accepted
    return watch.Watch('testbed', contract, acceptance, tmp_path / 'watch', reframe=port,
                       slurm=slurm, clock=clock, say=lambda text: None,
                       **{'act': True, 'max_drain': 0.25, **options})


def _cycles(tmp_path, accepted, port, slurm, clock, count, **options):
    found = []
    for _ in range(count):
        found.append(_watch(tmp_path, accepted, port, slurm, clock, **options).cycle())
        clock.now += 3600
    return found


def test_a_node_20_percent_slower_drifts_and_is_drained_after_its_streak_healthy_never(
        tmp_path, accepted):
    """Still meeting the contract (about 30 GFLOP/s of 14.42 committed), n3 20 % slower
    than its own accepted runs from the third cycle on drifts: its runs spread from 37 to 51
    GFLOP/s, so three slow runs beside its nine steady ones (three accepted, two steady
    cycles) are not yet significant (p = 0.07); with the next cycle's, six beside nine, they
    are (p <= 0.05, 20 % worse: beyond the 5 %). After two failing cycles (its streak) it is
    drained, its reason the suite's; then it is not run, drained by the watch. No other
    node is ever drained."""
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    first, second = _cycles(tmp_path, accepted, port, slurm, clock, 2)
    assert first.due == second.due == ACCEPTED and not first.actions + second.actions
    assert first.not_run['n7'].startswith('never accepted: hpl FAIL in the acceptance: '
                                          'median 2.06 GFLOP/s of 3 runs')
    assert {o.outcome for c in (first, second) for o in c.outcomes.values()} == {'PASS'}
    port.slow['n3'] = 0.2
    cycles = _cycles(tmp_path, accepted, port, slurm, clock, 4)
    n3 = [c.drifts['hpl'][next(u for u in c.drifts['hpl'] if u.key == 'n3')]
          for c in cycles[:3]]
    assert [d.verdict for d in n3] == ['OK', 'DRIFT', 'DRIFT'], n3
    assert [(len(d.runs), len(d.accepted)) for d in n3] == [(3, 9), (6, 9), (9, 9)]
    assert n3[1].effect == pytest.approx(0.2, abs=0.02) and n3[1].p_value <= 0.05
    hpl = next(v for v in cycles[1].verdicts if v.entry.id == 'hpl')
    assert {u.unit.key: u.verdict for u in hpl.units}['n3'] == 'PASS'   # meets the contract
    assert not cycles[1].actions
    assert [(a.node, a.kind, a.held) for a in cycles[2].actions] == [('n3', 'drain', '')]
    assert slurm.states['n3'][1].startswith('hpcbench watch: HPCC-NODE hpl drift: node n3: '
                                            'median')
    assert cycles[3].not_run['n3'].startswith('drained by the watch: hpcbench watch:')
    assert 'n3' not in cycles[3].due
    drained = [argv for argv in slurm.acted if 'State=DRAIN' in argv]
    assert [a[2] for a in drained] == ['NodeName=n3']
    memory = watch_record.Memory.load(tmp_path / 'watch')
    assert memory.nodes['n3'].drained and memory.nodes['n3'].streak == 2
    assert all(memory.nodes[n].streak == 0 for n in ACCEPTED if n != 'n3')
    assert 'n7' not in memory.nodes


def test_a_node_70_percent_slower_misses_the_contract_and_is_drained_at_once(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    failing = cycle.outcomes['n5'].failing
    assert {(f.how, f.at_once) for f in failing} == {('contract', True), ('drift', False)}
    assert [(a.node, a.kind, a.held) for a in cycle.actions] == [('n5', 'drain', '')]
    assert slurm.states['n5'][0] == 'IDLE+DRAIN'


def test_without_act_the_lines_are_printed_and_nothing_is_done(tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    said = []
    cycle = _watch(tmp_path, accepted, port, slurm, clock, act=False).cycle()
    assert slurm.acted == [] and slurm.states['n5'] == ('IDLE', '')
    assert not cycle.acted
    contract, acceptance = accepted
    printed = []
    watch.Watch('testbed', contract, acceptance, tmp_path / 'watch2', reframe=port,
                slurm=slurm, clock=clock, say=printed.append, max_drain=0.25).cycle()
    assert any(re.match(r"# to run \(give --act\): scontrol update NodeName=n5 State=DRAIN "
                        r"'Reason=hpcbench watch: HPCC-NODE", line) for line in printed), printed
    assert not watch_record.Memory.load(tmp_path / 'watch').nodes['n5'].drained
    del said


def test_the_safety_limit_drains_none_where_too_many_would_go(tmp_path, accepted):
    """Three of ten nodes failing at once (a shared cause: a file system, a wrong
    baseline), with at most 5 % of the partition to drain a cycle (none of ten): none is
    drained, and each says why."""
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow.update({'n2': 0.75, 'n4': 0.75, 'n6': 0.75})
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1, max_drain=0.05)[0]
    assert sorted(a.node for a in cycle.actions) == ['n2', 'n4', 'n6']
    assert all('3 node(s) of partition srun would be drained, more than 5 % of its 10 (0)'
               in a.held for a in cycle.actions)
    assert slurm.acted == []


def test_a_node_the_site_drained_is_left_alone_and_a_new_node_is_never_accepted(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(NODES + ['n11']), FakeSlurm(NODES + ['n11']), Clock()
    slurm.states['n8'] = ('IDLE+DRAIN', 'bad DIMM in slot 3 [admin@2026-12-04T10:00:00]')
    port.slow['n8'] = 0.7
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert 'n8' not in cycle.due and 'n11' not in cycle.due
    assert cycle.not_run['n8'].startswith("out of service (IDLE+DRAIN: drained (bad DIMM")
    assert cycle.not_run['n11'].startswith('never accepted: no run of it')
    assert slurm.acted == [] and slurm.states['n8'][1].startswith('bad DIMM')


def test_at_a_budget_nodes_are_taken_longest_unjudged_first_and_a_late_one_is_stale(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    cycles = []
    for _ in range(3):
        cycles.append(_watch(tmp_path, accepted, port, slurm, clock, budget=4).cycle())
        clock.now += 1800
    assert [c.due for c in cycles] == [ACCEPTED[:4], ACCEPTED[4:8], ACCEPTED[8:] +
                                       ACCEPTED[:3]]
    # Two hours on, at two nodes a cycle: the others, judged longer than the period ago,
    # are stale.
    clock.now += 3600
    late = _watch(tmp_path, accepted, port, slurm, clock, budget=2).cycle()
    assert late.due == ['n4', 'n5'] and sorted(late.stale, key=slurm_cluster.natural_key) \
        == ['n1', 'n2', 'n3', 'n6', 'n8', 'n9', 'n10']


def test_a_cycle_s_directory_verifies_as_an_acceptance_s_and_holds_its_record(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    directory = tmp_path / 'watch' / watch_record.CYCLES / cycle.name
    assert directories.verify(directory).problems == []
    record = json.loads((directory / watch_record.CYCLE_RECORD).read_text())
    n5 = next(d for d in record['drifts'] if d['node'] == 'n5')
    assert n5['verdict'] == 'DRIFT' and len(n5['runs']) == len(n5['accepted']) == 3
    assert record['nodes']['n5']['outcome'] == 'FAIL'
    assert record['actions'][0]['node'] == 'n5' and record['actions'][0]['run']
    (directory / watch_record.CYCLE_RECORD).write_text(json.dumps({**record, 'nodes': {}}))
    assert any(watch_record.CYCLE_RECORD in p for p in directories.verify(directory).problems)


def test_bad_input_is_one_message_and_nothing_is_drained(tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    with pytest.raises(watch_record.WatchError, match='a budget of 0 node'):
        _watch(tmp_path, accepted, port, slurm, clock, budget=0)
    contract, acceptance = accepted
    unwatched = tmp_path / 'unwatched.yaml'
    unwatched.write_text(yaml.safe_dump(json.loads(json.dumps({**CONTRACT, "entries": CONTRACT["entries"][1:]}))))
    with pytest.raises(watch_record.WatchError, match='no entry has a watch: clause'):
        _watch(tmp_path, (unwatched, acceptance), port, slurm, clock).cycle()
    others = tmp_path / 'others'
    others.mkdir()
    os.chown(others, 65534, 65534)
    with pytest.raises(watch_record.WatchError, match='belongs to another user'):
        watch.Watch('testbed', contract, acceptance, others, reframe=port, slurm=slurm,
                    clock=clock, act=True).cycle()
    verdicts = acceptance / 'verdicts.json'
    verdicts.write_text(verdicts.read_text().replace('"PASS"', '"FAIL"'))
    with pytest.raises(watch_record.WatchError, match='the accepted figures do not hold: '
                                               'verdicts.json'):
        _watch(tmp_path, accepted, port, slurm, clock).cycle()
    assert slurm.acted == []


def test_drift_needs_significance_and_the_least_effect():
    from hpcbench.acceptance import contract as contracts
    entry = contracts.from_data(CONTRACT, 'a test').entries[0]
    unit = entry.scope.unit('srun', 'n1')
    assert drift.judge_drift(entry, unit, [27, 27.1, 27.2], [28, 28.1, 28.2]).verdict == 'OK'
    assert drift.judge_drift(entry, unit, [20, 21, 22], [28, 28.1, 28.2]).verdict == 'DRIFT'
    assert drift.judge_drift(entry, unit, [20, 29, 22], [28, 28.1, 28.2]).verdict == 'OK'
    assert drift.judge_drift(entry, unit, [20], [28, 28.1, 28.2]).verdict == 'OK'
    assert drift.judge_drift(entry, unit, [20, 21], []).reason.startswith('never accepted')


def test_a_watch_on_an_entry_not_run_node_by_node_is_refused():
    from hpcbench.acceptance import contract as contracts
    pair = {**CONTRACT['entries'][0], 'scope': 'node_pair'}
    with pytest.raises(contracts.ContractError, match=r'entries\[hpl\]\.watch: a node_pair '
                                                      'entry is not measured on one node'):
        contracts.from_data({**CONTRACT, 'entries': [pair]}, 'a test')
    bad = {**CONTRACT['entries'][0], 'watch': {'period': '0h'}}
    with pytest.raises(contracts.ContractError, match='period'):
        contracts.from_data({**CONTRACT, 'entries': [bad]}, 'a test')


def test_due_leaves_busy_and_out_of_service_nodes_and_takes_idle_before_powered_down():
    nodes = [SeenNode('a', 'p', 'MIXED'), SeenNode('b', 'p', 'IDLE+POWERED_DOWN'),
             SeenNode('c', 'p', 'IDLE'), SeenNode('d', 'p', 'IDLE+DRAIN', 'x'),
             SeenNode('e', 'p', 'ALLOCATED')]
    assert watch_rules.due(nodes, {}, 3600, 10, 0) == ['c', 'b']


def test_a_repaired_node_is_re_tested_in_a_reservation_and_resumed_the_unrepaired_stays(
        tmp_path, accepted):
    """n5 and n6 drained at once (75 % slower); the site repairs n5 and marks both
    repaired (its own reason). The next cycle reserves both, resumes them, runs their
    watched entries inside the reservation, resumes n5 (as accepted again) and drains n6
    again with the new evidence before the reservation is deleted; then n5's re-test is its
    accepted runs and n6 is drained by the watch."""
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow.update({'n5': 0.75, 'n6': 0.75})
    first = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert sorted(a.node for a in first.actions if not a.held) == ['n5', 'n6']
    del port.slow['n5']
    for node in ('n5', 'n6'):
        slurm.states[node] = ('IDLE+DRAIN', 'hpcbench: repaired [admin@2027-01-15T09:00:00]')
    slurm.acted.clear()
    second = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert second.returned['n5'].startswith('resumed: n5: every watched entry met')
    assert second.returned['n6'].startswith('drained again: n6: FAIL: hpl contract')
    steps = [' '.join(argv[:3] + [a for a in argv[3:] if a.startswith(('State', 'Nodes'))])
             for argv in slurm.acted]
    assert steps == ['scontrol create reservation Nodes=n5,n6',
                     'scontrol update NodeName=n5 State=RESUME',
                     'scontrol update NodeName=n6 State=RESUME',
                     'scontrol update NodeName=n6 State=DRAIN',
                     f'scontrol delete ReservationName=hpcbench-watch-{second.name}-return']
    retest = port.ran.index(['n5', 'n6'])
    assert port.reservations[retest] == f'hpcbench-watch-{second.name}-return'
    assert slurm.reservations == {}
    assert slurm.states['n5'] == ('IDLE', '')
    assert slurm.states['n6'][1].startswith('hpcbench watch: still failing after its repair')
    assert 'n5' not in second.due and second.not_run['n6'].startswith('drained by the watch')
    memory = watch_record.Memory.load(tmp_path / 'watch')
    assert memory.nodes['n5'].baseline_cycle == f'{second.name}-return'
    assert not memory.nodes['n5'].drained and memory.nodes['n6'].drained
    returned = tmp_path / 'watch' / watch_record.CYCLES / f'{second.name}-return'
    assert directories.verify(returned).problems == []
    # Two hours on, n5 is judged against its re-test's runs, and passes.
    clock.now += 3600
    third = _watch(tmp_path, accepted, port, slurm, clock).cycle()
    assert 'n5' in third.due and third.outcomes['n5'].outcome == 'PASS'


def test_without_act_a_repaired_node_is_left_drained_and_said(tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    _cycles(tmp_path, accepted, port, slurm, clock, 1)
    slurm.states['n5'] = ('IDLE+DRAIN', 'hpcbench: repaired')
    slurm.acted.clear()
    cycle = _watch(tmp_path, accepted, port, slurm, clock, act=False).cycle()
    assert cycle.returned == {'n5': 'marked repaired: re-tested with --act'}
    assert slurm.acted == [] and slurm.states['n5'] == ('IDLE+DRAIN', 'hpcbench: repaired')
