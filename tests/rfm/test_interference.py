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
from pathlib import Path

import pytest

from conftest import BIN, ROOT, needs_root, signals_as_from_a_terminal
from hpcbench.core import job_script
from hpcbench.results import session_time
from hpcbench.core import launch_lock, quiet_node
from hpcbench.rfm import partition


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
    partition.repeat_launch(test, 3)
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
        start_new_session=True, preexec_fn=signals_as_from_a_terminal)


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
        # The orphaned job still holds the node's launch lock: named, its ranks too.
        reason = re.search(r"Reason: sanity error: the job did not take the node's launch "
                           r"lock and ran nothing: "
                           r"BUSY: the node's launch lock is held by another hpcbench job, "
                           r"orphaned \(the run that started it is gone\): not waited for: "
                           r"the job of PID \d+ .*", out)
        assert reason, out[-3000:]
        # In full in the job's output: the orphaned job, by its script's PID and directory,
        # and its processes (its script, launcher and ranks).
        line, = [ln for path in second.rglob('HpccCheck*/rfm_job.out')
                 for ln in path.read_text().splitlines() if ln.startswith(quiet_node.MARKER)]
        job_script, = [pid for pid in orphans if 'rfm_job.sh' in _command_of(pid)]
        assert f'the job of PID {job_script} ' in line and str(first / 'stage') in line, line
        assert 'hpcc' in line
        # The busy node was found before the launch: nothing was measured.
        assert not re.search(r'^P: hpl:', out, re.M)
    finally:
        if reframe.poll() is None:
            reframe.kill()
        _kill_all(orphans or _job_processes(first / 'stage'))


def _command_of(pid):
    with open(f'/proc/{pid}/cmdline', 'rb') as fp:
        return fp.read().replace(b'\0', b' ').decode()


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
    assert session_time.builds_beside_benchmarks(session) == []
    assert session_time.time_table(session).endswith('no build ran beside a benchmark job')


# --- The node's launch lock (issue 38): two runs on one node never measure together -------

def _job(tmp_path, name, lock, seconds, lock_wait=60, action='fail'):
    """A real job script as the suite writes it (quiet_node.job_lines), whose measurement
    is `seconds` of a busy core; it records when it measured."""
    chosen = quiet_node.settings({'max_busy_cores': 4, 'lock_wait': lock_wait,
                                  'action': action})
    script = tmp_path / f'{name}.sh'
    script.write_text('\n'.join([
        '#!/bin/bash',
        *quiet_node.job_lines(sys.executable, quiet_node.__file__, chosen),
        f'date +%s.%N > {name}.start',
        f'timeout {seconds} sh -c "while :; do :; done"',
        f'date +%s.%N > {name}.end', '']))
    script.chmod(0o755)
    return subprocess.Popen([str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, launch_lock.LAUNCH_LOCK_ENV: str(lock)})


def _window(tmp_path, name):
    return tuple(float((tmp_path / f'{name}.{end}').read_text()) for end in ('start', 'end'))


def test_two_jobs_started_together_measure_one_after_the_other_and_the_second_says_so(
        tmp_path):
    lock = tmp_path / 'launch.lock'
    first = _job(tmp_path, 'first', lock, 3)
    time.sleep(0.5)
    second = _job(tmp_path, 'second', lock, 1)
    out_first, out_second = first.communicate(timeout=60)[0], second.communicate(timeout=60)[0]
    assert first.returncode == 0 and second.returncode == 0, out_first + out_second
    # The second measured after the first had ended, not beside it.
    assert _window(tmp_path, 'second')[0] >= _window(tmp_path, 'first')[1]
    line, = [ln for ln in out_second.splitlines() if ln.startswith(quiet_node.MARKER)]
    waited = re.match(rf'{quiet_node.MARKER} quiet: launched after waiting (\d+) s for '
                      rf'another hpcbench job \(the job of PID {first.pid} \(user \S+, since '
                      rf'[^)]*\) in {re.escape(str(tmp_path))}, held by PID {first.pid}: ',
                      line)
    assert waited and 2 <= int(waited.group(1)) <= 10, line
    assert 'launched after waiting' not in out_first
    # The lock file is every user's to read (a second user's job takes it too), and nobody
    # writes to it: who holds it is in its holder's command line.
    assert lock.stat().st_mode & 0o777 == 0o644 and lock.stat().st_size == 0


def test_a_lock_held_past_its_wait_makes_the_node_busy_naming_the_holder(tmp_path):
    lock = tmp_path / 'launch.lock'
    first = _job(tmp_path, 'first', lock, 6)
    time.sleep(0.5)
    second = _job(tmp_path, 'second', lock, 1, lock_wait=1)
    out_second = second.communicate(timeout=60)[0]
    first.communicate(timeout=60)
    assert second.returncode == quiet_node.BUSY_EXIT, out_second
    assert re.search(rf"BUSY: the node's launch lock is held by another hpcbench job, waited "
                     rf"for 1 s: the job of PID {first.pid} .*held by PID {first.pid}: ",
                     out_second), out_second
    assert not (tmp_path / 'second.start').exists()


@pytest.fixture
def planted(tmp_path):
    """A directory like /dev/shm (every user writes to it, sticky) where a test plants what
    another user would put in the lock's place, as that user (`nobody`) where the tests run
    as root."""
    shared = tmp_path / 'shm'
    shared.mkdir()
    shared.chmod(0o1777)

    def plant(*command):
        as_nobody = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups'] \
            if os.geteuid() == 0 else []
        subprocess.run([*as_nobody, *command], check=True, cwd=shared)
        return shared / 'hpcbench-launch.lock'

    return plant


def _refused(tmp_path, lock, what):
    started = time.monotonic()
    job = _job(tmp_path, 'job', lock, 1)
    out = job.communicate(timeout=30)[0]
    assert time.monotonic() - started < 20
    assert job.returncode == quiet_node.BUSY_EXIT, out
    line, = [ln for ln in out.splitlines() if ln.startswith(quiet_node.MARKER)]
    assert re.fullmatch(rf"{quiet_node.MARKER} REFUSED: the node's launch lock "
                        rf"{re.escape(str(lock))} is {what}: refused, nothing was run: remove "
                        rf"it \(no hpcbench job made it\) or set HPCBENCH_LAUNCH_LOCK to "
                        rf"another path", line), line
    assert not (tmp_path / 'job.start').exists()


def test_a_launch_lock_planted_as_a_link_is_refused_and_its_target_left_whole(tmp_path,
                                                                               planted):
    """Issue 51, item 1: another user makes the lock's path a symbolic link to a file of
    root's; the job refuses it and writes nothing through it."""
    target = tmp_path / 'precious'
    target.write_text('root\'s own content\n')
    target.chmod(0o644)
    lock = planted('ln', '-s', str(target), 'hpcbench-launch.lock')
    _refused(tmp_path, lock, 'a symbolic link')
    assert target.read_text() == 'root\'s own content\n'
    # A link to nothing is refused too: no file is made where it points.
    lock.unlink()
    lock = planted('ln', '-s', str(tmp_path / 'made-through-the-link'),
                   'hpcbench-launch.lock')
    _refused(tmp_path, lock, 'a symbolic link')
    assert not (tmp_path / 'made-through-the-link').exists()


def test_a_launch_lock_planted_as_a_fifo_a_directory_or_a_hard_link_is_refused_at_once(
        tmp_path, planted):
    lock = planted('mkfifo', 'hpcbench-launch.lock')
    _refused(tmp_path, lock, 'a FIFO')
    lock.unlink()
    lock = planted('mkdir', 'hpcbench-launch.lock')
    _refused(tmp_path, lock, 'a directory')
    lock.rmdir()
    planted('touch', 'a-file')
    lock = planted('ln', 'a-file', 'hpcbench-launch.lock')
    _refused(tmp_path, lock, re.escape("a file of 2 hard links (another file's name)"))


@pytest.mark.parametrize('given', ['/dev/null', 'a directory of files'])
def test_a_launch_lock_that_is_a_device_or_a_full_directory_is_never_to_be_removed(tmp_path,
                                                                                    given):
    """Issue 60, item 14: HPCBENCH_LAUNCH_LOCK=/dev/null was refused with the advice to
    remove /dev/null (to root)."""
    if given != '/dev/null':
        lock = tmp_path / 'full'
        lock.mkdir()
        (lock / 'data').write_text('a user\'s\n')
    else:
        lock = Path(given)
    job = _job(tmp_path, 'job', lock, 1)
    out = job.communicate(timeout=30)[0]
    assert job.returncode == quiet_node.BUSY_EXIT, out
    line, = [ln for ln in out.splitlines() if ln.startswith(quiet_node.MARKER)]
    assert line.endswith(': refused, nothing was run: set HPCBENCH_LAUNCH_LOCK to a file\'s '
                         'path') and 'remove' not in line, line
    assert Path('/dev/null').is_char_device()


@needs_root
def test_a_launch_lock_owned_by_a_system_account_is_refused(tmp_path, planted):
    lock = planted('touch', 'hpcbench-launch.lock')
    assert lock.stat().st_uid == 65534
    _refused(tmp_path, lock, 'owned by the system account nobody, not by a user')


def test_with_the_check_off_a_lock_not_had_still_fails_the_job(tmp_path):
    """Issue 51, item 10: with the quiet-node check off (the testbed, nodes that share
    hosts) a job does not run beside another: it waits, and runs nothing once the wait is
    over."""
    lock = tmp_path / 'launch.lock'
    first = _job(tmp_path, 'first', lock, 6)
    time.sleep(0.5)
    second = _job(tmp_path, 'second', lock, 1, lock_wait=1, action='off')
    out_second = second.communicate(timeout=60)[0]
    first.communicate(timeout=60)
    assert second.returncode == quiet_node.BUSY_EXIT, out_second
    assert re.search(rf"BUSY: the node's launch lock is held by another hpcbench job, waited "
                     rf"for 1 s: the job of PID {first.pid} ", out_second), out_second
    assert not (tmp_path / 'second.start').exists()


def test_with_the_check_off_an_orphaned_holder_fails_the_job_at_once(tmp_path):
    lock = tmp_path / 'launch.lock'
    script = tmp_path / 'orphan.sh'
    chosen = quiet_node.settings({'max_busy_cores': 4})
    script.write_text('\n'.join(['#!/bin/bash', *quiet_node.job_lines(
        sys.executable, quiet_node.__file__, chosen), 'touch orphan.start', 'sleep 30', '']))
    script.chmod(0o755)
    # The job's parent (a run that started it) killed with SIGKILL: the job lives on.
    run = subprocess.Popen(['bash', '-c', f'{script} >orphan.out 2>&1 & echo $!; wait'],
                           cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                           env={**os.environ, launch_lock.LAUNCH_LOCK_ENV: str(lock)},
                           start_new_session=True)
    orphan = int(run.stdout.readline())
    try:
        for _ in range(100):
            if (tmp_path / 'orphan.start').exists():
                break
            time.sleep(0.1)
        run.kill()
        run.wait()
        started = time.monotonic()
        second = _job(tmp_path, 'second', lock, 1, action='off')
        out = second.communicate(timeout=60)[0]
        assert time.monotonic() - started < 20
        assert second.returncode == quiet_node.BUSY_EXIT, out
        assert re.search(rf"BUSY: the node's launch lock is held by another hpcbench job, "
                         rf"orphaned \(the run that started it is gone\): not waited for: the "
                         rf"job of PID {orphan} .*held by PID {orphan}: ", out), out
        assert not (tmp_path / 'second.start').exists()
    finally:
        os.killpg(run.pid, signal.SIGKILL)


@needs_registry_hpcc
def test_two_runs_from_two_results_directories_measure_one_after_the_other(tmp_path):
    """The issue's case for real: two ReFrame runs started together, each with its own
    HPCBENCH_VAR (as a second checkout has), on this node: the benchmark jobs run one
    after the other and the one that waited says so in its stored node_state."""
    env = {**os.environ, 'HPCBENCH_NO_SPACK': '1',
           launch_lock.LAUNCH_LOCK_ENV: str(tmp_path / 'launch.lock')}
    runs = [subprocess.Popen(
        [str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c', 'reframe-checks', '-n',
         'HpccCheck', '-S', 'memory_fraction=0.001', '-r'], cwd=ROOT,
        env={**env, 'HPCBENCH_VAR': str(tmp_path / name)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for name in ('a', 'b')]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    cases = {}
    for name in ('a', 'b'):
        report, = (tmp_path / name / 'reports').glob('run-report-*.json')
        cases[name], = [tc for run in json.loads(report.read_text())['runs']
                        for tc in run['testcases'] if tc['name'].startswith('HpccCheck')]
    later, earlier = sorted(cases, key=lambda n: cases[n]['job_completion_time_unix'],
                            reverse=True)
    assert re.match(rf'quiet: launched after waiting \d+ s for another hpcbench job \(the '
                    rf'job of PID \d+ .* in {re.escape(str(tmp_path / earlier))}/stage/',
                    cases[later]['node_state']), cases[later]['node_state']
    assert 'launched after waiting' not in cases[earlier]['node_state']


# --- A var/ that cannot keep a run's results (issue 38) ------------------------------------

def _read_only_bind(path):
    """`path` made read-only for root too: a read-only bind mount of it over itself."""
    subprocess.run(['mount', '--bind', str(path), str(path)], check=True)
    subprocess.run(['mount', '-o', 'remount,ro,bind', str(path)], check=True)


def _stored_session_count(database):
    import sqlite3
    with sqlite3.connect(database) as connection:
        return connection.execute('SELECT COUNT(*) FROM sessions').fetchone()[0]


@needs_root
@needs_registry_hpcc
def test_a_results_database_that_takes_no_write_is_refused_before_anything_runs(tmp_path):
    var = tmp_path / 'var'
    first = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    assert first.returncode == 0, first.stdout[-2000:]
    database = var / 'results.db'
    _read_only_bind(database)
    try:
        stages = sorted((var / 'stage').rglob('*'))
        proc = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    finally:
        subprocess.run(['umount', str(database)], check=True)
    assert proc.returncode == 1
    assert proc.stderr.count('\n') == 1 and re.match(
        rf'error: the results database {re.escape(str(database))} does not take a write '
        r'\(attempt to write a readonly database\): the run would measure and store nothing',
        proc.stderr), proc.stderr
    assert 'Traceback' not in proc.stdout + proc.stderr
    assert sorted((var / 'stage').rglob('*')) == stages
    assert _stored_session_count(database) == 1


def test_an_empty_results_database_is_refused_before_anything_runs(tmp_path):
    """Issue 51, item 12: a 0-byte results.db (as a full disk leaves it) passed the check;
    every later run measured, then lost its results ("no such table")."""
    var = tmp_path / 'var'
    listing = _reframe(var, '-l')
    assert listing.returncode == 0, listing.stderr
    database = var / 'results.db'
    database.write_bytes(b'')
    proc = _reframe(var, '-n', 'HpccCheck', '-S', 'memory_fraction=0.001', '-r')
    assert proc.returncode == 1
    assert proc.stderr == (
        f"error: the results database {database} is no results database of ReFrame's (no "
        'sessions or testcases table: 0 bytes, as a full disk or an interrupted write leaves '
        'it): the run would measure and store nothing; move it aside (ReFrame makes a new '
        'one) or give the run another results directory with HPCBENCH_VAR=<directory>\n'), \
        proc.stderr
    assert not (var / 'stage').exists() and database.read_bytes() == b''


@needs_root
@needs_registry_hpcc
def test_a_run_whose_session_was_not_stored_fails_and_shows_no_other_as_its(tmp_path):
    """The fault mid-run, for real: the database stops taking writes (mounted read-only)
    while the benchmark runs, after the run's own check passed. ReFrame only warns;
    make run then fails, naming the session that was not stored, and shows nothing (no
    stack table, no report) of the older session the database holds."""
    var = tmp_path / 'var'
    options = 'RFM_OPTS=-n HpccCheck -S memory_fraction=0.001'
    env = {**os.environ, 'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'}
    make = ['make', '--no-print-directory', 'run', options]
    older = subprocess.run(make, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert older.returncode == 0, older.stdout[-2000:] + older.stderr[-2000:]
    older_uuid, = [json.loads(p.read_text())['session_info']['uuid']
                   for p in (var / 'reports').glob('*.json')]
    reports_before = set((var / 'reports').glob('*.json'))
    run = subprocess.Popen(make, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    database = var / 'results.db'
    mounted = False
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not mounted:
            jobs = list((var / 'stage').rglob('HpccCheck*/rfm_job.out'))
            if jobs and jobs[0].stat().st_mtime > database.stat().st_mtime:
                _read_only_bind(database)
                mounted = True
            time.sleep(0.1)
        out, err = run.communicate(timeout=900)
    finally:
        if mounted:
            subprocess.run(['umount', str(database)], check=True)
    assert mounted, 'the benchmark job never started'
    new_report, = set((var / 'reports').glob('*.json')) - reports_before
    uuid = json.loads(new_report.read_text())['session_info']['uuid']
    assert run.returncode != 0
    assert err.count(f"error: this run's session {uuid} is not in the results database "
                     f'{database}') == 1, err[-3000:]
    assert older_uuid not in out + err and 'Traceback' not in out + err
    assert 'MPI stacks and BLAS libraries side by side' not in out
    assert _stored_session_count(database) == 1


def _full_file_system(mounted):
    """A real tmpfs, filled until the kernel refuses another byte."""
    point = mounted('-t', 'tmpfs', '-o', 'size=2m', 'hpcbench-full')
    subprocess.run(['dd', 'if=/dev/zero', f'of={point}/filler', 'bs=64k'],
                   capture_output=True)
    assert os.statvfs(point).f_bavail == 0
    return point


@needs_root
@needs_registry_hpcc
def test_a_full_results_directory_is_refused_in_one_message_before_anything_runs(
        tmp_path, mounted):
    point = _full_file_system(mounted)
    var = point / 'var'
    # Made before it was full, as a results directory in use is.
    subprocess.run(['rm', f'{point}/filler'], check=True)
    (var / 'logs').mkdir(parents=True)
    (var / '.hpcbench-results').write_text('made by a run\n')
    subprocess.run(['dd', 'if=/dev/zero', f'of={point}/filler', 'bs=64k'],
                   capture_output=True)
    env = {**os.environ, 'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'}
    proc = subprocess.run(['make', '--no-print-directory', 'run',
                           'RFM_OPTS=-n HpccCheck -S memory_fraction=0.001'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert proc.stderr.count(f'error: the file system of {var} is full (mounted at {point}, '
                             '0 MiB free)') == 1, proc.stderr[-3000:]
    assert 'Traceback' not in said and 'MPI stacks and BLAS libraries' not in said
    assert not (var / 'stage').exists() and not (var / 'reports').exists()


@needs_root
def test_a_full_cache_is_said_to_be_full_not_missing_a_spack(tmp_path, mounted):
    point = _full_file_system(mounted)
    env = {**os.environ, 'HPCBENCH_CACHE': str(point / 'cache'),
           'HPCBENCH_VAR': str(tmp_path / 'var')}
    for name in ('SPACK_ROOT', 'HPCBENCH_SPACK_PACKAGES'):
        env.pop(name, None)
    proc = subprocess.run([str(BIN / 'hpcbench'), 'setup'], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.count('\n') == 1 and proc.stderr.startswith(
        f'error: the file system of {point / "cache"} is full (mounted at {point}, 0 MiB '
        'free): the per-user cache holds Spack'), proc.stderr
    assert 'No Spack found' not in proc.stdout + proc.stderr


@needs_root
def test_a_read_only_results_directory_is_refused_in_one_message(tmp_path, mounted):
    """A real read-only file system as HPCBENCH_VAR (a results directory on a mount that
    went read-only)."""
    var = mounted('-t', 'tmpfs', '-o', 'ro,size=1m', 'hpcbench-ro')
    proc = subprocess.run([str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c',
                           'reframe-checks', '-n', 'StreamCheck', '-r'], cwd=ROOT,
                          env={**os.environ, 'HPCBENCH_VAR': str(var)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == (f'error: {var} cannot be written (Read-only file system: '
                           f'{var}/.hpcbench-results): give the run a writable results '
                           'directory with HPCBENCH_VAR=<directory>\n'), proc.stderr
    assert 'Traceback' not in proc.stdout


@needs_root
@pytest.mark.spack
def test_setup_with_a_read_only_results_directory_says_so_in_one_line(tmp_path, mounted):
    """Issue 51, item 13 (last round's E16): a read-only HPCBENCH_VAR gave `hpcbench setup`
    two chained tracebacks (it writes the detected topology there)."""
    source = tmp_path / 'source'
    source.mkdir()
    (source / '.hpcbench-results').write_text('made by a run\n')
    var = mounted('--bind', str(source))
    subprocess.run(['mount', '-o', 'remount,bind,ro', str(var)], check=True)
    proc = subprocess.run([str(BIN / 'hpcbench'), 'setup', '--system', 'local'], cwd=ROOT,
                          env={**os.environ, 'HPCBENCH_VAR': str(var)}, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1] == (
        f'error: {var} cannot be written (Read-only file system: {var}/topology): give the '
        'run a writable results directory with HPCBENCH_VAR=<directory>'), proc.stderr


def test_ctrl_c_during_setup_says_so_in_one_line(tmp_path):
    # A real SIGINT in the middle of `hpcbench setup`.
    script = ('import signal\n'
              'from hpcbench.cli import main\n'
              'from hpcbench.stack import bootstrap\n'
              'def interrupted(*a, **k):\n'
              '    signal.raise_signal(signal.SIGINT)\n'
              'bootstrap.setup = interrupted\n'
              'raise SystemExit(main.main(["setup"]))\n')
    proc = subprocess.run([str(BIN / 'python'), '-c', script], capture_output=True, text=True,
                          env={**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')},
                          preexec_fn=signals_as_from_a_terminal, timeout=120)
    assert proc.returncode == 130
    assert proc.stderr == 'hpcbench setup: interrupted (SIGINT); run it again to go on\n', \
        proc.stderr


@pytest.mark.parametrize('signal_name', ['TERM', 'HUP', 'INT'])
def test_a_signal_to_setup_ends_the_spack_it_started_and_all_spack_started(tmp_path,
                                                                           signal_name):
    """Issue 51, item 5: SIGTERM to `hpcbench setup` alone left Spack's install running,
    orphaned. A stand-in Spack whose install starts a build process (a real process tree,
    as Spack's builds are), run the way setup runs Spack (bootstrap.run_spack); the signal
    goes to hpcbench alone, as `kill PID` sends it."""
    spack_root = tmp_path / 'spack'
    (spack_root / 'bin').mkdir(parents=True)
    fake = spack_root / 'bin' / 'spack'
    fake.write_text(f'#!/bin/sh\nsleep 300 &\necho $! > {tmp_path}/build.pid\n'
                    f'echo $$ > {tmp_path}/spack.pid\nwait\n')
    fake.chmod(0o755)
    script = ('from pathlib import Path\n'
              'from hpcbench.cli import main\n'
              'from hpcbench.stack import bootstrap, spack\n'
              f'found = spack.Spack(Path({str(spack_root)!r}), Path({str(tmp_path)!r}))\n'
              'bootstrap.setup = lambda *a, **k: bootstrap.run_spack(found, "install")\n'
              'raise SystemExit(main.main(["setup"]))\n')
    proc = subprocess.Popen([str(BIN / 'python'), '-c', script], stderr=subprocess.PIPE,
                            text=True, env={**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')},
                            preexec_fn=signals_as_from_a_terminal)
    for _ in range(300):
        if (tmp_path / 'build.pid').exists() and (tmp_path / 'spack.pid').exists():
            break
        time.sleep(0.1)
    time.sleep(0.3)
    children = [int((tmp_path / f'{name}.pid').read_text()) for name in ('spack', 'build')]
    assert all(_alive(pid) for pid in children)
    proc.send_signal(getattr(signal, f'SIG{signal_name}'))
    stderr = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + getattr(signal, f'SIG{signal_name}'), stderr
    assert stderr == (f'hpcbench setup: interrupted (SIG{signal_name}); run it again to go '
                      'on\n'), stderr
    time.sleep(0.5)
    assert not [pid for pid in children if _alive(pid)]


def _alive(pid):
    """Whether `pid` runs (a zombie has ended: it waits for its parent alone)."""
    try:
        with open(f'/proc/{pid}/stat') as fp:
            return fp.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


@pytest.mark.machine_dependent
def test_run_wide_quiet_node_settings_give_the_builds_no_warning(tmp_path):
    proc = subprocess.run([str(BIN / 'reframe'), '-C', 'site-configs/local.py', '-c',
                           'reframe-checks', '-n', 'StreamCheck', '-S', 'quiet_node_action=warn',
                           '-S', 'quiet_node_wait=0', '-S', 'quiet_node_lock_wait=5',
                           '--dry-run'], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, 'HPCBENCH_VAR': str(tmp_path / 'var')},
                          timeout=300)
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout + proc.stderr)
    assert proc.returncode == 0, out[-2000:]
    assert 'were not set' not in out and 'WARNING' not in out, out[-2000:]


@needs_root
@needs_registry_hpcc
def test_a_results_directory_that_fills_during_the_run_fails_it_naming_the_full_disk(
        tmp_path, mounted):
    """The file system of var/ fills while the benchmark runs (a real tmpfs, filled with dd
    once the job has started, after the run's own check passed): ReFrame cannot write its
    report or store the session; make run fails, saying the disk is full, and shows no
    other session as this run's."""
    point = mounted('-t', 'tmpfs', '-o', 'size=96m', 'hpcbench-filling')
    var = point / 'var'
    env = {**os.environ, 'HPCBENCH_VAR': str(var), 'HPCBENCH_NO_SPACK': '1'}
    make = ['make', '--no-print-directory', 'run', 'RFM_OPTS=-n HpccCheck -S memory_fraction=0.001']
    older = subprocess.run(make, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert older.returncode == 0, older.stdout[-2000:] + older.stderr[-2000:]
    older_uuid, = [json.loads(p.read_text())['session_info']['uuid']
                   for p in (var / 'reports').glob('*.json')]
    run = subprocess.Popen(make, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    filled = False
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not filled and run.poll() is None:
        jobs = [p for p in (var / 'stage').rglob('HpccCheck*/rfm_job.out')
                if p.stat().st_mtime > (var / 'results.db').stat().st_mtime]
        if jobs:
            subprocess.run(['dd', 'if=/dev/zero', f'of={point}/filler', 'bs=64k'],
                           capture_output=True)
            filled = True
        time.sleep(0.1)
    out, err = run.communicate(timeout=900)
    assert filled, 'the benchmark job never started'
    assert run.returncode != 0
    final = [ln for ln in err.splitlines() if ln.startswith('error: ')]
    assert final and f'the file system of {var} is full (mounted at {point}' in final[-1], \
        err[-3000:]
    assert older_uuid not in out + err
    assert 'MPI stacks and BLAS libraries side by side' not in out
    # A log that cannot be written is said once, not a traceback per record.
    assert 'Traceback' not in out + err and 'Logging error' not in err, err[-3000:]
    assert err.count('hpcbench: a log of this run cannot be written') <= 1
