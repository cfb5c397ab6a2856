"""The checks' sanity functions themselves, on real outputs and broken copies of them: the
check files are loaded through ReFrame's loader under the local site config."""
import types

import pytest
import reframe.utility.sanity as sn
from reframe.core import config, runtime
from reframe.core.exceptions import SanityError
from reframe.frontend.loader import RegressionCheckLoader

from conftest import FIXTURES, ROOT
from test_stream import MUTATIONS, _mutations


@pytest.fixture(scope='module')
def check_classes():
    site = config.load_config(str(ROOT / 'site-configs' / 'local.py'))
    site.select_subconfig('local')
    runtime.init_runtime(site)
    loader = RegressionCheckLoader([str(ROOT / 'reframe-checks')])
    tests = loader.load_from_file(str(ROOT / 'reframe-checks' / 'stream.py'))
    return {type(t).__name__: type(t) for t in tests}


def _stream_test(stagedir, output, threads):
    (stagedir / 'rfm_job.out').write_text(output)
    return types.SimpleNamespace(stagedir=str(stagedir), stdout='rfm_job.out',
                                 num_threads=threads)


def test_stream_sanity_passes_a_real_output(check_classes, tmp_path):
    test = _stream_test(tmp_path, (FIXTURES / 'stream' / 'local-2-threads.out').read_text(), 2)
    assert sn.evaluate(check_classes['StreamCheck'].solution_validates(test))
    assert test.result.best_rate_mbps['Triad'] == 48037.4


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_stream_sanity_fails_a_broken_real_output(check_classes, tmp_path, mutation):
    real = (FIXTURES / 'stream' / 'local-2-threads.out').read_text()
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


# What `spack location -i` leaves on stdout when the spec is not installed or matches several
# builds (its errors go to stderr): nothing. Also a missing file and a stale path.
@pytest.mark.parametrize('recorded', ['', None, '/no/such/prefix\n', 'relative/prefix\n'])
def test_build_sanity_fails_without_an_install_prefix(check_classes, tmp_path, recorded):
    with pytest.raises(SanityError, match='no install prefix'):
        sn.evaluate(check_classes['StreamBuild'].prefix_found(_build(tmp_path, recorded)))
