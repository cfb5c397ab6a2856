"""What `hpcbench compare` tells a CI job by its exit status alone (hpcbench.cli): 0 when
nothing regressed, 1 on a regression, 2 when it cannot judge. The sessions are copies of a
real stored one (tests/fixtures/report, hpcbench.devtools.history), the newest with HPL
made slower, as a slower node would be."""
import json
import os
import re
import sqlite3
import subprocess
import time

import pytest

from conftest import BIN, FIXTURES, ROOT
from hpcbench.core import paths
from hpcbench.devtools import history

NIGHTS = 10


def _session(hpl_factor):
    session = json.loads((FIXTURES / 'report' / 'session-new.json').read_text())
    for run in session['runs']:
        for case in run['testcases']:
            for name, figure in (case.get('perfvalues') or {}).items():
                if name.endswith(':hpl'):
                    figure[0] *= hpl_factor
    return session


@pytest.fixture
def var(tmp_path):
    var = tmp_path / 'var'
    var.mkdir()
    (var / paths.VAR_MARKER).write_text('test\n')
    return var


def _compare(var, *options):
    return subprocess.run([str(BIN / 'hpcbench'), 'compare', *options], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'HPCBENCH_VAR': str(var)})


def _history(var, newest_hpl_factor):
    """NIGHTS nights: the older half as stored, the newer half's HPL times the factor;
    (--new, --old) options naming them."""
    half = NIGHTS // 2
    old = history.fill(var / 'results.db', [_session(1.0)], half,
                       now=time.time() - half * history.DAY)
    db = sqlite3.connect(var / 'results.db')
    new = []
    for night in range(half):
        session = history.night(_session(newest_hpl_factor),
                                time.time() - (half - night) * history.DAY)
        history.store(db, session)
        new.append(session['session_info']['uuid'])
    db.commit()
    db.close()
    return ['--new', *new, '--old', *old]


def test_nothing_regressed_is_0(var):
    same = _compare(var, *_history(var, 1.0))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stderr == ''


def test_a_regression_is_1_and_said_without_error(var):
    slower = _compare(var, *_history(var, 0.5))
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert re.fullmatch(r'[1-9]\d* regression\(s\)\n', slower.stderr), slower.stderr
    regressed = [line for line in slower.stdout.splitlines() if '| regression' in line
                 or ' regression ' in line]
    assert regressed and all(' hpl ' in line for line in regressed), slower.stdout


def test_a_session_that_is_not_stored_is_2(var):
    _history(var, 0.5)
    broken = _compare(var, '--new', 'no-such-session')
    assert broken.returncode == 2, broken.stderr
    assert broken.stderr.startswith("error: --new 'no-such-session': no stored session")
    assert broken.stderr.count('\n') == 1


def test_a_broken_references_file_is_2_even_with_a_regression_stored(var, tmp_path):
    options = _history(var, 0.5)
    references = tmp_path / 'references'
    references.mkdir()
    (references / 'local.yaml').write_text('system: local\nfigures: [1\n')
    broken = subprocess.run([str(BIN / 'hpcbench'), 'compare', *options], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, 'HPCBENCH_VAR': str(var),
                                 'HPCBENCH_REFERENCES': str(references)})
    assert broken.returncode == 2 and broken.stdout == '', broken.stderr
    assert broken.stderr.startswith(f'error: {references}/local.yaml: not valid YAML')


def test_an_unreadable_database_is_2_not_a_regression(var):
    (var / 'results.db').write_bytes(b'not a database, only text ' * 100)
    broken = _compare(var)
    assert broken.returncode == 2, broken.stderr
    assert "is no results database of ReFrame's" in broken.stderr


# --- Stored sessions that are not ReFrame's records (issue 60, items 12, 13 and 19) ---------

def _newest(var):
    db = sqlite3.connect(var / 'results.db')
    uuid, = db.execute('SELECT uuid FROM sessions ORDER BY session_start_unix DESC LIMIT 1'
                       ).fetchone()
    return db, uuid


@pytest.mark.parametrize('blob, said', [
    ('{"session_info": {"uuid": "x"', 'is no record of ReFrame\'s: not JSON'),
    ('{"session_info": [1, 2], "runs": []}',
     "is no record of ReFrame's session: session_info: missing, or not a mapping"),
    # Issue 70, item 6: a UUID that is a number, a test case named 7 (a traceback in
    # `contract init` and `--verify`, which read records the same way).
    ('{"session_info": {"uuid": 5}, "runs": []}',
     "is no record of ReFrame's session: session_info/uuid: '5' is no session UUID"),
    ('{"session_info": {"uuid": "8f0c5a36-3f54-4f8e-9d7b-0e4c1f2a9b10"}, "runs": [{'
     '"testcases": [{"name": 7, "result": "pass", "system": "local", "partition": "default",'
     ' "environ": "openmpi", "fixture": false}]}]}',
     "is no record of ReFrame's session: runs/0/testcases/0/name: '7' is not str"),
    (None, 'is no record of ReFrame\'s: not JSON'),
])
def test_a_stored_record_that_is_not_reframe_s_is_2_in_one_line(var, blob, said):
    options = _history(var, 1.0)
    db, uuid = _newest(var)
    db.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (blob, uuid))
    db.commit()
    db.close()
    broken = _compare(var, *options)
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert broken.stderr.startswith(f'error: the stored session {uuid} of ') and \
        said in broken.stderr and broken.stderr.count('\n') == 1, broken.stderr


def test_sessions_whose_uuid_or_start_do_not_read_are_left_out_and_said(var):
    _history(var, 1.0)
    db, uuid = _newest(var)
    db.execute("UPDATE sessions SET uuid = '' WHERE uuid = ?", (uuid,))
    older = db.execute('SELECT uuid FROM sessions ORDER BY session_start_unix LIMIT 1'
                       ).fetchone()[0]
    db.execute("UPDATE sessions SET session_start_unix = 'abc' WHERE uuid = ?", (older,))
    db.commit()
    db.close()
    judged = _compare(var)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert '()' not in judged.stdout.splitlines()[0], judged.stdout
    assert judged.stderr.startswith('hpcbench: 2 stored session(s) of ') and \
        "uuid '' started" in judged.stderr and "started 'abc'" in judged.stderr, judged.stderr


def test_a_session_given_as_both_new_and_old_is_2(var):
    options = _history(var, 1.0)
    first = options[1]
    broken = _compare(var, '--new', first, '--old', first[:8])
    assert broken.returncode == 2 and broken.stderr == (
        f'error: session(s) {first[:8]} given as both --new and --old: a session is judged '
        'against others, not itself\n'), broken.stderr


def test_compare_says_what_it_waits_for_and_gives_up_on_a_held_write_lock(var, monkeypatch,
                                                                          capsys):
    """ReFrame's write lock held by another process: compare waited forever, silently."""
    from hpcbench.results import results_db
    _history(var, 1.0)
    holder = subprocess.Popen(
        [str(BIN / 'python'), '-c', 'import fasteners, sys, time\n'
         f'lock = fasteners.InterProcessReaderWriterLock({str(var / ".db.lock")!r})\n'
         'lock.acquire_write_lock()\nprint("held", flush=True)\ntime.sleep(600)\n'],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == 'held\n'
        monkeypatch.setattr(results_db.Store, 'LOCK_WAIT', 4)
        monkeypatch.setenv('HPCBENCH_VAR', str(var))
        store = results_db.Store(results_db.site_config('local'))
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=r'stayed locked for writing for 4 s \(another '
                                               r'process holds .*\.db\.lock\): nothing was read'):
            store.sessions()
        assert time.monotonic() - started < 30
    finally:
        holder.kill()
        holder.wait()
    assert 'waiting for the results database' in capsys.readouterr().err
