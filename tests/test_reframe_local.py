"""The local site config and the checks through ReFrame itself: listing, dry-run job scripts,
and (with a Spack) a real STREAM run whose regression against a baseline is flagged."""
import re
import shutil
import subprocess

import pytest
import yaml

from hpcbench import host, hpl, layout, spack, stream
from conftest import BIN, ROOT, run_reframe

MPI_ENVIRONS = ('openmpi', 'mpich', 'intelmpi')


@pytest.fixture
def var(tmp_path, monkeypatch):
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    return tmp_path / 'var'


def _cores():
    info = host.processor_info()
    return len(info['topology']['cores'])


def test_checks_load_and_list_one_stream_test_per_thread_count(var):
    proc = run_reframe('-l')
    assert proc.returncode == 0, proc.stderr
    assert 'skipping test file' not in proc.stdout + proc.stderr
    listed = re.findall(r'^- StreamCheck %num_threads=(\d+)', proc.stdout, re.M)
    assert [int(n) for n in listed] == sorted(stream.thread_sweep(_cores()), reverse=True) \
        or sorted(int(n) for n in listed) == stream.thread_sweep(_cores())


def test_dry_run_writes_stream_jobs_for_every_mpi_environment(var):
    proc = run_reframe('--dry-run', '-n', 'StreamCheck')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for environ in MPI_ENVIRONS:
        for threads in stream.thread_sweep(_cores()):
            scripts = [p for p in (var / 'stage' / 'local' / 'default' / environ).glob(
                'StreamCheck_*/rfm_job.sh')
                if f'OMP_NUM_THREADS={threads}\n' in p.read_text()]
            assert len(scripts) == 1, (environ, threads)
            job = scripts[0].read_text()
            assert 'export OMP_PLACES=cores' in job and 'export OMP_PROC_BIND=spread' in job
            assert re.search(r'^export PATH=\S+/(openmpi|mpich|mpi/2021\.17)/bin:\$PATH$',
                             job, re.M)
            assert re.search(r"/bin/stream_c\.exe$", job, re.M)
            assert 'mpirun' not in job       # one process, placed by OpenMP

        builds = list((var / 'stage' / 'local' / 'default' / environ).glob(
            'StreamBuild_*/rfm_build.sh'))
        assert len(builds) == 1
        text = builds[0].read_text()
        assert f'spack -e {ROOT}/spack-envs/local install' in text
        assert "location -i 'stream stream_array_size=" in text


def test_dry_run_writes_hpl_jobs_per_layout_with_binding_and_a_fitting_hpl_dat(var):
    proc = run_reframe('--dry-run', '-n', 'HplCheck', '-S', 'sizing=tuning')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept, _ = layout.distinct_layouts(host.processor_info())
    for environ in MPI_ENVIRONS:
        stages = list((var / 'stage' / 'local' / 'default' / environ).glob('HplCheck_*'))
        assert len(stages) == len(kept)
        for stage in stages:
            job = (stage / 'rfm_job.sh').read_text()
            # Without a recorded build (a dry run), the prefix is Spack's own lookup.
            launch = re.search(r"^mpirun -np (\d+) \./bind-rank\.sh (\S+|\$\(spack -e \S+ "
                               r"location -i 'hpl \^\S+'\))/bin/xhpl$", job, re.M)
            ranks = int(launch.group(1))
            chosen = next(v for v in kept.values() if v.ranks_per_node == ranks)
            assert f'export OMP_NUM_THREADS={chosen.threads_per_rank}\n' in job
            assert 'export I_MPI_PIN=off' in job
            assert (stage / 'bind-rank.sh').read_text() == layout.bind_script(chosen)
            dat = (stage / 'HPL.dat').read_text().splitlines()
            ns = [int(n) for n in dat[5].split('  ')[0].split()]
            p, q = int(dat[10].split()[0]), int(dat[11].split()[0])
            assert len(ns) == 3            # the repeats
            assert p * q == ranks and len(set(ns)) == 1 and ns[0] % (192 * q) == 0
            assert 8 * ns[0] ** 2 <= hpl.TUNING_MEMORY_FRACTION * host.memory_bytes()


def test_an_hpl_n_that_does_not_fit_is_refused_before_its_job_is_written(var):
    proc = run_reframe('--dry-run', '-n', 'HplCheck', '-p', 'openmpi', '-S', 'n=400000')
    assert proc.returncode != 0
    assert 'Failing phase: setup' in proc.stdout
    assert re.search(r'HPL N=400000 needs 119\d\.\d GiB but 1 node\(s\)', proc.stdout)
    assert not list((var / 'stage').glob('**/HplCheck_*/rfm_job.sh'))


def test_registry_only_path_runs_a_small_real_hpcc_through_reframe(var):
    """What a fresh machine without Spack runs: Debian's hpcc on Debian's Open MPI."""
    if not shutil.which('hpcc') or not shutil.which('mpirun.openmpi'):
        pytest.skip('Debian hpcc/Open MPI missing: `make test` installs them as root '
                    '(hpcbench setup --registry-only)')

    proc = run_reframe('-r', '-S', 'memory_fraction=0.002', '--performance-report',
                       env={'HPCBENCH_NO_SPACK': '1'})
    out = re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout)
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r'^\[\s*OK\s*\] .*HpccDebianCheck .*@local:default\+openmpi$', out, re.M)
    # Everything built by Spack says why it did not run.
    assert 'no Spack found' in out
    assert not re.search(r'^\[\s*OK\s*\] .*(HpccCheck|StreamCheck|HplCheck)', out, re.M)
    figures = {k: float(v) for k, v in re.findall(r'^P: (\w+): ([\d.e+-]+) ', out, re.M)}
    assert figures['hpl'] > 0 and figures['star_dgemm'] > 0 and figures['star_stream_triad'] > 0
    assert 0 < figures['hpl_ceiling_efficiency'] < 100
    if host.processor_info().get('num_cpus', 1) > 1:
        assert figures['pingpong_latency'] > 0 and figures['random_ring_bandwidth'] > 0

    # The perflog line carries the inputs and every figure with its unit.
    line = (var / 'perflogs' / 'local' / 'default' / 'HpccDebianCheck.log').read_text(
        ).splitlines()[-1]
    assert re.search(r'\|inputs=N=\d+ NB=192 P=\d+ Q=\d+ per-core', line)
    assert re.search(r'\|hpl=[\d.]+ GFLOP/s \(ref=', line)
    assert re.search(r'\|star_stream_triad=[\d.]+ GB/s \(ref=', line)


requires_spack = pytest.mark.skipif(
    spack.find() is None,
    reason='no Spack found (SPACK_ROOT or the per-user cache): real STREAM run skipped')


@pytest.fixture(scope='module')
def installed():
    from hpcbench import bootstrap
    found = bootstrap.bootstrap()
    bootstrap.install_local_environment(found)


@pytest.mark.spack
@requires_spack
def test_real_stream_run_passes_and_a_regression_against_a_baseline_fails(
        installed, var, tmp_path, monkeypatch):
    refs_dir = tmp_path / 'refs'       # no baseline yet: the user's is not this test's
    refs_dir.mkdir()
    monkeypatch.setenv('HPCBENCH_REFERENCES', str(refs_dir))
    proc = run_reframe('-r', '-n', 'StreamCheck', '--performance-report')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 'PERFORMANCE REPORT' in proc.stdout
    triads = [float(v) for v in re.findall(r'triad: ([\d.]+) MB/s', proc.stdout)]
    assert len(triads) == 3 * len(stream.thread_sweep(_cores())) and min(triads) > 1000

    # Record that run as a baseline (tolerance 50 %), then make one of its figures four times
    # as good, so that its lower bound is twice what this machine does: the next run must
    # flag exactly that case as a performance failure, and no other.
    recorded = subprocess.run([str(BIN / 'hpcbench'), 'baseline', '--tolerance', '0.5'],
                              capture_output=True, text=True)
    assert recorded.returncode == 0, recorded.stderr
    baseline = yaml.safe_load((refs_dir / 'local.yaml').read_text())
    target = next(f for f in baseline['figures'] if f['variable'] == 'triad'
                  and f['environ'] == 'mpich' and f['match'] == {'num_threads': 1})
    target['value'] *= 4
    (refs_dir / 'local.yaml').write_text(yaml.safe_dump(baseline))

    proc = run_reframe('-r', '-n', 'StreamCheck')
    assert proc.returncode != 0
    failures = re.findall(r'^\[\s*FAIL\s*\] .*', re.sub(r'\x1b\[[0-9;]*m', '', proc.stdout),
                          re.M)
    assert len(failures) == 1 and 'num_threads=1' in failures[0] and '+mpich' in failures[0]
    assert 'triad' in proc.stdout[proc.stdout.index('FAILURE INFO'):]
