"""Results databases with a history made from real stored sessions, for the history
benchmark (perf/verdict_history.py) and the tests of verdicts over a window: ReFrame 4's
layout (its storage's schema 1.0, what hpcbench.results.results_db.Store reads), a stored
session copied into nights of its own (its own UUID and start)."""
import json
import sqlite3
import time
import uuid as uuids

DAY = 86400.0


def create_database(path):
    """An empty results database as ReFrame 4's storage lays it out."""
    db = sqlite3.connect(path)
    db.execute('CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, '
               'session_end_unix REAL, json_blob TEXT, report_file TEXT)')
    db.execute('CREATE TABLE testcases(name TEXT, system TEXT, partition TEXT, environ TEXT, '
               'job_completion_time_unix REAL, session_uuid TEXT, uuid TEXT, FOREIGN '
               'KEY(session_uuid) REFERENCES sessions(uuid) ON DELETE CASCADE)')
    db.execute('CREATE INDEX index_testcases_time on testcases(job_completion_time_unix)')
    db.execute('CREATE TABLE metadata(schema_version TEXT)')
    db.execute('CREATE INDEX index_sessions_time on sessions(session_start_unix)')
    db.execute("INSERT INTO metadata VALUES('1.0')")
    return db


def store(db, session):
    """Insert a session as ReFrame's storage does: its record (its session_info first, as
    ReFrame's report has it), and a row per test case."""
    info = session['session_info']
    db.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)',
               (info['uuid'], info['time_start_unix'], info['time_end_unix'],
                json.dumps({'session_info': info, **session}), None))
    for run_index, run in enumerate(session['runs']):
        for test_index, tc in enumerate(run['testcases']):
            db.execute('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                       (tc['name'], tc['system'], tc['partition'], tc['environ'],
                        tc.get('job_completion_time_unix'), info['uuid'],
                        f'{info["uuid"]}:{run_index}:{test_index}'))


def night(template, start):
    """A copy of a stored session as if it had started at `start`, with its own UUID."""
    old_uuid = template['session_info']['uuid']
    session = json.loads(json.dumps(template).replace(old_uuid, str(uuids.uuid4())))
    info = session['session_info']
    shift = start - info['time_start_unix']
    info['time_start_unix'] = start
    info['time_end_unix'] = (info.get('time_end_unix') or start) + shift
    for run in session['runs']:
        for tc in run['testcases']:
            if tc.get('job_completion_time_unix'):
                tc['job_completion_time_unix'] += shift
    return session


def fill(path, templates, nights, now=None):
    """A results database at `path` holding `nights` sessions, one a night up to `now`, the
    templates in turn; returns their UUIDs, oldest first."""
    db = create_database(path)
    now = time.time() if now is None else now
    made = []
    for index in range(nights):
        session = night(templates[index % len(templates)], now - (nights - index) * DAY)
        store(db, session)
        made.append(session['session_info']['uuid'])
    db.commit()
    db.close()
    return made
