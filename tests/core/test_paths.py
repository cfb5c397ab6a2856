"""Where a run writes (hpcbench.core.paths): a path an environment variable gives is taken
from where the command started, whatever directory what it starts runs in, and nothing a
run writes is tracked (issue 62, item 6)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, ROOT

_SHOW = ('import os\nfrom hpcbench.core import paths\n'
         'print(paths.VAR_DIR, os.environ["HPCBENCH_VAR"], paths.cache_dir(), '
         'os.environ["HPCBENCH_CACHE"])\n')


def test_a_relative_path_is_taken_from_where_the_command_started_and_passed_on(tmp_path):
    """HPCBENCH_VAR=var and HPCBENCH_CACHE=cache given relative: both are the starting
    directory's, and what the command starts (a job in its stage directory) is given the
    same absolute paths."""
    started = tmp_path / 'here'
    started.mkdir()
    env = {**os.environ, 'HPCBENCH_VAR': 'var', 'HPCBENCH_CACHE': 'cache'}
    shown = subprocess.run([sys.executable, '-c', _SHOW], cwd=started, env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    assert shown == [str(started / 'var')] * 2 + [str(started / 'cache')] * 2
    child = ('import os, subprocess, sys\nfrom hpcbench.core import paths\nos.chdir("/")\n'
             f'subprocess.run([sys.executable, "-c", {_SHOW!r}], check=True)\n')
    shown = subprocess.run([sys.executable, '-c', child], cwd=started, env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    assert shown == [str(started / 'var')] * 2 + [str(started / 'cache')] * 2


def _site_configs():
    return sorted(p.relative_to(ROOT) for p in (ROOT / 'site-configs').rglob('*')
                  if '__pycache__' not in p.parts)


@pytest.mark.machine_dependent
@pytest.mark.parametrize('given', ['command line', 'environment'])
def test_a_relative_results_directory_is_where_make_started_never_in_site_configs(tmp_path,
                                                                                given):
    """ReFrame imports a site config from its own directory: a relative HPCBENCH_VAR read
    there was site-configs/var, where a run wrote its lock, marker and topology (and they
    were committed). `make dry-run` given one (on its command line or in the environment)
    runs in the directory it names from where make started; ReFrame started by hand with
    one is refused in one line; neither writes into site-configs/."""
    before = _site_configs()
    relative = os.path.relpath(tmp_path / 'var', ROOT)
    env = {k: v for k, v in os.environ.items() if k != 'HPCBENCH_VAR'}
    assignment = [f'HPCBENCH_VAR={relative}'] if given == 'command line' else []
    if given == 'environment':
        env['HPCBENCH_VAR'] = relative
    done = subprocess.run(['make', '--no-print-directory', 'dry-run', *assignment,
                           'RFM_OPTS=-n StreamCheck -p openmpi'], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / 'var' / '.hpcbench-results').is_file()
    assert list((tmp_path / 'var' / 'stage').glob('**/rfm_job.sh'))
    assert _site_configs() == before

    by_hand = subprocess.run(
        [str(BIN / 'reframe'), '-C', str(ROOT / 'site-configs' / 'local.py'), '-c',
         str(ROOT / 'reframe-checks'), '-n', 'StreamCheck', '--dry-run'],
        cwd=tmp_path, env={**env, 'HPCBENCH_VAR': 'here'}, capture_output=True, text=True,
        timeout=600)
    assert by_hand.returncode != 0
    assert by_hand.stderr.strip().splitlines()[-1] == (
        "error: HPCBENCH_VAR='here' is a relative path, which ReFrame would take from the "
        f"directory of the file it reads ({ROOT / 'site-configs' / 'here'}), not from where "
        'it started: give an absolute one (HPCBENCH_VAR="$PWD/here")')
    assert _site_configs() == before and not (tmp_path / 'here').exists()


# What a run, a test or a benchmark script writes, wherever its results directory was.
WRITTEN_BY_RUNS = re.compile(r'(^|/)(var/|stage/|output/|perflogs/)|(^|/)(\.hpcbench-results|'
                             r'run\.lock|results\.db)$|(^|/)topology/[^/]+/processor\.json$|'
                             r'^[^/]*-report\.(json|xml)$')


def test_nothing_a_run_writes_is_tracked():
    if not shutil.which('git') or not (ROOT / '.git').exists():
        pytest.skip('not a git checkout')
    tracked = subprocess.run(['git', 'ls-files'], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.splitlines()
    assert [path for path in tracked if WRITTEN_BY_RUNS.search(path)] == []
    # And git ignores each, wherever it is written.
    examples = ['site-configs/var/run.lock', 'site-configs/topology/local-default/processor.json',
                'perf/var/results.db', 'tests/.hpcbench-results', 'var/perflogs/x.log']
    ignored = subprocess.run(['git', 'check-ignore', '--no-index', *examples], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert ignored == examples
