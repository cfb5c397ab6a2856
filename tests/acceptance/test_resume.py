"""An acceptance stopped inside its second round of node pairs, run again
(hpcbench.acceptance.use_case.Acceptance): it runs what is left of that round and nothing
it has. The acceptance as it is, given a fake port to ReFrame: each run stores a session of
its pairs' PingPong latencies (n2 slow: 40 us beside it, 10 us elsewhere), as ReFrame
stores a test case; the second round's second run is stopped before it stores anything. A
round of pairs is one ReFrame run, each pair its own test (hpcbench.rfm.plugins.
PinnedNodes)."""
import json
import uuid
from pathlib import Path

import pytest
import yaml

from hpcbench.acceptance import directory as directories
from hpcbench.acceptance import plan, use_case
from hpcbench.acceptance.state import DRAIN_LIST, STATE, AcceptanceError, State
from hpcbench.rfm import reframe_port

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


class FakeReFrame:
    """The port to ReFrame (hpcbench.rfm.reframe_port.ReFrame's methods) on four nodes of
    the testbed's `srun`: each run stores a session of its pairs' PingPong runs, as ReFrame
    stores a test case (`ran`: the pairs of each run, in order; `stop_at`: the runs that
    are stopped before they store anything)."""

    def __init__(self):
        self.stored, self.ran, self.stop_at, self.options = {}, [], [], []

    def partitions(self):
        return [reframe_port.SeenPartition('srun', 'slurm')]

    def check_kinds(self, checks):
        return {}

    def distributed_nodes(self, partition, check, job_options=()):
        return ('n1', 'n2', 'n3', 'n4')

    def run(self, partition, options):
        if len(self.ran) + 1 in self.stop_at:
            raise KeyboardInterrupt      # stopped before ReFrame stored the session
        self.options.append((partition, options))
        listed = options[options.index('-P') + 1].split('=', 1)[1]
        pairs = tuple(tuple(p.split(',')) for p in listed.split(plan.PAIRS_DELIMITER))
        self.ran.append(pairs)
        data = _session(pairs, int(options[options.index('--repeat') + 1]))
        self.stored[data['session_info']['uuid']] = data
        report = Path(options[options.index('--report-file') + 1])
        report.write_text(json.dumps({'session_info': data['session_info']}))
        return reframe_port.Finished(0, '[  PASSED  ] Ran 1/1 test case(s)', '')

    def stored_run(self, report):
        return json.loads(Path(report).read_text())['session_info']['uuid']

    def stored_session(self, uuid):
        return self.stored[uuid]


class InService:
    """The controller's word (NodeStates' method): every node can run."""

    def out_of_service(self, nodes):
        return {}


def _acceptance(port, contract, directory, batch_nodes=None):
    return use_case.Acceptance('testbed', contract, directory, reframe=port,
                               node_states=InService(), batch_nodes=batch_nodes,
                               say=lambda text: None)


@pytest.fixture
def port():
    return FakeReFrame()


def _stopped(tmp_path, port, at):
    """(the contract, the directory) of an acceptance stopped before its `at`-th ReFrame
    run stored anything, one pair a run."""
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    directory = tmp_path / 'acceptance'
    port.stop_at.append(at)
    with pytest.raises(KeyboardInterrupt):
        _acceptance(port, contract, directory, batch_nodes=2).run()
    return contract, directory


def test_stopped_in_the_second_round_it_runs_the_rest_of_it_and_nothing_it_has(
        tmp_path, port):
    # One pair a ReFrame run (batches of two nodes), each pair once a pass, three passes;
    # stopped in the second round's second pass, its first pair just run.
    contract, directory = _stopped(tmp_path, port, 10)
    first, second = [(('n1', 'n2'),), (('n3', 'n4'),)], [(('n1', 'n3'),), (('n2', 'n4'),)]
    assert port.ran == first * 3 + second + [(('n1', 'n3'),)]
    state = State.load(directory)
    assert state.second_pairs == {'srun': [['n1', 'n3'], ['n2', 'n4']]}
    port.stop_at.clear()
    again = _acceptance(port, contract, directory, batch_nodes=2).run()
    # What each pair lacks: n1-n3 one run, n2-n4 two, a pass apart.
    assert port.ran[9:] == [(('n1', 'n3'),), (('n2', 'n4'),), (('n2', 'n4'),)]
    assert again.assess().blame == {
        'n2': 'PAIR (node pairs: failed again beside a node that passed)'}



def test_a_round_of_node_pairs_is_one_reframe_run_each_pair_its_own_test(tmp_path, port):
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    directory = tmp_path / 'acceptance'
    acceptance = _acceptance(port, contract, directory).run()
    # The disjoint pairs in one run, each pair once, three passes; then n2's pair's nodes
    # beside nodes that passed, so. A pair's runs are a pass apart, never back to back.
    assert port.ran == [(('n1', 'n2'), ('n3', 'n4'))] * 3 + [(('n1', 'n3'), ('n2', 'n4'))] * 3
    assert len(acceptance.state.sessions) == 6
    # Each run on the contract's partition and environment, one run of each test.
    assert {partition for partition, _ in port.options} == {'srun'}
    assert all(o[o.index('-p') + 1] == '^intelmpi$' and o[o.index('--repeat') + 1] == '1'
               for _, o in port.options)
    # Judged, blamed and written once, all of it: the blame in the drain list, the
    # directory verified as it is.
    assessed = acceptance.finish()
    assert assessed.blame == {'n2': 'PAIR (node pairs: failed again beside a node that passed)'}
    assert assessed.verdict == 'FAIL'
    assert 'n2' in (directory / DRAIN_LIST).read_text()
    assert directories.verify(directory).problems == []


def test_a_state_cut_mid_string_is_one_line_and_a_state_is_written_whole(tmp_path, port):
    """Issue 70, item 6: resuming after a state.json cut mid-string (it was written in
    place: a kill or a full disk left one) was a traceback. It is one line; and a state is
    written beside the old one and renamed over it: a write that fails for a full disk
    (`ulimit -f`) leaves the old state whole, and no file beside it."""
    contract, directory = _stopped(tmp_path, port, 2)
    state = directory / STATE
    whole = state.read_text()
    # A save that cannot finish: the file-size limit below the state's size.
    import subprocess
    import sys
    done = subprocess.run([sys.executable, '-c', (
        'import resource, signal, sys\n'
        'signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n'
        'resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n'
        'from hpcbench.acceptance.state import State\n'
        f'state = State.load({str(directory)!r})\n'
        'state.sessions.append("0" * 8 + "-0000-0000-0000-" + "0" * 12)\n'
        'try:\n    state.save(sys.argv[1])\nexcept OSError as err:\n'
        '    print(err.strerror, err.filename)\n'), str(directory)],
        capture_output=True, text=True, timeout=60)
    assert done.stdout == f'File too large {state}\n', done.stdout + done.stderr
    assert state.read_text() == whole and sorted(p.name for p in directory.iterdir()) == [
        'contract.yaml', 'reports', STATE]
    state.write_text(whole[:len(whole) // 2])
    with pytest.raises(AcceptanceError, match=rf'^{state} is no acceptance\'s state '
                                              r'\(ValueError: .*not JSON .*\): give '
                                              r'another --output$'):
        _acceptance(port, contract, directory, batch_nodes=2).run()


def test_a_reframe_that_does_not_answer_stops_the_acceptance_before_it_writes(tmp_path, port):
    """ReFrame that shows no partitions (a site config it cannot read): one sentence
    (reframe_port.ReFrameError), and no directory is made."""
    def broken():
        raise reframe_port.ReFrameError('ReFrame does not show the partitions of testbed '
                                        '(exit 1): a site config it cannot read')
    port.partitions = broken
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    with pytest.raises(reframe_port.ReFrameError, match='does not show the partitions'):
        _acceptance(port, contract, tmp_path / 'acceptance').run()
    assert not (tmp_path / 'acceptance').exists() and port.ran == []
