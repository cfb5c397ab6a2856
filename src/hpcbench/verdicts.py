"""Figures as samples, and regression verdicts a noisy machine cannot fool (issue 19).

A figure measured once is a sample of one: on a shared VM two runs of the same code differ
by more than 10 % in many figures. A verdict therefore compares two samples of a figure
(its values in several sessions, or ReFrame --repeat runs) and needs both:

- a change of the medians beyond the user's threshold (percent, in the direction the
  figure gets worse: hpcbench.references.better), and
- a one-sided Mann-Whitney U test (scipy.stats.mannwhitneyu) that finds the new values
  lower (or higher) than the old ones with p <= ALPHA. It makes no assumption about the
  distribution, and works with few values: at 3 against 3 its smallest p is 0.05.

Verdicts: `regression` and `improvement` (both hold), `no change` (the medians differ by
at most the threshold), `inconclusive` (beyond the threshold, but too few values or too
much spread to tell), `not judged` (a figure with no better direction: a protocol switch
point, a coefficient of variation).
"""
import math
import statistics
from dataclasses import dataclass

from scipy.stats import mannwhitneyu

from hpcbench import references, results

# The significance level of the test: the chance that unchanged code is called changed.
ALPHA = 0.05
# The default threshold (percent) below which a change of the median does not matter.
THRESHOLD = 5.0
VERDICTS = ('regression', 'improvement', 'no change', 'inconclusive', 'not judged')


@dataclass(frozen=True)
class Sample:
    """The values of one figure (in one unit) over runs."""
    values: tuple

    def __post_init__(self):
        values = tuple(float(v) for v in self.values)
        if not values or not all(math.isfinite(v) for v in values):
            raise ValueError(f'a sample needs finite values, not {self.values!r}')
        object.__setattr__(self, 'values', values)

    @property
    def n(self):
        return len(self.values)

    @property
    def median(self):
        return statistics.median(self.values)


@dataclass(frozen=True)
class Verdict:
    variable: str
    unit: str
    better: str           # 'higher', 'lower' or None (hpcbench.references.better)
    old: Sample
    new: Sample
    change_percent: float  # of the median, new against old; None for an old median of 0
    p_value: float         # of the one-sided test in the direction of the change; None
    verdict: str           # one of VERDICTS
    reason: str


def check_threshold(threshold):
    """A threshold is a change in percent, 0 or more (NaN is refused too)."""
    if not threshold >= 0:
        raise ValueError(f'threshold {threshold}: a change in percent, 0 or more')
    return threshold


def judge(variable, unit, old, new, threshold=THRESHOLD, alpha=ALPHA):
    """The verdict on one figure: `old` and `new` are Samples (or sequences of values)."""
    check_threshold(threshold)
    old, new = (s if isinstance(s, Sample) else Sample(tuple(s)) for s in (old, new))
    better = references.better(variable, unit)
    change = (100 * (new.median - old.median) / abs(old.median)) if old.median else None

    def verdict(name, reason, p=None):
        return Verdict(variable, unit, better, old, new, change, p, name, reason)

    if better is None:
        return verdict('not judged', f'{unit or "this figure"} has no better direction')
    if change is None:
        return verdict('inconclusive', 'the old median is 0: no relative change')
    if abs(change) <= threshold:
        return verdict('no change', f'median changed {change:+.1f} %, within ±{threshold:g} %')

    # One-sided: are the new values lower (or higher) than the old ones, as their medians
    # suggest?
    p = mannwhitneyu(new.values, old.values,
                     alternative='less' if change < 0 else 'greater').pvalue
    worse = change < 0 if better == 'higher' else change > 0
    if p <= alpha:
        return verdict('regression' if worse else 'improvement',
                       f'median {change:+.1f} %, Mann-Whitney U p = {p:.3g} <= {alpha:g}', p)
    smallest = 1 / math.comb(new.n + old.n, new.n)
    why = (f'{new.n} against {old.n} value(s) cannot reach p <= {alpha:g} '
           f'(smallest p {smallest:.3g}): run more' if smallest > alpha else
           f'p = {p:.3g} > {alpha:g}: the runs overlap too much')
    return verdict('inconclusive', f'median {change:+.1f} %, but {why}', p)


# --- sets of sessions ------------------------------------------------------------------------

# By default the newest session is judged against every session of the days before it.
DAYS = 30


def _measured(sessions, system):
    return [d for d in sessions
            if any(case['system'] == system for case in results.measured_runs(d))]


def sessions_to_judge(sessions, system, new=None, old=None, days=DAYS):
    """(new UUIDs, old UUIDs) of `system` to compare (sessions as stored, newest first):
    `new` (default: the newest session that measured the system) against `old` (default:
    every session that measured it in the `days` before the first new one); None when
    there is nothing to compare with."""
    measured = _measured(sessions, system)
    started = {d['session_info']['uuid']: d['session_info']['time_start_unix'] for d in measured}
    new = list(new or ([measured[0]['session_info']['uuid']] if measured else []))
    if not new:
        return None
    if old:
        old = list(old)
    else:
        first = min(started.get(u, math.inf) for u in new)
        old = [u for u, t in started.items()
               if u not in new and first - days * 86400 <= t < first]
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


def compare(sessions, system, new, old, threshold=THRESHOLD, alpha=ALPHA):
    """Rows for every figure of `system` both sets of sessions (UUIDs) measured with the
    same inputs: their values over all runs of those sessions, judged (judge)."""
    by_uuid = {d['session_info']['uuid']: d for d in sessions}
    missing = [u for u in (*new, *old) if u not in by_uuid]
    if missing:
        raise ValueError(f'no stored session {", ".join(missing)}')
    new_samples = results.figure_samples([by_uuid[u] for u in new], system)
    old_samples = results.figure_samples([by_uuid[u] for u in old], system)
    rows = []
    for key in sorted(set(new_samples) & set(old_samples), key=str):
        check, partition, environ, parameters, inputs = key
        for variable in sorted(set(new_samples[key]) & set(old_samples[key])):
            new_figure, old_figure = new_samples[key][variable], old_samples[key][variable]
            if new_figure['unit'] != old_figure['unit']:
                continue        # not the same figure
            rows.append(Row(check, partition, environ, parameters, inputs,
                            judge(variable, new_figure['unit'], old_figure['values'],
                                  new_figure['values'], threshold, alpha)))
    return rows


def counts(rows):
    """{verdict: how many rows have it}, in VERDICTS order."""
    return {name: sum(r.verdict.verdict == name for r in rows) for name in VERDICTS}
