"""The sites' scheduler and launcher backends (hpcbench.rfm.backends), run for real where they
run shell code: the host file the schedulers write, and PJM's submit and poll against
stand-ins for pjsub and pjstat that print what Fujitsu's tools print."""
import os
import subprocess
from types import SimpleNamespace

import pytest

from hpcbench.rfm import backends


def _run_lines(lines, env, cwd):
    return subprocess.run(['bash', '-euc', '\n'.join(lines)], env={**os.environ, **env},
                          cwd=cwd, capture_output=True, text=True)


def test_the_host_file_lists_each_node_once_per_rank(tmp_path):
    # TORQUE lists a node once per core it grants (ppn); the job wants 2 ranks per node.
    nodefile = tmp_path / 'nodes'
    nodefile.write_text('n1\nn1\nn1\nn1\nn2\nn2\nn2\nn2\n')
    lines = backends.hostfile_lines('cat "$PBS_NODEFILE"', 2)
    done = _run_lines([*lines, 'cat "$HPCBENCH_HOSTFILE"'], {'PBS_NODEFILE': str(nodefile)},
                      tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['n1', 'n1', 'n2', 'n2']


def test_sge_host_file_comes_from_the_pe_host_file(tmp_path):
    pe = tmp_path / 'pe_hostfile'
    pe.write_text('x1 16 all.q@x1 UNDEFINED\nx2 16 all.q@x2 UNDEFINED\n')
    lines = backends.hostfile_lines('awk \'{ print $1 }\' "$PE_HOSTFILE"', 8)
    done = _run_lines([*lines, 'cat "$HPCBENCH_HOSTFILE"'], {'PE_HOSTFILE': str(pe)}, tmp_path)
    assert done.stdout.split() == ['x1'] * 8 + ['x2'] * 8


def _job(**kw):
    base = dict(name='rfm_Test', stdout='rfm_job.out', stderr='rfm_job.err', workdir='/w',
                num_tasks=8, num_tasks_per_node=4, num_cpus_per_task=2, time_limit=3600,
                sched_access=[], options=[], cli_options=[], script_filename='rfm_job.sh')
    return SimpleNamespace(**{**base, **kw})


def test_sge_refuses_a_partition_without_one_parallel_environment():
    from reframe.core.exceptions import JobSchedulerError
    scheduler = backends.SgeParallelEnvironmentScheduler.__new__(
        backends.SgeParallelEnvironmentScheduler)
    scheduler._prefix = '#$'
    assert '#$ -pe mpi 16' in scheduler.emit_preamble(_job(sched_access=['-pe mpi']))
    with pytest.raises(JobSchedulerError, match='one parallel environment'):
        scheduler.emit_preamble(_job(sched_access=[]))


@pytest.fixture
def fake_pjm(tmp_path, monkeypatch):
    """pjsub and pjstat stand-ins: pjstat lists the jobs in `running`."""
    running = tmp_path / 'running'
    running.write_text('')
    (tmp_path / 'pjsub').write_text(
        '#!/bin/sh\necho 1234567 >> ' + str(running) +
        '\necho "[INFO] PJM 0000 pjsub Job 1234567 submitted."\n')
    (tmp_path / 'pjstat').write_text(
        '#!/bin/sh\necho "JOB_ID     JOB_NAME   MD ST  USER     START_DATE      ELAPSE_LIM'
        ' NODE_REQUIRE"\nwhile read id; do echo "$id rfm_Test NM RUN user 11/21 09:00:00 '
        '0001:00:00 1"; done < ' + str(running) + '\n')
    for tool in ('pjsub', 'pjstat'):
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    return running


def test_pjm_submits_and_sees_its_job_end(fake_pjm):
    scheduler = backends.PjmScheduler.__new__(backends.PjmScheduler)
    scheduler._submit_timeout = 10
    job = SimpleNamespace(script_filename='rfm_job.sh', _jobid=None, _completed=False,
                          _state=None)
    scheduler.submit(job)
    assert job._jobid == '1234567'
    job.jobid = job._jobid            # what ReFrame's Job.jobid returns
    scheduler.poll(job)
    assert not job._completed
    fake_pjm.write_text('')
    scheduler.poll(job)
    assert job._completed and job._state == 'COMPLETED'
