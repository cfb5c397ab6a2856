"""`hpcbench accept` on the Slurm testbed, end to end (issue 63): six CPU nodes, n2 made
slow for real (its slurmd, and so every job step it starts, given half of one CPU by a
cgroup quota: hpcbench.devtools.testbed_slowdown), n4 drained through Slurm; a contract of
HPCC's HPL on every node of `srun`, the median of three runs. The acceptance names n2 slow
(and drains it in its list), n4 NOT_RUN with Slurm's reason, passes the others; its JUnit
XML reads; `--verify` passes, and fails after one byte of a stored session changes; run
again it resumes and runs nothing it has. Six, not four: beside two peers alone, two
healthy nodes 15 GFLOP/s apart (this VM's HPL: 38 to 53) hid a node at a fifth of them
(CI's clean root, 2026-12-01); beside four their median and spread hold."""
import json
import os
import subprocess

import junitparser
import pytest
import yaml

from conftest import BIN, ROOT
from hpcbench.devtools import testbed_slowdown
from test_testbed import running_testbed

CONTRACT = {'system': 'testbed', 'about': 'HPCC on every node of the testbed', 'entries': [{
    'id': 'hpcc-hpl-node', 'check': 'HpccCheck', 'figure': 'hpl', 'scope': 'node',
    'partitions': ['srun'],
    # Every node of this machine meets it: the slow node is caught beside its peers.
    'committed': {'value': 0.001, 'unit': 'GFLOP/s', 'direction': 'at_least'},
    'statistic': {'median_of': 3},
    'run_rules': {'settings': {'memory_fraction': 0.002}},
    'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
    'fault': {'code': 'HPL-NODE', 'action': 'drain it; check its CPU share'}}]}


def test_a_slow_node_s_quota_comes_in_periods_short_beside_the_work_it_slows(tmp_path):
    """Work shorter than a quota's period escapes it where it starts on a fresh one: 10 ms
    periods, longer only where the share would get less than the kernel's 1 ms of quota."""
    assert testbed_slowdown.quota(0.5) == (10_000, 5_000)
    assert testbed_slowdown.quota(0.25) == (10_000, 2_500)
    assert testbed_slowdown.quota(1.8) == (10_000, 18_000)
    assert testbed_slowdown.quota(8) == (10_000, 80_000)
    assert testbed_slowdown.quota(0.05) == (20_000, 1_000)
    assert testbed_slowdown.quota(0.001) == (1_000_000, 1_000)
    from hpcbench.stack import testbed_system
    with pytest.raises(testbed_slowdown.SlowdownError, match='from 0.001 to 8'):
        testbed_slowdown.slow(testbed_system.Layout(tmp_path), 'n2', 0.0005)


@pytest.fixture
def six_nodes():
    yield from running_testbed(6)


def _accept(layout, var, *args):
    # HPCC from Debian (the registry-only path) whether or not a Spack is here: what a
    # Spack would build, it builds in `make test`'s spack tests.
    env = dict(os.environ, HPCBENCH_TESTBED_DIR=str(layout.root), HPCBENCH_VAR=str(var),
               HPCBENCH_NO_SPACK='1')
    return subprocess.run([str(BIN / 'hpcbench'), 'accept', '--system', 'testbed', *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=1500)


def test_the_testbed_s_acceptance_names_the_slow_node_and_the_drained_node(six_nodes,
                                                                          tmp_path):
    try:
        group = testbed_slowdown.slow(six_nodes, 'n2', 0.5)
    except (testbed_slowdown.SlowdownError, OSError) as err:
        pytest.skip(f'no node can be made slow here: {err}')
    env = dict(os.environ, SLURM_CONF=str(six_nodes.slurm_conf))
    subprocess.run(['scontrol', 'update', 'NodeName=n4', 'State=DRAIN',
                    'Reason=fan failure'], env=env, check=True, timeout=60)
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    directory = tmp_path / 'acceptance'
    done = _accept(six_nodes, tmp_path / 'var', '--contract', str(contract), '--output',
                   str(directory))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert 'n4: out of service (IDLE+DRAIN: drained (fan failure' in done.stdout

    written = json.loads((directory / 'verdicts.json').read_text())
    units = {u['node']: u for u in written['entries'][0]['units']}
    healthy = ('n1', 'n3', 'n5', 'n6')
    assert sorted(units) == ['n1', 'n2', 'n3', 'n4', 'n5', 'n6']
    assert [len(units[n]['values']) for n in ('n2', *healthy)] == [3] * 5
    shown = {n: (u['values'], u['slow']) for n, u in units.items()}
    # Slowed in every run (with 100 ms quota periods one of three escaped: HPL is 25 ms).
    assert max(units['n2']['values']) < min(v for n in healthy for v in units[n]['values']), \
        shown
    assert units['n2']['slow'] and not any(units[n]['slow'] for n in healthy), shown
    assert [units[n]['verdict'] for n in healthy] == ['PASS'] * 4
    assert units['n4']['verdict'] == 'NOT_RUN' and 'fan failure' in units['n4']['reason']
    assert written['verdict'] == 'FAIL'
    drain = (directory / 'drain-list.sh').read_text().splitlines()[1:]
    assert [line.split()[2] for line in drain] == ['NodeName=n2']
    (suite,) = junitparser.JUnitXml.fromfile(str(directory / 'junit.xml'))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 1, 0, 0)
    assert [case.name for case in suite if case.result] == ['node n4']

    verify = subprocess.run([str(BIN / 'hpcbench'), 'accept', '--verify', str(directory)],
                            capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, HPCBENCH_VAR=str(tmp_path / 'var')))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    session = sorted((directory / 'sessions').glob('*.json'))[0]
    original = session.read_bytes()
    session.write_bytes(original.replace(b'"hpl"', b'"hpL"', 1))
    verify = subprocess.run([str(BIN / 'hpcbench'), 'accept', '--verify', str(directory)],
                            capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, HPCBENCH_VAR=str(tmp_path / 'var')))
    assert verify.returncode == 1 and f'sessions/{session.name}: changed' in verify.stdout
    session.write_bytes(original)

    # Run again: it resumes, and runs nothing it has (n4 still drained).
    sessions = json.loads((directory / 'state.json').read_text())['sessions']
    again = _accept(six_nodes, tmp_path / 'var', '--contract', str(contract), '--output',
                    str(directory))
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    assert f'resuming the acceptance in {directory}: {len(sessions)} session(s)' in again.stdout
    assert 'running:' not in again.stdout
    assert json.loads((directory / 'state.json').read_text())['sessions'] == sessions
    # n2 given its CPUs back: the group made for it is gone, and nothing else.
    assert testbed_slowdown.restore(six_nodes, 'n2') and not group.exists()
    assert not testbed_slowdown.restore(six_nodes, 'n2')
