"""Verdicts whose cost follows the window they judge (issue 52): the results database read
directly (hpcbench.results.results_db.Store), each session decoded only when a verdict needs
it. Histories are made of the two real stored sessions in tests/fixtures/report, one a
night (hpcbench.devtools.history); the costs themselves are measured by
perf/verdict_history.py, not here."""
import json
import sqlite3

import pytest

from conftest import FIXTURES
from hpcbench.core import paths
from hpcbench.devtools import history
from hpcbench.report import pages
from hpcbench.results import changes, results_db


def _real_sessions():
    return [json.loads((FIXTURES / 'report' / f'session-{name}.json').read_text())
            for name in ('new', 'old')]


@pytest.fixture
def year(tmp_path, monkeypatch):
    """A results directory with 60 nights of real sessions; (its UUIDs oldest first, the
    UUIDs each read of a whole session decoded, in order)."""
    var = tmp_path / 'var'
    var.mkdir()
    (var / paths.VAR_MARKER).write_text('test\n')
    made = history.fill(var / 'results.db', _real_sessions(), 60)
    monkeypatch.setattr(paths, 'VAR_DIR', var)
    monkeypatch.setenv('HPCBENCH_VAR', str(var))
    decoded = []
    whole = results_db.Store.decoded

    def counted(store, uuid):
        decoded.append(uuid)
        return whole(store, uuid)

    monkeypatch.setattr(results_db.Store, 'decoded', counted)
    return made, decoded


def test_a_verdict_reads_the_sessions_of_its_window_and_no_older_one(year):
    made, decoded = year
    stored = results_db.stored_sessions(results_db.site_config('local'))
    assert [results_db.uuid_of(s) for s in stored] == made[::-1]
    assert not decoded, 'listing the sessions decoded some'
    new, old = changes.sessions_to_judge(stored, 'local')
    # The newest night against the 30 before it: one a day.
    assert new == [made[-1]] and sorted(old) == sorted(made[-31:-1])
    rows = changes.compare(stored, 'local', new, old)
    assert rows and changes.counts(rows)['no change'] > 0
    assert set(decoded) == set(made[-31:]), 'a session outside the window was read'


def test_a_report_reads_its_window_and_shows_its_runs_per_stack(year, tmp_path):
    made, decoded = year
    index = pages.from_database('local', tmp_path / 'report')
    assert index.exists()
    assert set(decoded) == set(made[-31:]), 'a session outside the window was read'
    summary = (tmp_path / 'report' / 'summary.md').read_text()
    # HPL's ratio to its DGEMM ceiling, and its median over the window's runs of its stack.
    ratio_rows = [line for line in summary.splitlines() if '| DGEMM ceiling |' in line]
    assert ratio_rows and all("of this stack's runs" in line for line in ratio_rows), \
        ratio_rows


def test_a_session_info_read_from_the_head_of_its_record_is_the_whole_ones(year):
    made, decoded = year
    store = results_db.Store(results_db.site_config('local'))
    session = store.session(made[0])
    head = session['session_info']
    assert not decoded
    assert head == store.decoded(made[0])['session_info']


@pytest.mark.parametrize('spoil, said', [
    (lambda path: path.write_bytes(b'not a database, only text ' * 100),
     "is no results database of ReFrame's (file is not a database)"),
    (lambda path: sqlite3.connect(path).execute("UPDATE metadata SET schema_version = '2.0'")
     .connection.commit(),
     'is a results database of schema 2.0; this suite reads schema 1.0 (ReFrame 4)'),
])
def test_a_database_the_suite_cannot_read_is_one_message(year, spoil, said):
    spoil(paths.VAR_DIR / 'results.db')     # the fixture's, HPCBENCH_VAR's too
    with pytest.raises(RuntimeError, match=said.replace('(', r'\(').replace(')', r'\)')):
        results_db.stored_sessions(results_db.site_config('local'))


def test_no_results_database_is_no_session(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, 'VAR_DIR', tmp_path)
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path))
    assert results_db.stored_sessions(results_db.site_config('local')) == []
    assert not (tmp_path / 'results.db').exists()


def test_the_report_and_compare_judge_one_picture(year, capsys):
    """Item 7 of issue 53: the report renders the picture the results layer builds
    (hpcbench.results.picture), and `hpcbench compare` prints that picture's judgement."""
    from hpcbench.cli import main
    from hpcbench.results import picture
    made, _ = year
    shown = picture.from_database('local')
    assert shown.comparison.new == [made[-1]] and sorted(shown.comparison.old) == sorted(
        made[-31:-1])
    # Each case's latest figures: the newest session's, and what only earlier ones measured.
    assert made[-1] in {c.session for c in shown.cases}
    assert {c.session for c in shown.cases} <= set(made[-31:])
    assert main.main(['compare', '--system', 'local']) in (0, 1)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == shown.comparison.describe()
