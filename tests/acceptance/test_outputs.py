"""What an acceptance leaves for a site's tools (hpcbench.acceptance.outputs, manifest): the
verdicts of the testbed's screen with a node drained and one made slow, as JSON valid
against its schema, as JUnit XML, as drain lines; the manifest signed with a real SSH key,
verified, and refused after one byte of a result or of the contract changes."""
import json
import subprocess
import xml.etree.ElementTree as ET

import jsonschema

from hpcbench.acceptance import judgement, manifest, outputs
from test_judgement import SCREEN, _entry, _screen


def _verdicts():
    entry = _entry('HplNodeScreen', 'gflops', 'node', 70.0, 'GFLOP/s', median_of=1,
                   partitions=['batch'], id='hpl-node')
    expected = [judgement.Unit('node', 'batch', n) for n in ('n1', 'n2', 'n3', 'n4')]
    return [judgement.judge_entry(entry, _screen('n2'), expected,
                                  not_run={expected[3]: 'IDLE+DRAIN: drained (bad DIMM)'})]


def test_the_verdicts_as_json_valid_against_its_schema():
    document = outputs.as_json('testbed', _verdicts())
    jsonschema.validate(json.loads(json.dumps(document)), outputs.JSON_SCHEMA)
    (entry,) = document['entries']
    assert (document['verdict'], entry['verdict'], entry['counts']) == (
        'FAIL', 'FAIL', {'PASS': 2, 'WARN': 1, 'FAIL': 0, 'INVALID': 0, 'NOT_RUN': 1})
    slow, = [u for u in entry['units'] if u['slow']]
    assert (slow['node'], slow['verdict']) == ('n2', 'WARN')


def test_the_junit_xml_counts_a_node_not_run_as_a_failure_never_a_skip():
    root = ET.fromstring(outputs.junit_xml('testbed', _verdicts()))
    assert (root.tag, root.get('tests'), root.get('failures'), root.get('errors')) == (
        'testsuites', '4', '1', '0')
    suite, = root
    cases = {case.get('name'): case for case in suite}
    assert sorted(cases) == ['node n1', 'node n2', 'node n3', 'node n4']
    failure = cases['node n4'].find('failure')
    assert failure.get('message') == 'NOT_RUN: IDLE+DRAIN: drained (bad DIMM)'
    assert suite.find('.//skipped') is None
    assert 'slow beside its peers: 50.4 % worse' in cases['node n2'].find('system-out').text


def test_a_junit_parser_reads_a_case_per_unit_not_run_a_failure_invalid_an_error(tmp_path):
    """junitparser (what a CI's JUnit reader makes of the file, not an XML reader): one suite
    per entry, one case per unit, each with its result: NOT_RUN a Failure naming the fault
    code, INVALID an Error, a passing unit none; nothing is ever Skipped."""
    from junitparser import Error, Failure, JUnitXml, Skipped
    entry = _entry('HplNodeScreen', 'gflops', 'node', 70.0, 'GFLOP/s', median_of=1,
                   partitions=['batch'], id='hpl-node')
    expected = [judgement.Unit('node', 'batch', n) for n in ('n1', 'n2', 'n3', 'n4')]
    judged = judgement.judge_entry(
        entry, [r for r in _screen() if r.nodes != ('n3',)], expected,
        not_run={expected[3]: 'IDLE+DRAIN: drained (bad DIMM)'},
        invalid={expected[2]: 'sanity: HPL residual FAILED'})
    path = tmp_path / 'junit.xml'
    path.write_text(outputs.junit_xml('testbed', [judged]))
    suites = JUnitXml.fromfile(str(path))
    (suite,) = list(suites)
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == (
        'hpl-node', 4, 1, 1, 0)
    results = {case.name: case.result for case in suite}
    assert results['node n1'] == [] and results['node n2'] == []
    (failure,) = results['node n4']
    assert isinstance(failure, Failure) and failure.type == 'F' and \
        failure.message == 'NOT_RUN: IDLE+DRAIN: drained (bad DIMM)'
    (error,) = results['node n3']
    assert isinstance(error, Error) and error.message == 'INVALID: sanity: HPL residual FAILED'
    assert not any(isinstance(r, Skipped) for rs in results.values() for r in rs)


def test_the_drain_list_names_the_slow_node_and_quotes_its_reason():
    lines = outputs.drain_lines(_verdicts())
    assert lines == ["scontrol update NodeName=n2 State=DRAIN Reason='hpcbench acceptance: "
                     "F slow (node n2)'"]


def _key(tmp_path):
    key = tmp_path / 'site-key'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'acceptance@site',
                    '-f', str(key)], check=True)
    return key


def test_a_signed_manifest_verifies_and_names_what_changed(tmp_path):
    run = tmp_path / 'acceptance'
    (run / 'results').mkdir(parents=True)
    (run / 'contract.yaml').write_text('system: testbed\n')
    (run / 'results' / 'screen-session.json').write_bytes(SCREEN.read_bytes())
    (run / 'verdicts.json').write_text(json.dumps(outputs.as_json('testbed', _verdicts())))
    manifest.write(run)
    key = _key(tmp_path)
    manifest.sign(run, key)
    assert manifest.verify(run) == []
    signers = tmp_path / 'allowed_signers'
    signers.write_text(f'acceptance@site {(tmp_path / "site-key.pub").read_text()}')
    assert manifest.verify(run, signers, 'acceptance@site') == []
    assert manifest.verify(run, signers, 'someone@else')[0].startswith(
        'MANIFEST.sha256.sig: the signature does not verify')

    # One byte of a stored result changed: named, and nothing else.
    stored = run / 'results' / 'screen-session.json'
    data = bytearray(stored.read_bytes())
    data[100] ^= 1
    stored.write_bytes(bytes(data))
    problems = manifest.verify(run)
    assert len(problems) == 1 and problems[0].startswith('results/screen-session.json: '
                                                         'changed (sha256 ')
    stored.write_bytes(SCREEN.read_bytes())
    # The contract changed, and the manifest written again to hide it: the signature says.
    (run / 'contract.yaml').write_text('system: testbed \n')
    assert manifest.verify(run)[0].startswith('contract.yaml: changed')
    manifest.write(run)
    assert manifest.verify(run) == ['MANIFEST.sha256.sig: the signature does not verify: '
                                    + manifest.verify(run)[0].split(': ', 2)[2]]
    (run / 'extra.txt').write_text('x')
    assert 'extra.txt: not in the manifest' in manifest.verify(run)
