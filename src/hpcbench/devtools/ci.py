"""What the GitLab pipeline (.gitlab-ci.yml) asks of the project beyond `make`.

A merge request runs the unit tests and only the checks it changed: a check's file
(reframe-checks/<name>.py) or its pure-Python module (src/hpcbench/benchmarks/<name>.py, same
name).
"""
import copy
import re
import subprocess
from pathlib import PurePosixPath

from hpcbench.core import paths

CHECKS = PurePosixPath('reframe-checks')
MODULES = PurePosixPath('src/hpcbench/benchmarks')


def changed_checks(changed_files, existing_checks):
    """The check files (relative to the project) a change touches: `changed_files` are
    paths relative to the project root, `existing_checks` the check files there now (a
    deleted check is not run)."""
    existing = {str(PurePosixPath(c)) for c in existing_checks}
    touched = set()
    for name in changed_files:
        path = PurePosixPath(name)
        if path.suffix != '.py':
            continue
        if path.parent == CHECKS or path.parent == MODULES:
            touched.add(str(CHECKS / path.name))

    return sorted(touched & existing)


def git_changed_files(base):
    """Files changed between `base` and HEAD (the merge request's diff: from the merge
    base, as GitLab shows it)."""
    done = subprocess.run(['git', 'diff', '--name-only', f'{base}...HEAD'], cwd=paths.PROJECT_ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f'git diff {base}...HEAD: {done.stderr.strip()}')

    return done.stdout.split()


def project_checks():
    return [str(p.relative_to(paths.PROJECT_ROOT)) for p in sorted(paths.CHECKS_DIR.glob('*.py'))]


# --- The child pipeline ReFrame writes (reframe --ci-generate) ---------------------------------

# What every generated job needs on the runner before ReFrame: the project's venv and the
# testbed (a no-op when it runs).
CHILD_BEFORE_SCRIPT = ['make venv', 'ci/testbed/testbed start']
TESTBED_STOP_JOB = 'stop-testbed'
FIXTURE_JOB = re.compile(r'_[0-9a-f]{8}$')


def child_pipeline(generated, config='site-configs/testbed.py'):
    """ReFrame's generated pipeline (a dict) made runnable from any checkout of the project:
    - ReFrame 4.10.4 cannot select a fixture by its hash (`-n /<hash>` of a fixture finds no
      check), so the jobs it writes for fixtures run nothing and leave no report to restore:
      they are dropped, and each test's job runs its fixtures itself (the builds are Spack
      installs of the partition's environment: nothing to do once the build job ran);
    - the site config by its path in the project, not the generating host's absolute one;
    - ReFrame from the project's venv, the testbed started before each job;
    - each job's JUnit report published (when it fails too);
    - no cache: the stage and results live in HPCBENCH_VAR, outside the checkout;
    - a last stage that stops the testbed, whatever happened."""
    jobs = {name: job for name, job in generated.items()
            if isinstance(job, dict) and 'script' in job}
    # A fixture's job is named <class>_<8-hex hash>, a test's <class>[_<variant>]; `needs`
    # names only some of them.
    fixtures = {name for name in jobs if FIXTURE_JOB.search(name)}
    fixtures |= {needed for job in jobs.values() for needed in job.get('needs', [])}
    pipeline = {'stages': [*generated['stages'], 'stop']}
    for name, job in jobs.items():
        if name in fixtures:
            continue
        job = copy.deepcopy(job)
        job['script'] = [_project_command(line, config) for line in job['script']]
        job['before_script'] = list(CHILD_BEFORE_SCRIPT)
        job['needs'] = []
        artifacts = job.setdefault('artifacts', {})
        artifacts['when'] = 'always'
        artifacts.setdefault('reports', {})['junit'] = f'{name}-report.xml'
        pipeline[name] = job

    pipeline[TESTBED_STOP_JOB] = {'stage': 'stop', 'when': 'always',
                                  'script': ['ci/testbed/testbed stop']}
    return pipeline


def _project_command(line, config):
    words = [w for w in line.split() if not w.startswith('--restore-session=')]
    if words[:1] == ['reframe']:
        words[0] = '.venv/bin/reframe'
    for i, word in enumerate(words[:-1]):
        if word == '-C':
            words[i + 1] = config
    return ' '.join(words)
