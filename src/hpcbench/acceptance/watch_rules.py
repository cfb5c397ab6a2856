"""The watch's rules, pure (hpcbench.acceptance.watch runs them): which nodes a cycle takes,
what a cycle's verdicts say of each node, and what is done about it.

- Due: a node in service and not running anyone's job (Slurm's IDLE, or powered down and
  booted for the job) whose last judgement is older than half the shortest period of the
  watched entries, or which was never judged; the longest unjudged first, idle before
  powered down; at most `budget` of them. Half the period, so that a node waits at most a
  period where the cycles and the budget suffice; a node unjudged for longer than its
  period is stale (NOT_RUN, saying since when).
- A node's outcome of a cycle: FAIL where a unit of it fails a watched entry's clause
  (FAIL, INVALID) or drifts from its accepted figures; PASS where every unit of it passed
  both (a WARN passes); NOT_RUN where it has no figure. Slow beside its peers of the cycle
  is said, and is no failure by itself (a cycle may hold a handful of nodes).
- Actions: a failing node gets the strictest action (drain, comment, none) of the entries
  it fails, once it has failed `streak` cycles in a row (the entry's), or at once where it
  missed a clause of the contract beyond its tolerance (FAIL). The suite drains and
  comments only nodes in service; it never resumes, drains again or edits a node drained
  by anyone else. A cycle never drains more than `max_drain` of a partition's nodes
  (rounded down): beyond it, it drains none of that partition and says why (a failing file
  system or a wrong baseline must not empty the cluster)."""
import math
from dataclasses import dataclass, field

from hpcbench.core import slurm_cluster

# What a drain or comment of the suite's says first, and what the site writes into the
# reason of a node the suite drained once it is repaired (the suite then re-tests it).
REASON_PREFIX = 'hpcbench watch:'
REPAIRED_PREFIX = 'hpcbench: repaired'
# Slurm's reason is a line of the node's record: kept short.
MAX_REASON = 240
ACTION_ORDER = ('none', 'comment', 'drain')
DEFAULT_MAX_DRAIN = 0.05
# A job of someone's on the node: never taken for a watch's run.
BUSY = ('ALLOCATED', 'ALLOC', 'MIXED', 'MIX', 'COMPLETING', 'COMP')


@dataclass
class NodeMemory:
    """What the watch remembers of a node between cycles (watch.json)."""
    last_judged: float = None       # epoch seconds of its last cycle with figures
    streak: int = 0                 # failing cycles in a row
    drained: str = ''               # the reason the suite drained it with; '' : not drained
    drained_at: float = None
    baseline_cycle: str = ''        # the cycle that returned it to service, whose runs are
                                    # its accepted figures since; '' : the acceptance's
    history: list = field(default_factory=list)   # [[cycle, outcome], ...], newest last
    # {entry id: [[values of a cycle], ...]}: its runs of the last cycles that showed no
    # worsening (pooled with its accepted runs: hpcbench.acceptance.drift), and of the
    # cycles in a row so far that did (pooled with this cycle's).
    steady: dict = field(default_factory=dict)
    worse: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SeenNode:
    """A node as its controller shows it now."""
    name: str
    partition: str
    state: str = 'IDLE'
    reason: str = ''

    @property
    def out_of_service(self):
        return slurm_cluster.why_out(self.state, self.reason)

    @property
    def busy(self):
        return any(f in BUSY for f in slurm_cluster.state_flags(self.state))

    @property
    def drained_by_the_suite(self):
        return self.reason.startswith(REASON_PREFIX)

    @property
    def marked_repaired(self):
        return self.reason.lower().startswith(REPAIRED_PREFIX)


def due(nodes, memory, period, budget, now):
    """The names of `nodes` (SeenNode) a cycle at `now` takes, at most `budget`: in service,
    running no job, judged longer than half of `period` ago or never; the longest unjudged
    first, idle before powered down."""
    def last(name):
        seen = memory.get(name)
        return seen.last_judged if seen and seen.last_judged is not None else -math.inf
    ready = [n for n in nodes if not n.out_of_service and not n.busy
             and now - last(n.name) >= period / 2]
    powered_down = {n.name for n in ready
                    if any(f in slurm_cluster.POWER_SAVED
                           for f in slurm_cluster.state_flags(n.state))}
    ready.sort(key=lambda n: (last(n.name), n.name in powered_down,
                              slurm_cluster.natural_key(n.name)))
    return [n.name for n in ready[:budget]]


def stale(memory, period, now):
    """{node: since when, epoch seconds} of the remembered nodes judged longer than `period`
    ago (a node drained by the suite is drained, not stale)."""
    return {name: seen.last_judged for name, seen in memory.items()
            if seen.last_judged is not None and not seen.drained
            and now - seen.last_judged > period}


@dataclass(frozen=True)
class Failing:
    """One watched entry a node failed in a cycle: the entry, the clause or drift, and the
    evidence in words."""
    entry: object               # hpcbench.acceptance.contract.Entry
    how: str                    # 'contract' (FAIL or INVALID) or 'drift'
    evidence: str
    at_once: bool = False       # a clause missed beyond its tolerance: may act at once


@dataclass(frozen=True)
class NodeOutcome:
    node: str
    partition: str
    outcome: str                # PASS, FAIL or NOT_RUN
    failing: tuple = ()         # Failing
    slow: tuple = ()            # why it is slow beside its peers, per entry
    why: str = ''               # of a NOT_RUN

    def words(self):
        if self.outcome == 'NOT_RUN':
            return f'{self.node}: NOT_RUN: {self.why}'
        said = '; '.join(f'{f.entry.id} {f.how}: {f.evidence}' for f in self.failing)
        return f'{self.node}: {self.outcome}' + (f': {said}' if said else '')


def outcomes(verdicts, drifts, nodes):
    """{node: NodeOutcome} of the `nodes` ({name: partition}) a cycle ran, from the
    contract's EntryVerdicts of the watched entries and their Drifts ({entry id: {Unit:
    Drift}})."""
    failing, passed, slow = {}, {}, {}
    for entry_verdict in verdicts:
        entry = entry_verdict.entry
        drifted = drifts.get(entry.id, {})
        for u in entry_verdict.units:
            node = u.unit.node
            if node not in nodes:
                continue
            if u.verdict in ('FAIL', 'INVALID'):
                failing.setdefault(node, []).append(Failing(
                    entry, 'contract', f'{u.unit}: {u.verdict}: {u.reason}',
                    at_once=u.verdict == 'FAIL'))
            elif u.verdict in ('PASS', 'WARN'):
                passed.setdefault(node, True)
            if u.slow:
                slow.setdefault(node, []).append(f'{entry.id}: {u.unit}: {u.slow}')
            drift = drifted.get(u.unit)
            if drift is not None and drift.verdict == 'DRIFT':
                failing.setdefault(node, []).append(Failing(entry, 'drift',
                                                            f'{u.unit}: {drift.reason}'))
    found = {}
    for node, partition in nodes.items():
        if node in failing:
            found[node] = NodeOutcome(node, partition, 'FAIL', tuple(failing[node]),
                                      tuple(slow.get(node, ())))
        elif node in passed:
            found[node] = NodeOutcome(node, partition, 'PASS', slow=tuple(slow.get(node, ())))
        else:
            found[node] = NodeOutcome(node, partition, 'NOT_RUN',
                                      why='no figure of a watched entry: its runs did not '
                                          'finish')
    return found


@dataclass(frozen=True)
class Action:
    """What the watch does to a node: drain, comment, or nothing (held back: why)."""
    node: str
    partition: str
    kind: str                   # drain, comment, none
    reason: str                 # what Slurm is told (REASON_PREFIX first)
    held: str = ''              # why it is not done ('' : it is done)


def reason_of(outcome):
    """The reason the suite gives Slurm for a failing node: REASON_PREFIX, the fault codes
    and the evidence, short."""
    codes = '/'.join(sorted({f.entry.fault_code for f in outcome.failing}))
    first = outcome.failing[0]
    text = f'{REASON_PREFIX} {codes} {first.entry.id} {first.how}: {first.evidence}'
    # One line: a newline would end the record Slurm prints.
    text = ' '.join(text.split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + '...'


def actions(found, memory, seen, partition_sizes, max_drain=DEFAULT_MAX_DRAIN):
    """The Actions of a cycle: per failing node whose streak (memory's, this cycle
    counted) reaches an entry's, or at once for a clause missed beyond its tolerance, the
    strictest action of those entries; none where the node is not in service as the
    controller shows it now (`seen`: {node: SeenNode}), nor, in a partition where the
    drains would pass `max_drain` of its nodes (`partition_sizes`), any drain there."""
    chosen = []
    for node, outcome in sorted(found.items()):
        if outcome.outcome != 'FAIL':
            continue
        streak = memory.get(node, NodeMemory()).streak + 1
        acting = [f for f in outcome.failing if f.entry.watch and
                  (f.at_once or streak >= f.entry.watch.streak)]
        if not acting:
            continue
        kind = max((f.entry.watch.action for f in acting), key=ACTION_ORDER.index)
        if kind == 'none':
            continue
        now = seen.get(node)
        held = ''
        if now is None:
            held = 'its controller no longer shows it'
        elif now.out_of_service:
            held = f'not in service ({now.out_of_service}): the suite leaves it as it is'
        chosen.append(Action(node, outcome.partition, kind, reason_of(outcome), held))
    limited = []
    for partition in sorted({a.partition for a in chosen}):
        drains = [a for a in chosen if a.partition == partition and a.kind == 'drain'
                  and not a.held]
        allowed = math.floor(max_drain * partition_sizes.get(partition, 0) + 1e-9)
        for a in (a for a in chosen if a.partition == partition):
            if a.kind == 'drain' and not a.held and len(drains) > allowed:
                a = Action(a.node, a.partition, a.kind, a.reason, (
                    f'{len(drains)} node(s) of partition {partition} would be drained, more '
                    f'than {100 * max_drain:g} % of its {partition_sizes.get(partition, 0)} '
                    f'({allowed}): none is (a failing file system or a wrong baseline must '
                    'not empty it); see to them, or give --max-drain'))
            limited.append(a)
    return limited


def remembered(memory, found, done, cycle, now):
    """The memory after a cycle: each node with an outcome judged now, its streak counted,
    the suite's drains kept; `done`: the Actions taken."""
    memory = dict(memory)
    for node, outcome in found.items():
        seen = memory.get(node) or NodeMemory()
        if outcome.outcome == 'NOT_RUN':
            memory[node] = seen
            continue
        seen.last_judged = now
        seen.streak = seen.streak + 1 if outcome.outcome == 'FAIL' else 0
        seen.history = (seen.history + [[cycle, outcome.outcome]])[-50:]
        memory[node] = seen
    for action in done:
        if action.kind == 'drain' and not action.held:
            memory[action.node].drained = action.reason
            memory[action.node].drained_at = now
    return memory


def fit_to_return(outcome, drifts):
    """(whether a node re-tested after its repair goes back to service, why): every watched
    entry met (its outcome PASS: the contract's clauses, and no drift from its accepted
    runs, judged on the re-test's runs, more than a cycle's: watch_record.RETEST_RUNS)
    and none of its units drifting (`drifts`: its units' Drifts)."""
    if outcome is None or outcome.outcome != 'PASS':
        return False, outcome.words() if outcome else 'no figure of the re-test'
    drifted = [d for d in drifts if d.verdict == 'DRIFT']
    if drifted:
        return False, '; '.join(f'{d.unit}: {d.reason}' for d in drifted)
    return True, f'{outcome.node}: every watched entry met, no drift from its accepted runs'
