"""Checks of other sites and of ReFrame itself run on the suite's site configs (issue 70,
item 12): ReFrame's own tutorial STREAM check, unmodified, as the reframe-hpc wheel ships it
(share/doc/reframe-hpc/examples/tutorial/stream/stream_build_run.py: it builds with
`['-O3', extras['omp_flag']]`), failed at compile on every site config ("failed to set
variable 'cflags': ['-O3', None]"): no environment carried ReFrame's conventional
`omp_flag`. Built and run for real on `local` and on every partition of the testbed it is
generated for."""
import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import run_reframe
from hpcbench.rfm.site_partitions import CONVENTIONAL_EXTRAS
from test_testbed import running_testbed

TUTORIAL = (Path(sys.prefix) / 'share' / 'doc' / 'reframe-hpc' / 'examples' / 'tutorial' /
            'stream' / 'stream_build_run.py')


def _tutorial():
    if not TUTORIAL.is_file():
        pytest.skip(f'no ReFrame tutorial check at {TUTORIAL} (the reframe-hpc wheel ships it)')
    if not shutil.which('mpicc') and not any(Path(p).exists() for p in (
            '/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h', '/usr/include/mpi.h')):
        pytest.skip('no MPI compiler wrapper here (`hpcbench setup` installs Open MPI\'s)')
    return TUTORIAL


def _cases(report):
    data = json.loads(Path(report).read_text())
    return [tc for run in data['runs'] for tc in run['testcases']]


def test_the_environments_carry_reframe_s_conventional_extras():
    shown = run_reframe('--show-config=environments')
    assert shown.returncode == 0, shown.stderr[-2000:]
    environments = json.loads(shown.stdout[shown.stdout.index('['):])
    assert environments and all(env['extras'].get('omp_flag') == CONVENTIONAL_EXTRAS['omp_flag']
                                for env in environments if env['name'] != 'builtin'), \
        [(e['name'], e['extras']) for e in environments]


@pytest.mark.machine_dependent
def test_reframe_s_tutorial_stream_check_runs_on_local(tmp_path):
    check = _tutorial()
    done = run_reframe('-r', '--report-file', str(tmp_path / 'report.json'),
                       env={'HPCBENCH_VAR': str(tmp_path / 'var')}, checks=str(check))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (case,) = _cases(tmp_path / 'report.json')
    assert case['result'] == 'pass' and case['perfvalues']


@pytest.fixture
def testbed():
    yield from running_testbed(2)


@pytest.mark.machine_dependent
def test_reframe_s_tutorial_stream_check_runs_on_every_testbed_partition(testbed, tmp_path):
    check = _tutorial()
    env = {'HPCBENCH_TESTBED_DIR': str(testbed.root), 'HPCBENCH_VAR': str(tmp_path / 'var'),
           'HPCBENCH_NO_SPACK': '1'}
    listed = run_reframe('--system', 'testbed', '-l', config='site-configs/testbed.py',
                         env=env, checks=str(check))
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-2000:]
    done = run_reframe('--system', 'testbed', '-r', '--report-file',
                       str(tmp_path / 'report.json'), '--exec-policy', 'serial',
                       config='site-configs/testbed.py', env=env, checks=str(check),
                       timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    cases = _cases(tmp_path / 'report.json')
    partitions = {tc['partition'] for tc in cases}
    # Every CPU partition of the testbed, and every other the check is generated for.
    assert {'srun', 'mpirun'} <= partitions, partitions
    assert all(tc['result'] == 'pass' for tc in cases), [
        (tc['partition'], tc['fail_reason']) for tc in cases if tc['result'] != 'pass']
