"""An acceptance stopped inside its second round of node pairs, run again
(hpcbench.acceptance.runner.accept): it runs what is left of that round and nothing it has.
The runner as it is, with ReFrame's runs stood in for: each batch stores a session of its
pair's PingPong latencies (n2 slow: 40 us beside it, 10 us elsewhere), as ReFrame stores a
test case; the second round's second run is stopped before it stores anything. A round of
pairs is one ReFrame run, each pair its own test (hpcbench.rfm.plugins.PinnedNodes)."""
import uuid

import pytest
import yaml

from hpcbench.acceptance import plan, runner

CONTRACT = {'system': 'testbed', 'entries': [{
    'id': 'pingpong-latency', 'check': 'ImbPairCheck', 'figure': 'latency',
    'parameters': {'benchmark': 'PingPong'}, 'scope': 'node_pair', 'partitions': ['srun'],
    'environ': 'intelmpi',
    'committed': {'value': 18.78, 'unit': 'us', 'direction': 'at_most'},
    'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
    'fault': {'code': 'PAIR', 'action': 'rerun the pair'}}]}


def _session(pairs, repeats):
    """A stored session of `repeats` PingPong runs between each pair of `pairs`."""
    name = 'ImbPairCheck %benchmark=PingPong'
    cases = [{'name': name, 'benchmark': 'PingPong', 'system': 'testbed', 'partition': 'srun',
              'display_name': f'{name} %.pinned_nodes={",".join(nodes)} %.repeat_no={r}',
              'environ': 'intelmpi', 'result': 'pass', 'fixture': False,
              'job_nodelist': list(nodes),
              'perfvalues': {'testbed:srun:latency': [(40.0 if 'n2' in nodes else 10.0) + r,
                                                      0, None, None, 'us', 'pass']}}
             for nodes in pairs for r in range(repeats)]
    return {'session_info': {'uuid': str(uuid.uuid4())}, 'runs': [{'testcases': cases}]}


@pytest.fixture
def stood_in(monkeypatch):
    """The runner on four nodes of the testbed's `srun`, each batch's ReFrame run a stored
    session (`ran`: the batches' nodes, in order; `stop_at`: the run that is stopped)."""
    stored, ran, stop_at = {}, [], []
    monkeypatch.setattr(runner, 'system_partitions', lambda system: [
        plan.Partition('srun', (), 0, True)])
    monkeypatch.setattr(runner, 'slurm_nodes', lambda system, partition, check: (
        'n1', 'n2', 'n3', 'n4'))
    monkeypatch.setattr(runner, 'check_kinds', lambda system, checks: None)
    monkeypatch.setattr(runner, '_out_of_service', lambda system, partitions: {})
    monkeypatch.setattr(runner.results_db, 'site_config', lambda system: None)

    def sessions_runs(config, uuids):
        records = {u: stored[u] for u in uuids}
        runs = [c for r in records.values() for c in runner.measured.measured_runs(r)]
        return runs, [], records
    monkeypatch.setattr(runner, '_sessions_runs', sessions_runs)

    def run_batch(system, batch, directory, state, config, dry_run, say, mode):
        if len(ran) + 1 in stop_at:
            raise KeyboardInterrupt      # stopped before ReFrame stored the session
        ran.append(batch.pairs)
        data = _session(batch.pairs, batch.runs)
        stored[data['session_info']['uuid']] = data
        state.sessions.append(data['session_info']['uuid'])
        state.save(directory)
    monkeypatch.setattr(runner, '_run_batch', run_batch)
    return ran, stop_at


def _stopped(tmp_path, stood_in, at):
    """(the batches run, the contract, the directory) of an acceptance stopped before its
    `at`-th ReFrame run stored anything, one pair a run."""
    ran, stop_at = stood_in
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    directory = tmp_path / 'acceptance'
    stop_at.append(at)
    with pytest.raises(KeyboardInterrupt):
        runner.accept('testbed', contract, directory, say=lambda text: None, batch_nodes=2)
    return ran, contract, directory


def test_stopped_in_the_second_round_it_runs_the_rest_of_it_and_nothing_it_has(
        tmp_path, stood_in):
    # One pair a ReFrame run (batches of two nodes), each pair once a pass, three passes;
    # stopped in the second round's second pass, its first pair just run.
    ran, contract, directory = _stopped(tmp_path, stood_in, 10)
    first, second = [(('n1', 'n2'),), (('n3', 'n4'),)], [(('n1', 'n3'),), (('n2', 'n4'),)]
    assert ran == first * 3 + second + [(('n1', 'n3'),)]
    state = runner.State.load(directory)
    assert state.second_pairs == {'srun': [['n1', 'n3'], ['n2', 'n4']]}
    stood_in[1].clear()
    _, again, records = runner.accept('testbed', contract, directory, say=lambda t: None,
                                      batch_nodes=2)
    # What each pair lacks: n1-n3 one run, n2-n4 two, a pass apart.
    assert ran[9:] == [(('n1', 'n3'),), (('n2', 'n4'),), (('n2', 'n4'),)]
    verdicts = runner.judge(runner.contracts.load(contract, 'testbed'), again, records)
    assert runner.pair_blame(verdicts, again) == {
        'n2': 'PAIR (node pairs: failed again beside a node that passed)'}



def test_a_round_of_node_pairs_is_one_reframe_run_each_pair_its_own_test(tmp_path, stood_in):
    ran, _ = stood_in
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    _, state, records = runner.accept('testbed', contract, tmp_path / 'acceptance',
                                      say=lambda text: None)
    # The disjoint pairs in one run, each pair once, three passes; then n2's pair's nodes
    # beside nodes that passed, so. A pair's runs are a pass apart, never back to back.
    assert ran == [(('n1', 'n2'), ('n3', 'n4'))] * 3 + [(('n1', 'n3'), ('n2', 'n4'))] * 3
    assert len(state.sessions) == 6
    verdicts = runner.judge(runner.contracts.load(contract, 'testbed'), state, records)
    assert runner.pair_blame(verdicts, state) == {
        'n2': 'PAIR (node pairs: failed again beside a node that passed)'}


def test_a_state_cut_mid_string_is_one_line_and_a_state_is_written_whole(tmp_path, stood_in):
    """Issue 70, item 6: resuming after a state.json cut mid-string (it was written in
    place: a kill or a full disk left one) was a traceback. It is one line; and a state is
    written beside the old one and renamed over it: a write that fails for a full disk
    (`ulimit -f`) leaves the old state whole, and no file beside it."""
    _, contract, directory = _stopped(tmp_path, stood_in, 2)
    state = directory / runner.STATE
    whole = state.read_text()
    # A save that cannot finish: the file-size limit below the state's size.
    import subprocess
    import sys
    done = subprocess.run([sys.executable, '-c', (
        'import resource, signal, sys\n'
        'signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n'
        'resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n'
        'from hpcbench.acceptance import runner\n'
        f'state = runner.State.load({str(directory)!r})\n'
        'state.sessions.append("0" * 8 + "-0000-0000-0000-" + "0" * 12)\n'
        'try:\n    state.save(sys.argv[1])\nexcept OSError as err:\n'
        '    print(err.strerror, err.filename)\n'), str(directory)],
        capture_output=True, text=True, timeout=60)
    assert done.stdout == f'File too large {state}\n', done.stdout + done.stderr
    assert state.read_text() == whole and sorted(p.name for p in directory.iterdir()) == [
        'contract.yaml', runner.STATE]
    state.write_text(whole[:len(whole) // 2])
    with pytest.raises(runner.AcceptanceError, match=rf'^{state} is no acceptance\'s state '
                                                     r'\(ValueError: .*not JSON .*\): give '
                                                     r'another --output$'):
        runner.accept('testbed', contract, directory, say=lambda text: None, batch_nodes=2)
