"""The watch after the acceptance (hpcbench.acceptance.watch), cycle by cycle, given a fake
port to ReFrame that stores sessions of the real runs of the testbed's 32-node acceptance,
a node made slow by scaling its real runs' figures, and a fake controller that keeps each
node's state and reason and applies the drains it is given (tests/watch_fakes.py)."""
import json
import os
import re
import statistics

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
    """Still meeting the contract (about 31 GFLOP/s of 14.42 committed), n5 20 % slower
    than its own accepted runs (38.4 to 43.6 GFLOP/s) from the third cycle on drifts at
    once: its three slow runs below all nine of its accepted and steady ones (p = 1/220,
    under 0.05 over the nine nodes judged). After two failing cycles (its streak) it is
    drained, its reason the suite's; then it is not run, drained by the watch. n3, as slow,
    is not caught in these cycles: its own runs spread from 37.5 to 51.2 GFLOP/s, and its
    slow ones (30.0 to 41.0) still mix with them. No other node is ever drained."""
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    first, second = _cycles(tmp_path, accepted, port, slurm, clock, 2)
    assert first.due == second.due == ACCEPTED and not first.actions + second.actions
    assert first.not_run['n7'].startswith('never accepted: hpl FAIL in the acceptance: '
                                          'median 2.06 GFLOP/s of 3 runs')
    assert {o.outcome for c in (first, second) for o in c.outcomes.values()} == {'PASS'}
    port.slow.update({'n5': 0.2, 'n3': 0.2})
    cycles = _cycles(tmp_path, accepted, port, slurm, clock, 3)

    def drifts(node):
        return [c.drifts['hpl'][next(u for u in c.drifts['hpl'] if u.key == node)]
                for c in cycles if node in c.due]
    n5 = drifts('n5')
    assert [d.verdict for d in n5] == ['DRIFT', 'DRIFT'], n5
    assert [(len(d.runs), len(d.accepted)) for d in n5] == [(3, 9), (3, 9)]
    assert n5[0].effect == pytest.approx(0.2, abs=0.02)
    assert n5[0].p_value == pytest.approx(1 / 220) and 'p = 0.00455 <= 0.00556' in \
        n5[0].reason
    hpl = next(v for v in cycles[0].verdicts if v.entry.id == 'hpl')
    assert {u.unit.key: u.verdict for u in hpl.units}['n5'] == 'PASS'   # meets the contract
    assert not cycles[0].actions
    assert [(a.node, a.kind, a.held) for a in cycles[1].actions] == [('n5', 'drain', '')]
    assert slurm.states['n5'][1].startswith('hpcbench watch: HPCC-NODE hpl drift: node n5: '
                                            'median')
    assert cycles[2].not_run['n5'].startswith('drained by the watch: hpcbench watch:')
    assert [d.verdict for d in drifts('n3')] == ['OK', 'OK', 'OK']
    drained = [argv for argv in slurm.acted if 'State=DRAIN' in argv]
    assert [a[2] for a in drained] == ['NodeName=n5']
    memory = watch_record.Memory.load(tmp_path / 'watch')
    assert memory.nodes['n5'].drained and memory.nodes['n5'].streak == 2
    assert all(memory.nodes[n].streak == 0 for n in ACCEPTED if n not in ('n3', 'n5'))
    assert 'n7' not in memory.nodes


def test_a_node_70_percent_slower_misses_the_contract_and_is_drained_at_once(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    # Three runs beside three accepted ones: p = 0.05 at best, short of 0.05 over nine
    # nodes; the contract's clause, missed beyond its tolerance, acts at once.
    failing = cycle.outcomes['n5'].failing
    assert {(f.how, f.at_once) for f in failing} == {('contract', True)}
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
    assert n5['effect'] == pytest.approx(0.7, abs=0.01)
    assert len(n5['runs']) == len(n5['accepted']) == 3
    assert record['nodes']['n5']['outcome'] == 'FAIL'
    assert record['actions'][0]['node'] == 'n5' and record['actions'][0]['run']
    assert watch_record.verify(directory).problems == []
    # A drift written as other than its runs give: named, though re-signed.
    forged = json.loads(json.dumps(record))
    next(d for d in forged['drifts'] if d['node'] == 'n3')['verdict'] = 'DRIFT'
    (directory / watch_record.CYCLE_RECORD).write_text(json.dumps(forged))
    from hpcbench.acceptance import manifest
    manifest.write(directory)
    assert watch_record.verify(directory).problems == [
        'cycle.json: hpl node n3: DRIFT as written, OK judged again from its runs']
    # One unit's runs said to be scaled by another factor than its entry's: named.
    rescaled = json.loads(json.dumps(record))
    n3 = next(d for d in rescaled['drifts'] if d['node'] == 'n3' and d['entry'] == 'hpl')
    n3['scale'] = 1.25
    (directory / watch_record.CYCLE_RECORD).write_text(json.dumps(rescaled))
    manifest.write(directory)
    problems = watch_record.verify(directory).problems
    assert 'cycle.json: hpl: its units\' runs were scaled by 2 different factors, not one' \
        in problems
    assert 'cycle.json: hpl node n3: its runs are not its measured runs x 1.25' in problems
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


def test_a_step_is_drift_though_the_cycle_before_was_noisy_and_worse():
    """The testbed's n2 (2026-12-04): accepted at 51.4, 70.8, 69.3 GFLOP/s; a healthy cycle
    of 53.6, 51.6, 66.2 (23 % worse by its median, not significantly: kept as a worse
    cycle); then a quarter of one CPU: 1.6, 1.7, 3.4. Pooled with the cycle before, the
    step is not significant (p = 0.083); alone it is (p = 0.05, 97 % worse): drift."""
    from hpcbench.acceptance import contract as contracts
    entry = contracts.from_data(CONTRACT, 'a test').entries[0]
    unit = entry.scope.unit('srun', 'n2')
    accepted, noisy, step = [51.4, 70.8, 69.3], [53.6, 51.6, 66.2], [1.6, 1.7, 3.4]
    assert drift.judge_drift(entry, unit, *drift.pooled(step, accepted, [], [noisy])) \
        .verdict == 'OK'
    found = drift.judge_cycle(entry, unit, step, accepted, [], [noisy])
    assert found.verdict == 'DRIFT' and found.runs == tuple(step)
    # A smaller shift over cycles: each cycle alone short of significance, pooled not.
    slow = [[40.1, 45.0, 48.3], [41.0, 46.2, 60.0]]
    assert drift.judge_drift(entry, unit, *drift.pooled(slow[1], accepted, [], [])) \
        .verdict == 'OK'
    assert drift.judge_cycle(entry, unit, slow[1], accepted, [], [slow[0]]).verdict == 'DRIFT'


def test_a_noisy_healthy_cycle_joins_the_accepted_runs_a_slow_one_starts_a_row():
    """Real testbed runs (2026-12-05, var/perf-watch of perf/testbed_watch.py), HPL watched
    from 10 % worse as the testbed's contract watches it: healthy n5, accepted at 60.2,
    70.7, 67.8 GFLOP/s, gave 66.5, 63.7, 57.9 in a quiet cycle (its median 6.1 % worse, p
    = 0.2): steady, its runs pooled with the accepted ones from then on. n9, accepted at
    63.5, 68.3, 72.9, given 1.2 CPUs: 26.3, 13.1, 13.8 (p = 0.05): the start of a worse
    row, never accepted runs; a steady cycle after it ends the row. At 5 %, n5's quiet
    cycle is worse by the least effect and not significantly so: neither."""
    from hpcbench.acceptance import contract as contracts
    data = json.loads(json.dumps(CONTRACT))
    data['entries'][0]['watch']['min_effect'] = 0.1
    entry = contracts.from_data(data, 'a test').entries[0]
    steady, worse = drift.kept_after(entry, [66.5, 63.7, 57.9], [60.2, 70.7, 67.8], [], [])
    assert (steady, worse) == ([[66.5, 63.7, 57.9]], [])
    at_5 = contracts.from_data(CONTRACT, 'a test').entries[0]
    assert drift.kept_after(at_5, [66.5, 63.7, 57.9], [60.2, 70.7, 67.8], [], []) == ([], [])
    accepted, slow = [63.5, 68.3, 72.9], [26.3, 13.1, 13.8]
    steady, worse = drift.kept_after(entry, slow, accepted, [], [])
    assert (steady, worse) == ([], [slow])
    assert drift.kept_after(entry, [70.1, 66.0, 69.2], accepted, steady, worse) == \
        ([[70.1, 66.0, 69.2]], [])
    # Three slow cycles at most in a row: the oldest leaves it.
    rows = [[20.0 + k, 21.0 + k, 22.0 + k] for k in range(4)]
    for runs in rows:
        steady, worse = drift.kept_after(entry, runs, accepted, [], worse)
    assert worse == rows[-(drift.WORSE_CYCLES - 1):]


def test_the_first_slow_cycle_not_yet_significant_never_becomes_the_baseline():
    """n9 of the 32-node testbed's run of 2026-12-05 (HPL GFLOP/s, six runs a cycle, as
    cycle.json holds them scaled): accepted at 60.7, 62.1, 69.8 with two steady cycles;
    given 1.7 CPUs, its first cycle was 19 % worse at p = 0.103, not significantly: kept
    out of its baseline (joined, its 3.9 and 29.8 held every later cycle short of drift).
    Its next two cycles, pooled beside the baseline it had, drift (p = 0.00155 <= 0.05/31,
    its runs as cycle.json printed them, to 0.1; 0.0013 unrounded)."""
    from hpcbench.acceptance import contract as contracts
    data = json.loads(json.dumps(CONTRACT))
    data['entries'][0]['watch']['min_effect'] = 0.1
    entry = contracts.from_data(data, 'a test').entries[0]
    unit = entry.scope.unit('srun', 'n9')
    accepted = [60.7, 62.1, 69.8]
    steady = [[31.7, 67.7, 44.2, 68.6, 70.7, 59.2], [63.2, 57.5, 20.0, 67.2, 63.5, 64.2]]
    first = [3.9, 29.8, 63.6, 55.1, 47.4, 67.9]
    assert drift.kept_after(entry, first, accepted, steady, []) == (steady, [])
    second = [43.9, 42.1, 35.0, 44.6, 44.2, 38.0]
    steady, worse = drift.kept_after(entry, second, accepted, steady, [])
    assert worse == [second]
    third = [57.6, 54.6, 24.3, 45.9, 45.7, 53.4]
    found = drift.judge_cycle(entry, unit, third, accepted, steady, worse, 0.05 / 31)
    assert found.verdict == 'DRIFT' and found.p_value == pytest.approx(0.00155, abs=1e-5)


def test_a_watch_on_an_entry_not_run_node_by_node_is_refused():
    from hpcbench.acceptance import contract as contracts
    pair = {**CONTRACT['entries'][0], 'scope': 'node_pair'}
    with pytest.raises(contracts.ContractError, match=r'entries\[hpl\]\.watch: a node_pair '
                                                      'entry is not measured on one node'):
        contracts.from_data({**CONTRACT, 'entries': [pair]}, 'a test')
    bad = {**CONTRACT['entries'][0], 'watch': {'period': '0h'}}
    with pytest.raises(contracts.ContractError, match='period'):
        contracts.from_data({**CONTRACT, 'entries': [bad]}, 'a test')


def test_a_watch_naming_its_runs_takes_that_many_a_cycle(tmp_path, accepted):
    """`runs: 6`: each cycle runs the entry six times on each node (its run rules' repeats
    in the watched entries' contract), a re-test three times as many as its statistic's or
    the watch's; none is refused."""
    from hpcbench.acceptance import contract as contracts
    data = json.loads(json.dumps(CONTRACT))
    data['entries'][0]['watch']['runs'] = 6
    path = tmp_path / 'six.yaml'
    path.write_text(yaml.safe_dump(data))
    contract, text = watch_record.watched_contract(path, 'testbed')
    assert contract.entries[0].watch.runs == 6
    assert '6 run(s) a cycle' in contract.entries[0].watch.words()
    assert yaml.safe_load(text)['entries'][0]['run_rules'] == {'repeats': 6}
    assert yaml.safe_load(watch_record.retest_contract(text))['entries'][0]['run_rules'] == \
        {'repeats': 9}
    data['entries'][0]['watch']['runs'] = 0
    with pytest.raises(contracts.ContractError, match='runs'):
        contracts.from_data(data, 'a test')
    port = FakeReFrame()
    port_cycle = _watch(tmp_path, (path, accepted[1]), port, FakeSlurm(), Clock()).cycle()
    assert port.ran == [ACCEPTED] * 6
    assert all(len(d.runs) == 6 for d in port_cycle.drifts['hpl'].values())


def test_a_watched_fact_fails_its_node_at_once_and_never_drifts(tmp_path):
    """A fact watched beside HPL (no uncorrected memory error during a job): read around
    each cycle's jobs and judged against its expectation alone. n5's jobs read one error:
    n5 FAIL on the fact at once and drained; no drift is judged of a fact; the others pass.
    A fact cannot be watched alone (it is read around a watched figure's jobs), and its
    watch takes no runs or least effect (it is no sample)."""
    data = json.loads(json.dumps(CONTRACT))
    fact = {'id': 'memory-ue', 'fact': 'edac_uncorrected', 'scope': 'node',
            'partitions': ['srun'], 'expect': {'increase_at_most': 0},
            'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
            'fault': {'code': 'MEM-UE', 'action': 'replace the DIMM'},
            'watch': {'period': '1h', 'action': 'drain', 'streak': 2}}
    data['entries'].append(fact)
    contract, acceptance = accept(tmp_path, data)
    port, slurm = FakeReFrame(), FakeSlurm()
    port.facts['n5'] = {'edac_uncorrected_increase': 1.0}
    cycle = _watch(tmp_path, (contract, acceptance), port, slurm, Clock()).cycle()
    assert {(f.entry.id, f.how, f.at_once) for f in cycle.outcomes['n5'].failing} == {
        ('memory-ue', 'contract', True)}
    assert 'memory-ue' not in cycle.drifts and 'hpl' in cycle.drifts
    # n7, whose HPL failed the acceptance, is never accepted though its memory passed.
    assert 'n7' not in cycle.due and cycle.not_run['n7'].startswith('never accepted: hpl FAIL')
    assert {n for n, o in cycle.outcomes.items() if o.outcome == 'FAIL'} == {'n5'}
    assert {n for n, o in cycle.outcomes.items() if o.outcome == 'PASS'} == \
        set(ACCEPTED) - {'n5'}
    assert [(a.node, a.kind, a.held) for a in cycle.actions] == [('n5', 'drain', '')]
    assert 'MEM-UE' in slurm.states['n5'][1]
    alone = {**data, 'entries': [{**data['entries'][1]}, fact]}
    path = tmp_path / 'alone.yaml'
    path.write_text(yaml.safe_dump(alone))
    with pytest.raises(watch_record.WatchError, match='only facts are watched'):
        watch_record.watched_contract(path, 'testbed')
    from hpcbench.acceptance import contract as contracts
    with pytest.raises(contracts.ContractError, match='runs'):
        contracts.from_data({**data, 'entries': [data['entries'][0], {
            **fact, 'watch': {'period': '1h', 'runs': 6}}]}, 'a test')


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
    accepted runs and n6 is drained by the watch. ReFrame lists a reserved node only with
    its reservation named (as its Slurm backend does): the re-test's listing names it, or
    the re-test ran one job on one of them (the testbed's n9 and n17, 2026-12-05)."""
    slurm, clock = FakeSlurm(), Clock()
    port = FakeReFrame(slurm=slurm)
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
    # Three healthy idle nodes beside them, in the reservation too: the re-test's peers.
    assert steps == ['scontrol create reservation Nodes=n5,n6,n1,n2,n3',
                     'scontrol update NodeName=n5 State=RESUME',
                     'scontrol update NodeName=n6 State=RESUME',
                     'scontrol update NodeName=n6 State=DRAIN',
                     f'scontrol delete ReservationName=hpcbench-watch-{second.name}-return']
    retest = port.ran.index(['n1', 'n2', 'n3', 'n5', 'n6'])
    assert port.reservations[retest] == f'hpcbench-watch-{second.name}-return'
    assert second.returned.keys() == {'n5', 'n6'}
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


def test_a_re_test_that_measured_nothing_keeps_the_node_marked_repaired_for_the_next_cycle(
        tmp_path, accepted):
    """n5, drained 75 % slower, repaired and marked so; its re-test's jobs never run (the
    testbed's n17, 2026-12-05: its re-test listed no reserved node). No evidence either way:
    drained again still marked repaired, never "still failing"; the next cycle re-tests it,
    and it passes and is resumed."""
    slurm, clock = FakeSlurm(), Clock()
    port = FakeReFrame(slurm=slurm)
    port.slow['n5'] = 0.75
    _cycles(tmp_path, accepted, port, slurm, clock, 1)
    del port.slow['n5']
    slurm.states['n5'] = ('IDLE+DRAIN', 'hpcbench: repaired [admin@2027-01-15T09:00:00]')
    port.unrun.add('n5')
    second = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert second.returned['n5'].startswith('not re-tested: n5: NOT_RUN')
    state, reason = slurm.states['n5']
    assert state == 'IDLE+DRAIN' and reason.startswith('hpcbench: repaired (kept by hpcbench '
                                                        'watch: its re-test did not run')
    port.unrun.clear()
    third = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert third.returned['n5'].startswith('resumed: n5: every watched entry met')
    assert slurm.states['n5'] == ('IDLE', '')


def test_a_re_test_alone_in_its_reservation_is_scaled_as_the_last_cycle_and_so_its_baseline(
        tmp_path, accepted):
    """The host runs every node 20 % slower than at the acceptance (a common cause: the
    cycles scale it away), n5 75 % slower: drained. Repaired, n5 is re-tested alone (every
    other node runs a user's job), too few to be its own peers: its runs are scaled as the
    last cycle's were, so it is resumed (as measured, 20 % below its accepted runs, it would
    drift), and the runs it is judged against from then on are its re-test's as judged,
    scaled, not as measured."""
    slurm, clock = FakeSlurm(), Clock()
    port = FakeReFrame(slurm=slurm)
    port.slow.update({n: 0.2 for n in port.nodes})
    port.slow['n5'] = 0.75
    first = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert [a.node for a in first.actions if not a.held] == ['n5']
    scale = next(iter(first.drifts['hpl'].values())).scale
    assert scale == pytest.approx(1.25, rel=0.05)
    port.slow['n5'] = 0.2
    slurm.states['n5'] = ('IDLE+DRAIN', 'hpcbench: repaired')
    busy = {n: slurm.states[n] for n in NODES if n != 'n5'}
    slurm.states.update({n: ('ALLOCATED', '') for n in busy})
    second = _watch(tmp_path, accepted, port, slurm, clock).cycle()
    clock.now += 3600
    slurm.states.update(busy)
    assert second.returned['n5'].startswith('resumed'), second.returned
    returned = json.loads((tmp_path / 'watch' / watch_record.CYCLES / f'{second.name}-return'
                           / watch_record.CYCLE_RECORD).read_text())
    retested = next(d for d in returned['drifts'] if d['node'] == 'n5')
    assert retested['scale'] == pytest.approx(scale)
    assert f"as cycle {first.name}'s: too few units" in retested['reason']
    third = _watch(tmp_path, accepted, port, slurm, clock).cycle()
    n5 = next(d for u, d in third.drifts['hpl'].items() if u.node == 'n5')
    assert n5.accepted_median == pytest.approx(statistics.median(retested['runs']), rel=0.01)
    assert n5.verdict == 'OK'


def test_a_re_test_is_scaled_by_the_healthy_nodes_run_beside_it_in_its_reservation(
        tmp_path, accepted):
    """n6 drained 75 % slower and repaired; while it is re-tested the host runs every node
    30 % slower than in every cycle before (the testbed's re-test of n17, 2026-12-05: its
    first six runs 15 % slow, and it stayed drained). Scaled as the last cycle was, it
    would drift; three healthy idle nodes run beside it in its reservation, as slow, and
    its runs are scaled by theirs: resumed. The peers are judged for nothing and the record
    names them. A node 20 % slower than its peers after its "repair" (n5) still drifts and
    stays drained."""
    slurm, clock = FakeSlurm(), Clock()
    port = FakeReFrame(slurm=slurm)
    port.slow.update({'n5': 0.75, 'n6': 0.75})
    _cycles(tmp_path, accepted, port, slurm, clock, 1)
    port.slow.update({n: 0.3 for n in port.nodes})
    port.slow['n5'] = 0.44
    for node in ('n5', 'n6'):
        slurm.states[node] = ('IDLE+DRAIN', 'hpcbench: repaired')
    cycle = _watch(tmp_path, accepted, port, slurm, clock)
    cycle.budget = 5
    second = cycle.cycle()
    assert second.returned['n6'].startswith('resumed'), second.returned
    assert second.returned['n5'].startswith('drained again: n5: FAIL: hpl drift'), \
        second.returned
    record = json.loads((tmp_path / 'watch' / watch_record.CYCLES / f'{second.name}-return'
                         / watch_record.CYCLE_RECORD).read_text())
    assert record['due'] == ['n5', 'n6'] and record['peers'] == ['n1', 'n2', 'n3']
    assert sorted(record['nodes']) == ['n5', 'n6']
    n6 = next(d for d in record['drifts'] if d['node'] == 'n6')
    assert n6['scale'] == pytest.approx(1 / 0.7, rel=0.05)
    assert 'its peers n1, n2, n3 beside it in its reservation ran at' in n6['reason']
    # Judged for nothing: no drift of theirs (a node's runs join its memory only there).
    assert {d['node'] for d in record['drifts']} == {'n5', 'n6'}


def test_without_act_a_repaired_node_is_left_drained_and_said(tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.7
    _cycles(tmp_path, accepted, port, slurm, clock, 1)
    slurm.states['n5'] = ('IDLE+DRAIN', 'hpcbench: repaired')
    slurm.acted.clear()
    cycle = _watch(tmp_path, accepted, port, slurm, clock, act=False).cycle()
    assert cycle.returned == {'n5': 'marked repaired: re-tested with --act'}
    assert slurm.acted == [] and slurm.states['n5'] == ('IDLE+DRAIN', 'hpcbench: repaired')


def test_a_worsening_its_peers_share_is_a_common_cause_scaled_away_not_a_node_s_drift():
    """The 4-node testbed's cycle in which n2 got a quarter of one CPU (2026-12-04, HPL
    GFLOP/s, rounded as cycle.json printed them): n1 drifted alone (16.7 % worse, p =
    0.048), but its peers were 15.9 % worse (n4) and 1.5 % better (n3) too; n2, 91 % worse,
    is beyond them."""
    from hpcbench.acceptance import contract as contracts
    entry = contracts.from_data(CONTRACT, 'a test').entries[0]
    cycle = {'n1': ([52.7, 55.9, 57.1], [67.1, 69.1, 62.4, 53.5, 67.1, 69.6]),
             'n2': ([6.1, 5.7, 4.9], [66.7, 63.8, 64.3, 63.4, 69.7, 65.9]),
             'n3': ([54.6, 71.0, 67.3], [65.7, 66.9, 62.6, 68.4, 65.3, 69.8]),
             'n4': ([56.5, 56.6, 69.5], [66.7, 61.2, 64.0, 68.0, 71.5, 69.0])}
    found = {entry.scope.unit('srun', n): drift.judge_drift(entry, entry.scope.unit('srun', n),
                                                             *runs)
             for n, runs in cycle.items()}
    assert {u.key: d.verdict for u, d in found.items()} == {
        'n1': 'DRIFT', 'n2': 'DRIFT', 'n3': 'OK', 'n4': 'OK'}
    # Scaled beside its peers (their accepted medians' median, 66.7, over their medians'
    # median now, 56.25): n1 is its accepted self, n2 drifted.
    scale = drift.peer_scale({entry.scope.unit('srun', n): r for n, (r, _) in cycle.items()},
                             {entry.scope.unit('srun', n): a for n, (_, a) in cycle.items()})
    assert scale == pytest.approx(66.7 / 56.25)
    judged = {n: drift.judge_drift(entry, entry.scope.unit('srun', n),
                                   drift.scaled(runs, scale), accepted)
              for n, (runs, accepted) in cycle.items()}
    assert {n: d.verdict for n, d in judged.items()} == {
        'n1': 'OK', 'n2': 'DRIFT', 'n3': 'OK', 'n4': 'OK'}
    # Two peers are too few to tell a common cause: the runs stand as measured.
    two = {entry.scope.unit('srun', n): cycle[n][0] for n in ('n1', 'n2')}
    assert drift.peer_scale(two, {u: cycle[u.key][1] for u in two}) is None


def test_a_cycle_s_junit_has_a_case_per_node_failures_with_evidence_and_skips_with_why(
        tmp_path, accepted):
    import junitparser
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.75
    slurm.states['n8'] = ('IDLE+DRAIN', 'bad DIMM')
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    path = tmp_path / 'watch' / watch_record.CYCLES / cycle.name / watch_record.WATCH_JUNIT
    suites = junitparser.JUnitXml.fromfile(str(path))
    cases = {case.name: case for suite in suites for case in suite}
    assert sorted(cases, key=slurm_cluster.natural_key) == NODES
    failure, = cases['n5'].result
    assert isinstance(failure, junitparser.Failure) and failure.type == 'HPCC-NODE'
    assert failure.message.startswith('hpl contract: node n5: FAIL: median')
    assert 'action: drain done' in cases['n5'].system_out
    skipped, = cases['n8'].result
    assert isinstance(skipped, junitparser.Skipped) and 'bad DIMM' in skipped.message
    assert cases['n7'].result[0].message.startswith('never accepted')
    assert cases['n1'].is_passed


def test_a_node_slurm_no_longer_shows_is_said_and_nothing_is_done_to_it(tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    _cycles(tmp_path, accepted, port, slurm, clock, 1)
    del slurm.states['n10']          # removed from slurm.conf, or renamed
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert cycle.not_run['n10'] == ('Slurm no longer shows it (removed or renamed): not '
                                    'judged, nothing done to it')
    assert 'n10' not in cycle.due and slurm.acted == []


def test_a_new_acceptance_is_judged_against_from_then_on_its_cycles_pooled_anew(
        tmp_path, accepted):
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    _cycles(tmp_path, accepted, port, slurm, clock, 2)
    assert watch_record.Memory.load(tmp_path / 'watch').nodes['n1'].steady
    (tmp_path / 'again').mkdir()
    contract, acceptance = accept(tmp_path / 'again')      # the nodes accepted again
    said = []
    cycle = watch.Watch('testbed', contract, acceptance, tmp_path / 'watch', reframe=port,
                        slurm=slurm, clock=clock, say=said.append, act=True,
                        max_drain=0.25).cycle()
    assert any('is another than the one judged against so far' in line for line in said)
    # Beside the new acceptance's three runs alone: the cycles before were beside the old.
    assert [len(d.accepted) for u, d in cycle.drifts['hpl'].items() if u.key == 'n1'] == [3]


def test_a_node_the_site_drains_while_the_cycle_runs_is_left_as_the_site_left_it(
        tmp_path, accepted):
    """The drain is decided on the controller's word after the runs, not the snapshot of
    the cycle's start."""
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    port.slow['n5'] = 0.75
    run = port.run

    def site_drains_n5(partition, options):
        slurm.states['n5'] = ('IDLE+DRAIN', 'site: fan failure')
        return run(partition, options)
    port.run = site_drains_n5
    cycle = _cycles(tmp_path, accepted, port, slurm, clock, 1)[0]
    assert cycle.outcomes['n5'].outcome == 'FAIL'
    assert [(a.node, a.held[:41]) for a in cycle.actions] == [
        ('n5', 'not in service (IDLE+DRAIN: drained (site')]
    assert slurm.acted == [] and slurm.states['n5'][1] == 'site: fan failure'
