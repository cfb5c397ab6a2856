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


def run_reframe(*args, env=None, config='site-configs/local.py', timeout=900):
    cmd = [str(BIN / 'reframe'), '-C', config, '-c', 'reframe-checks', *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
