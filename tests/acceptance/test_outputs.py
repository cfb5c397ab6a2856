"""What an acceptance leaves for a site's tools (hpcbench.acceptance.outputs, manifest): the
verdicts of the testbed's screen with a node drained and one made slow, as JSON valid
against its schema, as JUnit XML, as drain lines; the manifest signed with a real SSH key,
verified, and refused after one byte of a result or of the contract changes."""
import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from hpcbench.acceptance import judgement, manifest, outputs
from hpcbench.core import paths
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


def test_the_verdicts_are_data_a_tool_reads_back_without_parsing_a_sentence():
    """Issue 71, item 5: the committed value, its unit and direction, the tolerance, the
    statistic, the source, the fault's code and action, each unit's runs and p-value are
    fields (they were sentences: 'at least 70 GFLOP/s')."""
    document = json.loads(json.dumps(outputs.as_json('testbed', _verdicts())))
    assert document['format'] == outputs.FORMAT
    (entry,) = document['entries']
    assert entry['committed'] == {'value': 70.0, 'unit': 'GFLOP/s', 'direction': 'at_least',
                                  'tolerance': 0.0}
    assert (entry['statistic'], entry['rule'], entry['partitions'], entry['scope']) == (
        {'median_of': 1}, {'every': True}, ['batch'], 'node')
    assert entry['fault'] == {'code': 'F', 'action': 'look'}
    assert (entry['source']['kind'], entry['source']['cite']) == ('procurement', 'test')
    units = {u['key']: u for u in entry['units']}
    assert units['n2']['runs'] == len(units['n2']['values']) == 1
    assert units['n2']['median'] == units['n2']['values'][0] < 70.0
    assert units['n4']['runs'] == 0 and units['n4']['median'] is None
    # What a tool does with them: the units short of the committed value, from fields.
    short = sorted(u['key'] for u in entry['units'] if u['median'] is not None
                   and u['median'] < entry['committed']['value'])
    assert short == ['n2']
    # Each key as data: a GPU pair's fields, a node pair's two names.
    from hpcbench.acceptance import scopes
    from hpcbench.core import device_keys
    pair = scopes.Unit('gpu_pair', 'gpu', device_keys.GpuPair('g1', '0', '1'))
    assert outputs._key(pair) == {'node': 'g1', 'first': '0', 'second': '1',
                                  'other_node': ''}
    assert outputs._key(scopes.Unit('node_pair', 'srun', ('n1', 'n2'))) == ['n1', 'n2']


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
    assert manifest.verify(run).problems == []
    signers = tmp_path / 'allowed_signers'
    signers.write_text(f'acceptance@site {(tmp_path / "site-key.pub").read_text()}')
    assert manifest.verify(run, signers, 'acceptance@site').problems == []
    assert manifest.verify(run, signers, 'someone@else').problems[0].startswith(
        'MANIFEST.sha256.sig: the signature does not verify')

    # One byte of a stored result changed: named, and nothing else.
    stored = run / 'results' / 'screen-session.json'
    data = bytearray(stored.read_bytes())
    data[100] ^= 1
    stored.write_bytes(bytes(data))
    problems = manifest.verify(run).problems
    assert len(problems) == 1 and problems[0].startswith('results/screen-session.json: '
                                                         'changed (sha256 ')
    stored.write_bytes(SCREEN.read_bytes())
    # The contract changed, and the manifest written again to hide it, the old signature
    # put back beside it: the signature says.
    (run / 'contract.yaml').write_text('system: testbed \n')
    assert manifest.verify(run).problems[0].startswith('contract.yaml: changed')
    old_signature = (run / manifest.SIGNATURE).read_bytes()
    manifest.write(run)
    assert not (run / manifest.SIGNATURE).exists()
    (run / manifest.SIGNATURE).write_bytes(old_signature)
    (problem,) = manifest.verify(run).problems
    assert problem.startswith('MANIFEST.sha256.sig: the signature does not verify: ')
    # Or the signature deleted (issue 70, item 2a): unsigned is all that can be said without
    # the site's signers; with them a signature is required.
    (run / manifest.SIGNATURE).unlink()
    checked = manifest.verify(run)
    assert (checked.problems, checked.signature) == ([], 'not signed')
    checked = manifest.verify(run, signers, 'acceptance@site')
    assert checked.problems == [
        f'MANIFEST.sha256.sig: missing, and a signature by acceptance@site is required '
        f'(--allowed-signers {signers})']
    (run / 'extra.txt').write_text('x')
    assert 'extra.txt: not in the manifest' in manifest.verify(run).problems


def _signed_run(tmp_path):
    run = tmp_path / 'acceptance'
    (run / 'sessions').mkdir(parents=True)
    (run / 'contract.yaml').write_text('system: testbed\n')
    (run / 'sessions' / 'screen-session.json').write_bytes(SCREEN.read_bytes())
    manifest.write(run)
    return run


def _fingerprint(key):
    done = subprocess.run(['ssh-keygen', '-l', '-f', f'{key}.pub'], capture_output=True,
                          text=True, check=True)
    return done.stdout.split()[1]


def test_without_the_site_s_signers_a_signature_is_said_to_be_a_key_s_not_a_signer_s(
        tmp_path):
    """Issue 70, item 2b: a directory re-signed with anybody's key printed "signature
    verified". Without allowed signers, what is said is the key's fingerprint and that whose
    key it is was not checked; with them, the signer; the other key refused."""
    run = _signed_run(tmp_path)
    site, anybody = _key(tmp_path), tmp_path / 'anybody'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', str(anybody)],
                   check=True)
    manifest.sign(run, anybody)
    checked = manifest.verify(run)
    assert checked.problems == []
    assert checked.signature == (f'signed with ED25519 key {_fingerprint(anybody)}; whose key '
                                 'that is was not checked (anybody can sign: give '
                                 '--allowed-signers and --identity to check the signer)')
    signers = tmp_path / 'allowed_signers'
    signers.write_text(f'acceptance@site {(tmp_path / "site-key.pub").read_text()}')
    (problem,) = manifest.verify(run, signers, 'acceptance@site').problems
    assert problem.startswith('MANIFEST.sha256.sig: the signature does not verify')
    manifest.sign(run, site)
    checked = manifest.verify(run, signers, 'acceptance@site')
    assert checked.problems == [] and checked.signature == (
        f'signed by acceptance@site (ED25519 key {_fingerprint(site)}), as the allowed '
        f'signers {signers} say')
    # Item 2c: the signers without the identity to check (OpenSSH: "Could not verify
    # signature"), or the identity alone, is one message asking for the other.
    with pytest.raises(manifest.ManifestError, match='give --allowed-signers FILE and '
                                                     '--identity NAME together'):
        manifest.verify(run, signers)
    with pytest.raises(manifest.ManifestError, match='--identity needs --allowed-signers'):
        manifest.verify(run, None, 'acceptance@site')


@pytest.mark.parametrize('line', ['../outside.txt', '{tmp}/outside.txt', 'sessions/../../outside.txt',
                                  './contract.yaml', 'sessions//screen-session.json'])
def test_a_manifest_line_naming_a_path_outside_the_directory_is_refused_unread(tmp_path, line):
    """Item 2d: a manifest line naming `../x` or an absolute path was hashed and accepted."""
    run = _signed_run(tmp_path)
    outside = tmp_path / 'outside.txt'
    outside.write_text('x')
    name = line.format(tmp=tmp_path)
    with open(run / manifest.MANIFEST, 'a') as written:
        written.write(f'{paths.file_sha256(outside)}  {name}\n')
    problems = manifest.verify(run).problems
    assert problems == [f'{run / manifest.MANIFEST}:3: {name!r} is no path inside the '
                        'directory: not hashed'], problems


def test_a_session_replaced_by_a_link_or_a_fifo_is_named_and_never_read(tmp_path):
    """Item 2d: a session file replaced by a link to an identical copy outside verified; a
    FIFO in sessions/ hung --verify. Each is named, never opened, and the manifest cannot be
    written over them."""
    run = _signed_run(tmp_path)
    session = run / 'sessions' / 'screen-session.json'
    copy = tmp_path / 'copy.json'
    copy.write_bytes(session.read_bytes())
    session.unlink()
    session.symlink_to(copy)
    assert manifest.verify(run).problems == [
        'sessions/screen-session.json: a link, not a regular file: not read']
    os.mkfifo(run / 'sessions' / 'extra.json')
    assert manifest.verify(run).problems == [
        'sessions/screen-session.json: a link, not a regular file: not read',
        'sessions/extra.json: a FIFO, where an acceptance holds files only']
    with pytest.raises(manifest.ManifestError, match='extra.json: a FIFO, where an acceptance '
                                                     'holds files only: no manifest written'):
        manifest.write(run)


def _hostile_verdicts(reason):
    """The screen's verdicts, n4 drained for `reason` (a Slurm reason is anybody's text)."""
    entry = _entry('HplNodeScreen', 'gflops', 'node', 70.0, 'GFLOP/s', median_of=1,
                   partitions=['batch'], id='hpl-node')
    expected = [judgement.Unit('node', 'batch', n) for n in ('n1', 'n2', 'n3', 'n4')]
    return [judgement.judge_entry(entry, _screen('n2'), expected,
                                  not_run={expected[3]: reason})]


def test_control_characters_from_a_reason_leave_junit_well_formed():
    """Issue 70, item 7: a Slurm reason's `\\x1b[31m` or a failed run's `\\x07` made
    junit.xml not well-formed. Each is written as `\\xNN`; the file parses."""
    text = outputs.junit_xml('testbed', _hostile_verdicts('drained \x1b[31mred\x1b[0m \x07 \x00'))
    root = ET.fromstring(text)
    failure = root.find('.//testcase[@name="node n4"]/failure')
    assert failure.get('message') == 'NOT_RUN: drained \\x1b[31mred\\x1b[0m \\x07 \\x00'


def test_acceptance_md_shows_a_hostile_reason_as_itself_in_its_row():
    """Item 15: a reason's `<script>` reached acceptance.md raw and a newline broke its
    table; each is shown as text, the row whole."""
    from hpcbench.acceptance import contract as contracts
    from hpcbench.report import acceptance_page, markdown_summary
    verdicts = _hostile_verdicts('drained <script>alert(1)</script>\n| x | y |')
    the_contract = contracts.Contract('testbed', (verdicts[0].entry,))
    text = acceptance_page.texts(acceptance_page.build(the_contract, verdicts, {}, 'now'))[
        acceptance_page.MARKDOWN]
    assert '<script>' not in text
    row = next(line for line in text.splitlines() if line.startswith('| node n4 | batch | '
                                                                       'hpl-node |'))
    assert 'drained &lt;script&gt;alert(1)&lt;/script&gt; \\| x \\| y \\|' in row
    assert row.count(' | ') == row.replace('\\|', '').count(' | ')
    assert markdown_summary.plain('*a* [b](c) `d`') == '\\*a\\* \\[b\\](c) \\`d\\`'


def test_a_node_s_drain_reason_names_each_fault_once_within_what_slurm_shows():
    """Item 14: two entries of one fault code put `F FAIL (node n2)` in the reason twice,
    and a node's reasons grew without bound: one mention each, cut at MAX_REASON saying how
    many more."""
    verdicts = _verdicts()
    twice = outputs.drain_lines(verdicts + verdicts)
    assert twice == outputs.drain_lines(verdicts) == [
        "scontrol update NodeName=n2 State=DRAIN Reason='hpcbench acceptance: F slow "
        "(node n2)'"]
    from dataclasses import replace
    many = [replace(v, entry=replace(v.entry, fault_code=f'CODE-{i}'))
            for i in range(40) for v in verdicts]
    (line,) = outputs.drain_lines(many, {'n2': 'PAIR (node pairs: of a failing pair)'})
    reason = line.split('Reason=', 1)[1].strip("'")
    assert len(reason) <= outputs.MAX_REASON, reason
    assert reason.startswith('hpcbench acceptance: PAIR (node pairs: of a failing pair); '
                             'CODE-0 slow (node n2); CODE-1 slow (node n2); ')
    assert reason.endswith(' more (see its acceptance)'), reason


def test_a_cut_drain_reason_still_names_every_fault_code_it_cut():
    """A CI run: n3's port at half rate failed IB-RATE and IB-SYMBOL and, on a busy VM, its
    HPL was slow beside its peers; the reason kept IB-RATE whole and said "and 2 more", so
    `sinfo -R` hid IB-SYMBOL. Each cut reason is named by its code and verdict."""
    from dataclasses import replace
    (verdict,) = _verdicts()
    hardware = 'port 1 of mlx4_0 of n3: symbol errors 0 -> 41 during its job, link downed 0 -> 0'
    units = tuple(replace(u, verdict='FAIL', hardware=hardware) for u in verdict.units
                  if u.unit.node == 'n3')
    verdicts = [replace(verdict, units=units, entry=replace(verdict.entry, fault_code=code))
                for code in ('IB-RATE', 'IB-SYMBOL', 'HPL-NODE')]
    (line,) = outputs.drain_lines(verdicts)
    reason = shlex.split(line)[-1].split('=', 1)[1]
    assert len(reason) <= outputs.MAX_REASON, reason
    assert reason == (f'hpcbench acceptance: IB-RATE FAIL (node n3; {hardware}); also '
                      'IB-SYMBOL FAIL, HPL-NODE FAIL (see its acceptance)'), reason
    # Both ports of one code failing, each cut: the code named once.
    ports = [replace(verdicts[1], units=tuple(replace(u, hardware=f'{hardware}, port {port}')
                                              for u in units)) for port in (1, 2)]
    (line,) = outputs.drain_lines([verdicts[0], *ports])
    reason = shlex.split(line)[-1].split('=', 1)[1]
    assert reason.endswith('); also IB-SYMBOL FAIL (see its acceptance)'), reason


def test_outputs_written_all_or_none_and_a_full_disk_names_the_file(tmp_path):
    """Items 7 and 16: the outputs are written whole or none (a full disk, `ulimit -f`: the
    files written then removed, the file named, not "File too large: ?"); written again
    without a key, an acceptance keeps no old signature that then fails."""
    run = _signed_run(tmp_path)
    manifest.sign(run, _key(tmp_path))
    from hpcbench.acceptance import directory
    directory.write(run, {'verdicts.json': '{}\n'})
    assert not (run / manifest.SIGNATURE).exists() and manifest.verify(run).problems == []
    before = sorted(p.relative_to(run).as_posix() for p in run.rglob('*'))
    done = subprocess.run([sys.executable, '-c', (
        'import resource, signal, sys\n'
        'signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n'
        'resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n'
        'from hpcbench.acceptance import directory\n'
        'try:\n'
        '    directory.write(sys.argv[1], {"junit.xml": "x", "big.txt": "y" * 10000})\n'
        'except OSError as err:\n'
        '    print(err.strerror, err.filename)\n'), str(run)],
        capture_output=True, text=True, timeout=60)
    assert done.stdout == f'File too large {run / "big.txt"}\n', done.stdout + done.stderr
    after = sorted(p.relative_to(run).as_posix() for p in run.rglob('*'))
    assert after == [p for p in before if p != manifest.MANIFEST], after
