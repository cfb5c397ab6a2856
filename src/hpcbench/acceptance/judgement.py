"""Verdicts of an acceptance: each contract entry (hpcbench.acceptance.contract) judged on
every unit of its scope (a node, a GPU, a GPU pair, a partition, the system) from the
measured cases (hpcbench.results.measured.MeasuredCase: a node's figure, each GPU's and GPU
pair's under its key), then over the scope by the entry's rule.

A unit's verdict, from its values over the repeats:
- NOT_RUN: no value, or fewer than the statistic needs (a node down, drained, not reached:
  named with why). It counts as a failure: a check that did not run never passes.
- INVALID: its run failed its sanity check: what it printed is no figure.
- PASS: the median of its values meets the committed value.
- WARN: short of it, but inside the entry's tolerance, or not significantly short.
- FAIL: short beyond the tolerance and significantly so: a one-sided one-sample t-test of
  its values against the committed value gives p <= ALPHA (said with the verdict). One run
  is no test: a unit short in one run is a warning, never a failure.

Slow, not broken: a unit far below its peers, the other units of the same partition (its
median more than SLOW_FRACTION below theirs and more than SLOW_DEVIATIONS robust deviations,
median absolute deviation x 1.4826, from it; the unit itself is not among them, or a slow
one widens the very spread it is measured by: with three nodes, two healthy ones 12 GFLOP/s
apart put a node at a quarter of their HPL 1.3 deviations out) is flagged even where it
meets the contract (DCGM passes an A100 at a third of its sisters' rate: DCGM issue 122).
A unit of several runs is flagged only where its runs are worse than its peers' runs
significantly too: a one-sided Mann-Whitney U test, exact, at ALPHA over the number of peers
(Bonferroni: among 30 nodes, the chance that any node of noisy runs is flagged by chance
stays ALPHA). A rank test, because the runs' noise has any shape: this VM's sub-microsecond
HPCC latencies are bimodal (each run lands near 0.17 or near 0.38 us, the second about two
times in five), so two of 31 healthy nodes drew three high runs, which a t-test against the
peers' median took for a shift (p = 0.0008) and the peers' own runs show to be ordinary.
Without any test, the 32-node testbed's TCP latencies (each node's three runs 7 to 15 us)
flagged three nodes that were not slow.
"""
import math
import statistics
from dataclasses import dataclass, replace

from hpcbench.acceptance.scopes import Unit
from hpcbench.benchmarks.reports import impossible
from hpcbench.core import device_keys, fact_figures

VERDICTS = ('PASS', 'WARN', 'FAIL', 'INVALID', 'NOT_RUN')
FAILING = ('FAIL', 'INVALID', 'NOT_RUN')
ALPHA = 0.05
# Slow, not broken: this far below the median of the unit's peers, and this many robust
# deviations (1.4826 x the median absolute deviation: the standard deviation of a normal
# sample) from it. SuperBench calls a node 5 % below its fleet's baseline defective.
SLOW_FRACTION = 0.05
SLOW_DEVIATIONS = 3.0
# Peers a unit needs to be judged beside them (the other units: three units in all).
MIN_PEERS = 2


@dataclass(frozen=True)
class UnitVerdict:
    unit: Unit
    verdict: str
    values: tuple = ()
    median: float = None
    p_value: float = None
    reason: str = ''
    slow: str = ''          # why the unit is slow beside its peers; '' where it is not
    # What the hardware said of itself around the unit's runs that explains a failing or
    # slow figure (hpcbench.core.fact_figures.evidence); '' where it said nothing amiss.
    hardware: str = ''


@dataclass(frozen=True)
class EntryVerdict:
    entry: object           # hpcbench.acceptance.contract.Entry
    units: tuple            # UnitVerdict, in unit order
    verdict: str            # the scope's, by the entry's rule
    reason: str

    def counts(self):
        return {name: sum(u.verdict == name for u in self.units) for name in VERDICTS}


def covers(check, parameters, environ, partitions, run):
    """Whether `run` (a MeasuredCase or FailedRun) is of this check ('' : any), with these parameters
    ({} : any; each a parameter of the test case, or a variable it stored; a name it has
    neither of is a fact of its partition, the DIMMs of a node, which its run does not
    record), on this environment ('' : any) and one of these partitions (() : any)."""
    if (check and run.check != check) or (partitions and run.partition not in partitions) or (
            environ and run.environ != environ):
        return False
    stored = {**(getattr(run, 'variables', None) or {}), **run.parameters}
    return all(str(stored[k]) == str(v) for k, v in parameters.items() if k in stored)


def _of_entry(entry, run):
    return covers(entry.check, entry.parameters or {}, entry.environ, entry.partitions, run)


def units_of(entry, case):
    """{Unit: value} the case measured for `entry` (its check, parameters and figure, in
    its partitions): a case on one node is that node's, each GPU and GPU pair under its
    key (its scope's units: hpcbench.acceptance.scopes)."""
    if not _of_entry(entry, case):
        return {}
    if entry.fact:
        found = entry.scope.case_fact_units(case, entry.figure)
        if entry.devices:
            found = {u: v for u, v in found.items()
                     if f'{u.key.device}/{u.key.port}' in entry.devices}
        return found
    return entry.scope.case_units(case, entry.figure)


def withheld_units(entry, cases):
    """{Unit: why} of the measured runs whose figure of `entry` is no result: withheld where
    the record was read (hpcbench.results.measured: a ratio above its ceiling, a figure no
    run can have), or, of any unit of the scope (a node's, a GPU's, a pair's), a value no run
    can have (not finite; nothing or less of a rate or a time: hpcbench.benchmarks.reports.
    impossible, in the unit the contract commits it in, the check's)."""
    withheld = {}
    if entry.fact:
        return withheld         # a fact is what a node said: no run's figure to withhold
    for case in (c for c in cases if _of_entry(entry, c)):
        unit = entry.scope.case_unit(case)
        if unit is not None and entry.figure in case.withheld:
            withheld[unit] = f'{entry.figure} withheld: {case.withheld[entry.figure][:300]}'
        for unit, value in entry.scope.case_units(case, entry.figure).items():
            why = impossible(float(value), entry.committed.unit)
            if why:
                withheld[unit] = (f'{entry.figure} withheld: {float(value):g} '
                                  f'{entry.committed.unit} as stored: {why}, so it is no '
                                  'result')
    return withheld


def invalid_units(entry, failed):
    """{Unit: why} of the runs of `entry`'s check that failed before their figures
    (hpcbench.results.measured.FailedRun): a node's run for a node entry, a pair's for a
    pair's, the partition's or the system's for theirs (the scope's failed_unit). A GPU's
    or pair's units are those its node's run would have measured: the caller's expected
    units name them (NOT_RUN)."""
    invalid = {}
    if entry.fact:
        return invalid          # a benchmark that failed read its node's facts all the same:
                                # its reads are judged (judge_entry's `failed`)
    for run in failed:
        unit = entry.scope.failed_unit(run) if _of_entry(entry, run) else None
        if unit is not None:
            invalid[unit] = f'{run.phase} failed: {run.reason[:300]}'.strip()
    return invalid


def elsewhere_units(entry, cases):
    """{Unit: why} of the node pairs some of whose runs were recorded on other nodes than
    they were pinned to: said, never dropped silently. (A job's own word that disagrees
    fails its sanity: hpcbench.rfm.plugins.JobNodes; this is what a session stored before
    the jobs said where they ran holds, ReFrame's snapshot of the job's nodes.)"""
    found = {}
    for case in cases:
        # The runs pinned to node pairs (the scope's runs) are the ones a snapshot can move.
        if entry.scope.runs != 'node_pair' or len(case.pinned) != 2 or \
                not _of_entry(entry, case) or sorted(case.nodes) == sorted(case.pinned):
            continue
        unit = entry.scope.unit(case.partition, tuple(sorted(case.pinned)))
        found.setdefault(unit, []).append(','.join(case.nodes) or 'no node')
    return {unit: f'{len(runs)} run(s) recorded on {"; ".join(sorted(set(runs)))} instead '
                  f'(ReFrame\'s snapshot of the job\'s nodes): not counted as the pair\'s'
            for unit, runs in found.items()}


def unit_values(entry, cases):
    """{Unit: [values, one per run]} of `entry` over the measured runs `cases`; a value no
    run can have (NaN, infinite, nothing or less of a rate) is no run's figure
    (withheld_units says so)."""
    values = {}
    for case in cases:
        for unit, value in units_of(entry, case).items():
            if fact_figures.is_text(value):
                values.setdefault(unit, []).append(value)      # a version: as it reads
            elif entry.fact or not impossible(float(value), entry.committed.unit):
                values.setdefault(unit, []).append(float(value))
    return values


def _p_value(committed, values):
    """One-sided one-sample t-test: p of values this far on the wrong side of the committed
    value by chance; 0 where they do not vary and all miss it."""
    if len(set(values)) == 1:
        return 0.0 if not committed.met_by(values[0]) else 1.0
    from scipy.stats import ttest_1samp
    alternative = 'less' if committed.direction == 'at_least' else 'greater'
    return float(ttest_1samp(values, committed.value, alternative=alternative).pvalue)


def judge_fact(entry, unit, values):
    """The UnitVerdict of a fact's `unit` from its `values` (one per job that read it): a
    fact is no sample, and one read that misses it fails, the worst one said."""
    committed = entry.committed
    if not values:
        return UnitVerdict(unit, 'NOT_RUN', reason='not read around any job')
    missed = [v for v in values if not committed.met_by(v)]
    said = f'{len(values)} read(s), expected {committed.words()}'
    if not missed:
        return UnitVerdict(unit, 'PASS', values, values[-1], reason=f'{said}: every one met it')
    if any(fact_figures.is_text(v) for v in missed):
        worst, what = missed[-1], 'the last'        # a text has no worst: the newest read
    else:
        worst, what = (min if committed.direction == 'at_least' else max)(missed), 'the worst'
    return UnitVerdict(unit, 'FAIL', values, worst, reason=(
        f'{said}: {len(missed)} missed it, {what} '
        f'{fact_figures.shown(worst, committed.unit)}'))


def judge_unit(entry, unit, values, alpha=ALPHA):
    """The UnitVerdict of `unit` from its `values` (its runs' figures)."""
    if entry.fact:
        return judge_fact(entry, unit, tuple(values))
    committed, needed = entry.committed, entry.median_of
    values = tuple(v for v in values if math.isfinite(v))
    if len(values) < needed:
        return UnitVerdict(unit, 'NOT_RUN', values, reason=(
            f'{len(values)} of the {needed} runs its statistic needs' if values else
            'no figure measured'))
    median = statistics.median(values)
    said = f'median {median:.4g} {committed.unit} of {len(values)} runs, committed ' \
           f'{committed.words()}'
    if committed.met_by(median):
        return UnitVerdict(unit, 'PASS', values, median, reason=said)
    short = 100 * abs(median - committed.value) / committed.value
    if committed.within_tolerance(median):
        return UnitVerdict(unit, 'WARN', values, median, reason=(
            f'{said}: short by {short:.1f} %, inside the tolerance of '
            f'{100 * committed.tolerance:g} %'))
    if len(values) < 2:
        return UnitVerdict(unit, 'WARN', values, median, reason=(
            f'{said}: short by {short:.1f} %, in one run: no test tells a slow unit from '
            'a slow run (the entry\'s statistic takes one; three tell)'))
    p = _p_value(committed, values)
    if p <= alpha:
        return UnitVerdict(unit, 'FAIL', values, median, p, (
            f'{said}: short by {short:.1f} %, one-sided t-test p = {p:.3g} <= {alpha:g}'))
    return UnitVerdict(unit, 'WARN', values, median, p, (
        f'{said}: short by {short:.1f} %, but not significantly (p = {p:.3g} > {alpha:g}): '
        'run more'))


def p_worse(values, peer_values, direction):
    """One-sided Mann-Whitney U test, exact: p of a unit's runs `values` this far on the
    worse side of its peers' runs `peer_values` by chance, whatever the shape of the runs'
    noise; None for one run (no test)."""
    if len(values) < 2 or not peer_values:
        return None
    from scipy.stats import mannwhitneyu
    alternative = 'less' if direction == 'at_least' else 'greater'
    return float(mannwhitneyu(values, peer_values, alternative=alternative,
                              method='exact').pvalue)


def slow_beside_peers(verdicts, direction):
    """The verdicts, each unit far worse than the other units of its partition (median and
    median absolute deviation over them) flagged `slow` with why."""
    flagged = []
    by_partition = {}
    for v in verdicts:
        if v.median is not None:
            by_partition.setdefault(v.unit.partition, []).append(v)
    for v in verdicts:
        others = [u for u in by_partition.get(v.unit.partition, []) if u is not v]
        peers = [u.median for u in others]
        if v.median is None or len(peers) < MIN_PEERS:
            flagged.append(v)
            continue
        centre = statistics.median(peers)
        spread = 1.4826 * statistics.median(abs(x - centre) for x in peers)
        worse = (centre - v.median) if direction == 'at_least' else (v.median - centre)
        deviations = worse / spread if spread else math.inf
        far = centre and worse > SLOW_FRACTION * abs(centre) and deviations > SLOW_DEVIATIONS
        peer_runs = [x for u in others for x in u.values]
        p = p_worse(v.values, peer_runs, direction) if far else None
        if far and (p is None or p <= ALPHA / len(peers)):
            why = (f'{100 * worse / abs(centre):.1f} % worse than the median of the '
                   f'{len(peers)} other units of partition {v.unit.partition} ({centre:.4g})'
                   + (f', {deviations:.1f} robust deviations' if spread else '')
                   + (f', its runs worse than their {len(peer_runs)}: one-sided Mann-Whitney '
                      f'U p = {p:.3g} <= {ALPHA:g}/{len(peers)}' if p is not None else ''))
            flagged.append(UnitVerdict(v.unit, v.verdict, v.values, v.median, v.p_value,
                                       v.reason, why))
        else:
            flagged.append(v)
    return flagged


def _over_scope(entry, verdicts):
    """(verdict, why) of the scope by the entry's rule over its units' verdicts."""
    if not verdicts:
        return 'NOT_RUN', 'no unit of its scope ran'
    name, value = entry.rule
    failing = [v for v in verdicts if v.verdict in FAILING]
    warned = any(v.verdict == 'WARN' for v in verdicts)
    if name == 'every':
        if failing:
            return 'FAIL', f'{len(failing)} of {len(verdicts)} unit(s) failed or did not run'
        return ('WARN' if warned else 'PASS'), f'every one of {len(verdicts)} unit(s) met it'
    if name == 'fraction':
        passing = len(verdicts) - len(failing)
        if passing < value * len(verdicts):
            return 'FAIL', (f'{passing} of {len(verdicts)} unit(s) met it, fewer than '
                            f'{100 * value:g} %')
        return ('WARN' if failing or warned else 'PASS'), (
            f'{passing} of {len(verdicts)} unit(s) met it, at least {100 * value:g} %')
    not_run = [v for v in verdicts if v.verdict in ('NOT_RUN', 'INVALID')]
    if not_run:
        return 'FAIL', (f'{len(not_run)} unit(s) without a figure: the {name} over the scope '
                        'is unknown')
    medians = [v.median for v in verdicts]
    if name == 'minimum':
        worst = (min if entry.committed.direction == 'at_least' else max)(
            verdicts, key=lambda v: v.median)
        return worst.verdict, f'the worst unit, {worst.unit}: {worst.reason}'
    centre = statistics.median(medians)
    if entry.committed.met_by(centre):
        return 'PASS', f'the median of {len(verdicts)} unit(s), {centre:.4g}, met it'
    if entry.committed.within_tolerance(centre):
        return 'WARN', f'the median of {len(verdicts)} unit(s), {centre:.4g}, inside tolerance'
    return 'FAIL', f'the median of {len(verdicts)} unit(s), {centre:.4g}, missed it'


def judge_entry(entry, cases, expected=(), not_run=None, invalid=None, alpha=ALPHA,
                failed=()):
    """The EntryVerdict of `entry` from the measured runs `cases`. `expected`: the units
    that should have a verdict (every node in the entry's partitions, each GPU or pair of
    each); `not_run`: {Unit: why} of those that could not run (drained, down); `invalid`:
    {Unit: why} of those whose run failed its sanity check; `failed`: the runs that failed
    (hpcbench.results.measured.FailedRun), whose jobs' facts are read as a measured run's
    (a fact's values, a failing unit's hardware). A unit expected and without a figure is
    NOT_RUN, never left out; one with fewer runs than its statistic needs too, saying why
    its node could not run them where it could not."""
    not_run = {**elsewhere_units(entry, cases), **dict(not_run or {})}
    invalid = {**withheld_units(entry, cases), **dict(invalid or {})}
    read = [*cases, *failed]
    values = unit_values(entry, read if entry.fact else cases)
    units = sorted({*expected, *values, *not_run, *invalid}, key=str)
    verdicts = []
    for unit in units:
        if unit in invalid and unit not in values:
            verdicts.append(UnitVerdict(unit, 'INVALID', reason=invalid[unit]))
        elif unit not in values:
            verdicts.append(UnitVerdict(unit, 'NOT_RUN', reason=not_run.get(
                unit, 'not read: no job of it read this fact (see its jobs\' facts_unread)'
                if entry.fact else 'no figure measured: not run, or its job did not finish')))
        else:
            judged = judge_unit(entry, unit, values[unit], alpha)
            if judged.verdict == 'NOT_RUN' and unit in not_run:
                # Runs cut short by what stopped the node (drained during the acceptance).
                judged = replace(judged, reason=f'{not_run[unit]}; {judged.reason}')
            verdicts.append(judged)
    if not entry.fact:
        verdicts = [_with_hardware(entry, v, read) for v in
                    slow_beside_peers(verdicts, entry.committed.direction)]
    verdict, why = _over_scope(entry, verdicts)
    return EntryVerdict(entry, tuple(verdicts), verdict, why)


# The most of the hardware's words a unit's verdict carries.
MAX_HARDWARE = 300


def _with_hardware(entry, verdict, cases):
    """A figure's failing or slow unit with what its node's hardware said around its runs
    (the facts its jobs read: hpcbench.rfm.hardware_facts): a GPU's unit its own GPU's and
    the node's, a node's every device's."""
    node = verdict.unit.node
    if node is None or not (verdict.verdict in FAILING + ('WARN',) or verdict.slow):
        return verdict
    key = verdict.unit.key
    own = {str(key)} if isinstance(key, device_keys.Gpu) else (
        {device_keys.gpu_key(key.node, key.first), device_keys.gpu_key(
            key.other_node or key.node, key.second)}
        if isinstance(key, device_keys.GpuPair) else None)
    said = []
    for case in cases:
        if not _of_entry(entry, case):
            continue
        devices = {str(d.key): d.figures for d in case.device_facts
                   if (d.key.node == node if own is None else str(d.key) in own)}
        if node in case.node_facts or devices:
            said += fact_figures.evidence(case.node_facts.get(node, {}), devices)
    if not said:
        return verdict
    text = '; '.join(dict.fromkeys(said))
    return replace(verdict, hardware=text if len(text) <= MAX_HARDWARE
                   else text[:MAX_HARDWARE - 3] + '...')


def system_verdict(entry_verdicts):
    """The system's verdict: FAIL where any entry failed or did not run, WARN where any
    warned, else PASS."""
    names = [v.verdict for v in entry_verdicts]
    if not names or any(n in FAILING for n in names):
        return 'FAIL'
    return 'WARN' if 'WARN' in names else 'PASS'
