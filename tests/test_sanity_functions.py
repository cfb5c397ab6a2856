"""The checks' sanity functions themselves, on real outputs and broken copies of them: the
check files are loaded through ReFrame's loader under the local site config."""
import re
import types

import pytest
import reframe.utility.sanity as sn
from reframe.core import config, runtime
from reframe.core.exceptions import SanityError
from reframe.frontend.loader import RegressionCheckLoader

from conftest import FIXTURES, ROOT
from hpcbench import ceilings, imb
from hpcbench.rfm import Samples
from test_hpcc_and_dgemm import HPCC_MUTATIONS, _dgemm_mutations, _hpcc_mutations
from test_ceilings import MUTATIONS as CEILINGS_MUTATIONS
from test_stream import _run_mutations as _stream_run_mutations
from test_ceilings import OUTPUT as CEILINGS_OUTPUT
from test_hpl import MUTATIONS as HPL_MUTATIONS
from test_hpl import _mutations as _hpl_mutations
from test_imb import ALL_SIZES, BROKEN_TABLE
from test_ior import DROP_CACHES_OUTPUT as IOR_OUTPUT
from test_ior import MUTATIONS as IOR_MUTATIONS
from test_ior import OUTPUTS as IOR_OUTPUTS
from test_ior import _mutations as _ior_mutations
from test_imb import MUTATIONS as IMB_MUTATIONS
from test_imb import OUTPUTS as IMB_OUTPUTS
from test_imb import _mutations as _imb_mutations
from test_mpi_startup import MUTATIONS as STARTUP_MUTATIONS
from test_mpi_startup import OUTPUT as STARTUP_OUTPUT
from test_mpi_startup import _mutations as _startup_mutations
from test_stream import MUTATIONS, _mutations


class _EveryVariable:
    def __contains__(self, name):
        return True

    def __delitem__(self, name):
        pass


class CheckUnderTest(types.SimpleNamespace):
    """What a sanity function is given here in place of the test: the attributes it reads,
    and what it records beside the figures (hpcbench.rfm.Samples)."""
    record_samples = Samples.record_samples
    record_aggregation = Samples.record_aggregation
    withhold_ratio_above_ceiling = Samples.withhold_ratio_above_ceiling

    def __init__(self, **attrs):
        super().__init__(samples={}, aggregation={}, flagged={}, unique_name='under test',
                         perf_variables=_EveryVariable(), **attrs)


@pytest.fixture(scope='module')
def check_classes():
    site = config.load_config(str(ROOT / 'site-configs' / 'local.py'))
    site.select_subconfig('local')
    runtime.init_runtime(site)
    loader = RegressionCheckLoader([str(ROOT / 'reframe-checks')])
    classes = {}
    for name in ('stream.py', 'hpl.py', 'hpcc.py', 'imb.py', 'mpi_startup.py', 'ior.py'):
        module = loader.load_from_file(str(ROOT / 'reframe-checks' / name))
        classes.update({type(t).__name__: type(t) for t in module})

    # Fixtures and bases are not listed as tests: take them from the checks' modules.
    for test_class in list(classes.values()):
        module = __import__(test_class.__module__, fromlist=['*'])
        classes.update({k: v for k, v in vars(module).items() if isinstance(v, type)})

    return classes


def _ended(at):
    """A fixture's job that ended `at` (seconds since the epoch; None: not known)."""
    return types.SimpleNamespace(completion_time=at)


def _stream_test(stagedir, output, threads, node_ceilings=None, streaming_store_triads=(),
                 submitted=None, streaming_store_ended=None):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', num_threads=threads,
                          job=types.SimpleNamespace(submit_time=submitted),
                          node_ceilings=node_ceilings or _node_ceilings(),
                          streaming_store_ceiling=types.SimpleNamespace(
                              triads=list(streaming_store_triads),
                              job=_ended(streaming_store_ended)))


def _node_ceilings(output=CEILINGS_OUTPUT, repeats=5, ended=None):
    """The NodeCeilings fixture as STREAM and HPL read it: its real result on this machine."""
    return types.SimpleNamespace(result=ceilings.parse(output, ceilings.kernels(32), repeats),
                                 repeats=repeats, kernels=ceilings.kernels(32), job=_ended(ended))


def _judging_stream_test(stream_check, test):
    """`test` with StreamCheck's methods that judge its ratios."""
    test.is_dry_run = lambda: False
    test.CEILING_RATIOS = stream_check.CEILING_RATIOS
    for method in ('percent_of', 'ceiling_mbps', 'ceiling_runs', 'ceiling_source'):
        setattr(test, method, types.MethodType(getattr(stream_check, method), test))
    return test


@pytest.mark.parametrize('output, triad', [
    ('local-2-threads.out', 48037.4),
    # STREAM with streaming stores (stores=nontemporal), as the job wrote it.
    ('local-2-threads-nontemporal.out', 46847.4)])
def test_stream_sanity_passes_a_real_output(check_classes, tmp_path, output, triad):
    test = _stream_test(tmp_path, (FIXTURES / 'stream' / output).read_text(), 2)
    assert sn.evaluate(check_classes['StreamCheck'].solution_validates(test))
    assert test.result.best_rate_mbps['Triad'] == triad


def test_a_stream_triad_above_its_ceiling_is_withheld(check_classes, tmp_path):
    """A real all-core run (the VM as an Intel Xeon) against the ceilings of a later session
    (as an AMD EPYC): 74.6 % of the bandwidth ceiling is a result; 120.3 % of the
    ordinary-store triad is none (that ceiling was measured low), and says why."""
    stream_check = check_classes['StreamCheck']
    test = _judging_stream_test(stream_check, _stream_test(
        tmp_path, (FIXTURES / 'stream' / 'local-2-threads.out').read_text(), 2))
    assert sn.evaluate(stream_check.solution_validates(test))
    stream_check.judge_the_ceilings(test)
    assert set(test.flagged) == {'triad_cached_store_efficiency'}
    assert test.flagged['triad_cached_store_efficiency'] == (
        '120.3 % of the ceiling: STREAM\'s triad reached 48037 MB/s against the ordinary-store '
        'triad of 39923 MB/s: it was measured low')
    assert test.percent_of('bandwidth') == pytest.approx(74.64, abs=0.01)
    assert test.aggregation['triad_ceiling_efficiency'] == (
        'triad / the bandwidth ceiling (64359 MB/s, best of 5 runs of stream_mem_avx512 '
        '(64359, measured in this session))')


STREAMING_STORE_CEILING = (FIXTURES / 'stream' /
                           'local-2-threads-streaming-store-ceiling-3-runs.out').read_text()


def test_the_bandwidth_ceiling_is_the_faster_triad_with_streaming_stores(check_classes,
                                                                          tmp_path):
    """One real session (the ceilings' jobs, then STREAM as compiled): likwid-bench's triad
    reached 36889 MB/s, STREAM's own with streaming stores 44126: the ceiling is the latter,
    and the compiled triad's 38874 MB/s is 88.1 % of it (105.4 % of likwid-bench's alone,
    which would have been withheld). Each kernel says how long before STREAM's job it ran
    (as in `make run`, where ReFrame runs fixtures first: minutes)."""
    stream_check = check_classes['StreamCheck']
    session = FIXTURES / 'ceilings' / 'local-likwid-3-runs-same-session.out'
    ceiling = check_classes['StreamingStoreCeiling']
    ceiling_test = CheckUnderTest(stagedir=str(tmp_path), stdout='ceiling.out', cores=2,
                                  repeats=3, measures=True)
    (tmp_path / 'ceiling.out').write_text(STREAMING_STORE_CEILING)
    assert sn.evaluate(ceiling.every_run_validates(ceiling_test))
    test = _judging_stream_test(stream_check, _stream_test(
        tmp_path, (FIXTURES / 'stream' / 'local-2-threads-same-session.out').read_text(), 2,
        node_ceilings=_node_ceilings(session.read_text(), 3, ended=1000.0),
        streaming_store_triads=ceiling_test.triads, streaming_store_ended=1480.0,
        submitted=1900.0))
    assert sn.evaluate(stream_check.solution_validates(test))
    stream_check.judge_the_ceilings(test)
    assert test.percent_of('bandwidth') == pytest.approx(88.10, abs=0.01)
    assert 'triad_ceiling_efficiency' not in test.flagged
    assert test.aggregation['triad_ceiling_efficiency'] == (
        'triad / the bandwidth ceiling (44126 MB/s, best of 3 runs of stream_mem_avx512 '
        '(36889, measured 900 s before this job) and 3 runs of STREAM\'s streaming-store '
        'triad (44126, measured 420 s before this job))')


def test_streaming_store_ceiling_sanity_passes_a_real_output(check_classes, tmp_path):
    (tmp_path / 'rfm_job.out').write_text(STREAMING_STORE_CEILING)
    test = CheckUnderTest(stagedir=str(tmp_path), stdout='rfm_job.out', cores=2, repeats=3,
                          measures=True)
    assert sn.evaluate(check_classes['StreamingStoreCeiling'].every_run_validates(test))
    assert test.samples['triad'] == [43249.5, 44126.4, 43861.7]
    assert test.aggregation['triad'] == (
        'best of 3 runs (each STREAM\'s best of 19 timed iterations)')


@pytest.mark.parametrize('mutation', ['cut in the third run', 'two of three runs',
                                      'second run failed validation', 'one run more'])
def test_streaming_store_ceiling_sanity_fails_a_broken_real_output(check_classes, tmp_path,
                                                                    mutation):
    (tmp_path / 'rfm_job.out').write_text(_stream_run_mutations(STREAMING_STORE_CEILING)[mutation])
    test = CheckUnderTest(stagedir=str(tmp_path), stdout='rfm_job.out', cores=2, repeats=3,
                          measures=True)
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['StreamingStoreCeiling'].every_run_validates(test))


def test_without_the_streaming_store_program_likwid_bench_alone_is_the_ceiling(
        check_classes, tmp_path):
    """Not x86-64: the fixture ran nothing; StreamCheck divides by likwid-bench's triad."""
    ceiling_test = CheckUnderTest(stagedir=str(tmp_path), measures=False)
    assert sn.evaluate(check_classes['StreamingStoreCeiling'].every_run_validates(ceiling_test))
    stream_check = check_classes['StreamCheck']
    test = _judging_stream_test(stream_check, _stream_test(
        tmp_path, (FIXTURES / 'stream' / 'local-2-threads-same-session.out').read_text(), 2,
        node_ceilings=_node_ceilings(
            (FIXTURES / 'ceilings' / 'local-likwid-3-runs-same-session.out').read_text(), 3),
        streaming_store_triads=ceiling_test.triads))
    assert sn.evaluate(stream_check.solution_validates(test))
    assert test.ceiling_mbps('bandwidth') == 36888.61


@pytest.mark.parametrize('output', ['local-2-threads.out', 'local-2-threads-nontemporal.out'])
@pytest.mark.parametrize('mutation', MUTATIONS)
def test_stream_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation, output):
    real = (FIXTURES / 'stream' / output).read_text()
    test = _stream_test(tmp_path, _mutations(real)[mutation], 2)
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['StreamCheck'].solution_validates(test))


def test_stream_sanity_fails_when_threads_were_not_all_used(check_classes, tmp_path):
    test = _stream_test(tmp_path, (FIXTURES / 'stream' / 'local-1-thread.out').read_text(), 2)
    with pytest.raises(SanityError, match='1 OpenMP threads ran, 2 expected'):
        sn.evaluate(check_classes['StreamCheck'].solution_validates(test))


def _build(stagedir, recorded):
    if recorded is not None:
        (stagedir / 'spack-prefix.txt').write_text(recorded)

    return types.SimpleNamespace(stagedir=str(stagedir))


def test_build_sanity_accepts_an_install_prefix(check_classes, tmp_path):
    prefix = tmp_path / 'stream-5.10-nddwq6z'
    prefix.mkdir()
    assert sn.evaluate(check_classes['StreamBuild'].prefix_found(_build(tmp_path,
                                                                        f'{prefix}\n')))


def test_a_build_without_the_streaming_stores_program_lacks_it(check_classes, tmp_path):
    """A STREAM built where the recipe makes no streaming-store program (not x86-64): its
    `stores=nontemporal` case is skipped, naming the build; in a dry run (no prefix
    recorded yet) nothing is known, and the job script is written."""
    build_class = check_classes['StreamBuild']
    prefix = tmp_path / 'stream-5.10-nddwq6z'
    (prefix / 'bin').mkdir(parents=True)
    (prefix / 'bin' / 'stream_c.exe').write_text('')
    for stagedir, recorded in ((tmp_path / 'located', f'{prefix}\n'), (tmp_path / 'dry', None)):
        stagedir.mkdir()
        build = _build(stagedir, recorded)
        for method in ('located', 'install_prefix'):
            setattr(build, method, types.MethodType(getattr(build_class, method), build))
        assert not build_class.lacks_program(build, 'stream_c.exe')
        assert build_class.lacks_program(build, 'stream_nontemporal_c.exe') == bool(recorded)


# What `spack location -i` leaves on stdout when the spec is not installed or matches several
# builds (its errors go to stderr): nothing. Also a missing file and a stale path.
@pytest.mark.parametrize('recorded', ['', None, '/no/such/prefix\n', 'relative/prefix\n'])
def test_build_sanity_fails_without_an_install_prefix(check_classes, tmp_path, recorded):
    with pytest.raises(SanityError, match='no install prefix'):
        sn.evaluate(check_classes['StreamBuild'].prefix_found(_build(tmp_path, recorded)))


HPL_OUTPUT = FIXTURES / 'hpl' / 'openmpi-1x2-nb-bcast.out'


def _hpl_test(stagedir, output, expected_results=8):
    (stagedir / 'rfm_job.out').write_text(output)
    plan = types.SimpleNamespace(inputs=types.SimpleNamespace(expected_results=expected_results))
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', plan=plan)


@pytest.mark.parametrize('check', ['HplCheck', 'HplTuningSweep', 'HplNodeScreen'])
def test_hpl_sanity_passes_a_real_output(check_classes, tmp_path, check):
    test = _hpl_test(tmp_path, HPL_OUTPUT.read_text())
    assert sn.evaluate(check_classes[check].residuals_passed(test))
    assert len(test.runs) == 8 and test.summary.best_gflops == 79.439
    # Every solve is kept beside the best, and how the figure came from them.
    assert test.samples['gflops'] == [r.gflops for r in test.runs]
    assert test.aggregation['gflops'] == 'best of 8 solve(s)'


@pytest.mark.parametrize('mutation', HPL_MUTATIONS)
def test_hpl_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    test = _hpl_test(tmp_path, _hpl_mutations(HPL_OUTPUT.read_text())[mutation])
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['HplCheck'].residuals_passed(test))


def test_hpl_sanity_fails_when_results_are_missing(check_classes, tmp_path):
    test = _hpl_test(tmp_path, HPL_OUTPUT.read_text(), expected_results=24)
    with pytest.raises(SanityError, match='asked for 24'):
        sn.evaluate(check_classes['HplCheck'].residuals_passed(test))


HPCC_OUTPUT = FIXTURES / 'hpcc' / 'debian-openmpi-2-ranks.hpccoutf.txt'


def _hpcc_test(stagedir, output):
    if output is not None:
        (stagedir / 'hpccoutf.txt').write_text(output)

    return CheckUnderTest(stagedir=str(stagedir), num_tasks=2)


def test_hpcc_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _hpcc_test(tmp_path, HPCC_OUTPUT.read_text())
    assert sn.evaluate(check_classes['HpccCheck'].hpcc_succeeded(test))
    assert test.figures['star_dgemm'] == 50.5162


@pytest.mark.parametrize('mutation', [*HPCC_MUTATIONS, 'no output file'])
def test_hpcc_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    output = (None if mutation == 'no output file'
              else _hpcc_mutations(HPCC_OUTPUT.read_text())[mutation])
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['HpccCheck'].hpcc_succeeded(_hpcc_test(tmp_path, output)))


DGEMM_OUTPUT = FIXTURES / 'dgemm' / 'local-2-cores.out'


def _dgemm_test(stagedir, output):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', repeats=5)


def _ceilings_test(stagedir, output):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', repeats=5,
                          kernels=ceilings.kernels(32), rpeak_gflops=166.1)


def test_node_ceilings_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _ceilings_test(tmp_path, CEILINGS_OUTPUT)
    assert sn.evaluate(check_classes['NodeCeilings'].every_kernel_ran(test))
    assert len(test.samples['peak_gflops']) == len(test.samples['bandwidth']) == 5
    assert test.aggregation['bandwidth'] == 'stream_mem_avx512, best of 5 runs'


@pytest.mark.parametrize('mutation', CEILINGS_MUTATIONS)
def test_node_ceilings_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    test = _ceilings_test(tmp_path, CEILINGS_MUTATIONS[mutation](CEILINGS_OUTPUT))
    with pytest.raises(SanityError, match='likwid-bench'):
        sn.evaluate(check_classes['NodeCeilings'].every_kernel_ran(test))


def test_dgemm_ceiling_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _dgemm_test(tmp_path, DGEMM_OUTPUT.read_text())
    assert sn.evaluate(check_classes['DgemmCeiling'].verified(test))
    assert test.result.best == 108.862
    assert max(test.samples['gflops']) == 108.862 and len(test.samples['gflops']) == 5


@pytest.mark.parametrize('mutation', list(_dgemm_mutations(DGEMM_OUTPUT.read_text())))
def test_dgemm_ceiling_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    test = _dgemm_test(tmp_path, _dgemm_mutations(DGEMM_OUTPUT.read_text())[mutation])
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['DgemmCeiling'].verified(test))


def _imb_test(stagedir, output, benchmark, **attrs):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out',
                                 benchmark=benchmark, num_tasks=2, repeats=1,
                                 sizes=ALL_SIZES[benchmark], **attrs)


@pytest.mark.parametrize('check, benchmark', [('ImbPairCheck', 'PingPong'),
                                              ('ImbPairCheck', 'Biband'),
                                              ('ImbGroupCheck', 'Sendrecv'),
                                              ('ImbGroupCheck', 'Alltoall'),
                                              ('ImbGroupCheck', 'Barrier')])
def test_imb_sanity_passes_a_real_output(check_classes, tmp_path, check, benchmark):
    test = _imb_test(tmp_path, IMB_OUTPUTS['mpich'], benchmark)
    assert sn.evaluate(check_classes[check].table_complete(test))
    assert test.figures
    assert all(len(values) == test.repeats for values in test.samples.values())


@pytest.mark.parametrize('mutation', IMB_MUTATIONS)
def test_imb_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    test = _imb_test(tmp_path, _imb_mutations(IMB_OUTPUTS['openmpi'])[mutation],
                     BROKEN_TABLE[mutation])
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['ImbGroupCheck'].table_complete(test))


def test_imb_sanity_takes_the_best_of_its_launches_and_needs_all(check_classes, tmp_path):
    text = (FIXTURES / 'imb' / 'openmpi-pingpong-3-runs.out').read_text()
    test = _imb_test(tmp_path, text, 'PingPong')
    test.repeats = 3
    assert sn.evaluate(check_classes['ImbPairCheck'].table_complete(test))
    assert test.figures['switch_size'] == 4096
    test.repeats = 4
    with pytest.raises(SanityError, match='3 IMB run.s. in the output, the job made 4'):
        sn.evaluate(check_classes['ImbPairCheck'].table_complete(test))


def test_imb_sanity_fails_when_sizes_are_missing(check_classes, tmp_path):
    test = _imb_test(tmp_path, IMB_OUTPUTS['intelmpi'], 'PingPong')
    test.sizes = imb.message_sizes('PingPong', 0, 23)
    with pytest.raises(SanityError, match='8388608 missing'):
        sn.evaluate(check_classes['ImbPairCheck'].table_complete(test))


VARIABILITY_OUTPUT = FIXTURES / 'imb' / 'variability-openmpi-2-ranks-10-launches.out'


def _variability_test(stagedir, output, repeats=10):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', num_tasks=2,
                                 repeats=repeats)


def test_imb_variability_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _variability_test(tmp_path, VARIABILITY_OUTPUT.read_text())
    assert sn.evaluate(check_classes['ImbVariability'].every_launch_complete(test))
    barrier = test.stats['barrier']
    assert barrier.min <= barrier.mean <= barrier.max and barrier.cv_percent >= 0
    assert test.samples['barrier_mean'] == list(barrier.values)
    assert test.aggregation['barrier_cv'].startswith('standard deviation / mean of ')


@pytest.mark.parametrize('mutation', ['a launch missing', 'NaN', 'a table missing'])
def test_imb_variability_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    text = VARIABILITY_OUTPUT.read_text()
    last_run = text.rindex('#----------------------------------------------------------------'
                           '\n#    Intel(R) MPI Benchmarks')
    broken = {
        'a launch missing': text[:last_run],
        'NaN': re.sub(r'(\n +16 +\d+ +\S+ +\S+ +)\S+', r'\1nan', text, 1),
        'a table missing': re.sub(r'# Benchmarking Barrier', '# Benchmarking Barrier2', text,
                                  1),
    }[mutation]
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['ImbVariability'].every_launch_complete(
            _variability_test(tmp_path, broken)))


def _startup_test(stagedir, output):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', num_tasks=2,
                                 launches=5)


def test_mpi_startup_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _startup_test(tmp_path, STARTUP_OUTPUT)
    assert sn.evaluate(check_classes['MpiStartupCheck'].every_rank_said_hello(test))
    assert len(test.summary.launches) == 5
    assert len(test.samples['mpi_init']) == 5
    assert test.aggregation['hello_world_max'] == 'slowest of 5 launches'


@pytest.mark.parametrize('mutation', STARTUP_MUTATIONS)
def test_mpi_startup_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    test = _startup_test(tmp_path, _startup_mutations(STARTUP_OUTPUT)[mutation])
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['MpiStartupCheck'].every_rank_said_hello(test))


def _ior_test(stagedir, output, repetitions=3, loops=3):
    (stagedir / 'rfm_job.out').write_text(output)
    return CheckUnderTest(stagedir=str(stagedir), stdout='rfm_job.out', num_tasks=2,
                                 repetitions=repetitions, loops=loops)


def test_ior_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _ior_test(tmp_path, IOR_OUTPUT)
    assert sn.evaluate(check_classes['IorCheck'].both_phases_measured(test))
    assert set(test.phases) == {'write', 'read'}
    assert len(test.samples['read_max']) == 3
    assert max(test.samples['read_max']) == pytest.approx(test.phases['read'].max_mib_s,
                                                          rel=1e-3)


@pytest.mark.parametrize('mutation', IOR_MUTATIONS)
def test_ior_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    output = _ior_mutations(IOR_OUTPUTS['file-per-process-posix'])[mutation]
    with pytest.raises(SanityError):
        sn.evaluate(check_classes['IorCheck'].both_phases_measured(
            _ior_test(tmp_path, output, repetitions=2, loops=1)))
