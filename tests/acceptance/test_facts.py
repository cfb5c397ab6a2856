"""Facts as contract entries (issue 73): what a node, GPU or port said of itself around each
job (hpcbench.core.node_facts, read by hpcbench.rfm.plugins.HardwareFacts) judged against
an expectation (equal, at_least, at_most, increase_at_most), every read meeting it. The runs
are the testbed's real HPCC runs of n1..n3 (tests/fixtures/acceptance/testbed-32-nodes-
hpcc-session.json), each given the facts a job reads from a tree of other sites' real
outputs (tests/fixtures/health: two P100s, a ConnectX-3 and a ConnectX-4, EDAC, rasdaemon's
record), with the faults injected into the tree: n2's second GPU trained at x8, n3's
ConnectX-4 port gaining symbol errors during the job and an uncorrected memory error (in
EDAC and in rasdaemon's record, an Alibaba server's)."""
import json
import re
import shutil

import pytest

from conftest import FIXTURES
from hpcbench.acceptance import contract as contracts, judgement
from hpcbench.core import fact_figures, node_facts
from hpcbench.results.measured import measured_runs

HEALTH = FIXTURES / 'health'
SESSION = json.loads((FIXTURES / 'acceptance' / 'testbed-32-nodes-hpcc-session.json')
                     .read_text())
SOURCE = {'kind': 'procurement', 'cite': 'a test of the suite'}
HPL = {'id': 'hpl', 'check': 'HpccCheck', 'figure': 'hpl', 'scope': 'node',
       'committed': {'value': 14.42, 'unit': 'GFLOP/s', 'direction': 'at_least'},
       'source': SOURCE, 'fault': {'code': 'HPCC-NODE', 'action': 'see to the node'}}


def _fact(id_, fact, scope, expect, code):
    return {'id': id_, 'fact': fact, 'scope': scope, 'expect': expect, 'source': SOURCE,
            'fault': {'code': code, 'action': 'see NVIDIA\'s and the vendor\'s action'}}


FACTS = [_fact('pcie', 'pcie_width', 'gpu', {'equal': 16}, 'GPU-PCIE-WIDTH'),
         _fact('ib-rate', 'rate_gbps', 'nic', {'at_least': 25}, 'IB-RATE'),
         _fact('ib-symbols', 'symbol_error', 'nic', {'increase_at_most': 0}, 'IB-SYMBOL'),
         _fact('edac', 'edac_uncorrected', 'node', {'increase_at_most': 0}, 'MEM-UE')]


def _contract(*entries):
    return contracts.from_data({'system': 'testbed', 'entries': [HPL, *entries]}, 'a test')


def _tree(tmp_path, node):
    root = tmp_path / node
    shutil.copytree(HEALTH / 'procfs-sys' / 'class', root / 'sys' / 'class')
    shutil.copytree(HEALTH / 'netdata-1508' / 'sys' / 'devices', root / 'sys' / 'devices')
    (root / node_facts.SOURCES).mkdir(parents=True)
    shutil.copy(HEALTH / 'nvidia-smi-q-p100x2.xml',
                root / node_facts.SOURCES / node_facts.SMI_FILE)
    shutil.copy(HEALTH / 'ras-mc-ctl-summary-rasdaemon-121.txt',
                root / node_facts.SOURCES / node_facts.RAS_FILE)
    return root


def _bump(path, by):
    path.write_text(f'{int(path.read_text()) + by}\n')


def _with_facts(tc, tmp_path):
    """A real test case given the facts its job read around it from its node's tree."""
    node = tc['job_nodelist'][0]
    root = _tree(tmp_path, node)
    if node == 'n2':
        smi = root / node_facts.SOURCES / node_facts.SMI_FILE
        text = smi.read_text()
        second = text.index('<minor_number>1</minor_number>')
        head, tail = text[:second], text[second:]
        smi.write_text(head + re.sub(r'<current_link_width>16x</current_link_width>',
                                     '<current_link_width>8x</current_link_width>', tail,
                                     count=1))
    before = node_facts.read(root, node, clock=lambda: 1000.0)
    if node == 'n3':
        _bump(root / 'sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error', 37)
        _bump(root / 'sys/devices/system/edac/mc/mc0/ue_count', 1)
        shutil.copy(HEALTH / 'ras-mc-ctl-summary-lkml-ghes-2025.txt',
                    root / node_facts.SOURCES / node_facts.RAS_FILE)
    found = fact_figures.figures(before, node_facts.read(root, node, clock=lambda: 1002.0))
    shutil.rmtree(root)
    return {**tc, 'node_facts': {found.node_name: found.node}, 'device_facts': found.devices,
            'node_texts': {found.node_name: found.texts}, 'device_texts': found.device_texts}


@pytest.fixture
def session(tmp_path):
    stored = [tc for run in SESSION['runs'] for tc in run['testcases']
              if not tc['fixture'] and tc['job_nodelist'] in (['n1'], ['n2'], ['n3'])]
    assert len(stored) == 9
    return {'session_info': SESSION['session_info'],
            'runs': [{'testcases': [_with_facts(tc, tmp_path) for tc in stored]}]}


@pytest.fixture
def cases(session):
    return list(measured_runs(session))


def _verdicts(entry, cases):
    return {str(u.unit): (u.verdict, u.reason)
            for u in judgement.judge_entry(entry, cases).units}


def test_a_fact_entry_reads_as_its_figure_and_expectation():
    pcie, rate, symbols, edac = _contract(*FACTS).entries[1:]
    assert (pcie.fact, pcie.check, pcie.figure, pcie.committed.words()) == (
        True, '', 'pcie_width', 'equal to 16 lanes')
    assert symbols.figure == 'symbol_error_increase' and symbols.committed.words() == \
        'at most 0 errors'
    assert edac.figure == 'edac_uncorrected_increase' and rate.committed.unit == 'Gb/s'


@pytest.mark.parametrize('entry, said', [
    (_fact('x', 'pcie_lanes', 'gpu', {'equal': 16}, 'X'), r"entries\[x\]\.fact: a gpu has "
                                                           r"no fact 'pcie_lanes' \(its facts: "),
    (_fact('x', 'rate_gbps', 'nic', {'increase_at_most': 0}, 'X'), "no fact 'rate_gbps' "
                                                                   'that increases'),
    (_fact('x', 'pcie_width', 'gpu_pair', {'equal': 16}, 'X'), 'a gpu_pair has no facts'),
    ({**_fact('x', 'pcie_width', 'gpu', {'equal': 16}, 'X'), 'check': 'StreamCheck'},
     r'entries\[x\]\.check: no entry of the contract runs StreamCheck'),
    (_fact('x', 'pcie_width', 'gpu', {'equal': 16, 'at_least': 8}, 'X'), 'expect'),
    (_fact('x', 'pcie_width', 'gpu', {'below': 16}, 'X'), 'no such field below'),
    # A fact may be watched, never for drift: no least effect, no runs of its own.
    ({**_fact('x', 'pcie_width', 'gpu', {'equal': 16}, 'X'),
      'watch': {'period': '1d', 'min_effect': 0.1}}, 'no such field min_effect'),
    ({**_fact('x', 'pcie_width', 'gpu', {'equal': 16}, 'X'), 'devices': ['mlx5_0/1']},
     r'entries\[x\]\.devices: a gpu entry is about every one of its units'),
    ({**_fact('x', 'rate_gbps', 'nic', {'equal': 16}, 'X'), 'devices': ['mlx5_0;1']},
     'devices'),
])
def test_a_fact_entry_that_is_none_is_refused_in_one_line(entry, said):
    with pytest.raises(contracts.ContractError, match=said):
        _contract(entry)


def test_every_read_must_meet_a_fact_the_faulty_units_named_with_their_worst(cases):
    pcie, rate, symbols, edac = _contract(*FACTS).entries[1:]
    gpus = _verdicts(pcie, cases)
    assert [k for k, (v, _) in gpus.items() if v == 'FAIL'] == ['GPU 1 of n2']
    assert gpus['GPU 1 of n2'][1] == ('3 read(s), expected equal to 16 lanes: 3 missed it, '
                                      'the worst 8 lanes')
    assert gpus['GPU 0 of n2'] == ('PASS', '3 read(s), expected equal to 16 lanes: every one '
                                           'met it')
    # Every node's ConnectX-4 port trained at one lane of four: 25 Gb/s meets 25.
    assert {v for v, _ in _verdicts(rate, cases).values()} == {'PASS'}
    ports = _verdicts(symbols, cases)
    assert len(ports) == 9 and ports['port 1 of mlx5_0 of n3'][0] == 'FAIL'
    assert 'the worst 37 errors' in ports['port 1 of mlx5_0 of n3'][1]
    assert [k for k, (v, _) in ports.items() if v == 'FAIL'] == ['port 1 of mlx5_0 of n3']
    nodes = _verdicts(edac, cases)
    assert nodes == {'node n1': ('PASS', '3 read(s), expected at most 0 errors: every one met '
                                         'it'),
                     'node n2': nodes['node n2'], 'node n3': nodes['node n3']}
    assert nodes['node n3'][0] == 'FAIL' and nodes['node n2'][0] == 'PASS'


def test_a_unit_no_job_read_is_not_run_never_a_silent_pass(cases):
    from hpcbench.acceptance.scopes import NODE
    edac = _contract(*FACTS).entries[4]
    verdict = judgement.judge_entry(edac, cases, expected={NODE.unit('srun', 'n4')})
    found = {str(u.unit): (u.verdict, u.reason) for u in verdict.units}
    assert found['node n4'] == ('NOT_RUN', 'not read: no job of it read this fact (see its '
                                           'jobs\' facts_unread)')
    assert verdict.verdict == 'FAIL'


def test_a_failing_figure_says_what_the_hardware_said_and_the_drain_reason_leads_with_facts(
        cases):
    """HPL committed beyond any node (1000 GFLOP/s): every node fails it, and each says what
    its hardware said around its runs: n2 its GPU at x8, n3 its port's symbol errors and its
    memory error, n1 nothing. The drain list names the facts first, then the figure."""
    import jsonschema
    from hpcbench.acceptance import outputs
    hpl = {**HPL, 'committed': {**HPL['committed'], 'value': 1000}}
    contract = contracts.from_data({'system': 'testbed', 'entries': [hpl, *FACTS]}, 'a test')
    verdicts = [judgement.judge_entry(e, cases) for e in contract.entries]
    said = {str(u.unit): u.hardware for u in verdicts[0].units}
    assert said == {'node n1': '',
                    'node n2': 'GPU 1 of n2: PCIe Gen3 x8 of Gen3 x16',
                    'node n3': '1 uncorrected memory error(s) during the job; port 1 of '
                               'mlx5_0 of n3: symbol_error +37 during the job'}
    lines = outputs.drain_lines(verdicts)
    assert lines[1].startswith("scontrol update NodeName=n2 State=DRAIN Reason='hpcbench "
                               'acceptance: GPU-PCIE-WIDTH FAIL (GPU 1 of n2: 8 lanes, '
                               'expected equal to 16 lanes); HPCC-NODE FAIL (node n2; GPU 1 '
                               'of n2: PCIe Gen3 x8 of Gen3 x16)')
    document = outputs.as_json('testbed', verdicts)
    jsonschema.validate(document, outputs.JSON_SCHEMA)
    assert [e.get('fact', False) for e in document['entries']] == [False, True, True, True,
                                                                    True]
    assert 'hardware' not in document['entries'][0]['units'][0]
    assert document['entries'][0]['units'][1]['hardware'].startswith('GPU 1 of n2')
    assert 'hardware: GPU 1 of n2: PCIe Gen3 x8 of Gen3 x16' in outputs.junit_xml(
        'testbed', verdicts)


def test_the_facts_docs_show_are_a_contract_s():
    from conftest import ROOT
    import yaml
    text = (ROOT / 'docs' / 'acceptance.md').read_text()
    block = next(b for b in re.findall(r'```yaml\n(.*?)```', text, re.S) if 'fact:' in b)
    entries = yaml.safe_load(block)
    found = _contract(*entries).entries[1:]
    assert [(e.figure, e.committed.words()) for e in found] == [
        ('pcie_width', 'equal to 16 lanes'), ('symbol_error_increase', 'at most 0 errors')]


def test_a_draft_expects_each_fact_as_most_units_of_a_partition_read_it(session, cases):
    """The baseline's jobs read n1..n3's facts: two P100s each (n2's second at x8), a
    ConnectX-3's two ports at 40 Gb/s and a ConnectX-4's at 25 on each. The draft expects
    x16 (5 of 6 GPUs), each port its own rate on most nodes (two entries, by port), no
    error growing; drafted, judged on the same runs, it fails n2's GPU and n3's port and
    memory, and passes the rest."""
    from hpcbench.acceptance import fact_drafts
    drafted = fact_drafts.from_sessions('testbed', [session])
    by_id = {e['id']: e for e in drafted}
    width = by_id['fact-pcie-width-gpu-srun']
    assert width['expect'] == {'equal': 16}
    # The sessions cited as every entry drawn from them cites them; what it read its own.
    assert width['source']['clause'] == '5 of 6 GPU(s) of srun read 16 lanes'
    assert width['source']['cite'] == (
        f'read around the jobs of stored session(s) {session["session_info"]["uuid"]} '
        f'({session["session_info"]["time_start"][:10]}) of testbed')
    assert width['fault']['code'] == 'GPU-PCIE-WIDTH'
    rates = {tuple(e.get('devices', ())): e['expect'] for e in drafted
             if e['fact'] == 'rate_gbps'}
    assert rates == {('mlx4_0/1', 'mlx4_0/2'): {'equal': 40}, ('mlx5_0/1',): {'equal': 25}}
    assert by_id['fact-symbol-error-nic-srun']['expect'] == {'increase_at_most': 0}
    assert by_id['fact-dimm-ranks-node-srun']['expect'] == {'equal': 4}
    # An uncorrected memory error: none during a job, none since boot.
    assert by_id['fact-edac-uncorrected-node-srun']['expect'] == {'increase_at_most': 0}
    since_boot = by_id['fact-edac-uncorrected-since-boot-node-srun']
    assert (since_boot['fact'], since_boot['expect']) == ('edac_uncorrected', {'at_most': 0})
    assert 'fact-xid-node-srun' not in by_id        # no dmesg read: nothing to draft
    # rasdaemon's record: no uncorrected error in it, none gained during a job.
    assert by_id['fact-ras-uncorrected-node-srun']['expect'] == {'increase_at_most': 0}
    recorded = by_id['fact-ras-uncorrected-recorded-node-srun']
    assert (recorded['fact'], recorded['expect']) == ('ras_uncorrected', {'at_most': 0})
    contract = contracts.from_data({'system': 'testbed', 'entries': [HPL, *drafted]},
                                   'a draft')
    failed = sorted(str(u.unit) for e in contract.entries[1:]
                    for u in judgement.judge_entry(e, cases).units if u.verdict == 'FAIL')
    # n3's memory four times: its error came during a job, is there since boot, and in
    # rasdaemon's record, gained during the job.
    assert failed == ['GPU 1 of n2', *['node n3'] * 4, 'port 1 of mlx5_0 of n3']


def test_a_job_that_failed_still_says_what_its_hardware_said(session):
    """n3's HPCC jobs failed their sanity check (as HPL does when a memory error spoils its
    residual): its HPL unit is INVALID, saying the memory error its jobs read, and its
    memory fact fails on those failed jobs' reads, as on a measured run's."""
    from hpcbench.results import measured
    for tc in session['runs'][0]['testcases']:
        if tc['job_nodelist'] == ['n3']:
            tc.update(result='fail', fail_phase='sanity', perfvalues={},
                      fail_reason='sanity error: the residual check failed')
    cases, failed = list(measured_runs(session)), list(measured.failed_runs(session))
    assert [list(r.node_facts) for r in failed] == [['n3']] * 3
    assert failed[0].node_facts['n3']['edac_uncorrected_increase'] == 1
    hpl, edac = _contract(FACTS[3]).entries
    verdict = judgement.judge_entry(hpl, cases, invalid=judgement.invalid_units(hpl, failed),
                                    failed=failed)
    n3 = next(u for u in verdict.units if u.unit.node == 'n3')
    assert n3.verdict == 'INVALID' and 'residual' in n3.reason
    assert n3.hardware.startswith('1 uncorrected memory error(s) during the job')
    nodes = {str(u.unit): u.verdict for u in judgement.judge_entry(edac, cases,
                                                                   failed=failed).units}
    assert nodes == {'node n1': 'PASS', 'node n2': 'PASS', 'node n3': 'FAIL'}
    # Without the failed runs' reads, n3's memory was read by no job.
    assert 'node n3' not in {str(u.unit) for u in judgement.judge_entry(edac, cases).units}


def test_a_version_is_a_text_fact_drafted_as_most_read_it_and_judged_equal(session, cases):
    """The driver, VBIOS and the adapters' firmware as their nodes read them: drafted as
    most units read them ("375.66" on every GPU; each port's firmware by its name), and a
    node whose driver differs fails naming what it read. A version committed as a number,
    or a figure as a text, is refused in one line."""
    import dataclasses
    from hpcbench.acceptance import fact_drafts, outputs
    drafted = {e['id']: e for e in fact_drafts.from_sessions('testbed', [session])}
    assert drafted['fact-driver-gpu-srun']['expect'] == {'equal': '375.66'}
    assert drafted['fact-driver-gpu-srun']['source']['clause'] == \
        '6 of 6 GPU(s) of srun read 375.66'
    firmware = {tuple(e.get('devices', ())): e['expect'] for e in drafted.values()
                if e['fact'] == 'firmware'}
    assert firmware == {('mlx4_0/1', 'mlx4_0/2'): {'equal': '2.31.5050'},
                        ('mlx5_0/1',): {'equal': '14.28.2006'}}
    driver = contracts.from_data({'system': 'testbed', 'entries': [
        HPL, drafted['fact-driver-gpu-srun']]}, 'a draft').entries[1]
    assert driver.committed.words() == 'equal to 375.66'
    older = [dataclasses.replace(c, device_texts={
        k: {**v, 'driver': '370.28'} for k, v in c.device_texts.items()})
        if 'n2' in c.node_facts else c for c in cases]
    verdict = judgement.judge_entry(driver, older)
    failed = {str(u.unit): u.reason for u in verdict.units if u.verdict == 'FAIL'}
    assert failed == {f'GPU {i} of n2': '3 read(s), expected equal to 375.66: 3 missed it, '
                                        'the last 370.28' for i in (0, 1)}
    drain = outputs.drain_lines([verdict])
    assert len(drain) == 1 and 'GPU 0 of n2: 370.28, expected equal to 375.66' in drain[0]
    import jsonschema
    jsonschema.validate(outputs.as_json('testbed', [verdict]), outputs.JSON_SCHEMA)
    for expect, said in (({'equal': 375.66}, 'driver is a text'),
                         ({'at_least': '375.66'}, 'expect'),
                         ):
        with pytest.raises(contracts.ContractError, match=said):
            _contract(_fact('x', 'driver', 'gpu', expect, 'X'))
    with pytest.raises(contracts.ContractError, match='pcie_width is a figure in lanes'):
        _contract(_fact('x', 'pcie_width', 'gpu', {'equal': '16'}, 'X'))


def test_online_cpus_are_drafted_as_the_description_states_not_as_most_nodes_read_them(
        session):
    """The partition's description (ReFrame's processor: num_cpus) states a node's CPUs.
    Every node reads half of them (SMT switched off by a BIOS update on all three): the
    draft expects what the description states, cites it and how many nodes read it, and
    fails all three; without a description it expects what most read."""
    from hpcbench.acceptance import fact_drafts
    for tc in session['runs'][0]['testcases']:
        (facts,) = tc['node_facts'].values()
        facts['online_cpus'] = 64.0
    cases = list(measured_runs(session))
    drafted = {e['id']: e for e in fact_drafts.from_sessions(
        'testbed', [session], {'srun': {'cpus': 128}})}
    cpus = drafted['fact-online-cpus-node-srun']
    assert cpus['expect'] == {'equal': 128.0} and cpus['source']['kind'] == 'description'
    assert cpus['source']['clause'].startswith("128 CPUs as the description of testbed's "
                                             "partition srun states (its processor's "
                                             "num_cpus); 0 of 3 node(s) read it")
    entry = contracts.from_data({'system': 'testbed', 'entries': [HPL, cpus]}, 'a draft')
    units = judgement.judge_entry(entry.entries[1], cases).units
    assert {u.verdict for u in units} == {'FAIL'} and len(units) == 3
    assert units[0].reason == ('3 read(s), expected equal to 128 CPUs: 3 missed it, the '
                               'worst 64 CPUs')
    most = {e['id']: e for e in fact_drafts.from_sessions('testbed', [session])}
    assert most['fact-online-cpus-node-srun']['expect'] == {'equal': 64.0}
    assert most['fact-online-cpus-node-srun']['source']['kind'] == 'baseline'
