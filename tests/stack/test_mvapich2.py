"""MVAPICH2 as a site has it: an installed prefix the suite finds (HPCBENCH_MVAPICH2_PREFIX, the
`mpichversion` on PATH, or a standard location), a ReFrame environment `mvapich2` (Hydra's mpirun)
and `mvapich2-rsh` (mpirun_rsh, for the start-up check), and the benchmarks built against it
by Spack. The real runs need an MVAPICH2 on this machine and a Spack."""
import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import BIN, FIXTURES, ROOT, run_reframe
from hpcbench.results import case_builds, changes, measured, stack_comparison
from hpcbench.stack import mpi_stacks, spack

INSTALLED = mpi_stacks.site_mvapich2()
requires_mvapich2 = pytest.mark.skipif(
    INSTALLED is None, reason='no MVAPICH2 installed here (HPCBENCH_MVAPICH2_PREFIX, mpichversion '
                              f'on PATH, {", ".join(mpi_stacks.MVAPICH2_LOCATIONS)})')


def _plain(out):
    return re.sub(r'\x1b\[[0-9;]*m', '', out)


@pytest.fixture
def var(tmp_path, monkeypatch):
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    return tmp_path / 'var'


def test_without_an_mvapich2_there_is_no_environment_and_no_error(tmp_path):
    assert mpi_stacks.site_mvapich2({'PATH': str(tmp_path)}, locations=()) is None
    names = [s.name for s in mpi_stacks.local_stacks({'PATH': str(tmp_path)})]
    assert 'mvapich2' not in names if INSTALLED is None else names[-1] == 'mvapich2'


def test_a_prefix_that_is_not_mvapich2_is_refused_with_one_message(var, tmp_path):
    # Debian's MPICH: an mpichversion, but no MVAPICH2.
    proc = run_reframe('-l', env={'HPCBENCH_MVAPICH2_PREFIX': '/usr'})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert 'HPCBENCH_MVAPICH2_PREFIX=/usr: not an MVAPICH2 install' in out
    assert 'Traceback' not in out


@requires_mvapich2
def test_an_installed_mvapich2_is_found_with_its_launchers():
    stack = next(s for s in mpi_stacks.local_stacks() if s.name == 'mvapich2')
    assert re.fullmatch(r'2\.\d+(\.\d+)?\w*', stack.version())
    assert (stack.bin_dir / 'mpicc').exists() and stack.spack_detects
    assert stack.other_launchers == (('mpirun_rsh',) if (stack.bin_dir / 'mpirun_rsh').exists()
                                     else ())
    # Found from PATH alone, after Debian's MPICH (whose mpichversion is no MVAPICH2's).
    assert mpi_stacks.site_mvapich2({'PATH': f'/usr/bin:{stack.bin_dir}'},
                                    locations=()) == INSTALLED
    assert mpi_stacks.site_mvapich2({'HPCBENCH_MVAPICH2_PREFIX': str(INSTALLED)}) == INSTALLED


@requires_mvapich2
def test_mvapich2_environments_are_listed_and_write_their_launches(var):
    proc = run_reframe('--dry-run', '-n', r'HplCheck|ImbPairCheck%benchmark=PingPong$|'
                       'MpiStartupCheck', '-p', 'mvapich2')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stage = var / 'stage' / 'local' / 'default'
    hpl = [p.read_text() for p in (stage / 'mvapich2').glob('HplCheck_*/rfm_job.sh')]
    assert hpl and all(f'export PATH={INSTALLED}/bin:$PATH' in job for job in hpl)
    # Its own binding is off: the suite binds.
    assert all('export MV2_ENABLE_AFFINITY=0' in job for job in hpl)
    assert any(re.search(r'^mpirun -np 2 \./bind-rank\.sh ', job, re.M) for job in hpl)
    if (INSTALLED / 'bin' / 'mpirun_rsh').exists():
        startup = [p.read_text() for p in (stage / 'mvapich2-rsh').glob(
            'MpiStartupCheck_*/rfm_job.sh')]
        assert len(startup) == 1
        assert re.search(r'^mpirun_rsh -np 2 -hostfile "\$\{HPCBENCH_HOSTFILE:\?',
                         startup[0], re.M)
        # The only start-up check under mpirun_rsh: the others run once per stack.
        assert not list((stage / 'mvapich2-rsh').glob('HplCheck_*'))


def _fake_mvapich2(root, version, device):
    (root / 'bin').mkdir(parents=True)
    tool = root / 'bin' / 'mpichversion'
    tool.write_text(f"#!/bin/sh\nprintf 'MVAPICH2 Version:     \\t{version}\\n"
                    f"MVAPICH2 Device:      \\t{device}\\n'\n")
    tool.chmod(0o755)
    return mpi_stacks.InstalledMvapich2('mvapich2', 'mvapich2', '', root, root / 'bin')


def test_only_the_build_known_to_crash_skips_uniband_and_biband(tmp_path):
    nemesis = _fake_mvapich2(tmp_path / 'nemesis', '2.3.7', 'ch3:nemesis')
    assert set(nemesis.known_failures()) == {'IMB Uniband', 'IMB Biband'}
    assert 'segfaults' in nemesis.known_failures()['IMB Uniband']
    # The same release over InfiniBand (OSU's mrail device), and another release: no entry.
    assert _fake_mvapich2(tmp_path / 'mrail', '2.3.7', 'ch3:mrail').known_failures() == {}
    assert _fake_mvapich2(tmp_path / 'newer', '2.3.8', 'ch3:nemesis').known_failures() == {}


@requires_mvapich2
def test_a_known_failure_is_skipped_saying_why_and_the_other_benchmarks_run(var):
    stack = next(s for s in mpi_stacks.local_stacks() if s.name == 'mvapich2')
    proc = run_reframe('--dry-run', '-n', 'ImbPairCheck', '-p', 'mvapich2$')
    out = _plain(proc.stdout)
    assert proc.returncode == 0, out[-2000:] + proc.stderr
    for benchmark in ('Uniband', 'Biband'):
        skipped = re.search(rf'SKIP.*ImbPairCheck %benchmark={benchmark} .*\[(.*)\]$', out, re.M)
        reason = stack.known_failures().get(f'IMB {benchmark}')
        assert (skipped.group(1) == f'known failure of mvapich2: {reason}') if reason \
            else not skipped
    jobs = [p.read_text() for p in (var / 'stage' / 'local' / 'default' / 'mvapich2').glob(
        'ImbPairCheck_*/rfm_job.sh')]
    assert sorted(re.search(r' (\w+)$', j.split('mpirun ')[-1].splitlines()[0]).group(1)
                  for j in jobs) == sorted({'PingPong', 'PingPing', 'Uniband', 'Biband'}
                                           - {k.split()[1] for k in stack.known_failures()})


@pytest.mark.spack
@requires_mvapich2
def test_the_known_failure_is_real_on_this_build(installed, tmp_path):
    """The entry describes the MVAPICH2 here, not a guess: its IMB Uniband still crashes at
    0 B (when a rebuilt MVAPICH2 stops crashing, this fails and the entry goes)."""
    stack = next(s for s in mpi_stacks.local_stacks() if s.name == 'mvapich2')
    if not stack.known_failures():
        pytest.skip(f'no known failure of MVAPICH2 {stack.version()} here')
    found = spack.find()
    prefix = subprocess.run(
        [str(found.executable), '-e', str(ROOT / 'spack-envs' / 'local'), 'location', '-i',
         'intel-mpi-benchmarks ^mvapich2'], capture_output=True, text=True, timeout=300,
        env={**os.environ, **spack.isolated_environment(found)})
    assert prefix.returncode == 0, prefix.stderr
    env = {**os.environ, 'PATH': f'{stack.bin_dir}:{os.environ["PATH"]}'}
    for benchmark, status in (('Uniband', 'crash'), ('Biband', 'crash'), ('PingPong', 0)):
        run = subprocess.run(['mpirun', '-np', '2', f'{prefix.stdout.strip()}/bin/IMB-MPI1',
                              '-npmin', '2', '-msglog', '0:0', benchmark], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
        if status == 'crash':
            assert run.returncode != 0 and 'Segmentation fault' in run.stdout + run.stderr, \
                (benchmark, run.returncode)
        else:
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr


@pytest.mark.spack
@requires_mvapich2
def test_real_runs_on_mvapich2_pass_under_both_launchers_and_compare_with_the_others(
        installed, var, tmp_path, monkeypatch):
    # Spack's own detection described it (its variants from its configure line).
    host_yaml = yaml.safe_load((ROOT / 'spack-envs' / 'local' / 'host.yaml').read_text())
    external, = host_yaml['packages']['mvapich2']['externals']
    assert external['prefix'] == str(INSTALLED)
    assert re.match(r'mvapich2@[\d.]+\w*[~+]', external['spec']), external
    assert 'mvapich2' in next(d['mpis'] for d in host_yaml['definitions'] if 'mpis' in d)

    monkeypatch.setenv('HPCBENCH_REFERENCES', str(tmp_path))    # no baseline
    # One solve, one run of each ceiling: what runs is checked here, not its figures.
    proc = run_reframe('-r', '-n', r'HplCheck%layout_name=per-core|'
                       r'ImbPairCheck%benchmark=PingPong$|MpiStartupCheck',
                       '-p', 'mvapich2', '-p', 'mvapich2-rsh', '-p', 'openmpi$',
                       '-S', 'sizing=quick', '-S', 'HplCheck.solve_seconds=4',
                       '-S', 'HplCheck.dgemm_repeats=1',
                       '-S', 'max_msglog=16', '-S', 'launches=2', '-S', 'repeats=1',
                       timeout=1800)
    out = _plain(proc.stdout)
    assert proc.returncode == 0, out[-3000:]
    passed = re.findall(r'^\[\s*OK\s*\] .*?(\w+Check)\b.*@local:default\+([\w-]+)$', out, re.M)
    rsh = ['mvapich2-rsh'] if (INSTALLED / 'bin' / 'mpirun_rsh').exists() else []
    assert sorted(set(passed)) == sorted(
        {(check, env) for check in ('HplCheck', 'ImbPairCheck', 'MpiStartupCheck')
         for env in ('mvapich2', 'openmpi')} | {('MpiStartupCheck', e) for e in rsh})
    line = next(ln for ln in (var / 'perflogs' / 'local' / 'default' / 'HplCheck.log')
                .read_text().splitlines() if '|mvapich2|' in ln)
    assert re.search(r'\|build=hpl@2\.3 .*\^mpi=mvapich2@[\d.]+', line), line

    shown = subprocess.run([str(BIN / 'hpcbench'), 'compare-stacks', '--check', 'Imb|Mpi'],
                           capture_output=True, text=True, env={**os.environ})
    assert shown.returncode == 0, shown.stderr
    assert re.search(r'^figure +openmpi +mvapich2( +mvapich2-rsh)?$', shown.stdout, re.M), \
        shown.stdout
    assert re.search(r'^latency \[us\] +[\d.]+ +[\d.]+', shown.stdout, re.M)


def test_four_mpis_side_by_side_with_repeats():
    """A real session of IMB PingPong, three runs (--repeat 3) on each of the four MPIs of
    this machine (MVAPICH2 2.3.7 built by hand): compare-stacks shows each figure as the
    median of the runs, and ranks the latencies with a statistic."""
    data = json.loads((FIXTURES / 'reframe' / 'pingpong-four-mpis-session.json').read_text())
    groups = dict(stack_comparison.side_by_side(measured.measured_cases(data)))
    group = groups['ImbPairCheck benchmark=PingPong on local:default']
    assert {case_builds.stack_of(c)['mpi'].split('@')[0] for c in group.values()} == {
        'openmpi', 'mpich', 'intel-oneapi-mpi', 'mvapich2'}
    table = stack_comparison.stacks_table(group)
    assert all(len(c.figures['latency'].runs) == 3 for c in group.values())
    assert re.search(r'^peak_bandwidth \[MB/s\] +23470 \(median of 3\) +23261 \(median of 3\) '
                     r'+20462 \(median of 3\) +16095 \(median of 3\)$', table, re.M), table
    ranks = changes.rank_environments(group, 'latency')
    assert [r.sample.n for r in ranks] == [3, 3, 3, 3] and ranks[0].what == '3 runs'
    # Open MPI's 0.25 us first, MPICH's 0.36 last; three runs each tell none apart (within
    # 5 %, or MPICH's runs spread from 0.10 to 0.36 us).
    assert [r.environ for r in ranks][::3] == ['openmpi', 'mpich']
    assert [r.ahead.verdict for r in ranks[:-1]] == ['no change', 'no change', 'inconclusive']
