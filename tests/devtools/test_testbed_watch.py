"""`hpcbench watch` on the Slurm testbed, end to end, through the command a site runs: four
CPU nodes accepted on HPCC's HPL (three runs each), then cycles with --act into the
testbed's real Pushgateway and VictoriaMetrics. n2 made slow for real (a tenth of one
CPU: hpcbench.devtools.testbed_slowdown) drifts from its accepted runs and is drained
through Slurm; the site gives it its CPU back and marks it repaired; the next cycle reserves
it, resumes it, re-tests it inside the reservation and leaves it in service. The healthy
nodes are never drained; each cycle's record verifies (`hpcbench watch --verify`).

The slow node misses the contract's clause (10 GFLOP/s; this VM's nodes run HPL at 40 to
70, a quarter of one CPU at 2 to 6, a tenth less) and is drained at once; drift, whose streak (3) no
node reaches in these cycles, is said and not acted on: on a 2-core VM four nodes' HPL
runs share the cores and spread by a fifth."""
import json
import os
import re
import subprocess
import time

import pytest
import yaml

from conftest import BIN, ROOT
from hpcbench.acceptance import watch_record
from hpcbench.devtools import testbed_metrics, testbed_slowdown
from test_testbed import running_testbed

CONTRACT = {'system': 'testbed', 'about': 'HPL on every node, watched', 'entries': [{
    'id': 'hpl', 'check': 'HpccCheck', 'figure': 'hpl', 'scope': 'node',
    'partitions': ['srun'],
    'committed': {'value': 10, 'unit': 'GFLOP/s', 'direction': 'at_least',
                  'tolerance': 0.05},
    'statistic': {'median_of': 3},
    'run_rules': {'settings': {'memory_fraction': 0.002}},
    # From 30 % worse: a healthy node's runs here wander from its three accepted ones by
    # more than the testbed's contract's 10 %, since that baseline is itself a draw of
    # three (n2 accepted at 47.7 GFLOP/s, runs 36 to 49, then re-tested healthy 19 % below
    # it; n2 and n4 of CI runs 15 % below, at p = 0.005, 2026-12-06; healthy cycles up to
    # 20 % worse). The slow node's runs are over 90 % worse.
    'watch': {'period': '1m', 'action': 'drain', 'streak': 3, 'min_effect': 0.3},
    'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
    'fault': {'code': 'HPL-NODE', 'action': 'drain it; check its CPU share'}}]}


@pytest.fixture
def four_nodes():
    yield from running_testbed(4)


def _hpcbench(layout, var, *args):
    env = dict(os.environ, HPCBENCH_TESTBED_DIR=str(layout.root), HPCBENCH_VAR=str(var),
               HPCBENCH_NO_SPACK='1')
    return subprocess.run([str(BIN / 'hpcbench'), *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=1500)


def _node(layout, name):
    env = dict(os.environ, SLURM_CONF=str(layout.slurm_conf))
    out = subprocess.run(['scontrol', 'show', 'node', '-o', name], capture_output=True,
                         text=True, env=env, timeout=60).stdout
    state = re.search(r'State=(\S+)', out).group(1)
    reason = re.search(r'Reason=(.*?)(?= \w+=|$)', out)
    return state, reason.group(1) if reason else ''


def test_a_slow_node_is_drained_and_once_repaired_re_tested_in_a_reservation_and_resumed(
        four_nodes, tmp_path):
    urls = testbed_metrics.start(four_nodes)
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(CONTRACT))
    acceptance, directory, var = tmp_path / 'acceptance', tmp_path / 'watch', tmp_path / 'var'
    done = _hpcbench(four_nodes, var, 'accept', '--system', 'testbed', '--contract',
                     str(contract), '--output', str(acceptance))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    options = ['watch', 'testbed', '--contract', str(contract), '--acceptance',
               str(acceptance), '--output', str(directory), '--act', '--max-drain', '0.25',
               '--pushgateway', urls['pushgateway'].split('//')[1], '--victoria-metrics',
               urls['victoria-metrics']]
    records = []

    def cycle(expected_exit):
        # Each node due again: judged at least half its period (a minute) ago.
        if records:
            time.sleep(max(0.0, records[-1]['time'] + 31 - time.time()))
        done = _hpcbench(four_nodes, var, *options)
        assert done.returncode == expected_exit, done.stdout[-3000:] + done.stderr[-3000:]
        name = re.search(r'^testbed: cycle (\S+): ', done.stdout, re.M).group(1)
        records.append(json.loads((directory / watch_record.CYCLES / name /
                                   watch_record.CYCLE_RECORD).read_text()))
        return done.stdout

    cycle(0)
    assert {n: o['outcome'] for n, o in records[0]['nodes'].items()} == \
        {'n1': 'PASS', 'n2': 'PASS', 'n3': 'PASS', 'n4': 'PASS'}
    try:
        # A tenth of one CPU: at a quarter, one of a node's three runs could escape the
        # quota (14 GFLOP/s beside 3), and the clause, judged by a t-test, only warned.
        testbed_slowdown.slow(four_nodes, 'n2', 0.1)
    except (testbed_slowdown.SlowdownError, OSError) as err:
        pytest.skip(f'no node can be made slow here: {err}')
    said = cycle(1)
    assert records[1]['nodes']['n2']['outcome'] == 'FAIL', said
    drift, = [d for d in records[1]['drifts'] if d['node'] == 'n2']
    # Over 90 % below its accepted runs; three runs beside three or six are short of 0.05
    # over four nodes (p = 0.05, 0.012): the clause acted.
    assert drift['effect'] > 0.3, drift
    assert [(a['node'], a['kind'], a['run']) for a in records[1]['actions']] == \
        [('n2', 'drain', True)]
    state, reason = _node(four_nodes, 'n2')
    assert 'DRAIN' in state and reason.startswith('hpcbench watch: HPL-NODE hpl contract')
    # The site repairs it and says so.
    testbed_slowdown.restore(four_nodes, 'n2')
    env = dict(os.environ, SLURM_CONF=str(four_nodes.slurm_conf))
    subprocess.run(['scontrol', 'update', 'NodeName=n2', 'Reason=hpcbench: repaired'],
                   env=env, check=True, timeout=60)
    said = cycle(0)
    if records[-1]['returned']['n2'].startswith('drained again'):
        # Kept drained by chance (watch_record.RETEST_RUNS): the site marks it repaired
        # again, as it would.
        subprocess.run(['scontrol', 'update', 'NodeName=n2', 'Reason=hpcbench: repaired'],
                       env=env, check=True, timeout=60)
        said = cycle(0)
    assert records[-1]['returned']['n2'].startswith('resumed: n2: every watched entry met'), \
        said
    assert _node(four_nodes, 'n2')[0] == 'IDLE'
    # Its healthy peers ran beside it in its reservation, their jobs there as its own.
    retest = json.loads((directory / watch_record.CYCLES / f'{records[-1]["cycle"]}-return' /
                         watch_record.CYCLE_RECORD).read_text())
    assert retest['peers'] and set(retest['peers']) <= {'n1', 'n3', 'n4'}, retest
    ran = {f['node'] for f in retest['figures'] if f['runs']}
    assert ran == {'n2', *retest['peers']}, retest['figures']
    assert 'beside it in its reservation' in next(d['reason'] for d in retest['drifts']
                                                  if d['node'] == 'n2')
    reservations = subprocess.run(['scontrol', 'show', 'reservation'], env=env,
                                  capture_output=True, text=True, timeout=60).stdout
    assert 'hpcbench-watch' not in reservations
    drained = [a for r in records for a in r['actions'] if a['kind'] == 'drain']
    assert [a['node'] for a in drained] == ['n2']
    for name in [r['cycle'] for r in records] + [f'{records[-1]["cycle"]}-return']:
        done = _hpcbench(four_nodes, var, 'watch', 'testbed', '--verify',
                         str(directory / watch_record.CYCLES / name))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    history = _hpcbench(four_nodes, var, 'watch', 'testbed', '--output', str(directory),
                        '--history', 'n2')
    assert history.returncode == 0 and len(history.stdout.splitlines()) >= 3, history.stderr
    # n2's figures of the cycles it ran in VictoriaMetrics, at their cycles' times.
    stored = testbed_metrics.exported(urls['victoria-metrics'],
                                      'hpcbench_watch_drift_ratio{node="n2"}')
    points = sorted(p for _, values in stored for p in values)
    assert [t for t, _ in points] == [pytest.approx(r['time'], abs=1) for r in records[:2]]
    assert points[1][1] > 0.3, points


def test_the_schedule_is_a_job_slurm_holds_until_its_time_and_uninstall_cancels_it(
        four_nodes, tmp_path):
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump({**CONTRACT, 'entries': [
        {**CONTRACT['entries'][0], 'watch': {'period': '1d'}}]}))
    var, directory = tmp_path / 'var', tmp_path / 'watch'
    options = ['watch', 'testbed', '--contract', str(contract), '--output', str(directory)]
    done = _hpcbench(four_nodes, var, *options, '--install', 'sbatch', '--every', '1h',
                     '--partition', 'batch')
    assert done.returncode == 0, done.stdout + done.stderr
    job = re.match(r'job (\d+) \(hpcbench-watch-testbed\) submitted: one cycle every 1h',
                   done.stdout).group(1)
    env = dict(os.environ, SLURM_CONF=str(four_nodes.slurm_conf))
    # The job, or (once it began) the next one it submitted first: one is always queued.
    queued = subprocess.run(['squeue', '-h', '-n', 'hpcbench-watch-testbed', '-o', '%i %P'],
                            env=env, capture_output=True, text=True, timeout=60).stdout
    assert [line.split()[1] for line in queued.splitlines()][:1] == ['batch'], queued
    assert int(queued.split()[0]) >= int(job)
    script = (directory / 'hpcbench-watch-testbed.sbatch').read_text()
    assert f'--contract {contract}' in script and '--act' not in script
    done = _hpcbench(four_nodes, var, *options, '--uninstall', 'sbatch')
    assert done.returncode == 0 and 'cancelled' in done.stdout, done.stdout + done.stderr
    wait_for_gone = time.monotonic() + 30
    while time.monotonic() < wait_for_gone and subprocess.run(
            ['squeue', '-h', '-n', 'hpcbench-watch-testbed', '-t', 'PENDING,RUNNING'],
            env=env, capture_output=True, text=True, timeout=60).stdout.strip():
        time.sleep(0.5)
    assert not (directory / 'hpcbench-watch-testbed.sbatch').exists()
    # A period the schedule would outrun: one message, nothing submitted.
    done = _hpcbench(four_nodes, var, *options, '--install', 'sbatch', '--every', '1d')
    assert done.returncode == 2 and 'is shorter than two cycles' in done.stderr, done.stderr
