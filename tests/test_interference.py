"""A benchmark does not measure a busy node, and an interrupted run leaves nothing running
and nothing behind: with real processes (a busy loop, the orphaned MPI job of a killed
ReFrame, a cancelled run) on this machine."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, ROOT, sigint_as_from_a_terminal
from hpcbench import job_script, quiet_node, results, rfm


def _busy_loop(seconds=120):
    """A real process burning one core, detached from the test (its own session)."""
    return subprocess.Popen(['timeout', str(seconds), 'sh', '-c', 'while :; do :; done'],
                            start_new_session=True)


def _stop(busy):
    os.killpg(busy.pid, signal.SIGKILL)
    busy.wait()


def test_a_busy_process_is_named_and_a_quiet_node_passes():
    busy = _busy_loop()
    try:
        time.sleep(0.3)
        busy_cores, others, used, total, _ = quiet_node.survey(0.5)
        chosen = quiet_node.settings(None)
        is_busy, line = quiet_node.verdict(chosen, busy_cores, others, used, total, 0.0)
        assert is_busy and busy_cores > 0.5
        assert line.startswith(f'{quiet_node.MARKER} BUSY: ')
        assert 'while :; do :; done' in line
    finally:
        _stop(busy)

    # Without it: this test's process and its ancestors (pytest) are not counted.
    script = subprocess.run([sys.executable, quiet_node.__file__], capture_output=True,
                            text=True)
    assert script.returncode == 0, script.stdout
    assert script.stdout.startswith(f'{quiet_node.MARKER} quiet: ')


def _quiet_node(*args):
    """The node check as a job runs it: (its result, seconds it took)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, quiet_node.__file__, *args], capture_output=True,
                          text=True)
    return done, time.monotonic() - start


def test_busy_exits_with_its_status_only_when_told_to_fail():
    busy = _busy_loop()
    try:
        time.sleep(0.3)
        fail, _ = _quiet_node('--wait', '0')
        # `warn` measures under the load as asked: it does not wait the default minute.
        warn, warn_seconds = _quiet_node('--action', 'warn')
    finally:
        _stop(busy)
    assert fail.returncode == quiet_node.BUSY_EXIT and 'BUSY' in fail.stdout
    assert warn.returncode == 0 and 'BUSY' in warn.stdout and warn_seconds < 10


def _skip_unless_quiet(when):
    """Skip unless no other process loads this machine (`when`: before or during the test):
    a test that times a wait for its own load assumes it is the only one."""
    check, _ = _quiet_node('--wait', '0')
    if check.returncode != 0:
        pytest.skip(f'another process loads this machine {when} the test, and the test times '
                    f'a wait for a load of its own alone: {check.stdout.strip()}')


def test_a_passing_load_delays_the_launch_and_the_wait_is_recorded():
    """A 4-s busy loop delays the launch by about its life: the wait (3 to 10 s) is bounded
    when nothing else loads the machine; a machine loaded by others before or during the
    test is said, not measured (CI once waited 35 s behind another process)."""
    _skip_unless_quiet('before')
    busy = _busy_loop(seconds=4)
    try:
        time.sleep(0.3)
        done, seconds = _quiet_node('--wait', '60')
    finally:
        _stop(busy)
    assert done.returncode == 0, done.stdout
    waited = re.match(rf'{quiet_node.MARKER} quiet: after waiting (\d+) s for it, ', done.stdout)
    assert waited and int(waited.group(1)) >= 3, done.stdout
    if int(waited.group(1)) > 10 or seconds >= 20:
        _skip_unless_quiet('during')
    assert int(waited.group(1)) <= 10 and 3 <= seconds < 20, done.stdout


def test_a_load_that_stays_fails_once_the_wait_is_over_naming_it():
    busy = _busy_loop()
    try:
        time.sleep(0.3)
        done, seconds = _quiet_node('--wait', '3')
    finally:
        _stop(busy)
    assert done.returncode == quiet_node.BUSY_EXIT
    assert re.match(rf'{quiet_node.MARKER} BUSY: after waiting [34] s for it, ', done.stdout)
    assert 'while :; do :; done' in done.stdout
    assert 3 <= seconds < 15


@pytest.mark.parametrize('setting, message', [
    ({'action': 'sometimes'}, "action 'sometimes'"),
    ({'max_busy_cores': 0}, 'max_busy_cores=0: a positive number'),
    ({'max_busy_cores': float('nan')}, 'max_busy_cores=nan'),
    ({'max_memory_in_use': 1.5}, 'at most 1'),
    ({'treshold': 1}, 'unknown setting'),
    ({'wait': -1}, 'wait=-1: seconds, 0 or more'),
    ({'wait': '60'}, "wait='60'"),
])
def test_bad_settings_are_refused(setting, message):
    with pytest.raises(quiet_node.QuietNodeSettingsError, match=re.escape(message)):
        quiet_node.settings(setting)


def test_a_failed_launch_among_repeated_launches_fails_the_job(tmp_path):
    class Job:
        prerun_cmds, postrun_cmds = ['echo before'], ['echo after']

    test = Job()
    rfm.repeat_launch(test, 3)
    # The second of three launches fails; the job's status must say so.
    script = '\n'.join([*test.prerun_cmds, '[ "$launch" -ne 2 ]', *test.postrun_cmds])
    proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.count('wall_ns=') == 3 and 'after' not in proc.stdout
    ok = subprocess.run(['bash', '-c', script.replace('-ne 2', '-ne 9')],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith('after')


def test_mpi_scratch_falls_back_to_the_jobs_directory(tmp_path):
    job = tmp_path / 'job'
    job.mkdir()
    script = '\n'.join([*job_script.mpi_scratch(str(tmp_path / 'no-shm')), 'echo "$TMPDIR"'])
    proc = subprocess.run(['bash', '-c', script], cwd=job, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f'{job}/hpcbench-mpi.')
    assert list(job.iterdir()) == []


def test_mpi_scratch_is_removed_however_the_job_ends(tmp_path):
    for ending in ('exit 0', 'exit 3', 'kill -TERM $$; sleep 5'):
        script = '\n'.join([*job_script.mpi_scratch(str(tmp_path)), 'echo "$TMPDIR"',
                            'touch "$OMPI_MCA_btl_vader_backing_directory/vader_segment.x"',
                            ending])
        proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True)
        assert proc.stdout.startswith(str(tmp_path / 'hpcbench-mpi.')), ending
        assert list(tmp_path.iterdir()) == [], ending


# The real thing: Debian's HPCC on Debian's Open MPI through ReFrame (the registry-only
# path, which a fresh machine has), large enough to run for minutes.
needs_registry_hpcc = pytest.mark.skipif(
    not shutil.which('hpcc') or not shutil.which('mpirun.openmpi'),
    reason='Debian hpcc/Open MPI missing: `make test` installs them as root '
           '(hpcbench setup --registry-only)')


def _start_long_hpcc(var):
    env = {**os.environ, 'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'}
    return subprocess.Popen(
        [str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c', 'reframe-checks',
         '-n', 'HpccCheck', '-S', 'memory_fraction=0.3', '-r'],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=sigint_as_from_a_terminal)


def _job_processes(stage):
    """PIDs of processes working in `stage` (the job script, mpirun, the ranks)."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                if os.readlink(f'/proc/{entry}/cwd').startswith(str(stage)):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _wait_for_ranks(var, reframe, timeout=120):
    stage = var / 'stage'
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranks = [p for p in _job_processes(stage)
                 if open(f'/proc/{p}/comm').read().strip() == 'hpcc']
        if len(ranks) >= 1:
            return ranks
        assert reframe.poll() is None, reframe.stdout.read()
        time.sleep(0.5)
    raise AssertionError('HPCC never started')


def _kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _shared_memory_and_tmp():
    return {p for d in ('/dev/shm', '/tmp') for p in os.listdir(d)
            if re.match(r'(vader_segment|ompi\.|hpcbench-mpi)', p)}


@pytest.fixture
def killed_jobs_scratch():
    """What jobs this test kills with SIGKILL leave (no trap runs then): their MPI scratch
    directories in /dev/shm, removed after the test."""
    before = set(os.listdir('/dev/shm'))
    yield
    for name in set(os.listdir('/dev/shm')) - before:
        if name.startswith('hpcbench-mpi.'):
            shutil.rmtree(os.path.join('/dev/shm', name), ignore_errors=True)


@needs_registry_hpcc
@pytest.mark.parametrize('signal_name', ['INT', 'TERM'])
def test_a_cancelled_run_leaves_nothing_running_and_nothing_behind(tmp_path, signal_name):
    before = _shared_memory_and_tmp()
    var = tmp_path / 'var'
    reframe = _start_long_hpcc(var)
    try:
        _wait_for_ranks(var, reframe)
        # Open MPI's files of the running job are in the job's own directory.
        during = _shared_memory_and_tmp() - before
        assert during and all(p.startswith('hpcbench-mpi.') for p in during), during
        reframe.send_signal(getattr(signal, f'SIG{signal_name}'))
        out, _ = reframe.communicate(timeout=60)
        assert reframe.returncode != 0
        deadline = time.monotonic() + 10
        while _job_processes(var / 'stage') and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _job_processes(var / 'stage') == [], out[-2000:]
        assert _shared_memory_and_tmp() - before == set()
    finally:
        if reframe.poll() is None:
            reframe.kill()
        _kill_all(_job_processes(var / 'stage'))


@needs_registry_hpcc
def test_the_orphaned_job_of_a_killed_run_fails_the_next_run_naming_it(tmp_path,
                                                                       killed_jobs_scratch):
    first, second = tmp_path / 'first', tmp_path / 'second'
    reframe = _start_long_hpcc(first)
    orphans = []
    try:
        ranks = _wait_for_ranks(first, reframe)
        # kill -KILL: ReFrame cannot cancel its job, which lives on.
        reframe.kill()
        reframe.wait()
        time.sleep(1)
        orphans = _job_processes(first / 'stage')
        assert set(ranks) <= set(orphans)
        env = {**os.environ, 'HPCBENCH_VAR': str(second), 'HPCBENCH_NO_SPACK': '1'}
        proc = subprocess.run(
            [str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c', 'reframe-checks',
             # An orphan stays: waiting the default minute for it would only be slower.
             '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-S', 'quiet_node_wait=0',
             '-r'],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
        assert proc.returncode != 0
        reason = re.search(r'Reason: sanity error: the node was not quiet before the launch: '
                           r'BUSY: ([\d.]+) core.*', out)
        assert reason and float(reason.group(1)) > 0.25, out[-3000:]
        assert any(f'PID {pid} ' in reason.group(0) for pid in ranks)
        assert 'hpcc' in reason.group(0)
        # The busy node was found before the launch: nothing was measured.
        assert not re.search(r'^P: hpl:', out, re.M)
    finally:
        if reframe.poll() is None:
            reframe.kill()
        _kill_all(orphans or _job_processes(first / 'stage'))


def _reframe(var, *args, timeout=600):
    env = {**os.environ, 'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'}
    return subprocess.run([str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c',
                           'reframe-checks', *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@needs_registry_hpcc
def test_a_second_run_in_the_same_var_refuses_naming_the_first(tmp_path, killed_jobs_scratch):
    var = tmp_path / 'var'
    first = _start_long_hpcc(var)
    try:
        _wait_for_ranks(var, first)
        stage = sorted((var / 'stage').rglob('HpccCheck*'))
        second = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
        assert second.returncode == 1
        assert re.search(rf'error: {var} is in use by another run \(PID {first.pid}, started '
                         r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+: .*reframe .*-r\)',
                         second.stderr), second.stderr
        assert 'Traceback' not in second.stderr + second.stdout
        # Nothing of the first run was touched; listing (no run) is not locked out.
        assert sorted((var / 'stage').rglob('HpccCheck*')) == stage
        assert _job_processes(var / 'stage')
        listing = _reframe(var, '-n', 'HpccCheck', '-l')
        assert listing.returncode == 0, listing.stderr
    finally:
        first.kill()
        first.wait()
        _kill_all(_job_processes(var / 'stage'))

    # Killed with SIGKILL, the first run holds no lock: the next run goes ahead.
    third = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    assert 'is in use by another run' not in third.stderr
    assert re.search(r'Ran 2/2 test case', third.stdout), third.stdout[-2000:]


@needs_registry_hpcc
def test_each_run_keeps_its_log_and_a_dry_run_stores_nothing(tmp_path):
    var = tmp_path / 'var'
    dry = _reframe(var, '-n', 'HpccCheck', '--dry-run')
    assert dry.returncode == 0, dry.stdout[-2000:]
    # The job script was written, nothing was stored as a result.
    assert list((var / 'stage').rglob('HpccCheck*/rfm_job.sh'))
    assert not (var / 'perflogs').exists() and not (var / 'reports').exists()
    assert not (var / 'results.db').exists()

    run = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    assert run.returncode == 0, run.stdout[-2000:]
    logs = sorted((var / 'logs').glob('reframe-run_*.log'))
    assert len(logs) == 2
    size = logs[-1].stat().st_size
    assert size > 1000 and 'HpccCheck' in logs[-1].read_text()
    # Queries of the stored results (as `hpcbench report` makes) leave the run's log whole.
    query = _reframe(var, '--list-stored-sessions')
    assert query.returncode == 0, query.stderr
    assert logs[-1].stat().st_size == size
    assert (var / 'logs' / 'reframe-query.log').exists()


@needs_registry_hpcc
def test_a_load_at_the_start_of_a_run_delays_the_first_benchmark_and_no_build_runs_beside_it(
        tmp_path):
    """Issue 22: a real load when a run starts (a busy loop for 8 s, as the builds' tail
    was) delays the first benchmark's launch until it has passed: the benchmark measures a
    quiet node, says how long it waited, and its session shows that no build's job ran
    beside a benchmark's."""
    var = tmp_path / 'var'
    busy = _busy_loop(seconds=8)
    try:
        proc = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    finally:
        _stop(busy)
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    report, = (var / 'reports').glob('run-report-*.json')
    session = json.loads(report.read_text())
    hpcc, = [tc for run in session['runs'] for tc in run['testcases']
             if tc['name'].startswith('HpccCheck')]
    waited = re.match(r'quiet: after waiting (\d+) s for it, ', hpcc['node_state'])
    assert waited and 3 <= int(waited.group(1)) <= 20, hpcc['node_state']
    build, = [tc for run in session['runs'] for tc in run['testcases']
              if tc['name'].startswith('HpccBuild')]
    assert build['build_job_interval'][1] <= hpcc['job_submit_time']
    assert results.builds_beside_benchmarks(session) == []
    assert results.time_table(session).endswith('no build ran beside a benchmark job')
