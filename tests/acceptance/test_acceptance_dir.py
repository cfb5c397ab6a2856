"""An acceptance's directory (hpcbench.acceptance.directory): what its verdicts stand on (the
contract, the plan, each session's record) and what they say (JSON, JUnit XML, a drain list,
the report page), a manifest over all of it; `--verify` judges the verdicts again from what
the directory holds and checks every file, and says what changed. On the testbed's real
stored screen (make screen: one run of every node), n2 made slow in the record, n4 drained."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import yaml

from conftest import BIN, FIXTURES, ROOT
from hpcbench.acceptance import assessment, contract as contracts
from hpcbench.acceptance import directory as directories
from hpcbench.acceptance import manifest, plan, use_case
from hpcbench.acceptance import state as states
from hpcbench.report import acceptance_page
from test_judgement import SCREEN

CONTRACT = {'system': 'mycluster', 'about': 'single-node HPL on every node', 'entries': [{
    'id': 'hpl-node', 'check': 'HplNodeScreen', 'figure': 'gflops', 'scope': 'node',
    'partitions': ['batch'],
    'committed': {'value': 70.0, 'unit': 'GFLOP/s', 'direction': 'at_least'},
    'statistic': {'median_of': 1},
    'source': {'kind': 'procurement', 'cite': 'RFP 2026-04, annex B', 'clause': 'B.3.1'},
    'fault': {'code': 'HPL-NODE', 'action': 'drain it; check its DIMMs and clocks'}}]}


def _contract_and_state(directory):
    state = states.State.load(directory)
    return contracts.load(directory / states.CONTRACT_COPY, state.system), state


def _acceptance(directory, slow_node='n2'):
    """An acceptance directory as `hpcbench accept` leaves it, from the stored screen."""
    data = json.loads(SCREEN.read_text())
    for run in data['runs']:
        for tc in run['testcases']:
            if tc.get('job_nodelist') == [slow_node]:
                for values in tc['perfvalues'].values():
                    values[0] *= 0.5
    directory.mkdir()
    (directory / states.CONTRACT_COPY).write_text(yaml.safe_dump(CONTRACT))
    state = states.State('mycluster', 'sha',
                         [plan.PartitionNodes('batch', ('n1', 'n2', 'n3', 'n4'))],
                         [data['session_info']['uuid']],
                         {'n4': 'IDLE+DRAIN: drained (bad DIMM in slot 3 [root@2026-11-29])'})
    state.save(directory)
    (directory / states.SESSIONS).mkdir()
    (directory / states.SESSIONS / f'{data["session_info"]["uuid"]}.json').write_text(
        json.dumps(data))
    # Finished as `hpcbench accept` finishes it: judged, blamed, written with its page and
    # manifest (hpcbench.acceptance.use_case.Acceptance).
    acceptance = use_case.Acceptance.stored(directory, page=acceptance_page.files)
    return list(acceptance.finish().verdicts)


def test_the_directory_holds_the_verdicts_and_what_they_stand_on(tmp_path):
    verdicts = _acceptance(tmp_path / 'acceptance')
    directory = tmp_path / 'acceptance'
    units = {u.unit.key: (u.verdict, bool(u.slow)) for u in verdicts[0].units}
    assert units == {'n1': ('PASS', False), 'n2': ('WARN', True), 'n3': ('PASS', False),
                     'n4': ('NOT_RUN', False)}
    written = json.loads((directory / states.VERDICTS_JSON).read_text())
    assert written['verdict'] == 'FAIL'
    junit = ET.parse(directory / states.JUNIT_XML).getroot()
    assert (junit.get('tests'), junit.get('failures')) == ('4', '1')
    drain = (directory / states.DRAIN_LIST).read_text().splitlines()
    assert drain[1:] == ["scontrol update NodeName=n2 State=DRAIN Reason='hpcbench acceptance: "
                         "HPL-NODE slow (node n2)'"]
    page = (directory / acceptance_page.HTML).read_text()
    assert 'hpcbench acceptance: mycluster' in page and 'bad DIMM in slot 3' in page
    summary = (directory / acceptance_page.MARKDOWN).read_text()
    assert f"The system's verdict against {directory / states.CONTRACT_COPY} **FAIL**." in summary
    # Out of service: one row of the node, not one per entry; its source cited once.
    assert '| node n4 | batch | 1 entry | NOT_RUN |' in summary
    assert '| \\[1\\] | procurement | RFP 2026-04, annex B |' in summary
    assert '| at least 70 GFLOP/s | \\[1\\] B.3.1 |' in summary
    assert (directory / 'plots' / 'grid-node.svg').read_text().count('<svg') == 1


def test_verify_passes_and_names_one_byte_changed_in_a_session_or_the_contract(tmp_path):
    _acceptance(tmp_path / 'a')
    directory = tmp_path / 'a'
    assert directories.verify(directory).problems == []
    session, = (directory / states.SESSIONS).glob('*.json')
    text = session.read_text()
    at = text.index('"perfvalues"') + 40
    session.write_text(text[:at] + ('1' if text[at] != '1' else '2') + text[at + 1:])
    problems = directories.verify(directory).problems
    assert problems[0].startswith(f'sessions/{session.name}: changed (sha256 ')
    session.write_text(text)
    assert directories.verify(directory).problems == []
    contract = directory / states.CONTRACT_COPY
    contract.write_text(contract.read_text().replace('70.0', '30.0'))
    problems = directories.verify(directory).problems
    assert problems[0].startswith('contract.yaml: changed')


def test_verdicts_rewritten_with_the_manifest_are_not_what_the_sessions_give(tmp_path):
    """Someone edits verdicts.json to PASS and writes the manifest again: every sum holds, and
    the verdicts judged again from the sessions say otherwise."""
    _acceptance(tmp_path / 'a')
    directory = tmp_path / 'a'
    written = json.loads((directory / states.VERDICTS_JSON).read_text())
    written['verdict'] = written['entries'][0]['verdict'] = 'PASS'
    (directory / states.VERDICTS_JSON).write_text(json.dumps(written))
    manifest.write(directory)
    (problem,) = directories.verify(directory).problems
    assert problem == ('verdicts.json: not what its contract, plan and sessions give '
                       '(entries hpl-node; system FAIL, written PASS)')


def test_verdicts_another_commit_wrote_differ_saying_the_rules_may_have_changed(tmp_path):
    """A directory written before verdicts.json named a pair's nodes (no `nodes` in it) and
    by another commit: --verify says which rules judged it again, and which wrote it, so
    that a changed rule is not taken for a changed result."""
    _acceptance(tmp_path / 'a')
    directory = tmp_path / 'a'
    written = json.loads((directory / states.VERDICTS_JSON).read_text())
    for unit in written['entries'][0]['units']:
        del unit['nodes']
    (directory / states.VERDICTS_JSON).write_text(json.dumps(written))
    (directory / 'project-commit.txt').write_text('df39ccb299dd05d86e5d5ebd9ba8d1b16022a22b\n')
    manifest.write(directory)
    (problem,) = directories.verify(directory).problems
    assert problem.startswith('verdicts.json: not what its contract, plan and sessions give '
                              '(entries hpl-node; system FAIL, written FAIL); judged by the '
                              'rules of project commit '), problem
    assert problem.endswith(', written by df39ccb299dd: the rules may have changed since')


def test_a_contract_with_a_wrong_unit_is_one_message_and_nothing_runs(tmp_path):
    """`hpcbench accept` on a contract whose figure is committed in another unit than its
    check reports: exit 2, one line naming the file, entry and field; no directory made."""
    bad = {**CONTRACT, 'system': 'tsubame', 'entries': [{
        **CONTRACT['entries'][0], 'partitions': ['x4600-26'],
        'committed': {'value': 70.0, 'unit': 'MFLOP/s', 'direction': 'at_least'}}]}
    path = tmp_path / 'tsubame.yaml'
    path.write_text(yaml.safe_dump(bad))
    done = subprocess.run([str(BIN / 'hpcbench'), 'accept', '--system', 'tsubame', '--contract',
                           str(path), '--output', str(tmp_path / 'acceptance')],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode == 2
    assert done.stderr == (f"error: {path}: entries[hpl-node].committed.unit: 'MFLOP/s' is not the "
                           "unit of HplNodeScreen gflops, 'GFLOP/s': commit the value in the unit "
                           'the check reports\n')
    assert not (tmp_path / 'acceptance').exists()


def test_node_pairs_blame_the_node_that_fails_beside_good_ones_and_never_a_drained_one():
    """The testbed's 32-node run: n7 slow fails with n8 and again with n13; n8 passes
    beside n14; n20 was drained during the run, so its pairs did not run (n19 passes beside
    n1). Only n7 is blamed: a pair not run is no evidence, a drained node is named as such."""
    from hpcbench.acceptance.judgement import EntryVerdict, Unit, UnitVerdict
    entry = contracts.from_data({'system': 'testbed', 'entries': [{
        'id': 'latency', 'check': 'ImbPairCheck', 'figure': 'latency', 'scope': 'node_pair',
        'parameters': {'benchmark': 'PingPong'},
        'committed': {'value': 18.78, 'unit': 'us', 'direction': 'at_most'},
        'source': {'kind': 'baseline', 'cite': 'x'},
        'fault': {'code': 'MPI-PAIR', 'action': 'look'}}]}, 'c.yaml').entries[0]
    verdicts = {('n1', 'n2'): 'PASS', ('n7', 'n8'): 'FAIL', ('n19', 'n20'): 'NOT_RUN',
                ('n13', 'n14'): 'PASS', ('n13', 'n7'): 'FAIL', ('n14', 'n8'): 'PASS',
                ('n1', 'n19'): 'PASS', ('n10', 'n20'): 'NOT_RUN'}
    units = tuple(UnitVerdict(Unit('node_pair', 'srun', pair), verdict)
                  for pair, verdict in verdicts.items())
    state = states.State('testbed', 'sha', [plan.PartitionNodes('srun', ())],
                         second_pairs={'srun': [['n13', 'n7'], ['n14', 'n8'], ['n1', 'n19'],
                                                ['n10', 'n20']]},
                         out_of_service={'n20': 'IDLE+DRAIN: drained (fan failure)'})
    blame = assessment.pair_blame([EntryVerdict(entry, units, 'FAIL', '')], state)
    assert blame == {'n7': 'MPI-PAIR (node pairs: failed again beside a node that passed)'}


def test_a_system_that_is_a_path_is_refused_before_anything_reads_it(tmp_path):
    """Issue 70, item 17: `accept --system /path/x` and `contract init /path/x` ran
    /path/x.py as a site config before saying it was no system. A name that is not one of
    the systems (a path, a name of no site config) is refused first, in one line."""
    (tmp_path / 'x.py').write_text(f'open({str(tmp_path / "RAN")!r}, "w")\n')
    env = {**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')}
    for argv in (['accept', '--system', str(tmp_path / 'x')],
                 ['contract', 'init', str(tmp_path / 'x')],
                 ['accept', '--system', '../site-configs/local'],
                 ['contract', 'init', 'nosuchsystem', '--output', str(tmp_path / 'c.yaml')]):
        done = subprocess.run([str(BIN / 'hpcbench'), *argv], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1].endswith('is not a system (the systems: chic, '
                                                     'local, louhi, murska, oakforest-pacs, '
                                                     't2k-tsukuba, testbed, tsubame; '
                                                     '`hpcbench new-system` describes another)')
    assert not (tmp_path / 'RAN').exists() and not (tmp_path / 'c.yaml').exists()


def test_contract_init_s_settings_and_factor_are_plain_finite_values(tmp_path):
    """Issue 70, items 4 and 6: `--setting HplCheck.n=.nan` was taken, `--setting
    'HplCheck.sizing=a b'` a traceback, `--factor nan` taken: each one line, nothing
    written."""
    env = {**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')}
    target = tmp_path / 'c.yaml'
    for extra, said in ((['--setting', 'HplCheck.n=.nan'],
                         "error: --setting 'HplCheck.n=.nan': not valid YAML: line 1, "
                         "column 1: '.nan' is not a finite number"),
                        (['--setting', 'HplCheck.sizing=a b'],
                         'run_rules.settings.sizing:'),
                        (['--setting', 'HplNodeScreen.n=4'],
                         "error: --setting 'HplNodeScreen.n=4': the draft has no entry of "
                         'HplNodeScreen (its checks: GpuDgemmCheck, HplCheck)'),
                        (['--factor', 'nan'], "argument --factor: 'nan' is no share of a "
                                              'figure')):
        done = subprocess.run([str(BIN / 'hpcbench'), 'contract', 'init', 'tsubame',
                               '--output', str(target), *extra], capture_output=True,
                              text=True, cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 2 and 'Traceback' not in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 or extra[0] == '--factor', done.stderr
        assert said in done.stderr, done.stderr
        assert not target.exists()


def _verify(directory, *options):
    return subprocess.run([str(BIN / 'hpcbench'), 'accept', '--verify', str(directory),
                           *options], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, 'HPCBENCH_VAR': str(directory.parent / 'var')})


def test_verify_says_what_it_checked_and_requires_the_signature_the_site_names(tmp_path):
    """Issue 70, item 2a: a signed acceptance whose signature was deleted after its verdicts
    were turned to PASS and its manifest written again verified with the site's signers
    ("every file as the manifest says (not signed)", exit 0). With signers given, a
    signature is required; without, the output says what it checked, and no more."""
    directory = tmp_path / 'a'
    _acceptance(directory)
    key = tmp_path / 'site-key'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', str(key)],
                   check=True)
    manifest.sign(directory, key)
    signers = tmp_path / 'allowed_signers'
    signers.write_text(f'acceptance@site {(tmp_path / "site-key.pub").read_text()}')
    done = _verify(directory, '--allowed-signers', str(signers), '--identity',
                   'acceptance@site')
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f'{directory}: every file as the manifest says; signed by '
                                  'acceptance@site (ED25519 key SHA256:'), done.stdout
    # The FAIL turned PASS, the manifest written again, the signature deleted.
    (directory / states.CONTRACT_COPY).write_text(
        (directory / states.CONTRACT_COPY).read_text().replace('70.0', '1.0'))
    written = json.loads((directory / states.VERDICTS_JSON).read_text())
    written['verdict'] = 'PASS'
    (directory / states.VERDICTS_JSON).write_text(json.dumps(written))
    manifest.write(directory)
    done = _verify(directory, '--allowed-signers', str(signers), '--identity',
                   'acceptance@site')
    assert done.returncode == 1, done.stdout
    assert 'MANIFEST.sha256.sig: missing, and a signature by acceptance@site is required' in \
        done.stdout
    done = _verify(directory)
    assert done.returncode == 1 and 'not signed' in done.stderr, done.stderr
    # The signers without the identity: asked for, in one line.
    done = _verify(directory, '--allowed-signers', str(signers))
    assert (done.returncode, done.stderr) == (2, 'error: give --allowed-signers FILE and '
                                                 '--identity NAME together: the signature is '
                                                 "checked as the site's NAME's, named in "
                                                 'FILE\n')


def test_verify_of_a_directory_that_holds_no_acceptance_is_one_line_each(tmp_path):
    """Item 6: `--verify` of a directory whose verdicts.json is `[]` or lacks `entries`, or
    whose sessions/ holds a FIFO (it hung), is a line saying so, never a traceback."""
    directory = tmp_path / 'a'
    _acceptance(directory)
    for text in ('[]', '{"system": "mycluster"}', '[' * 100000):
        (directory / states.VERDICTS_JSON).write_text(text)
        manifest.write(directory)
        done = _verify(directory)
        assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
        assert done.stdout.startswith(f'the verdicts cannot be judged again from {directory}: '
                                      'ValueError: verdicts.json: '), done.stdout
    os.mkfifo(directory / states.SESSIONS / 'fifo.json')
    done = _verify(directory)
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
    assert 'sessions/fifo.json: a FIFO, where an acceptance holds files only' in done.stdout
    # A session of its state that is a FIFO: never opened either.
    state = json.loads((directory / states.STATE).read_text())
    session = directory / states.SESSIONS / f'{state["sessions"][0]}.json'
    session.unlink()
    os.mkfifo(session)
    done = _verify(directory)
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
    assert f'{session}: not a regular file, so not a session record' in done.stdout


def test_a_stored_node_name_slurm_refuses_is_one_line_before_any_output(tmp_path):
    """Issue 70, item 7: a node name Slurm's grammar refuses, in a stored run, stopped the
    acceptance after verdicts.json, junit.xml and sessions/ were written and before the page,
    drain list and manifest. It is refused where the record is read, in one line, and the
    outputs are computed whole before any is written."""
    import pytest
    data = json.loads(SCREEN.read_text())
    tc = next(tc for run in data['runs'] for tc in run['testcases']
              if tc.get('job_nodelist') == ['n2'])
    tc['job_nodelist'] = ['n2;reboot']
    directory = tmp_path / 'a'
    directory.mkdir()
    (directory / states.CONTRACT_COPY).write_text(yaml.safe_dump(CONTRACT))
    states.State('mycluster', 'sha', [plan.PartitionNodes('batch', ('n1', 'n2', 'n3'))],
                 [data['session_info']['uuid']]).save(directory)
    acceptance = use_case.Acceptance('mycluster', directory / states.CONTRACT_COPY, directory)
    acceptance.contract, acceptance.state = _contract_and_state(directory)
    acceptance.records = {data['session_info']['uuid']: data}
    with pytest.raises(RuntimeError, match=r"^test case HplNodeScreen .*: 'n2;reboot' is no "
                                           r'node name \(a letter or digit, then letters, '
                                           r"digits, \. _ -\): the record is not a run's$"):
        acceptance.finish()
    assert sorted(p.name for p in directory.iterdir()) == [states.CONTRACT_COPY, states.STATE]


def test_a_directory_that_is_not_an_acceptance_of_the_suite_is_refused(tmp_path):
    """Issue 70, item 8: `--output` overwrote a `contract.yaml` of the user's own in a
    directory that was no acceptance; a dry run of another contract into a finished, signed
    acceptance replaced its contract and added runs; two acceptances into one directory both
    ran. Each refused in one line, nothing in the directory touched."""
    import pytest
    own = tmp_path / 'mine'
    own.mkdir()
    (own / 'contract.yaml').write_text('my own notes\n')
    with pytest.raises(states.AcceptanceError, match=r'holds other files \(contract.yaml\) and '
                                                     r'no acceptance of the suite'):
        with directories.claimed(own):
            pass
    assert os.listdir(own) == ['contract.yaml']
    assert (own / 'contract.yaml').read_text() == 'my own notes\n'
    finished = tmp_path / 'a'
    _acceptance(finished)
    before = {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()}
    with pytest.raises(states.AcceptanceError, match='holds an acceptance: a dry run writes '
                                                     'its jobs beside another --output'):
        with directories.claimed(finished, dry_run=True):
            pass
    assert {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()} == before
    with directories.claimed(finished):
        with pytest.raises(states.AcceptanceError, match='is in use by another acceptance'):
            with directories.claimed(finished):
                pass
    # Through the command: one line, exit 2.
    done = subprocess.run([str(BIN / 'hpcbench'), 'accept', '--system', 'tsubame', '--output',
                           str(own), '--dry-run'], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')},
                          timeout=300)
    assert done.returncode == 2 and done.stderr.startswith(f'error: {own} holds other files'), \
        done.stderr


def test_verify_of_a_session_record_that_is_not_reframe_s_is_one_line(tmp_path):
    """Item 6: a stored session that is not ReFrame's (`"uuid": 5`, a test case `"name": 7`)
    was a traceback in --verify."""
    directory = tmp_path / 'a'
    _acceptance(directory)
    session, = (directory / states.SESSIONS).glob('*.json')
    data = json.loads(session.read_text())
    for change, said in ((lambda d: d['session_info'].update(uuid=5),
                          "session_info/uuid: '5' is no session UUID"),
                         (lambda d: d['runs'][0]['testcases'][0].update(name=7),
                          "runs/0/testcases/0/name: '7' is not str")):
        broken = json.loads(json.dumps(data))
        change(broken)
        session.write_text(json.dumps(broken))
        manifest.write(directory)
        done = _verify(directory)
        assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
        assert (f"RuntimeError: sessions/{session.name} is no record of ReFrame's session: "
                f'{said}') in done.stdout, done.stdout


def test_an_acceptance_written_before_verdicts_were_data_still_verifies(tmp_path):
    """Issue 71, item 8: a directory the suite wrote at commit 66f1530 (its verdicts.json
    of format 1: the committed value and the fault as sentences; tests/fixtures/acceptance/
    written-by-66f1530, written by that commit's own test of this file) verifies: judged
    again in the format it holds, every file as its manifest says. Changed, it does not."""
    import shutil
    directory = tmp_path / 'old'
    shutil.copytree(FIXTURES / 'acceptance' / 'written-by-66f1530', directory)
    written = json.loads((directory / states.VERDICTS_JSON).read_text())
    assert 'format' not in written and written['entries'][0]['committed'] == \
        'at least 70 GFLOP/s'
    checked = directories.verify(directory)
    assert checked.problems == [], checked.problems
    written['entries'][0]['units'][1]['verdict'] = 'PASS'
    (directory / states.VERDICTS_JSON).write_text(json.dumps(written, indent=1) + '\n')
    manifest.write(directory)
    (problem,) = directories.verify(directory).problems
    assert problem.startswith('verdicts.json: not what its contract, plan and sessions give '
                              '(entries hpl-node; ')
    written['format'] = 7
    (directory / states.VERDICTS_JSON).write_text(json.dumps(written))
    manifest.write(directory)
    (problem,) = directories.verify(directory).problems
    assert "format '7' is none this suite writes (1 to 2)" in problem
