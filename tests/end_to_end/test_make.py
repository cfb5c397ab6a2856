"""The Makefile's targets as a user meets them, each with its own var/ (HPCBENCH_VAR)."""
import contextlib
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from hpcbench.stack import mpi_stacks
from conftest import ROOT


def _make(var, *args, timeout=600):
    env = {**os.environ, 'HPCBENCH_VAR': str(var)}
    return subprocess.run(['make', '--no-print-directory', *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.machine_dependent
def test_the_users_options_win_over_the_modes(tmp_path):
    var = tmp_path / 'var'
    proc = _make(var, 'dry-run', "RFM_OPTS=-n StreamCheck -p openmpi")
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
    assert proc.returncode == 0, out[-2000:] + proc.stderr
    # The mode's options first, the user's after them; only the environment asked for.
    assert "-S IorCheck.every_stack=false -T '^(sweep|screen)$' --dry-run -n StreamCheck " \
        "-p openmpi" in out
    assert 'were not set' not in out        # each quick setting names the checks it is for
    assert {p.name for p in (var / 'stage' / 'local' / 'default').iterdir()} == {'openmpi'}


@pytest.mark.machine_dependent
def test_rfm_opts_reach_reframe_as_written_with_quotes_and_dollars(tmp_path):
    """README's own `-p 'openmpi$'` in RFM_OPTS: make expanded `$'` to nothing and the
    shell met an unbalanced quote ('syntax error near unexpected token'); a name regex
    with `|` needs its quotes too."""
    var = tmp_path / 'var'
    proc = _make(var, 'dry-run', "RFM_OPTS=-n 'StreamCheck|MpiStartupCheck' -p 'openmpi$'")
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
    assert proc.returncode == 0, out[-2000:] + proc.stderr
    assert "--dry-run -n 'StreamCheck|MpiStartupCheck' -p 'openmpi$'" in out
    staged = {p.name: {c.name.split('_')[0] for c in p.iterdir()}
              for p in (var / 'stage' / 'local' / 'default').glob('*/')}
    assert set(staged) == {'openmpi'}, staged
    assert {'StreamCheck', 'MpiStartupCheck'} <= staged['openmpi']


def test_a_system_whose_nodes_share_a_host_runs_one_job_at_a_time(tmp_path):
    """The testbed's Slurm nodes are processes of this host: its runs (make run, screen,
    tune) start one job at a time, as a described cluster whose nodes share hosts does
    (run_modes.execution_options); local's are not serialized. Each target sets up, and
    reads the results of, the system it runs."""
    for system, policy in (('testbed', ' --exec-policy=serial '), ('local', None)):
        proc = _make(tmp_path / 'var', '-n', 'run', 'screen', 'tune', f'SYSTEM={system}')
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        runs = [line for line in proc.stdout.splitlines() if '/reframe -C ' in line]
        assert len(runs) == 3, proc.stdout
        assert all((policy in line) if policy else ('--exec-policy' not in line)
                   for line in runs), runs
        for command in ('setup', 'screen-nodes', 'hpl-tuning'):
            assert f'hpcbench {command} --system {system}' in proc.stdout, command


@pytest.mark.machine_dependent
def test_make_screen_screens_each_node_once_on_the_first_stack(tmp_path):
    """One rank on one node sends no MPI message: screening every node once per MPI stack
    tripled `make screen` on the testbed (15 jobs for its 5 nodes) for the same figures.
    The target's own ReFrame command, as a dry run, stages one screen per node, on the
    first stack, and says why the others skip."""
    var = tmp_path / 'var'
    printed = _make(var, '-n', 'screen').stdout.replace('\\\n', ' ')
    command = next(line for line in printed.splitlines() if '/reframe -C ' in line)
    args = shlex.split(command)
    assert args[-1] == '-r', command
    proc = subprocess.run([*args[:-1], '--dry-run'], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, 'HPCBENCH_VAR': str(var)}, timeout=600)
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
    assert proc.returncode == 0, out[-2000:] + proc.stderr
    stacks = [s.name for s in mpi_stacks.local_stacks()]
    screened = {p.parent.parent.name for p in (var / 'stage' / 'local' / 'default').glob(
        '*/HplNodeScreen*/rfm_job.sh')}
    assert screened == {stacks[0]}, screened
    for other in stacks[1:]:
        assert re.search(rf'SKIP.*HplNodeScreen .*@local:default\+{other} \[its figures do '
                         rf'not depend on the MPI stack: measured on {stacks[0]} '
                         r'\(HplNodeScreen\.every_stack=false', out), out[-2000:]


@pytest.mark.machine_dependent
def test_a_paper_systems_dry_run_is_its_papers_run(tmp_path):
    """Without MODE=, a paper's system runs full size, as its paper did: T2K's HPL at 625
    nodes is Table 5's N (1,508,000, from its huge pages), not quick mode's 1/50."""
    var = tmp_path / 'var'
    proc = _make(var, 'dry-run', 'SYSTEM=t2k-tsukuba', 'RFM_OPTS=-n HplCheck -p openmpi')
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert 'sizing=quick' not in proc.stdout
    # Its paper screened every node first (§4.2): its run keeps the screening, not the sweep.
    assert "-T '^(sweep)$' --dry-run -n HplCheck" in proc.stdout
    dats = [p.read_text() for p in (var / 'stage').glob('**/HplCheck_*/HPL.dat')]
    assert any(re.search(r'^1508000 .*Ns$', d, re.M) and re.search(r'^232 +NBs$', d, re.M)
               for d in dats), len(dats)


@pytest.mark.machine_dependent
def test_a_run_that_reframe_refuses_stops_with_one_message(tmp_path):
    var = tmp_path / 'var'
    # The registry path: a Spack's set-up (which may need sources) comes before ReFrame.
    proc = _make(var, 'run', 'RFM_OPTS=--no-such-option', 'HPCBENCH_NO_SPACK=1')
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    # (make echoes the recipe, with the message's text, on stdout.)
    assert proc.stderr.count('unrecognized arguments: --no-such-option') == 1
    assert proc.stderr.count('make run: ReFrame stopped before running') == 1
    assert 'run the suite first' not in said and 'Traceback' not in said
    assert not (var / 'reports').exists() and not (var / 'report').exists()


def test_make_clean_keeps_every_result(tmp_path):
    var = tmp_path / 'var'
    var.mkdir()
    (var / '.hpcbench-results').write_text('made by a run of the suite\n')
    results = [var / 'results.db', var / 'perflogs' / 'local' / 'default' / 'X.log',
               var / 'reports' / 'run-report-1.json', var / 'output' / 'x' / 'rfm_job.out',
               var / 'logs' / 'reframe-run_1.log']
    scratch = [var / 'stage' / 'x' / 'rfm_job.sh', var / 'topology' / 'local-default' / 'p.json']
    for path in results + scratch:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('x')
    venv = tmp_path / 'venv'        # not the checkout's
    venv.mkdir()
    proc = _make(var, 'clean', f'VENV={venv}')
    assert proc.returncode == 0, proc.stderr
    assert all(p.exists() for p in results)
    assert not any(p.exists() for p in scratch) and not venv.exists()
    assert f'kept the results in {var}/' in proc.stdout


def test_a_results_directory_of_other_files_is_neither_cleaned_nor_written(tmp_path):
    """Issue 51, item 4: `make clean` with HPCBENCH_VAR at a directory of its own deleted
    its ci/, stage/ and topology/; / or /etc as HPCBENCH_VAR got run.lock, stage/, logs/...
    written into it, by `reframe -l` too."""
    theirs = tmp_path / 'project'
    files = [theirs / 'ci' / 'pipeline.yml', theirs / 'stage' / 'notes.txt',
             theirs / 'topology' / 'map.json', theirs / 'README']
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('theirs')
    before = sorted(p.relative_to(theirs) for p in theirs.rglob('*'))
    venv = tmp_path / 'venv'
    venv.mkdir()
    proc = _make(theirs, 'clean', f'VENV={venv}')
    assert proc.returncode != 0
    assert (f"make clean: {theirs} is not the suite's results directory (no .hpcbench-results "
            'in it): nothing was removed') in proc.stderr, proc.stderr
    said = ("error: the results directory {} holds other files (README, ci, stage, topology) "
            "and is not the suite's (no .hpcbench-results in it): give the run a new or empty "
            'directory with HPCBENCH_VAR=<directory>').format(theirs)
    from conftest import BIN, run_reframe
    for command in (['-l'], ['-n', 'StreamCheck', '--dry-run']):
        listed = run_reframe(*command, env={'HPCBENCH_VAR': str(theirs)})
        assert listed.returncode == 1 and said in listed.stderr, listed.stderr
        assert 'Traceback' not in listed.stdout + listed.stderr
    report = subprocess.run([str(BIN / 'hpcbench'), 'report'], cwd=ROOT, capture_output=True,
                            text=True, env={**os.environ, 'HPCBENCH_VAR': str(theirs)})
    assert report.returncode == 2 and report.stderr.startswith(said), report.stderr
    assert sorted(p.relative_to(theirs) for p in theirs.rglob('*')) == before
    assert venv.exists() and all(p.read_text() == 'theirs' for p in files)
    # A new or empty directory becomes the suite's.
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert run_reframe('-l', env={'HPCBENCH_VAR': str(empty)}).returncode == 0
    assert (empty / '.hpcbench-results').is_file()


def test_make_takes_every_variable_as_typed_and_never_runs_what_it_holds(tmp_path):
    """Issue 51, item 16: a `$(shell ...)` in any variable given on the command line (NAME,
    RFM_OPTS, BUNDLE, MODE, an unrelated one) was run by make; MODE='quick full' passed
    its check and ran unsized."""
    var = tmp_path / 'var'
    ran = tmp_path / 'ran'
    hostile = {name: f'$(shell touch {ran}-{name})' for name in
               ('RFM_OPTS', 'NAME', 'BUNDLE', 'REPORT_OPTS', 'UNRELATED')}
    proc = _make(var, '-n', 'run', 'new-system', *(f'{k}={v}' for k, v in hostile.items()),
                 timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert hostile['RFM_OPTS'] in proc.stdout
    assert not list(tmp_path.glob('ran*'))
    for mode in ('quick full', hostile['RFM_OPTS']):
        refused = _make(var, '-n', 'run', f'MODE={mode}', timeout=120)
        assert refused.returncode != 0
        assert f"MODE must be quick or full, not '{mode}'" in refused.stderr, refused.stderr
    assert not list(tmp_path.glob('ran*'))


def test_make_n_prints_a_run_and_runs_nothing(tmp_path):
    """make -n runs every recipe line that names $(MAKE): a run's recipe must not, or the
    user who asks what `make run` would do gets the benchmarks run (it did, once)."""
    var = tmp_path / 'var'
    proc = _make(var, '-n', 'run', 'RFM_OPTS=-n StreamCheck -p openmpi', timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert 'reframe -C site-configs/local.py' in proc.stdout
    assert 'hpcbench report --system local' in proc.stdout
    assert not var.exists() or not any(var.iterdir()), sorted(p.name for p in var.iterdir())


# --- Values given to make that reach a shell (issue 38) ------------------------------------

def test_a_system_that_is_not_one_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / 'ran'
    for system in (f'local; touch {marker}', f'$(shell touch {marker})', f'`touch {marker}`'):
        proc = _make(tmp_path / 'var', 'dry-run', f'SYSTEM={system}', timeout=60)
        assert proc.returncode != 0
        assert "is not a system; the systems: chic local louhi" in proc.stderr, proc.stderr
        assert not marker.exists(), system


def test_a_bundle_path_reaches_the_unpacker_as_written(tmp_path):
    marker = tmp_path / 'ran'
    archive = f"{tmp_path}/it's; touch {marker}"
    proc = _make(tmp_path / 'var', 'unpack-bundle', f'BUNDLE={archive}', timeout=60)
    assert proc.returncode != 0
    assert f'error: {archive}: no such file' in proc.stderr, proc.stderr
    assert not marker.exists()


def test_a_screening_threshold_must_be_a_number(tmp_path):
    marker = tmp_path / 'ran'
    proc = _make(tmp_path / 'var', 'screen', f'SCREEN_THRESHOLD=5; touch {marker}', timeout=60)
    assert proc.returncode != 0 and 'is not a number of percent' in proc.stderr
    assert not marker.exists()


def test_a_results_directory_with_a_space_is_refused_up_front_with_one_message(tmp_path):
    var = tmp_path / 'v w'
    proc = _make(var, 'run', 'RFM_OPTS=-n StreamCheck', timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.count(f"HPCBENCH_VAR '{var}': a results directory's path has") == 1
    # ReFrame run directly refuses it too, before making anything there.
    direct = subprocess.run([str(ROOT / '.venv/bin/reframe'), '-C', 'site-configs/local.py',
                             '-c', 'reframe-checks', '-n', 'StreamCheck', '--dry-run'],
                            cwd=ROOT, env={**os.environ, 'HPCBENCH_VAR': str(var)},
                            capture_output=True, text=True, timeout=120)
    assert direct.returncode == 1 and direct.stderr == (
        f"error: '{var}': a results directory's path has no spaces or shell syntax (it "
        'reaches job scripts, Spack and make); give the run another one with '
        'HPCBENCH_VAR=<directory>\n'), direct.stderr
    assert not var.exists()


# --- Variables given to make reach the tools; a signal reaches ReFrame (issue 60) ----------

def _make_without(names, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in names}
    return subprocess.run(['make', '--no-print-directory', *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.machine_dependent
def test_a_variable_given_on_make_s_command_line_reaches_the_tools(tmp_path):
    """Item 3: since every command-line variable was taken as typed, none was exported:
    `make ... HPCBENCH_VAR=...` measured into var/, and a cache path of shell syntax given
    on the command line was not refused where the same in the environment was."""
    var = tmp_path / 'given'
    done = _make_without({'HPCBENCH_VAR'}, 'dry-run', f'HPCBENCH_VAR={var}',
                         'RFM_OPTS=-n StreamCheck -p openmpi')
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert list((var / 'stage' / 'local' / 'default').iterdir())
    bad = str(tmp_path / 'bad cache')
    typed = _make_without({'HPCBENCH_CACHE'}, 'dry-run', f'HPCBENCH_CACHE={bad}',
                          f'HPCBENCH_VAR={tmp_path / "v1"}', timeout=120)
    env = {k: v for k, v in os.environ.items() if k != 'HPCBENCH_CACHE'}
    from_environment = subprocess.run(
        ['make', '--no-print-directory', 'dry-run', f'HPCBENCH_VAR={tmp_path / "v1"}'],
        cwd=ROOT, env={**env, 'HPCBENCH_CACHE': bad}, capture_output=True, text=True,
        timeout=120)
    for refused in (typed, from_environment):
        assert refused.returncode != 0
        assert f"HPCBENCH_CACHE '{bad}': a path that reaches job scripts" in refused.stderr, \
            refused.stderr
    assert not (tmp_path / 'bad cache').exists()


def _processes_of(var):
    """PIDs of the processes whose environment names `var` as HPCBENCH_VAR."""
    wanted = f'HPCBENCH_VAR={var}'.encode()
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/environ', 'rb') as fp:
                if wanted in fp.read().split(b'\0'):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.machine_dependent
def test_sigterm_to_make_run_ends_reframe_and_its_job(tmp_path):
    """Item 4: SIGTERM to `make run` (make passes it to the recipe's shell) left ReFrame, its
    parent now PID 1, measuring and storing."""
    var = tmp_path / 'var'
    # HPCC from Debian (no Spack: the set-up does not build), a run of a minute or two.
    run = subprocess.Popen(['setsid', 'make', '--no-print-directory', 'run',
                            'RFM_OPTS=-n HpccCheck -p openmpi'], cwd=ROOT,
                           env={**os.environ, 'HPCBENCH_VAR': str(var),
                                'HPCBENCH_NO_SPACK': '1'},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not list(var.glob('stage/**/rfm_job.sh')):
            time.sleep(0.5)
        assert list(var.glob('stage/**/rfm_job.sh')), 'no job started'
        time.sleep(3)
        run.send_signal(signal.SIGTERM)
        out = run.communicate(timeout=120)[0]
        deadline = time.monotonic() + 60
        while _processes_of(var) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _processes_of(var)
        assert not left, [open(f'/proc/{p}/cmdline').read() for p in left] + [out[-2000:]]
        assert run.returncode != 0
    finally:
        if run.poll() is None:
            run.kill()
        for pid in _processes_of(var):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
