"""One picture of what a system measured, built by the results layer in one pass over the
sessions it needs, for the report to render (hpcbench.report.pages) and `hpcbench compare`
to print: each test case's latest figures, marked with their session (latest_cases); the
sessions those come from; the system's references; the newest sessions judged against
earlier ones (Comparison, hpcbench.results.changes); every figure's samples over the
window (its trends, each case's figures over the stored runs of its stack); the node's
ceilings measured in those sessions.

`from_database` reads the window a verdict needs and no older session
(hpcbench.results.results_db.Store: a year of nightly history costs what a month does);
`of_sessions` builds the same picture from sessions as data (tests, fixtures)."""
from dataclasses import dataclass, field, replace

from hpcbench.results import changes, measured, references, results_db


@dataclass
class Comparison:
    new: list                    # session UUIDs
    old: list
    rows: list = field(default_factory=list)   # hpcbench.results.changes.Row
    threshold: float = changes.THRESHOLD

    @property
    def regressions(self):
        return [r for r in self.rows if r.verdict.verdict == 'regression']

    def describe(self):
        """One sentence: what was compared, how, and how it came out."""
        tally = ', '.join(f'{n} {name}' for name, n in changes.counts(self.rows).items() if n)
        return (f'{len(self.new)} new session(s) ({", ".join(u[:8] for u in self.new)}) '
                f'against {len(self.old)} earlier one(s); a figure regressed when its median '
                f'got worse by more than {self.threshold:g} % and a one-sided Mann-Whitney '
                f'U test gives p <= {changes.ALPHA:g}, over the sessions\' medians where '
                f'each side has {changes.MIN_SESSIONS} sessions, else over the runs (and '
                f'then outside the earlier sessions\' medians when there are '
                f'{changes.MIN_SESSIONS}); the runs of a build only against runs of the same '
                f'build (another BLAS, MPI or recipe: \'stack changed\', not judged). '
                f'{tally or "no figure in common"}.')


def system_cases(session_data, system):
    return [c for c in measured.measured_cases(session_data) if c.system == system]


def latest_cases(sessions, system):
    """Each test case's figures from the newest session that measured it on `system`
    (sessions newest first), each marked with its session's UUID; and those sessions. A
    run of a few cases (one check, one stack) shows those anew and hides none of the others
    an earlier, fuller run measured (issue 51: after `-n 'StreamCheck|HplCheck' -p
    'openmpi$'` HPL showed 2 cases of 12, and the BLAS x MPI table none)."""
    cases, used, seen = [], [], set()
    for data in sessions:
        uuid = results_db.uuid_of(data)
        mine = [replace(c, session=uuid) for c in system_cases(data, system)
                if c.key not in seen]
        seen.update(c.key for c in mine)
        if mine:
            cases += mine
            used.append(data)
    return cases, used


CEILING_CHECKS = ('NodeCeilings', 'DgemmCeiling')


def over_stored_runs(cases, history):
    """The cases, each figure with its values over the stored runs of its case's stack
    (Figure.over_runs; history: measured.figure_samples of the sessions the report covers):
    a ratio such as HPL's to its DGEMM ceiling swings by 10 % from one run to the next on a
    shared machine; its median over runs is the figure to hold."""
    def over(case):
        series = history.get((*case.key, case.inputs), {})
        values = {name: part.values for name, whole in series.items()
                  for stack, part in measured.by_stack(whole).items() if stack == case.stack}
        return replace(case, figures={name: replace(figure, over_runs=values.get(name, ()))
                                      for name, figure in case.figures.items()})
    return [over(case) for case in cases]


def ceiling_cases(sessions, system):
    """The ceilings measured in `sessions` on `system` (fixtures: CEILING_CHECKS)."""
    return [case for data in sessions for case in measured.measured_cases(data, fixtures=True)
            if case.check in CEILING_CHECKS and case.system == system]


@dataclass
class Picture:
    system: str
    cases: list                 # MeasuredCase: each test case's latest (.session: its UUID)
    sessions: list              # the sessions those figures come from, newest first
    references: object          # hpcbench.results.references.ReferenceSet of the system
    comparison: object = None   # Comparison, or None where nothing was judged
    history: dict = field(default_factory=dict)     # measured.figure_samples of the window
    ceilings: list = field(default_factory=list)    # ceiling cases of `sessions`
    threshold: float = changes.THRESHOLD   # percent: what a verdict and a trend call a change


def judged(stored, system, new=None, old=None, days=changes.DAYS,
           threshold=changes.THRESHOLD, across_stacks=False):
    """The sessions `new` (default: the newest) judged against `old` (default: those of the
    `days` before), among `stored`: a Comparison, or None where there is nothing to judge
    against."""
    compared = changes.sessions_to_judge(stored, system, new, old, days)
    if not compared:
        return None
    rows = changes.compare(stored, system, *compared, threshold=threshold,
                            across_stacks=across_stacks)
    return Comparison(*compared, rows, threshold)


def of_sessions(system, sessions, comparison=None, stored=None,
                threshold=changes.THRESHOLD):
    """The picture of `system` from `sessions` (newest first): their latest figures, and
    `comparison` with the figures' samples over `stored` (default: `sessions`)."""
    cases, used = latest_cases(sessions, system)
    if not cases:
        raise RuntimeError(f'no stored session has results of {system}: run the suite first')
    history = measured.figure_samples(stored or sessions, system)
    cases = over_stored_runs(cases, history)
    return Picture(system, cases, used, references.load(system),
                   comparison if comparison and comparison.rows else None, history,
                   ceiling_cases(used, system), threshold)


def from_database(system, session=None, against=None, threshold=changes.THRESHOLD,
                  days=changes.DAYS):
    """The picture of `system` from its results database, reading the window it judges:
    the latest figures of every case measured there (or those of `session`), and that
    session (default: the newest) judged against `against` (default: the sessions of the
    `days` before it)."""
    config = results_db.site_config(system)
    references.load(system)     # a broken references file is named before anything is read
    stored = results_db.stored_sessions(config)
    session = session and results_db.resolve(stored, [session], '--session')[0]
    against = against and results_db.resolve(stored, [against], '--against')[0]
    comparison = judged(stored, system, session and [session], against and [against], days,
                        threshold)
    if session:
        shown = [s for s in stored if results_db.uuid_of(s) == session]
    elif comparison:
        shown = [s for s in stored
                 if results_db.uuid_of(s) in {*comparison.new, *comparison.old}]
    else:
        # Nothing to judge against: the newest session with results of the system.
        shown = [next((s for s in stored if changes.measures(s, system)), stored[0])
                 ] if stored else []
    window = [s for s in stored if results_db.uuid_of(s) in
              {*(comparison.new + comparison.old if comparison else ()),
               *map(results_db.uuid_of, shown)}]
    return of_sessions(system, shown, comparison, window, threshold)
