"""The GitLab pipeline: what a merge request runs, and the pipeline file itself."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT
from hpcbench.devtools import ci, gitlab_ci_local

CHECKS = ['reframe-checks/hpl.py', 'reframe-checks/imb.py', 'reframe-checks/ior.py',
          'reframe-checks/stream.py']


def test_a_changed_check_or_its_module_selects_that_check_only():
    changed = ['reframe-checks/imb.py', 'src/hpcbench/benchmarks/stream.py', 'README.md',
               'src/hpcbench/rfm/partition.py', 'tests/benchmarks/test_hpl.py', 'references/chic.yaml']
    assert ci.changed_checks(changed, CHECKS) == ['reframe-checks/imb.py',
                                                  'reframe-checks/stream.py']


def test_a_deleted_check_and_documentation_select_nothing():
    assert ci.changed_checks(['reframe-checks/gone.py', 'docs/systems.md'], CHECKS) == []


def test_changed_checks_reads_the_merge_requests_diff():
    # Against HEAD itself nothing changed; against a commit that is not there, one error.
    assert ci.git_changed_files('HEAD') == []
    done = subprocess.run([str(ROOT / '.venv/bin/hpcbench'), 'changed-checks', '--base',
                           'no-such-commit'], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.startswith('error: git diff no-such-commit...HEAD')


def test_pipeline_stages_and_rules():
    pipeline = yaml.safe_load((ROOT / '.gitlab-ci.yml').read_text())
    assert pipeline['stages'] == ['lint', 'test', 'build', 'run', 'report']
    jobs = {name: job for name, job in pipeline.items()
            if isinstance(job, dict) and 'stage' in job}
    by_stage = {}
    for name, job in jobs.items():
        by_stage.setdefault(job['stage'], []).append(name)
    assert set(by_stage) == set(pipeline['stages'])
    # Merge requests: unit tests and the changed checks; schedules: every check.
    assert jobs['unit-tests']['script'][0].startswith('make test ')
    rules = {name: [r.get('if', '') for r in _extended(pipeline, name).get('rules', [])]
             for name in jobs}
    assert any('merge_request_event' in r for r in rules['changed-checks'])
    assert any('schedule' in r for r in rules['checks'])
    assert not any('merge_request_event' in r for r in rules['checks'])
    # The child pipeline ReFrame generates runs on the testbed with RFM_SYSTEM set.
    assert jobs['checks']['trigger']['include'][0]['job'] == 'generate-checks'
    for name in ('checks', 'changed-checks', 'generate-checks'):
        assert '.testbed' in jobs[name]['extends']
    assert pipeline['.testbed']['variables']['RFM_SYSTEM'] == 'testbed'
    # The watch: scheduled, on the testbed, its JUnit the pipeline's test report.
    assert any('schedule' in r for r in rules['watch'])
    assert not any('merge_request_event' in r for r in rules['watch'])
    assert jobs['watch']['artifacts']['reports']['junit'] == 'var/junit/watch.xml'
    assert '--junit var/junit/watch.xml' in jobs['watch']['script'][-1]


def _extended(pipeline, name):
    """A job with its `extends` templates merged in (GitLab's rule: the job's keys win)."""
    job = pipeline[name]
    extends = job.get('extends', [])
    merged = {}
    for template in [extends] if isinstance(extends, str) else extends:
        merged.update(_extended(pipeline, template))
    merged.update(job)
    return merged


GENERATED = {
    'cache': {'key': '${CI_COMMIT_REF_SLUG}', 'paths': ['rfm-stage/${CI_COMMIT_SHORT_SHA}']},
    'stages': ['rfm-stage-0', 'rfm-stage-1'],
    'ImbBuild_1': {'stage': 'rfm-stage-0', 'needs': [], 'artifacts': {
        'paths': ['ImbBuild_1-report.json']}, 'script': [
        'reframe --prefix=rfm-stage/${CI_COMMIT_SHORT_SHA} -C /home/ci/builds/x/site-configs/'
        'testbed.py -c reframe-checks -R --report-file=ImbBuild_1-report.json  '
        '--report-junit=ImbBuild_1-report.xml  -n /34bd3789 -r --mode=quick']},
    # A fixture no job names in `needs` (ReFrame lists one per check).
    'ImbBuild_e05c4eba': {'stage': 'rfm-stage-0', 'needs': [], 'script': [
        'reframe -C /home/ci/builds/x/site-configs/testbed.py -n /e05c4eba -r']},
    # A test with no fixture.
    'HpccCheck': {'stage': 'rfm-stage-0', 'needs': [], 'script': [
        'reframe -C /home/ci/builds/x/site-configs/testbed.py -n /0badc0de -r']},
    'ImbPairCheck_0': {'stage': 'rfm-stage-1', 'needs': ['ImbBuild_1'], 'artifacts': {
        'paths': ['ImbPairCheck_0-report.json']}, 'script': [
        'reframe -C /home/ci/builds/x/site-configs/testbed.py -c reframe-checks '
        '--restore-session=ImbBuild_1-report.json -n /e132cd70 -r --mode=quick']},
}


def test_the_generated_child_pipeline_runs_from_any_checkout():
    child = ci.child_pipeline(GENERATED)
    assert 'cache' not in child
    assert child['stages'] == ['rfm-stage-0', 'rfm-stage-1', 'stop']
    # The fixture's job (ReFrame 4.10.4 selects nothing with a fixture's hash) is dropped;
    # the test's job runs its fixture itself.
    assert set(child) == {'stages', 'ImbPairCheck_0', 'HpccCheck', 'stop-testbed'}
    job = child['ImbPairCheck_0']
    assert job['script'] == ['.venv/bin/reframe -C site-configs/testbed.py -c reframe-checks '
                             '-n /e132cd70 -r --mode=quick']
    assert job['before_script'] == ['make venv', 'ci/testbed/testbed start']
    assert job['needs'] == []
    assert job['artifacts'] == {'paths': ['ImbPairCheck_0-report.json'], 'when': 'always',
                                'reports': {'junit': 'ImbPairCheck_0-report.xml'}}
    assert child['stop-testbed'] == {'stage': 'stop', 'when': 'always',
                                     'script': ['ci/testbed/testbed stop']}
    # The input is left as it was.
    assert GENERATED['ImbPairCheck_0']['script'][0].startswith('reframe -C /home/ci/')


def test_a_file_reframe_did_not_write_is_refused(tmp_path):
    bad = tmp_path / 'bad.yml'
    bad.write_text('just: text\n')
    done = subprocess.run([str(ROOT / '.venv/bin/hpcbench'), 'ci-pipeline', str(bad),
                           str(tmp_path / 'out.yml')], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f'error: {bad} is not a pipeline written by reframe --ci-generate\n'
    assert not (tmp_path / 'out.yml').exists()


# --- gitlab-ci-local: the pipeline validated against GitLab's schema and run here -----------

def _gitlab_ci_local(*args):
    missing = [cmd for cmd in gitlab_ci_local.APT_PACKAGES if not shutil.which(cmd)]
    if missing and os.geteuid() != 0:
        pytest.skip(f'gitlab-ci-local needs {", ".join(missing)} (installed when running as root)')
    return subprocess.run(['make', '-s', 'gitlab-ci-local', f'PIPELINE_OPTS={" ".join(args)}'],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200)


def _listed_jobs(out):
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('name '))
    return [line.split()[0] for line in lines[start + 1:] if line.strip()]


def test_gitlab_ci_local_validates_the_pipeline_and_lists_each_sources_jobs():
    schedule = _gitlab_ci_local('--list', '--variable', 'CI_PIPELINE_SOURCE=schedule')
    assert schedule.returncode == 0, schedule.stdout[-2000:] + schedule.stderr[-2000:]
    assert 'json schema validated' in schedule.stderr
    assert _listed_jobs(schedule.stdout) == ['lint', 'unit-tests', 'build-testbed',
                                             'generate-checks', 'checks', 'watch', 'report']
    merge = _gitlab_ci_local('--list', '--variable', 'CI_PIPELINE_SOURCE=merge_request_event')
    assert _listed_jobs(merge.stdout) == ['lint', 'unit-tests', 'build-testbed',
                                          'changed-checks', 'report']
    push = _gitlab_ci_local('--list', '--variable', 'CI_PIPELINE_SOURCE=push')
    assert _listed_jobs(push.stdout) == ['lint', 'unit-tests']


def test_gitlab_ci_local_runs_the_lint_job():
    # The unit-tests job is `make test` itself, and the testbed jobs take the machine:
    # those run in `make gitlab-ci-local` (docs/testbed-and-ci.md).
    done = _gitlab_ci_local('--job', 'lint')
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r'^\s*PASS\s+lint\s*$', re.sub(r'\x1b\[[0-9;]*m', '', done.stdout), re.M)
