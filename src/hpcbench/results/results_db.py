"""Reading ReFrame's results database (its SQLite layout, schema 1.0, read directly: Store):
the stored sessions of a system, one session by its UUID or a prefix, this run's. What a
session measured is hpcbench.results.measured."""
import contextlib
import json
import math
import re
import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from hpcbench.core import paths

# A session's UUID, as ReFrame names sessions.
UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def without_colours(text):
    """ReFrame's output without its terminal colours (it colours a pipe too)."""
    return _ANSI.sub('', text)


# What ReFrame's storage calls the layout of its results database (reframe.frontend.reporting.
# storage._SqliteStorage.SCHEMA_VERSION): the one read directly here.
SCHEMA_VERSION = '1.0'
# How far back a session is looked for by default: a year.
YEAR = 365 * 86400


# What the suite reads of a session's record (hpcbench.results.measured), as ReFrame 4
# writes it: its UUID and start, each run's test cases with their names, results, places,
# nodes and figures. A record that is not so (a UUID that is a number, a case named 7: an
# edited or damaged file) is refused in one line where it is read, before anything of it.
# Checked field by field, not by a JSON Schema: a schema validator took 2.5 ms a test case,
# half a minute for an acceptance of 1,000 nodes.
_TEXT, _NUMBER, _NAMES = (str, type(None)), (int, float, type(None)), (str,)
_CASE_FIELDS = {'name': _NAMES, 'result': _NAMES, 'system': _NAMES, 'partition': _NAMES,
                'environ': _NAMES, 'fixture': (bool,)}
_OPTIONAL_FIELDS = {'display_name': _TEXT, 'fail_phase': _TEXT, 'fail_reason': _TEXT,
                    'num_tasks': (int, type(None)), 'job_nodelist': (str, list, type(None)),
                    'perfvalues': (dict, type(None)), 'samples': (dict, type(None)),
                    'device_figures': (dict, type(None)), 'ran_on': (list, type(None)),
                    'pinned_nodes': (list, type(None))}


def _number(value):
    return isinstance(value, _NUMBER) and not isinstance(value, bool)


def _record_fault(data):
    """(where, what) of the first field of a session record that is not ReFrame's; None."""
    if not isinstance(data, dict):
        return 'top level', f'{type(data).__name__}, not a mapping'
    info = data.get('session_info')
    if not isinstance(info, dict):
        return 'session_info', 'missing, or not a mapping'
    if not isinstance(info.get('uuid'), str) or not UUID.fullmatch(info['uuid']):
        return 'session_info/uuid', f'{str(info.get("uuid"))[:60]!r} is no session UUID'
    if not _number(info.get('time_start_unix')):
        return 'session_info/time_start_unix', 'not a time'
    runs = data.get('runs')
    if not isinstance(runs, list):
        return 'runs', 'missing, or not a list'
    for r, run in enumerate(runs):
        cases = run.get('testcases') if isinstance(run, dict) else None
        if not isinstance(cases, list):
            return f'runs/{r}/testcases', 'missing, or not a list'
        for c, case in enumerate(cases):
            at = f'runs/{r}/testcases/{c}'
            if not isinstance(case, dict):
                return at, 'not a mapping'
            for name, kinds in _CASE_FIELDS.items():
                if not isinstance(case.get(name), kinds) or case[name] == '':
                    return f'{at}/{name}', f'{str(case.get(name))[:60]!r} is not {kinds[0].__name__}'
            for name, kinds in _OPTIONAL_FIELDS.items():
                if not isinstance(case.get(name), kinds):
                    return f'{at}/{name}', f'{str(case.get(name))[:60]!r} is not of its kind'
            nodes = case.get('job_nodelist')
            if isinstance(nodes, list) and not all(isinstance(n, str) for n in nodes):
                return f'{at}/job_nodelist', 'a node that is no name'
            for key, values in (case.get('perfvalues') or {}).items():
                if not (isinstance(values, list) and len(values) == 6 and
                        all(_number(v) for v in values[:4]) and
                        all(isinstance(v, _TEXT) for v in values[4:])):
                    return f'{at}/perfvalues/{key}', 'not [value, reference, lower, upper, ' \
                                                    'unit, result]'
            for key, values in (case.get('samples') or {}).items():
                if not isinstance(values, list) or not all(_number(v) for v in values):
                    return f'{at}/samples/{key}', 'not a list of numbers'
            for key, figures in (case.get('device_figures') or {}).items():
                if not isinstance(figures, dict) or not all(_number(v)
                                                            for v in figures.values()):
                    return f'{at}/device_figures/{key}', 'not figures'
    return None


def checked_record(data, where):
    """`data`, a session's record, checked as ReFrame's (_record_fault); RuntimeError in one
    line naming `where` and the first field that is not."""
    fault = _record_fault(data)
    if fault:
        raise RuntimeError(f'{where} is no record of ReFrame\'s session: {fault[0]}: '
                           f'{fault[1]}')
    return data


class StoredSession(Mapping):
    """A session of the results database as ReFrame stores it, read when it is used: its
    `session_info` from the head of its record (kept: a kilobyte), everything else
    decoded from the database each time it is asked for and never kept, so that going
    over a year of sessions holds one at a time."""

    def __init__(self, store, uuid, started):
        self._store, self.uuid, self.started = store, uuid, started
        self._info = None

    def _whole(self):
        return self._store.decoded(self.uuid)

    def __getitem__(self, key):
        if key == 'session_info':
            if self._info is None:
                self._info = self._store.session_info(self.uuid)
            return self._info
        return self._whole()[key]

    def __iter__(self):
        return iter(self._whole())

    def __len__(self):
        return len(self._whole())


class Store:
    """ReFrame's results database of a system (var/results.db), read directly, read-only and
    under ReFrame's own read lock (fasteners' reader lock on its .db.lock): sessions are
    listed from the sessions table's index on their start (no record decoded), and each is
    decoded when it is used (StoredSession). ReFrame's CLI, the way it was read before,
    decodes every session of the period at once: a year of nightly runs cost 825 MB and 12 s
    for a verdict on one night."""

    def __init__(self, config):
        if not Path(config).exists():
            systems = sorted(p.stem for p in paths.SITE_CONFIGS_DIR.glob('*.py'))
            raise RuntimeError(f'no site config {config}; the systems: {", ".join(systems)}')
        # HPCBENCH_VAR as it is now: a caller may set it after this module loaded (as it
        # could for ReFrame's CLI, which read the database before).
        self.path = paths.from_environment('HPCBENCH_VAR', paths.VAR_DIR) / 'results.db'

    # How long a read waits for ReFrame's write lock (a run storing its session holds it for
    # a second or two), said after SAY_WAITING seconds.
    LOCK_WAIT = 120
    SAY_WAITING = 2

    @contextlib.contextmanager
    def _reading(self):
        import fasteners      # ReFrame's lock (reframe.utility.osext.ReadWriteFileLock)
        lock = fasteners.InterProcessReaderWriterLock(str(self.path.parent / '.db.lock'))
        if not lock.acquire_read_lock(timeout=self.SAY_WAITING):
            print(f'hpcbench: waiting for the results database {self.path}: another process '
                  f'writes it (ReFrame storing a run); giving up after {self.LOCK_WAIT} s',
                  file=sys.stderr, flush=True)
            if not lock.acquire_read_lock(timeout=self.LOCK_WAIT - self.SAY_WAITING):
                raise RuntimeError(f'the results database {self.path} stayed locked for writing '
                                   f'for {self.LOCK_WAIT} s (another process holds '
                                   f'{self.path.parent / ".db.lock"}): nothing was read; try '
                                   'again when the run that stores there has ended')
        try:
            connection = sqlite3.connect(f'file:{urllib.parse.quote(str(self.path))}?mode=ro',
                                         uri=True, timeout=60)
            try:
                yield connection
            except sqlite3.Error as err:
                raise RuntimeError(f'reading the results database {self.path} failed: '
                                   f'{err}') from None
            finally:
                connection.close()
        finally:
            lock.release_read_lock()

    def _query(self, sql, parameters=()):
        if not self.path.exists():
            return []
        with self._reading() as connection:
            try:
                version = connection.execute('SELECT schema_version FROM metadata').fetchone()
            except sqlite3.DatabaseError as err:
                raise RuntimeError(f'{self.path} is no results database of ReFrame\'s '
                                   f'({err})') from None
            if version and version[0] != SCHEMA_VERSION:
                raise RuntimeError(f'{self.path} is a results database of schema {version[0]}; '
                                   f'this suite reads schema {SCHEMA_VERSION} (ReFrame 4)')
            return connection.execute(sql, parameters).fetchall()

    def sessions(self, since=None, until=None):
        """The sessions that started in [since, until) (Unix times; default: the last
        year), newest first, none decoded."""
        since = time.time() - YEAR if since is None else since
        until = math.inf if until is None else until
        rows = self._query('SELECT uuid, session_start_unix FROM sessions WHERE '
                           'session_start_unix >= ? AND session_start_unix < ? '
                           'ORDER BY session_start_unix DESC', (since, min(until, 1e300)))
        self._say_unreadable()
        return [StoredSession(self, uuid, started) for uuid, started in rows
                if isinstance(uuid, str) and UUID.fullmatch(uuid)]

    def _say_unreadable(self):
        """Say once, in one line, which stored sessions cannot be listed (a UUID that is none,
        a start that is no time: a database edited or damaged); the others are read."""
        if getattr(self, '_said', False):
            return
        self._said = True
        rows = self._query("SELECT uuid, session_start_unix FROM sessions WHERE typeof("
                           "session_start_unix) NOT IN ('integer', 'real') OR uuid IS NULL OR "
                           "uuid NOT GLOB '[0-9a-f]*-*-*-*-*' OR length(uuid) != 36")
        if rows:
            shown = '; '.join(f'uuid {str(u)[:40]!r} started {str(t)[:40]!r}' for u, t in rows[:3])
            print(f'hpcbench: {len(rows)} stored session(s) of {self.path} left out: no UUID or '
                  f'no start time of theirs reads ({shown}{"; ..." if len(rows) > 3 else ""})',
                  file=sys.stderr)

    def session(self, uuid):
        """The session `uuid` (whole), of any age, or None."""
        rows = self._query('SELECT uuid, session_start_unix FROM sessions WHERE uuid = ?',
                           (uuid,))
        return StoredSession(self, *rows[0]) if rows else None

    def decoded(self, uuid):
        rows = self._query('SELECT json_blob FROM sessions WHERE uuid = ?', (uuid,))
        if not rows:
            raise RuntimeError(f'no stored session {uuid} (removed while it was read)')
        try:
            data = json.loads(rows[0][0])
        except (TypeError, ValueError, RecursionError) as err:
            raise RuntimeError(f'the stored session {uuid} of {self.path} is no record of '
                               f'ReFrame\'s: not JSON ({err})') from None
        return checked_record(data, f'the stored session {uuid} of {self.path}')

    # A session record begins with its session_info (ReFrame writes the report in that
    # order); a head this long holds it whole.
    _HEAD = 65536

    def session_info(self, uuid):
        rows = self._query('SELECT substr(json_blob, 1, ?) FROM sessions WHERE uuid = ?',
                           (self._HEAD, uuid))
        head = rows[0][0] if rows else ''
        key = '"session_info":'
        start = head.find(key)
        if start >= 0:
            at = start + len(key)
            at += len(head[at:]) - len(head[at:].lstrip())
            with contextlib.suppress(ValueError):
                info = json.JSONDecoder().raw_decode(head, at)[0]
                if isinstance(info, dict):
                    return info
        return self.decoded(uuid)['session_info']


def uuid_of(data):
    """A session's UUID (a StoredSession's without reading it)."""
    return data.uuid if isinstance(data, StoredSession) else data['session_info']['uuid']


def started_of(data):
    """A session's start, Unix time (a StoredSession's without reading it)."""
    return (data.started if isinstance(data, StoredSession)
            else data['session_info'].get('time_start_unix'))


def latest_session(config, period_days=365):
    """The newest stored session of this config's results database, or None."""
    found = Store(config).sessions(time.time() - period_days * 86400)
    return found[0] if found else None


def stored_sessions(config, period_days=365):
    """The stored sessions of the last `period_days`, newest first (StoredSession: each
    decoded when used)."""
    return Store(config).sessions(time.time() - period_days * 86400)


def resolve(stored, ids, what='session'):
    """The full UUIDs of `ids` among the `stored` sessions, each given whole or by a prefix
    that names one session alone (as git takes an abbreviated commit); RuntimeError in one
    sentence for an unknown or ambiguous one."""
    known = [uuid_of(d) for d in stored]
    resolved = []
    for given in ids or []:
        matches = [u for u in known if u == given] or [u for u in known if u.startswith(given)]
        if len(matches) != 1:
            listed = ', '.join(u[:8] for u in known[:5]) or 'none'
            raise RuntimeError(
                f'{what} {given!r}: ' + (f'{len(matches)} stored sessions begin so; give more '
                                         'of it' if matches else 'no stored session of the last '
                                         f'year is so named (the newest: {listed})'))
        resolved.append(matches[0])
    return resolved


def session(config, uuid):
    """The stored session `uuid` names, whole (of any age) or by a prefix (resolve: of the
    last year)."""
    if re.fullmatch(r'[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}', uuid):
        found = Store(config).session(uuid)
        if not found:
            raise RuntimeError(f'no stored session {uuid}')
        return found
    stored = stored_sessions(config)
    return next(d for d in stored if uuid_of(d) == resolve(stored, [uuid], '--session')[0])


def this_run(config, report):
    """The UUID of the session whose run report is `report` (the file a run just wrote),
    once the results database holds that session; else RuntimeError in one sentence: the
    report is empty or not ReFrame's (a full file system, an interrupted write), or the
    session was not stored. Nothing after a run may take an older session for it."""
    report = Path(report)
    why = (f'; {paths.full(paths.VAR_DIR)}'
           if paths.free_bytes(report.parent) < paths.MIN_FREE_BYTES else '')
    try:
        uuid = json.loads(report.read_text())['session_info']['uuid']
        # Only a session's UUID reaches ReFrame's query: an empty one made it run every
        # check, without the run lock.
        if not isinstance(uuid, str) or not UUID.fullmatch(uuid):
            raise ValueError(f'its session UUID {uuid!r} is none')
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RuntimeError(f"this run's report {report} does not read ({type(err).__name__}: "
                           f'{err}){why}: the run was not stored, and no other session is '
                           'shown as its') from None
    if not Store(config).session(uuid):
        raise RuntimeError(f"this run's session {uuid} is not in the results database "
                           f'{paths.VAR_DIR / "results.db"} (ReFrame warned why above){why}: '
                           f'its figures are in {report} only, and no other session is shown '
                           'as its')
    return uuid


def site_config(system):
    return paths.SITE_CONFIGS_DIR / f'{system}.py'
