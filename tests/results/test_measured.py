"""The one reader of ReFrame's records of test cases (hpcbench.results.measured), on real
stored sessions."""
import json

import pytest

from conftest import FIXTURES
from hpcbench.results import case_facts, measured


def test_a_node_list_stored_as_one_abbreviated_string_reads_as_its_nodes():
    """ReFrame stores a job's node list as a list (the testbed's screen session) or, in
    other sessions, as one string as it reports it: this machine's `vm`, read as characters,
    was the two nodes `v` and `m` in the report's provenance and in screen-nodes."""
    stored = json.loads((FIXTURES / 'report' / 'session-new.json').read_text())
    assert all(isinstance(tc['job_nodelist'], str) for run in stored['runs']
               for tc in run['testcases'])
    assert {case.nodes for case in measured.measured_runs(stored)} == {('vm',)}
    screen = json.loads((FIXTURES / 'report' / 'screen-session.json').read_text())
    assert sorted(case.nodes for case in measured.measured_runs(screen)) == [
        ('g1',), ('g2',), ('n1',), ('n2',), ('n3',)]
    # An abbreviated list of several nodes, as ReFrame abbreviates one (nid[001-003]).
    assert measured._nodes({'job_nodelist': 'n[1-3],g1'}) == ('g1', 'n1', 'n2', 'n3')


def test_a_record_of_one_node_s_facts_written_before_reads_as_that_node_s():
    old = {'facts_node': 'n3', 'node_facts': {'online_cpus': 2}}
    assert case_facts.node_facts(old) == {'n3': {'online_cpus': 2.0}}
    assert case_facts.node_facts({'node_facts': {'n1': {'gpus': 8}, 'n2': {}}}) == {
        'n1': {'gpus': 8.0}, 'n2': {}}
    with pytest.raises(RuntimeError, match='no node\'s name'):
        case_facts.node_facts({'node_facts': {'n1;rm': {}}})
