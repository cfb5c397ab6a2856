import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / 'fixtures'
BIN = Path(sys.executable).parent


@pytest.fixture
def fixture_text():
    def read(name):
        return (FIXTURES / name).read_text()

    return read


def _spack_found():
    from hpcbench import spack
    return spack.find() is not None


requires_spack = pytest.mark.skipif(
    not _spack_found(),
    reason='no Spack found (SPACK_ROOT or the per-user cache): real runs of Spack builds '
           'skipped')


@pytest.fixture(scope='module')
def installed():
    """The local environment installed (bootstrap, then spack install: nothing to do when
    it is)."""
    from hpcbench import bootstrap
    found = bootstrap.bootstrap()
    bootstrap.install_environment(found)


def run_reframe(*args, env=None, config='site-configs/local.py', timeout=900):
    cmd = [str(BIN / 'reframe'), '-C', config, '-c', 'reframe-checks', *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
