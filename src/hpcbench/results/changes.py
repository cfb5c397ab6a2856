"""Figures as samples, and regression verdicts a noisy machine cannot fool (issue 19).

A figure measured once is a sample of one: on a shared VM two runs of the same code differ
by more than 10 % in many figures. A verdict therefore compares two samples of a figure
(its values in several sessions, or ReFrame --repeat runs) and needs both:

- a change of the medians beyond the user's threshold (percent, in the direction the
  figure gets worse: hpcbench.results.measured.better), and
- a one-sided Mann-Whitney U test (scipy.stats.mannwhitneyu) that finds the new values
  lower (or higher) than the old ones with p <= ALPHA. It makes no assumption about the
  distribution, and works with few values: at 3 against 3 its smallest p is 0.05.

Verdicts: `regression` and `improvement` (both hold), `no change` (the medians differ by
at most the threshold), `inconclusive` (beyond the threshold, but too few values or too
much spread to tell), `not judged` (a figure with no better direction: a protocol switch
point, a coefficient of variation), `stack changed` (the figure's software differs: another
build, BLAS or MPI; never judged as the machine's change, unless asked: compare's
across_stacks).

The runs of one session share the machine's phase (a shared VM drifts between phases), so
sets of sessions are judged with the session as the unit when they allow it (compare):
with MIN_SESSIONS sessions or more on each side, the values tested are the sessions'
medians; with fewer new sessions against MIN_SESSIONS old ones or more, the runs are
tested, and a change must also leave the range of the old sessions' medians.
"""
import math
import statistics
from dataclasses import dataclass, replace

from hpcbench.results import case_builds, measured, results_db, stack_comparison

# The significance level of the test: the chance that unchanged code is called changed.
ALPHA = 0.05
# The default threshold (percent) below which a change of the median does not matter.
THRESHOLD = 5.0
VERDICTS = ('regression', 'improvement', 'no change', 'inconclusive', 'not judged',
            'stack changed')


@dataclass(frozen=True)
class Sample:
    """The values of one figure (in one unit) over runs. A value that is no number (NaN, or
    infinite: a broken figure stored all the same) is kept, to be shown as what it is, and
    left out of every statistic (`values` are the finite ones, `not_finite` the others)."""
    values: tuple
    not_finite: tuple = ()

    def __post_init__(self):
        given = tuple(float(v) for v in (*self.values, *self.not_finite))
        if not given:
            raise ValueError('a sample needs values')
        object.__setattr__(self, 'values', tuple(v for v in given if math.isfinite(v)))
        object.__setattr__(self, 'not_finite', tuple(v for v in given if not math.isfinite(v)))

    @property
    def n(self):
        return len(self.values)

    @property
    def median(self):
        return statistics.median(self.values) if self.values else math.nan


@dataclass(frozen=True)
class Verdict:
    variable: str
    unit: str
    better: str           # 'higher', 'lower' or None (hpcbench.results.measured.better)
    old: Sample
    new: Sample
    change_percent: float  # of the median, new against old; None for an old median of 0
    p_value: float         # of the one-sided test in the direction of the change; None
    verdict: str           # one of VERDICTS
    reason: str
    basis: str = 'runs'    # what the values are: 'runs' or 'session medians'


def check_threshold(threshold):
    """A threshold is a change in percent, 0 or more and finite (NaN is refused too)."""
    if not 0 <= threshold < math.inf:
        raise ValueError(f'threshold {threshold}: a change in percent, 0 or more')
    return threshold


def judge(variable, unit, old, new, threshold=THRESHOLD, alpha=ALPHA, basis='runs',
          old_range=None):
    """The verdict on one figure: `old` and `new` are Samples (or sequences of values) of
    `basis`. With `old_range` (lowest, highest median of the old sessions) a change must
    also leave it."""
    check_threshold(threshold)
    old, new = (s if isinstance(s, Sample) else Sample(tuple(s)) for s in (old, new))
    better = measured.better(variable, unit)
    broken = [(side, s.not_finite) for side, s in (('old', old), ('new', new)) if s.not_finite]
    if broken:
        said = '; '.join(f'{side}: {", ".join(map(str, values))}' for side, values in broken)
        return Verdict(variable, unit, better, old, new, None, None, 'not judged',
                       f'a figure that is no number ({said}) is not judged', basis)
    change = (100 * (new.median - old.median) / abs(old.median)) if old.median else None

    def verdict(name, reason, p=None):
        return Verdict(variable, unit, better, old, new, change, p, name, reason, basis)

    if better is None:
        return verdict('not judged', f'{unit or "this figure"} has no better direction')
    if change is None:
        return verdict('inconclusive', 'the old median is 0: no relative change')
    if abs(change) <= threshold:
        return verdict('no change', f'median changed {change:+.1f} %, within ±{threshold:g} %')

    # One-sided: are the new values lower (or higher) than the old ones, as their medians
    # suggest? (scipy.stats takes 0.6 s to import: every hpcbench command would pay it.)
    from scipy.stats import mannwhitneyu
    p = mannwhitneyu(new.values, old.values,
                     alternative='less' if change < 0 else 'greater').pvalue
    worse = change < 0 if better == 'higher' else change > 0
    if p <= alpha and old_range and old_range[0] <= new.median <= old_range[1]:
        return verdict('inconclusive', f'median {change:+.1f} %, p = {p:.3g}, but within the '
                       f'earlier sessions\' medians ({old_range[0]:.4g} to '
                       f'{old_range[1]:.4g}): one phase of the machine', p)
    if p <= alpha:
        return verdict('regression' if worse else 'improvement',
                       f'median {change:+.1f} %, Mann-Whitney U p = {p:.3g} <= {alpha:g}', p)
    smallest = 1 / math.comb(new.n + old.n, new.n)
    why = (f'{new.n} against {old.n} value(s) cannot reach p <= {alpha:g} '
           f'(smallest p {smallest:.3g}): run more' if smallest > alpha else
           f'p = {p:.3g} > {alpha:g}: the runs overlap too much')
    return verdict('inconclusive', f'median {change:+.1f} %, but {why}', p)


# --- environments of one session, ranked ---------------------------------------------------

@dataclass(frozen=True)
class Rank:
    environ: str
    sample: Sample
    what: str               # what the values are (stack_comparison.environment_samples)
    ahead: Verdict = None   # this environment against the next one down; None for the last


def rank_environments(group, variable, threshold=THRESHOLD, alpha=ALPHA):
    """A side_by_side group's environments ranked by one figure's median, best first, each
    judged against the next one down as judge() judges a change (its threshold and
    one-sided Mann-Whitney U test): 'improvement' is ahead, anything else cannot be told
    apart from it at this size of sample. [] when a figure has no better direction or
    fewer than two environments have two values or more."""
    unit = next(iter(group.values())).figures[variable].unit
    better = measured.better(variable, unit)
    samples = {env: (Sample(tuple(values)), what)
               for env, (values, what)
               in stack_comparison.environment_samples(group, variable).items()
               if len(values) > 1}
    if better is None or len(samples) < 2:
        return []

    order = sorted(samples, key=lambda env: samples[env][0].median,
                   reverse=better == 'higher')
    ranks = []
    for env, below in zip(order, [*order[1:], None]):
        ahead = (judge(variable, unit, samples[below][0], samples[env][0], threshold, alpha)
                 if below else None)
        ranks.append(Rank(env, *samples[env], ahead))
    return ranks


def ranking_lines(group, variable, threshold=THRESHOLD):
    """rank_environments as text: one line per environment, best first."""
    unit = next(iter(group.values())).figures[variable].unit
    ranks = rank_environments(group, variable, threshold)
    order = [r.environ for r in ranks]
    lines = []
    for place, rank in enumerate(ranks, 1):
        s = rank.sample
        line = (f'{place}. {rank.environ}: median {s.median:.4g} {unit} '
                f'({rank.what}, {min(s.values):.4g} to {max(s.values):.4g})')
        if rank.ahead:
            below = order[place]
            v = rank.ahead
            if v.verdict == 'improvement':
                line += f'; ahead of {below} by {abs(v.change_percent):.1f} %, p = {v.p_value:.3g}'
            else:
                line += f'; not told apart from {below}: {v.reason}'
        lines.append(line)
    return lines


# --- sets of sessions ------------------------------------------------------------------------

# By default the newest session is judged against every session of the days before it.
DAYS = 30
# Sessions on each side from which the session, not the run, is the unit.
MIN_SESSIONS = 3


def session_medians(figure):
    """A figure's median in each session, oldest first (figure: a measured.figure_samples
    entry)."""
    return [statistics.median(values) for _, _, values in measured.by_session(figure)]


def judge_figure(variable, old, new, threshold=THRESHOLD, alpha=ALPHA):
    """judge() on two measured.figure_samples entries of one figure, the session as the
    unit where both have MIN_SESSIONS sessions (see the module's doc)."""
    old_medians, new_medians = session_medians(old), session_medians(new)
    if len(old_medians) >= MIN_SESSIONS and len(new_medians) >= MIN_SESSIONS:
        return judge(variable, new.unit, old_medians, new_medians, threshold, alpha,
                     basis='session medians')
    old_range = ((min(old_medians), max(old_medians))
                 if len(old_medians) >= MIN_SESSIONS else None)
    return judge(variable, new.unit, old.values, new.values, threshold, alpha,
                 old_range=old_range)


def measures(data, system):
    """Whether a session holds valid figures of `system`."""
    return any(case.system == system for case in measured.measured_runs(data))


def sessions_to_judge(sessions, system, new=None, old=None, days=DAYS):
    """(new UUIDs, old UUIDs) of `system` to compare (sessions as stored, newest first):
    `new` (default: the newest session that measured the system) against `old` (default:
    every session that measured it in the `days` before the first new one); None when
    there is nothing to compare with. Only what this needs is read: the newest sessions
    until one measured the system, the new ones, and those of the window (a year of
    history costs no more than a month)."""
    by_uuid = {results_db.uuid_of(d): d for d in sessions}
    measuring = None        # the new sessions that measured the system, once known
    if new:
        new = list(new)
    else:
        newest = next((d for d in sessions if measures(d, system)), None)
        if newest is None:
            return None
        new, measuring = [results_db.uuid_of(newest)], [newest]
    if old:
        old = [u for u in old if u not in new]
    else:
        if measuring is None:
            measuring = [by_uuid[u] for u in new
                         if u in by_uuid and measures(by_uuid[u], system)]
        starts = [results_db.started_of(d) for d in measuring]
        if not starts:
            return None
        first = min(starts)
        old = [u for u, d in by_uuid.items()
               if u not in new and first - days * 86400 <= results_db.started_of(d) < first
               and measures(d, system)]
    return (new, old) if old else None


@dataclass(frozen=True)
class Row:
    """One figure of one test case, judged."""
    check: str
    partition: str
    environ: str
    parameters: tuple      # ((name, value), ...)
    inputs: str
    verdict: Verdict
    # the software of the new runs (hpcbench.results.measured.MeasuredCase.stack)
    stack: str = ''


def stack_changed(variable, old, new, old_stack, new_stack):
    """The verdict on a figure (old and new: measured.figure_samples entries) whose software
    changed: not judged, what changed said."""
    unit = new.unit
    old, new = Sample(old.values), Sample(new.values)
    return Verdict(variable, unit, measured.better(variable, unit), old, new,
                   None, None, 'stack changed',
                   f'stack changed: {case_builds.stack_change(old_stack, new_stack)} (median '
                   f'{old.median:.4g} -> {new.median:.4g}): not judged as the machine\'s '
                   'change; compare --across-stacks judges the two stacks')


def compare(sessions, system, new, old, threshold=THRESHOLD, alpha=ALPHA, across_stacks=False):
    """Rows for every figure of `system` both sets of sessions (UUIDs) measured with the
    same inputs: their values over all runs of those sessions, judged (judge_figure), the
    new runs of each stack against the old runs of the same stack. Where the old sessions
    never ran the new runs' stack (another build, BLAS or MPI), the row says `stack
    changed` instead of a verdict; `across_stacks` judges such runs against the old ones
    all the same, the stacks named in the reason."""
    by_uuid = {results_db.uuid_of(d): d for d in sessions}
    missing = [u for u in (*new, *old) if u not in by_uuid]
    if missing:
        raise ValueError(f'no stored session {", ".join(missing)}')
    new_samples = measured.figure_samples([by_uuid[u] for u in new], system)
    old_samples = measured.figure_samples([by_uuid[u] for u in old], system)
    rows = []
    for key in sorted(set(new_samples) & set(old_samples), key=str):
        check, partition, environ, parameters, inputs = key
        for variable in sorted(set(new_samples[key]) & set(old_samples[key])):
            new_figure, old_figure = new_samples[key][variable], old_samples[key][variable]
            if new_figure.unit != old_figure.unit:
                continue        # not the same figure
            old_stacks = measured.by_stack(old_figure)
            last_old = list(old_stacks)[-1]
            for stack, new_part in measured.by_stack(new_figure).items():
                if stack in old_stacks:
                    verdict = judge_figure(variable, old_stacks[stack], new_part, threshold,
                                           alpha)
                elif across_stacks:
                    verdict = judge_figure(variable, old_figure, new_part, threshold, alpha)
                    verdict = replace(verdict, reason=f'across stacks '
                                      f'({case_builds.stack_change(last_old, stack)}): '
                                      f'{verdict.reason}')
                else:
                    verdict = stack_changed(variable, old_stacks[last_old], new_part,
                                            last_old, stack)
                rows.append(Row(check, partition, environ, parameters, inputs, verdict, stack))
    return rows


def counts(rows):
    """{verdict: how many rows have it}, in VERDICTS order."""
    return {name: sum(r.verdict.verdict == name for r in rows) for name in VERDICTS}


def change_points(variable, unit, values, threshold=THRESHOLD, alpha=ALPHA,
                  min_size=MIN_SESSIONS):
    """Where a series (a figure's session medians, oldest first) changes level: [(index of
    the first value after the change, 'regression' or 'improvement')]. Binary segmentation:
    of the splits leaving `min_size` values on each side, the one judge() finds most
    significant (a change beyond the threshold and p <= alpha) is kept, then each side is
    searched again. Every split is tested, so a long noisy series can show a change that
    is a phase of the machine: that is what the plot shows it as, a change of level."""
    found = []

    def search(lo, hi):
        best = None
        for k in range(lo + min_size, hi - min_size + 1):
            verdict = judge(variable, unit, values[lo:k], values[k:hi], threshold, alpha)
            if (verdict.verdict in ('regression', 'improvement')
                    and (best is None or verdict.p_value < best[1].p_value)):
                best = (k, verdict)
        if best:
            found.append((best[0], best[1].verdict))
            search(lo, best[0])
            search(best[0], hi)

    search(0, len(values))
    return sorted(found)
