"""Reading ReFrame's results database (its SQLite layout, schema 1.0, read directly: Store)
and turning stored test cases into the figures of a baseline."""
import contextlib
import json
import math
import os
import re
import sqlite3
import statistics
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from hpcbench.core import paths

# Test parameters in a case's display name, including --distribute's `.part` and `.nid`.
_PARAM = re.compile(r'%([\w.$]+)=(\S+)')
# A session's UUID, as ReFrame names sessions.
UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
# The parameter ReFrame's --repeat gives each run of a case (in its display name).
REPEAT_PARAMETER = '.repeat_no'


_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def without_colours(text):
    """ReFrame's output without its terminal colours (it colours a pipe too)."""
    return _ANSI.sub('', text)


# What ReFrame's storage calls the layout of its results database (reframe.frontend.reporting.
# storage._SqliteStorage.SCHEMA_VERSION): the one read directly here.
SCHEMA_VERSION = '1.0'
# How far back a session is looked for by default: a year.
YEAR = 365 * 86400


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
        self.path = Path(os.environ.get('HPCBENCH_VAR') or paths.VAR_DIR) / 'results.db'

    @contextlib.contextmanager
    def _reading(self):
        import fasteners      # ReFrame's lock (reframe.utility.osext.ReadWriteFileLock)
        lock = fasteners.InterProcessReaderWriterLock(str(self.path.parent / '.db.lock'))
        with lock.read_lock():
            connection = sqlite3.connect(f'file:{urllib.parse.quote(str(self.path))}?mode=ro',
                                         uri=True, timeout=60)
            try:
                yield connection
            except sqlite3.Error as err:
                raise RuntimeError(f'reading the results database {self.path} failed: '
                                   f'{err}') from None
            finally:
                connection.close()

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
        return [StoredSession(self, uuid, started) for uuid, started in rows]

    def session(self, uuid):
        """The session `uuid` (whole), of any age, or None."""
        rows = self._query('SELECT uuid, session_start_unix FROM sessions WHERE uuid = ?',
                           (uuid,))
        return StoredSession(self, *rows[0]) if rows else None

    def decoded(self, uuid):
        rows = self._query('SELECT json_blob FROM sessions WHERE uuid = ?', (uuid,))
        if not rows:
            raise RuntimeError(f'no stored session {uuid} (removed while it was read)')
        return json.loads(rows[0][0])

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
                return json.JSONDecoder().raw_decode(head, at)[0]
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


# Parameters a check gained after sessions were stored, with the value that ran before it
# had them: a session stored earlier stays the same test case as a newer one.
ADDED_PARAMETERS = {'StreamCheck': {'stores': 'compiled'}}


def with_added_parameters(check, match):
    """A case's parameters (`match`, as stored) with those its check gained since, at the
    value that ran before the check had them (ADDED_PARAMETERS)."""
    return {**ADDED_PARAMETERS.get(check, {}), **match}


# Figures that are ratios to a peak or a ceiling (percent): above 100 % the peak or the
# ceiling is wrong, never the figure a result. The checks withhold such a ratio with its
# reason (hpcbench.rfm.plugins.Samples); one stored without (a session from before they did) is
# withheld here, saying so.
PEAK_RATIOS = ('efficiency', 'ceiling_efficiency', 'sustained_peak_efficiency',
               'peak_of_rpeak', 'hpl_efficiency', 'hpl_ceiling_efficiency',
               'triad_ceiling_efficiency', 'triad_cached_store_efficiency',
               # The GPU checks' ratios to their device's datasheet.
               'triad_datasheet_efficiency', 'fp64_peak_efficiency',
               'host_to_device_link_efficiency', 'device_to_host_link_efficiency')
UNEXPLAINED_RATIO = ('{value:.1f} % of its peak or ceiling, stored without a reason (a '
                     'session from before the suite withheld such ratios): above 100 % the '
                     'peak is wrong (a nominal clock below the one the cores run at, a '
                     'ceiling measured low), so it is no result')


def _withhold_unexplained_ratios(tc, perf, refs):
    """perf and refs without the ratios above 100 % a test case stored without a reason,
    and the test case with those in its `flagged` figures."""
    above = {name: value for name, (value, unit) in perf.items()
             if name in PEAK_RATIOS and unit == '%' and value is not None and value > 100}
    if not above:
        return tc, perf, refs

    flagged = {**{name: UNEXPLAINED_RATIO.format(value=value) for name, value in above.items()},
               **(tc.get('flagged') or {})}
    return ({**tc, 'flagged': flagged}, {k: v for k, v in perf.items() if k not in above},
            {k: v for k, v in refs.items() if k not in above})


def measured_runs(session_data, fixtures=False):
    """Every valid run of the session's test cases, in order (ReFrame's --repeat and
    --reruns give a case several): those that passed, and those that failed only against
    their references (their figures are real; re-baselining is how a new level is
    accepted). A case that failed anything else (build, run, sanity) measured nothing.
    `fixtures`: the fixtures' too (the ceilings the checks divide by). A ratio to a peak
    above 100 % is never among the figures: it is withheld, with its reason (PEAK_RATIOS)."""
    for run in session_data['runs']:
        for tc in run['testcases']:
            valid = tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'
            if (tc['fixture'] and not fixtures) or not valid or not tc.get('perfvalues'):
                continue

            check = tc['name'].split()[0]
            # Typed values where the case records them (parameters), else the name's text.
            # A case of --distribute is stored under its check's bare name; its partition
            # and node (%.part, %.nid) are in its display name only. --repeat's runs
            # (%.repeat_no there too) are runs of one case.
            named = tc.get('display_name') or tc['name']
            match = with_added_parameters(
                check, {p: tc.get(p, text) for p, text in _PARAM.findall(named)
                        if p != REPEAT_PARAMETER})
            perf, refs = {}, {}
            for key, (value, ref, lower, upper, unit, result) in tc['perfvalues'].items():
                perf[key.rsplit(':', 1)[1]] = (value, unit)
                refs[key.rsplit(':', 1)[1]] = (ref, lower, upper, result)
            tc, perf, refs = _withhold_unexplained_ratios(tc, perf, refs)

            yield {
                'check': check, 'system': tc['system'], 'partition': tc['partition'],
                'environ': tc['environ'], 'match': match, 'perfvalues': perf,
                'nodelist': tc.get('job_nodelist') or [],
                'inputs': tc.get('inputs') or '',
                # Per variable: (reference, lower, upper, 'pass'|'fail') as ReFrame judged
                # it; a reference of 0 with no bounds is no reference.
                'references': refs,
                'testcase': tc,
            }


def case_key(case):
    """What makes two runs the same test case: check, partition, environment, parameters."""
    return (case['check'], case['partition'], case['environ'],
            tuple(sorted(case['match'].items())))


def measured_cases(session_data, fixtures=False):
    """The session's measured test cases (measured_runs), the last run of each, with every
    run's figures in `runs` ({variable: [value per run]}: --repeat gives several)."""
    cases, runs = {}, {}
    for case in measured_runs(session_data, fixtures):
        key = case_key(case)
        cases[key] = case
        for variable, (value, _) in case['perfvalues'].items():
            if value is not None:
                runs.setdefault(key, {}).setdefault(variable, []).append(value)
    for key, case in cases.items():
        case['runs'] = runs.get(key, {})
    return list(cases.values())


def figure_samples(sessions, system):
    """Every figure of `system` measured in `sessions`, as a sample over their runs:
    {(check, partition, environ, parameters, inputs): {variable: {'unit', 'values',
    'sessions', 'times', 'stacks'}}}, one entry of each list per run: its figure, its
    session's UUID and start (Unix time), and the software that produced it (run_stack).
    Runs of other inputs (a quick run and a full one, another -S) are other samples: a
    figure is compared only with itself; runs of another stack are told apart by
    by_stack."""
    samples = {}
    for data in sessions:
        uuid, started = uuid_of(data), started_of(data)
        for case in measured_runs(data):
            if case['system'] != system:
                continue
            figures = samples.setdefault((*case_key(case), case['inputs']), {})
            for variable, (value, unit) in case['perfvalues'].items():
                if value is None:
                    continue
                figure = figures.setdefault(variable, {'unit': unit, 'values': [],
                                                       'sessions': [], 'times': [],
                                                       'stacks': []})
                figure['values'].append(value)
                figure['sessions'].append(uuid)
                figure['times'].append(started)
                figure['stacks'].append(run_stack(case))
    return samples


def by_session(figure):
    """A figure (a figure_samples entry) session by session, oldest first:
    [(session start, UUID, [its runs' values])]."""
    sessions = {}
    for value, uuid, started in zip(figure['values'], figure['sessions'], figure['times']):
        sessions.setdefault((started, uuid), []).append(value)
    return [(started, uuid, values) for (started, uuid), values
            in sorted(sessions.items(), key=lambda item: item[0][0] or 0)]


def run_stack(case):
    """The software that produced a case's figures: its build's spec as recorded (hpcbench.
    provenance.build_spec: package, variants, target, hash, compiler, MPI and BLAS with
    versions; a registry binary's package and version); '' where none was recorded."""
    return case['testcase'].get('build_spec') or ''


def by_stack(figure):
    """A figure (a figure_samples entry) split by the stack of its runs: {stack: the same
    entry of those runs only}, in the order the stacks first ran."""
    fields = ('values', 'sessions', 'times', 'stacks')
    runs = sorted(zip(*(figure[name] for name in fields)), key=lambda run: run[2] or 0)
    parts = {}
    for run in runs:
        part = parts.setdefault(run[3], {'unit': figure['unit'], **{n: [] for n in fields}})
        for name, value in zip(fields, run):
            part[name].append(value)
    return parts


def _stack_parts(stack):
    """A build spec's parts by what they are: {'build': name@version, 'variants', 'target',
    'hash', and each named virtual (mpi, blas, c, ...): its provider}."""
    parts = {}
    for token in stack.split():
        if token.startswith('^') and '=' in token:
            virtuals, provider = token[1:].split('=', 1)
            parts[virtuals] = provider
        elif token.startswith('/'):
            parts['hash'] = token
        elif token.startswith('arch='):
            parts['target'] = token[5:]
        elif token[0] in '+~':
            parts['variants'] = f'{parts.get("variants", "")} {token}'.strip()
        else:
            parts['build'] = f'{parts.get("build", "")} {token}'.strip()
    return parts


def stack_change(old, new):
    """What changed from stack `old` to `new`, in words: `blas intel-oneapi-mkl@2025.3.0 ->
    openblas@0.3.28, hash /5vtt4bg -> /kq2x7fa`; the whole stacks where either was not
    recorded."""
    if not old or not new:
        return f'{old or "(not recorded)"} -> {new or "(not recorded)"}'
    before, after = _stack_parts(old), _stack_parts(new)
    changed = [f'{key} {before.get(key, "(none)")} -> {after.get(key, "(none)")}'
               for key in dict.fromkeys([*before, *after]) if before.get(key) != after.get(key)]
    return ', '.join(changed) or 'the same'


def site_config(system):
    return paths.SITE_CONFIGS_DIR / f'{system}.py'


def check_cases(config, check, uuid=None):
    """Measured cases of one check in a stored session (default: the newest that ran it)."""
    if uuid:
        data = [session(config, uuid)]
    else:
        data = stored_sessions(config)

    for candidate in data:
        cases = [c for c in measured_cases(candidate) if c['check'] == check]
        if cases:
            return candidate['session_info']['uuid'], cases

    raise RuntimeError(f'no stored session has results of {check}'
                       + (f' (session {uuid})' if uuid else ''))


def case_figure(case, variable):
    """A case's figure in a session: the median of its runs where it ran more than once
    (--repeat), else its one value."""
    runs = case.get('runs', {}).get(variable, [])
    return statistics.median(runs) if len(runs) > 1 else case['perfvalues'][variable][0]


# A build spec's virtual providers: ^mpi=openmpi@4.1.4.
_PROVIDER = re.compile(r'\^([\w,]+)=(\S+)')


def stack_of(case):
    """{'mpi': 'openmpi@4.1.4', 'blas': 'intel-oneapi-mkl@2025.3.0'} of a case's build, as its
    provenance names them ({} for a build Spack did not make)."""
    stack = {}
    for virtuals, provider in _PROVIDER.findall(case['testcase'].get('build_spec') or ''):
        for virtual in virtuals.split(','):
            stack[virtual] = provider
    return stack


# Where a session holds DGEMM ceilings: HPL's jobs measure theirs just before HPL; sessions
# stored before that have them as a check of their own.
DGEMM_FIGURES = {'HplCheck': 'dgemm_ceiling', 'DgemmCeiling': 'gflops'}


def dgemm_by_blas(session_data):
    """The DGEMM ceilings of a session per BLAS its build used: {provider (`openblas@0.3.28`):
    [GFLOP/s of every call]}, each case's calls (its job's repeats) pooled across the
    cases that share a BLAS (HPL's layouts, the MPI stacks with the default one)."""
    rates = {}
    for case in measured_cases(session_data, fixtures=True):
        provider = stack_of(case).get('blas')
        variable = DGEMM_FIGURES.get(case['check'])
        if provider and variable in case['perfvalues']:
            calls = (case['testcase'].get('samples') or {}).get(variable) or [
                case_figure(case, variable)]
            rates.setdefault(provider, []).extend(calls)
    return rates


