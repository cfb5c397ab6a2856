"""`local` accepts itself against a contract drawn from its own baseline (issue 63): HPCC
measured three times on this machine (the baseline session), `hpcbench contract init local
--checks HpccCheck --factor 0.25` commits a quarter of its medians (four times its
latencies), and `hpcbench accept --system local` runs what that contract names and passes
every entry; an entry committed at twice the median fails, with its p-value said.

A quarter, not a half: this shared 2-core VM's HPCC latencies (under a microsecond, two
ranks on one host) vary threefold from run to run; in CI's clean root a baseline median of
0.227 us met runs of 0.475, 0.670 and 0.226 us, short of twice it."""
import json
import os
import subprocess

import yaml

from conftest import BIN, ROOT, run_reframe


def _hpcbench(var, *args, timeout=1200):
    return subprocess.run([str(BIN / 'hpcbench'), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout,
                          env=dict(os.environ, HPCBENCH_VAR=str(var), HPCBENCH_NO_SPACK='1'))


def test_local_accepts_itself_against_a_contract_drawn_from_its_baseline(tmp_path):
    var = tmp_path / 'var'
    baseline = run_reframe('-n', '^HpccCheck$', '--repeat', '3', '-S',
                           'HpccCheck.memory_fraction=0.002', '-S', 'HpccCheck.every_mpi=false',
                           '-S', 'HpccCheck.every_blas=false', '-r',
                           env={'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'})
    assert baseline.returncode == 0, baseline.stdout[-3000:] + baseline.stderr[-2000:]
    contract = tmp_path / 'local.yaml'
    drafted = _hpcbench(var, 'contract', 'init', 'local', '--checks', 'HpccCheck',
                        '--factor', '0.25', '--output', str(contract))
    assert drafted.returncode == 0, drafted.stderr
    data = yaml.safe_load(contract.read_text())
    measured = [e for e in data['entries'] if 'figure' in e]
    figures = {e['figure'] for e in measured}
    assert {'hpl', 'star_dgemm', 'star_stream_triad'} <= figures, figures
    assert all(e['source']['kind'] == 'baseline' and e['source']['factor'] == 0.25
               for e in measured)
    # The facts this machine read around the baseline's jobs, drafted as it read them: its
    # CPUs, its memory (at least 0.99 of it), its RDMA ports (none); they pass, it is the
    # same machine.
    facts = {e['fact']: e['expect'] for e in data['entries'] if 'fact' in e}
    assert facts['online_cpus'] == {'equal': float(os.cpu_count())}, facts
    assert set(facts['memory_gib']) == {'at_least'} and facts['rdma_ports'] == {'equal': 0}
    for entry in measured:
        entry['run_rules'] = {'settings': {'memory_fraction': 0.002}}
    # One entry committed at twice what was measured: it fails, the rest pass.
    hpl = next(e for e in measured if e['figure'] == 'hpl')
    hpl['committed']['value'] = round(hpl['source']['figure'] * 2, 4)
    contract.write_text(yaml.safe_dump(data, sort_keys=False))

    done = _hpcbench(var, 'accept', '--system', 'local', '--contract', str(contract),
                     '--output', str(tmp_path / 'acceptance'))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    written = json.loads((tmp_path / 'acceptance' / 'verdicts.json').read_text())
    verdicts = {e['id']: e for e in written['entries']}
    failing = [i for i, e in verdicts.items() if e['verdict'] != 'PASS']
    assert failing == [hpl['id']], {i: e['reason'] for i, e in verdicts.items()}
    (unit,) = verdicts[hpl['id']]['units']
    assert unit['verdict'] == 'FAIL' and 'one-sided t-test p = ' in unit['reason']
    assert len(unit['values']) == 3


def _processes(name):
    """PIDs of this host's running processes whose command is `name`: not those that have
    ended and wait for their parent to reap them (zombies, state Z; HPCC's ranks were, a
    second after mpirun was told to end, in CI's clean root)."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as fp:
                    stat = fp.read()
            except OSError:
                continue
            # pid (comm) state ...: comm may hold spaces and parentheses; state follows the last ')'.
            comm, state = stat[stat.index('(') + 1:stat.rindex(')')], stat[stat.rindex(')') + 2:][:1]
            if comm == name and state not in ('Z', 'X'):
                found.append(int(entry))
    return found


def test_sigterm_to_an_acceptance_ends_its_jobs_and_keeps_what_finished(tmp_path):
    """Issue 70, item 9: SIGTERM to `hpcbench accept` (and so to `make accept`) ended
    ReFrame with SIGKILL: its job script, `mpirun` and both HPCC ranks kept running,
    orphaned. ReFrame is now sent SIGTERM, cancels its job, and the acceptance ends with
    the signal's status, its job's processes gone; run again, it resumes."""
    import signal
    import time
    contract = tmp_path / 'local.yaml'
    contract.write_text(yaml.safe_dump({'system': 'local', 'entries': [{
        'id': 'hpcc-hpl', 'check': 'HpccCheck', 'figure': 'hpl', 'scope': 'node',
        'committed': {'value': 0.001, 'unit': 'GFLOP/s', 'direction': 'at_least'},
        'statistic': {'median_of': 1},
        # A run long enough to be caught in: HPL at N = 9000, about a minute here.
        'run_rules': {'settings': {'n': 9000, 'every_mpi': False, 'every_blas': False}},
        'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
        'fault': {'code': 'HPL', 'action': 'look'}}]}))
    before = set(_processes('hpcc'))
    accept = subprocess.Popen(
        [str(BIN / 'hpcbench'), 'accept', '--system', 'local', '--contract', str(contract),
         '--output', str(tmp_path / 'acceptance')], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, HPCBENCH_VAR=str(tmp_path / 'var'), HPCBENCH_NO_SPACK='1'))
    deadline = time.monotonic() + 300
    while not set(_processes('hpcc')) - before and time.monotonic() < deadline:
        assert accept.poll() is None, accept.communicate()
        time.sleep(0.5)
    ranks = set(_processes('hpcc')) - before
    assert ranks, 'HPCC never started'
    accept.send_signal(signal.SIGTERM)
    _, stderr = accept.communicate(timeout=120)
    assert accept.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert 'hpcbench accept: interrupted (SIGTERM); run it again to go on' in stderr
    # mpirun, told to end, ends its ranks in a moment; orphaned, they ran the rest of HPL
    # (about a minute at this N).
    deadline = time.monotonic() + 5
    while ranks & set(_processes('hpcc')) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ranks & set(_processes('hpcc')), 'HPCC ranks left running'
    assert not _processes('reframe') or all(
        'acceptance' not in open(f'/proc/{p}/cmdline').read() for p in _processes('reframe'))
