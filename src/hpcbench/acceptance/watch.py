"""`hpcbench watch SYSTEM`, the use case: after the acceptance, one cycle at a time, every
node re-judged on the contract's watched entries (those with a `watch:` clause) against the
contract, against its own accepted figures (hpcbench.acceptance.drift) and beside its peers
of the cycle, and what is done about it through Slurm (hpcbench.acceptance.watch_rules).

A cycle is a partial acceptance, on the acceptance's own pieces: the watched entries as a
contract of their own, run by an Acceptance restricted to the nodes that are due, judged by
the same judgement, and written as an acceptance's directory (sessions, verdicts, JUnit,
manifest, signature), with the watch's own record beside them (`cycle.json`: each node's
outcome, its drifts with the accepted runs they were judged against, the actions and their
scontrol lines, run or printed), so that `hpcbench accept --verify CYCLE` checks it.

The accepted figures: the runs of each unit in the acceptance's directory, read only once
its manifest holds (every file's sha256: figures edited after they were signed are
refused), or, for a node the watch returned to service after a repair, the runs of the
cycle that returned it. What the watch remembers between cycles (each node's last
judgement, failing streak, the suite's own drains) is `watch.json` in its directory
(var/watch/SYSTEM), written whole at the end of each cycle. Metrics go to the site's store
through a port it is given (hpcbench.report.watch_metrics: a store that is down keeps
them on disk for the next cycle)."""
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from hpcbench.acceptance import contract as contracts, directory as directories, drift
from hpcbench.acceptance import judgement, manifest, slurm_actions, watch_rules
from hpcbench.acceptance.assessment import judge, runs_of
from hpcbench.acceptance.state import AcceptanceError
from hpcbench.acceptance.use_case import Acceptance
from hpcbench.acceptance.watch_rules import NodeMemory
from hpcbench.core import paths, slurm_cluster
from hpcbench.rfm import reframe_port

WATCH_DIR = 'watch'
MEMORY = 'watch.json'
CYCLES = 'cycles'
CYCLE_RECORD = 'cycle.json'
WATCHED_CONTRACT = 'watched-contract.yaml'
MARKER = '.hpcbench-watch'
DEFAULT_BUDGET = 32


class WatchError(AcceptanceError):
    """A watch cycle that cannot run: one sentence saying why; nothing was done to a node."""


@dataclass
class Memory:
    """watch.json: the acceptance the watch judges against and each node's NodeMemory."""
    system: str
    acceptance: str                         # its directory
    acceptance_manifest_sha256: str
    nodes: dict = field(default_factory=dict)   # {node: NodeMemory}
    cycles: list = field(default_factory=list)  # the cycles' names, in order

    def save(self, directory):
        data = asdict(self)
        paths.write_atomically(Path(directory) / MEMORY,
                               json.dumps(data, indent=1, sort_keys=True) + '\n')

    @classmethod
    def load(cls, directory):
        path = Path(directory) / MEMORY
        try:
            data = json.loads(paths.read_regular(path, 1 << 28, 'a watch\'s memory'))
            data['nodes'] = {str(k): NodeMemory(**v) for k, v in data['nodes'].items()}
            return cls(**data)
        except (ValueError, KeyError, TypeError) as err:
            raise WatchError(f'{path} is no watch\'s memory ({type(err).__name__}: '
                             f'{str(err)[:200]}): give another --output') from None


def claim(directory):
    """The watch's directory made, checked as the user's own and the suite's, and locked
    (an open file whose lock the caller keeps while the cycle runs)."""
    directory = Path(directory)
    if directory.exists() and directory.stat().st_uid != os.geteuid():
        raise WatchError(f'{directory} belongs to another user (uid '
                         f'{directory.stat().st_uid}): a watch writes only its own directory; '
                         'give --output one of yours')
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER).exists():
        raise WatchError(f'{directory} holds other files and no watch of the suite\'s (no '
                         f'{MARKER}): give --output a new or empty directory')
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / MARKER
    if marker.is_symlink():
        raise WatchError(f'{marker} is a link: {directory} is not the suite\'s')
    lock = open(marker, 'a')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise WatchError(f'{directory}: another watch cycle runs (it holds {MARKER}\'s lock)') \
            from None
    return lock


@dataclass(frozen=True)
class Accepted:
    """The accepted figures: {entry id: {Unit: its runs' values}} of the units that passed
    the acceptance (PASS or WARN: a unit that failed was never accepted), {node: why} of
    the nodes the acceptance judged and did not accept, and its manifest's sha256."""
    values: dict
    refused: dict
    manifest_sha256: str


def accepted_figures(acceptance_dir, watched, allowed_signers=None, identity=None):
    """The Accepted figures of the `watched` entries in an acceptance's directory, once
    every file is as its manifest says (and its signature, with the site's allowed
    signers): its sessions judged again on those entries, on its plan. WatchError naming
    what does not hold."""
    directory = Path(acceptance_dir)
    if not (directory / manifest.MANIFEST).is_file():
        raise WatchError(f'{directory}: no finished acceptance (no {manifest.MANIFEST}): accept '
                         'the system first (hpcbench accept), or give --acceptance')
    checked = manifest.verify(directory, allowed_signers, identity)
    if checked.problems:
        raise WatchError(f'{directory}: the accepted figures do not hold: '
                         f'{"; ".join(checked.problems[:3])}')
    _, state, records = directories.stored(directory)
    values, refused = {}, {}
    for verdict in judge(contracts.Contract(state.system, tuple(watched)), state, records):
        values[verdict.entry.id] = {u.unit: u.values for u in verdict.units
                                    if u.verdict in ('PASS', 'WARN') and u.values}
        for u in verdict.units:
            if u.verdict not in ('PASS', 'WARN') and u.unit.node:
                refused.setdefault(u.unit.node, f'{verdict.entry.id} {u.verdict} in the '
                                                f'acceptance: {u.reason}'[:300])
    return Accepted(values, refused, paths.file_sha256(directory / manifest.MANIFEST))


def watched_contract(contract_path, system):
    """(the contract, its watched entries' own contract text): WatchError where none is
    watched."""
    contract = contracts.load(contract_path, system)
    watched = [e for e in contract.entries if e.watch]
    if not watched:
        raise WatchError(f'{contract_path}: no entry has a watch: clause (e.g. `watch: '
                         '{period: 24h, action: drain, streak: 2}`): nothing to watch')
    data = yaml.safe_load(Path(contract_path).read_text())
    ids = {e.id for e in watched}
    data['entries'] = [e for e in data['entries'] if e['id'] in ids]
    data['about'] = f'The watched entries of {contract_path} (hpcbench watch).'
    return contract, yaml.safe_dump(data, sort_keys=False)


def node_partitions(reframe, checks):
    """{partition: [nodes]} of the Slurm partitions ReFrame's --distribute runs `checks` on."""
    found = {}
    for partition in reframe.partitions():
        if not partition.distributes:
            continue
        nodes = {n for check in checks for n in reframe.distributed_nodes(partition.name,
                                                                           check)}
        if nodes:
            found[partition.name] = sorted(nodes, key=slurm_cluster.natural_key)
    return found


@dataclass
class Cycle:
    """One cycle's findings, as its record (cycle.json) holds them."""
    name: str
    time: float
    due: list
    outcomes: dict = field(default_factory=dict)     # {node: watch_rules.NodeOutcome}
    drifts: dict = field(default_factory=dict)       # {entry id: {Unit: drift.Drift}}
    actions: list = field(default_factory=list)      # watch_rules.Action
    not_run: dict = field(default_factory=dict)      # {node: why}, not run this cycle
    stale: dict = field(default_factory=dict)        # {node: last judged, epoch s}
    acted: bool = False
    verdicts: tuple = ()                             # judgement.EntryVerdict
    run: object = None                               # the cycle's Acceptance, where it ran
    assessed: object = None                          # its assessment.Assessment
    record: dict = None                              # cycle.json's data, once written


class Watch:
    """The watch of `system` against the contract at `contract_path`, judged against the
    acceptance in `acceptance_dir`, kept in `directory`. Ports: `reframe` (as the
    acceptance's), `slurm` (hpcbench.acceptance.slurm_actions.SlurmNodes), `store` (where
    metrics go: an object with deliver(record, {node: its memory as data}), or None). `act`: run the
    actions' scontrol lines (else they are printed); `clock`: the time now."""

    def __init__(self, system, contract_path, acceptance_dir, directory, *, reframe=None,
                 slurm=None, store=None, budget=DEFAULT_BUDGET,
                 max_drain=watch_rules.DEFAULT_MAX_DRAIN, act=False, key=None,
                 clock=time.time, say=print, batch_nodes=None, mode=None,
                 allowed_signers=None):
        if budget < 1:
            raise WatchError(f'a budget of {budget} node(s) at once runs nothing: give '
                             '--budget 1 or more')
        self.system, self.contract_path = system, Path(contract_path)
        self.acceptance_dir, self.directory = Path(acceptance_dir), Path(directory)
        self.reframe = reframe or reframe_port.ReFrame(system)
        self.slurm = slurm or slurm_actions.SlurmNodes(system)
        self.store, self.budget, self.max_drain, self.act = store, budget, max_drain, act
        self.key, self.clock, self.say = key, clock, say
        self.batch_nodes, self.mode, self.allowed_signers = batch_nodes, mode, allowed_signers

    def cycle(self):
        """One cycle: the nodes due judged, actions decided (and run with `act`), its
        record written and signed, the memory kept, the metrics delivered. The Cycle."""
        contract, watched_text = watched_contract(self.contract_path, self.system)
        watched = [e for e in contract.entries if e.watch]
        period = min(e.watch.period for e in watched)
        accepted = accepted_figures(self.acceptance_dir, watched, self.allowed_signers)
        with claim(self.directory):
            memory = self._memory(accepted.manifest_sha256)
            now = self.clock()
            name = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))
            if name in memory.cycles:
                name = f'{name}-{len(memory.cycles)}'
            nodes = node_partitions(self.reframe, sorted({e.check for e in watched}))
            seen = self.slurm.seen(nodes)
            cycle = Cycle(name, now, [])
            candidates = self._candidates(nodes, seen, memory, accepted, cycle)
            cycle.due = watch_rules.due(candidates, memory.nodes, period, self.budget, now)
            cycle.stale = {n: t for n, t in watch_rules.stale(memory.nodes, period, now).items()
                           if n not in cycle.due}
            contract_file = self.directory / WATCHED_CONTRACT
            paths.write_atomically(contract_file, watched_text)
            cycle_dir = self.directory / CYCLES / name
            if cycle.due:
                self._judge(cycle, contract_file, cycle_dir, accepted, memory)
            partition_of = {n: p for p, names in nodes.items() for n in names}
            cycle.actions = watch_rules.actions(
                cycle.outcomes, memory.nodes, seen, {p: len(n) for p, n in nodes.items()},
                self.max_drain)
            self._act(cycle)
            memory.nodes = watch_rules.remembered(memory.nodes, cycle.outcomes,
                                                  cycle.actions if cycle.acted else [], name,
                                                  now)
            memory.cycles.append(name)
            self._write(cycle, cycle_dir, partition_of)
            memory.save(self.directory)
            if self.store is not None:
                self.store.deliver(cycle.record, {n: asdict(kept)
                                                  for n, kept in memory.nodes.items()})
            return cycle

    def _memory(self, digest):
        if (self.directory / MEMORY).exists():
            memory = Memory.load(self.directory)
            if memory.system != self.system:
                raise WatchError(f'{self.directory} watches {memory.system}, not '
                                 f'{self.system}: give another --output')
            if memory.acceptance_manifest_sha256 != digest:
                self.say(f'the acceptance in {self.acceptance_dir} is another than the one '
                         'judged against so far: its figures are the accepted ones from now')
                memory.acceptance_manifest_sha256 = digest
                memory.acceptance = str(self.acceptance_dir)
            return memory
        return Memory(self.system, str(self.acceptance_dir), digest)

    def _candidates(self, nodes, seen, memory, accepted, cycle):
        """The SeenNodes a cycle may take; every other node into cycle.not_run with why."""
        returned = {n for n, kept in memory.nodes.items() if kept.baseline_cycle}
        has = {u.node for units in accepted.values.values() for u in units} | returned
        candidates = []
        for node in (n for names in nodes.values() for n in names):
            now, kept = seen.get(node), memory.nodes.get(node)
            if now is None:
                cycle.not_run[node] = ('Slurm no longer shows it (removed or renamed): not '
                                       'judged, nothing done to it')
            elif now.out_of_service:
                cycle.not_run[node] = (
                    f'drained by the watch: {now.reason}' if now.drained_by_the_suite else
                    f'out of service ({now.out_of_service}): the site\'s, left as it is')
            elif node not in has:
                cycle.not_run[node] = (
                    f'never accepted: {accepted.refused[node]}' if node in accepted.refused
                    else 'never accepted: no run of it in the acceptance (a node added or '
                         'renamed since): judged once an acceptance covers it')
            elif now.busy:
                cycle.not_run[node] = f'running a job ({now.state}): not taken this cycle'
            else:
                if kept and kept.drained:
                    # In service again: the site resumed a node the suite had drained.
                    kept.drained, kept.streak = '', 0
                candidates.append(now)
        return candidates

    def _accepted(self, entry, accepted, memory):
        """{Unit: accepted values} of `entry`: the acceptance's runs, but a node returned to
        service after a repair has those of the cycle that returned it."""
        values = dict(accepted.values.get(entry.id, {}))
        for node, kept in memory.nodes.items():
            if kept.baseline_cycle:
                _, _, records = directories.stored(self.directory / CYCLES / kept.baseline_cycle)
                values = {u: v for u, v in values.items() if u.node != node}
                values.update({u: v for u, v in judgement.unit_values(
                    entry, runs_of(records)[0]).items() if u.node == node})
        return values

    def _judge(self, cycle, contract_file, cycle_dir, accepted, memory):
        """The due nodes run (an Acceptance restricted to them) and judged: the contract's
        verdicts, drift, the outcomes."""
        self.say(f'cycle {cycle.name}: {len(cycle.due)} node(s) due: {", ".join(cycle.due)}')
        with directories.claimed(cycle_dir):
            run = Acceptance(self.system, contract_file, cycle_dir, reframe=self.reframe,
                             node_states=self.slurm, batch_nodes=self.batch_nodes,
                             mode=self.mode, say=self.say, nodes=set(cycle.due)).run()
        cycle.run = run
        cycle.assessed = run.assess()
        cycle.verdicts = cycle.assessed.verdicts
        for verdict in cycle.verdicts:
            before = self._accepted(verdict.entry, accepted, memory)
            cycle.drifts[verdict.entry.id] = {
                u.unit: self._drift(verdict.entry, u, before.get(u.unit, ()), memory)
                for u in verdict.units if u.values}
        partition_of = {n: p.name for p in run.state.partitions for n in p.nodes}
        cycle.outcomes = watch_rules.outcomes(
            cycle.verdicts, cycle.drifts, {n: partition_of.get(n, '') for n in cycle.due})

    @staticmethod
    def _drift(entry, judged, accepted, memory):
        """The Drift of a unit's runs this cycle (a UnitVerdict's), its runs of the cycles
        kept in memory pooled (hpcbench.acceptance.drift.pooled); the memory kept."""
        kept = memory.nodes.setdefault(judged.unit.node, NodeMemory())
        key = f'{entry.id} {judged.unit.key}'
        steady, worse = kept.steady.get(key, []), kept.worse.get(key, [])
        found = drift.judge_drift(entry, judged.unit,
                                  *drift.pooled(judged.values, accepted, steady, worse))
        if accepted:
            kept.steady[key], kept.worse[key] = drift.kept_after(
                entry, judged.values, found.accepted_median, steady, worse)
        return found

    def _act(self, cycle):
        """Each action's scontrol line printed, and run with `act`; one that fails is said
        and held, the others go on."""
        cycle.acted = self.act
        done = []
        for action in cycle.actions:
            if action.held:
                self.say(f'{action.node}: {action.kind} held: {action.held}')
                done.append(action)
                continue
            argv = (slurm_actions.drain if action.kind == 'drain' else
                    slurm_actions.comment)(action.node, action.reason)
            self.say(('' if self.act else '# to run (give --act): ') + slurm_actions.line(argv))
            if self.act:
                try:
                    self.slurm.act(argv)
                except AcceptanceError as err:
                    self.say(f'{action.node}: {err}')
                    action = watch_rules.Action(action.node, action.partition, action.kind,
                                                action.reason, f'scontrol failed: {err}')
            done.append(action)
        cycle.actions = done

    def _write(self, cycle, cycle_dir, partition_of):
        """The cycle's directory: what its verdicts stand on (an acceptance's record, where
        it ran), its record (cycle.json), the manifest and, with a key, the signature."""
        files = {}
        if cycle.run is not None:
            files = directories.record_files(cycle.run.contract, cycle.run.state,
                                             cycle.run.records, cycle.assessed)
        cycle.record = cycle_record(self.system, cycle, self.acceptance_dir, partition_of)
        files[CYCLE_RECORD] = json.dumps(cycle.record, indent=1) + '\n'
        cycle_dir.mkdir(parents=True, exist_ok=True)
        directories.write(cycle_dir, files, self.key)


def _unit(unit):
    return {'unit': str(unit), 'scope': unit.scope.name, 'partition': unit.partition,
            'node': unit.node}


def cycle_record(system, cycle, acceptance_dir, partition_of):
    """The watch's record of a cycle (cycle.json): plain data."""
    return {
        'format': 1, 'system': system, 'cycle': cycle.name, 'time': cycle.time,
        'acceptance': str(acceptance_dir), 'due': list(cycle.due),
        'not_run': {n: why for n, why in sorted(cycle.not_run.items())},
        'stale': {n: t for n, t in sorted(cycle.stale.items())},
        'nodes': {n: {'partition': o.partition, 'outcome': o.outcome, 'why': o.why,
                      'slow': list(o.slow),
                      'failing': [{'entry': f.entry.id, 'fault': f.entry.fault_code,
                                   'how': f.how, 'evidence': f.evidence,
                                   'at_once': f.at_once} for f in o.failing]}
                  for n, o in sorted(cycle.outcomes.items())},
        'drifts': [{'entry': entry_id, **_unit(d.unit), 'verdict': d.verdict,
                    'runs': list(d.runs), 'accepted': list(d.accepted), 'median': d.median,
                    'accepted_median': d.accepted_median, 'effect': d.effect,
                    'p_value': d.p_value, 'reason': d.reason}
                   for entry_id, found in sorted(cycle.drifts.items())
                   for d in sorted(found.values(), key=lambda d: str(d.unit))],
        'figures': [{'entry': v.entry.id, 'figure': v.entry.figure,
                     'unit_of_figure': v.entry.committed.unit, **_unit(u.unit),
                     'verdict': u.verdict, 'median': u.median, 'runs': list(u.values),
                     'committed': v.entry.committed.value, 'reason': u.reason}
                    for v in cycle.verdicts for u in v.units],
        'actions': [{'node': a.node, 'partition': a.partition or partition_of.get(a.node, ''),
                     'kind': a.kind, 'reason': a.reason, 'held': a.held,
                     'run': cycle.acted and not a.held} for a in cycle.actions],
    }
