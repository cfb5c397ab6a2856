"""Drift: a unit's runs of a watch cycle judged against its own accepted runs (the runs of
the same unit in the signed acceptance, or in the cycle that returned it to service after a
repair), not against the contract and not against its peers. A unit has drifted where its
runs are worse than its accepted ones significantly, by a one-sided Mann-Whitney U test,
exact, at ALPHA (a rank test: the runs' noise has any shape, and this VM's latencies are
bimodal: hpcbench.acceptance.judgement), AND by at least the entry's `min_effect`, a fraction
of the accepted median: a difference the test finds but no user feels is not drift. Three
runs beside three accepted ones give p = 0.05 at best (every run worse than every accepted
one), so one cycle is evidence, and the entry's streak of cycles decides
(hpcbench.acceptance.watch_rules). A cycle judges many units at once: each at ALPHA over
their number (Bonferroni, as the peers' test: among 32 healthy nodes, the chance that any
drifts by chance in a cycle stays ALPHA; at ALPHA each, one of four healthy testbed nodes
drifted in a cycle of three, 2026-12-04), which a unit's runs reach pooled over cycles.

A unit without accepted runs is NOT_RUN, never judged: "never accepted" (a node added or
renamed after the acceptance), until an acceptance covers it."""
import statistics
from dataclasses import dataclass

from hpcbench.acceptance.judgement import ALPHA, p_worse

DRIFT_VERDICTS = ('OK', 'DRIFT', 'NOT_RUN')


@dataclass(frozen=True)
class Drift:
    """A unit's runs of a cycle beside its accepted runs: OK, DRIFT or NOT_RUN, the medians,
    the effect (a fraction of the accepted median: positive is worse), the test's p and
    why, in words."""
    unit: object                # hpcbench.acceptance.scopes.Unit
    verdict: str
    runs: tuple = ()
    accepted: tuple = ()
    median: float = None
    accepted_median: float = None
    effect: float = None
    p_value: float = None
    reason: str = ''
    entry_min_effect: float = None      # the entry's least effect that is drift
    alpha: float = ALPHA                # the level it was tested at
    measured: tuple = ()                # this cycle's runs as measured, before the scale
    scale: float = 1.0                  # what they were multiplied by (peer_scale)


def worsening(median, accepted_median, direction):
    """How much worse `median` is than `accepted_median`, as a fraction of the latter
    (negative: better), in the entry's direction (at_least: lower is worse)."""
    if not accepted_median:
        return 0.0
    change = (median - accepted_median) / abs(accepted_median)
    return -change if direction == 'at_least' else change


def judge_drift(entry, unit, runs, accepted, alpha=ALPHA):
    """The Drift of `unit` of the watched `entry` from this cycle's `runs` and its
    `accepted` runs (values of its figure, in the unit the contract commits)."""
    runs, accepted = tuple(runs), tuple(accepted)
    unit_of = entry.committed.unit
    if not accepted:
        return Drift(unit, 'NOT_RUN', runs, reason='never accepted: no run of it in the '
                     'acceptance (a node added or renamed since): judged once an acceptance '
                     'covers it', alpha=alpha)
    accepted_median = statistics.median(accepted)
    if not runs:
        return Drift(unit, 'NOT_RUN', runs, accepted, accepted_median=accepted_median,
                     reason='no run of this cycle to judge', alpha=alpha)
    median = statistics.median(runs)
    effect = worsening(median, accepted_median, entry.committed.direction)
    p = p_worse(list(runs), list(accepted), entry.committed.direction)
    said = (f'median {median:.4g} {unit_of} of {len(runs)} run(s), accepted '
            f'{accepted_median:.4g} {unit_of} of {len(accepted)}: '
            f'{100 * abs(effect):.1f} % {"worse" if effect > 0 else "better"}')
    tested = '' if p is None else f', one-sided Mann-Whitney U p = {p:.3g}'
    least = entry.watch.min_effect if entry.watch else 0.0
    if effect >= least and p is not None and p <= alpha:
        return Drift(unit, 'DRIFT', runs, accepted, median, accepted_median, effect, p,
                     f'{said}{tested} <= {alpha:.3g}, at least the {100 * least:g} % that is '
                     'drift', least, alpha)
    why = ('one run is no test' if p is None else
           f'not significantly (p > {alpha:.3g})' if p > alpha else
           f'less than the {100 * least:g} % that is drift')
    return Drift(unit, 'OK', runs, accepted, median, accepted_median, effect, p,
                 f'{said}{tested}: {why}' if effect > 0 else f'{said}{tested}', least, alpha)


# A unit's runs pooled (its runs of a cycle are few, three, and a shared VM's HPL spreads
# by a fifth between runs of one node: three runs 20 % slower beside three accepted ones
# drifted on 18 of the 29 accepted nodes of the 32-node testbed's acceptance, six beside
# nine on all 29): beside its accepted runs, its runs of the last STEADY_CYCLES steady
# cycles; with this cycle's, its runs of the worse cycles in a row before it (at most
# WORSE_CYCLES in all). A cycle is worse where its median is worse by the least effect AND
# its runs are worse than the pooled accepted ones at WORSE_P on their own (each cycle's
# own test, not the cycle's many at once): by the median alone, half the healthy testbed
# nodes had a noisy cycle 5 % worse among their first two (2026-12-05), their accepted runs
# stayed three, and three against any number of runs can never reach ALPHA over 64 units.
# A worse cycle never joins the accepted runs, so a unit cannot drift into its own
# baseline. WORSE_P, not ALPHA: at ALPHA a node 20 % slow, whose runs spread 15 % as the
# testbed's do, had cycles not worse at 0.05 join its baseline. Nor does a cycle worse by
# the least effect but not significantly: in the 32-node testbed's run of 2026-12-05 (six
# runs a cycle), n9's first cycle at 1.7 CPUs was 19 % worse at p = 0.103, joined its
# baseline with runs of 4 and 30 GFLOP/s, and no later cycle of it (20 to 34 % worse)
# could reach ALPHA over the nodes beside them; kept out, its cycles 4 and 5 pooled give
# p = 0.0013 (replayed on the run's own records).
STEADY_CYCLES = 2
WORSE_CYCLES = 3
WORSE_P = 0.1


def pooled(runs, accepted, steady, worse):
    """(this cycle's runs with those of the worse cycles before it, the accepted runs with
    those of the steady cycles): what judge_drift compares."""
    return (tuple(runs) + tuple(v for cycle in worse for v in cycle),
            tuple(accepted) + tuple(v for cycle in steady for v in cycle))


def kept_after(entry, runs, accepted, steady, worse):
    """(steady, worse) of a unit after a cycle of `runs` beside its `accepted` runs: a cycle
    worse than the pooled accepted runs by the entry's least effect and significantly (at
    WORSE_P alone) joins the worse cycles in a row; one worse by that effect but not
    significantly joins neither and ends the row (the node it was, or the first cycle of a
    slowdown: never its baseline); any other joins the steady ones and ends the row."""
    if not runs or not accepted:
        return steady, worse
    baseline = pooled((), accepted, steady, ())[1]
    direction = entry.committed.direction
    effect = worsening(statistics.median(runs), statistics.median(baseline), direction)
    least = entry.watch.min_effect if entry.watch else 0.0
    p = p_worse(list(runs), list(baseline), direction)
    if effect >= least and p is not None and p <= WORSE_P:
        return steady, (list(worse) + [list(runs)])[-(WORSE_CYCLES - 1):]
    if effect >= least:
        return steady, []
    return (list(steady) + [list(runs)])[-STEADY_CYCLES:], []


def judge_cycle(entry, unit, runs, accepted, steady=(), worse=(), alpha=ALPHA):
    """The Drift of a unit's `runs` of this cycle beside its `accepted` runs with its steady
    cycles' (pooled): of this cycle's runs alone (a step: a node that lost most of its speed
    since the last cycle, whose noisy last cycle would dilute it), and of them with the
    worse cycles' before (a smaller shift, seen over cycles); drift where either is."""
    alone = judge_drift(entry, unit, *pooled(runs, accepted, steady, ()), alpha)
    if alone.verdict == 'DRIFT' or not worse:
        return alone
    over_cycles = judge_drift(entry, unit, *pooled(runs, accepted, steady, worse), alpha)
    return over_cycles if over_cycles.verdict == 'DRIFT' else alone


# Peers a unit's runs are scaled by (the other units of its entry judged in the cycle):
# fewer, and its runs stand as measured.
MIN_PEERS = 2


def peer_scale(measured, accepted):
    """What a cycle's runs are multiplied by to stand beside their accepted runs: the median
    over the units judged (`measured`: {Unit: runs of this cycle}) of their accepted runs'
    medians (`accepted`: {Unit: accepted runs}) over the median of their runs' medians now;
    None where fewer than MIN_PEERS + 1 units have both (the caller's word then: a re-test
    of one node takes the last cycle's scale). What all the units show at once (a
    host that runs slower this hour, a shared file system, a new kernel) is a common cause,
    not a node's drift, and the contract's clause judges that: on the 2-core testbed the
    cycles' medians of 31 healthy nodes' HPL ran from 52.3 to 62.2 GFLOP/s over eleven
    cycles (2026-12-05), and a healthy node drifted 21 % in a cycle its peers ran 13 % slow.
    Scaled run by run, a node drifts only against its own accepted runs beside its peers."""
    now, then = [], []
    for unit, runs in measured.items():
        if runs and accepted.get(unit):
            now.append(statistics.median(runs))
            then.append(statistics.median(accepted[unit]))
    if len(now) < MIN_PEERS + 1:
        return None
    centre = statistics.median(now)
    return statistics.median(then) / centre if centre else 1.0


def scaled(runs, scale):
    return tuple(v * scale for v in runs)
