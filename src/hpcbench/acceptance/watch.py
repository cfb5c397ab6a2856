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

The accepted figures: the runs of each unit that passed the acceptance (its directory read
only once its manifest holds: figures edited after they were signed are refused), pooled
with its runs of its last steady cycles, or, for a node the watch returned to service after
a repair, the runs of its re-test (hpcbench.acceptance.drift). What the watch remembers
between cycles (each node's last judgement, failing streak, the suite's own drains) is
`watch.json` in its directory (var/watch/SYSTEM: hpcbench.acceptance.watch_record),
written whole at the end of each cycle. Metrics go to the site's store through a port it
is given (`store`: hpcbench.report.watch_metrics.MetricsStore)."""
import getpass
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from hpcbench.acceptance import directory as directories, drift, judgement, slurm_actions
from hpcbench.acceptance import watch_rules
from hpcbench.acceptance.assessment import runs_of
from hpcbench.acceptance.state import AcceptanceError
from hpcbench.acceptance.use_case import Acceptance
from hpcbench.acceptance.watch_record import (CYCLE_RECORD, CYCLES, DEFAULT_BUDGET, MEMORY,
                                              RETEST_CONTRACT, WATCH_JUNIT, WATCHED_CONTRACT,
                                              Cycle, Memory, junit_xml,
                                              WatchError, accepted_figures, claim,
                                              cycle_record, node_partitions,
                                              retest_contract, watched_contract)
from hpcbench.acceptance.watch_rules import NodeMemory
from hpcbench.core import paths, slurm_cluster
from hpcbench.rfm import reframe_port

# How long a reservation of nodes re-tested after their repair lasts, in minutes: the
# watched entries' runs on them; deleted as soon as they are judged.
RESERVATION_MINUTES = 240
# Healthy nodes a re-test runs beside (its reservation holds them too): enough to be its
# peers (hpcbench.acceptance.drift.MIN_PEERS + 1) without the re-tested nodes, whose runs
# are what is in question.
RETEST_PEERS = drift.MIN_PEERS + 1


class InReservation:
    """The controller's word for jobs inside the watch's reservation: its nodes, reserved,
    can run them."""

    def __init__(self, slurm):
        self.slurm = slurm

    def out_of_service(self, nodes):
        return self.slurm.out_of_service(nodes, in_reservation=True)


class Watch:
    """The watch of `system` against the contract at `contract_path`, judged against the
    acceptance in `acceptance_dir`, kept in `directory`. Ports: `reframe` (as the
    acceptance's), `slurm` (hpcbench.acceptance.slurm_actions.SlurmNodes), `store` (where
    metrics go: an object with deliver(record, {node: its memory as data}), or None).
    `act`: run the actions' scontrol lines (else they are printed); `clock`: the time now."""

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
            nodes = node_partitions(self.reframe, watched)
            contract_file = self.directory / WATCHED_CONTRACT
            paths.write_atomically(contract_file, watched_text)
            seen = self.slurm.seen(nodes)
            cycle = Cycle(name, now, [])
            cycle.returned = self._return_to_service(cycle, seen, memory, accepted,
                                                     watched_text)
            if cycle.returned:
                seen = self.slurm.seen(nodes)
            candidates = self._candidates(nodes, seen, memory, accepted, cycle)
            cycle.due = watch_rules.due(candidates, memory.nodes, period, self.budget, now)
            cycle.stale = {n: t for n, t in watch_rules.stale(memory.nodes, period, now).items()
                           if n not in cycle.due}
            cycle_dir = self.directory / CYCLES / name
            if cycle.due:
                self._judge(cycle, contract_file, cycle_dir, accepted, memory)
            partition_of = {n: p for p, names in nodes.items() for n in names}
            # The controller's word now, not at the cycle's start: a node the site drained
            # while it ran is the site's, and the suite leaves it as it is.
            if cycle.due:
                seen = self.slurm.seen(nodes)
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
                # Pooled beside the old accepted runs, a node's cycles are not beside these.
                for kept in memory.nodes.values():
                    kept.steady, kept.worse, kept.baseline_cycle = {}, {}, ''
            return memory
        return Memory(self.system, str(self.acceptance_dir), digest)

    def _candidates(self, nodes, seen, memory, accepted, cycle):
        """The SeenNodes a cycle may take; every other node into cycle.not_run with why."""
        has = self._accepted_nodes(accepted, memory)
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

    @staticmethod
    def _accepted_nodes(accepted, memory):
        """The nodes accepted: a figure of each passed and nothing of it failed (a node that
        passed DGEMM and failed HPL, or passed HPL and failed a fact, was never accepted),
        and those the watch returned to service after a repair."""
        returned = {n for n, kept in memory.nodes.items() if kept.baseline_cycle}
        return ({u.node for units in accepted.values.values() for u in units}
                - set(accepted.refused)) | returned

    def _retest_peers(self, seen, memory, accepted, repaired):
        """Up to RETEST_PEERS nodes to run beside a re-test, in its reservation: in service
        and idle, accepted, passing their last cycle, of the partitions of the `repaired`
        nodes, within the budget; their runs are the re-test's peers (its scale), judged
        for nothing. What the hour does to every node scales away as a cycle's peers do
        (the testbed's host ran a re-test's first six runs 15 % slow, and n17, repaired,
        stayed drained, 2026-12-05)."""
        partitions = {seen[n].partition for n in repaired}
        has = self._accepted_nodes(accepted, memory)
        fit = []
        for name in sorted(seen, key=slurm_cluster.natural_key):
            now, kept = seen[name], memory.nodes.get(name)
            if name in repaired or now.partition not in partitions or name not in has or \
                    now.out_of_service or now.busy or now.marked_repaired:
                continue
            if kept and (kept.drained or kept.streak or
                         (kept.history and kept.history[-1][1] != 'PASS')):
                continue
            fit.append(name)
        return fit[:max(0, min(RETEST_PEERS, self.budget - len(repaired)))]

    def _peers_free(self, peers, seen):
        """The `peers` still free in the reservation: a job that landed on one before it
        (the reservation ignores jobs) keeps it, and it is left out, never waited for."""
        if not peers:
            return []
        now = self.slurm.seen({p: [n for n in peers if seen[n].partition == p]
                               for p in {seen[n].partition for n in peers}})
        out = self.slurm.out_of_service(peers, in_reservation=True)
        return [n for n in peers if n in now and not now[n].busy and n not in out]

    def _accepted(self, entry, accepted, memory):
        """{Unit: accepted values} of `entry`: the acceptance's runs, but a node returned to
        service after a repair has those of the cycle that returned it."""
        values = dict(accepted.values.get(entry.id, {}))
        for node, kept in memory.nodes.items():
            if kept.baseline_cycle:
                # Its runs as that cycle judged them: scaled, as every cycle's are.
                record = json.loads(paths.read_regular(
                    self.directory / CYCLES / kept.baseline_cycle / CYCLE_RECORD, 1 << 28,
                    'a watch cycle\'s record'))
                values = {u: v for u, v in values.items() if u.node != node}
                _, _, records = directories.stored(self.directory / CYCLES / kept.baseline_cycle)
                scale = {d['unit']: d.get('scale', 1.0) for d in record['drifts']
                         if d['entry'] == entry.id and d['node'] == node}
                values.update({u: tuple(v * scale.get(str(u), 1.0) for v in runs)
                               for u, runs in judgement.unit_values(
                                   entry, runs_of(records)[0]).items() if u.node == node})
        return values

    def _judge(self, cycle, contract_file, cycle_dir, accepted, memory, job_options=(),
               node_states=None):
        """The due nodes run (an Acceptance restricted to them, and the cycle's peers where
        it has any) and judged: the contract's verdicts, drift, the outcomes."""
        self.say(f'cycle {cycle.name}: {len(cycle.due)} node(s) due: {", ".join(cycle.due)}'
                 + (f'; beside them: {", ".join(cycle.peers)}' if cycle.peers else ''))
        with directories.claimed(cycle_dir):
            run = Acceptance(self.system, contract_file, cycle_dir, reframe=self.reframe,
                             node_states=node_states or self.slurm,
                             batch_nodes=self.batch_nodes,
                             mode=self.mode, say=self.say,
                             nodes=set(cycle.due) | set(cycle.peers),
                             job_options=job_options).run()
        cycle.run = run
        cycle.assessed = run.assess()
        cycle.verdicts = cycle.assessed.verdicts
        for verdict in cycle.verdicts:
            if verdict.entry.fact:
                continue        # judged against its expectation alone: a fact drifts not
            before = self._accepted(verdict.entry, accepted, memory)
            ran = [u for u in verdict.units if u.values]
            judged = [u for u in ran if u.unit.node in cycle.due]
            # Bonferroni over the units judged at once (hpcbench.acceptance.drift).
            alpha = judgement.ALPHA / max(1, len(judged))
            peers = [u for u in ran if u.unit.node in cycle.peers] if cycle.peers else judged
            scale = drift.peer_scale({u.unit: u.values for u in peers}, before)
            if scale is not None:
                names = sorted({u.unit.node for u in peers}, key=slurm_cluster.natural_key)
                said = (f'its peers {", ".join(names)} beside it in its reservation'
                        if cycle.peers else 'its peers of the cycle')
                said = f'{said} ran at {100 / scale:.1f} % of their accepted medians (median)'
                if not cycle.peers:
                    memory.scales[verdict.entry.id] = [cycle.name, scale]
            else:
                # Too few to be their own peers (a re-test of a repaired node with no idle
                # node beside it): as the last cycle's, so that its runs stand beside its
                # accepted ones as every other cycle's do; as measured before any cycle.
                since, scale = memory.scales.get(verdict.entry.id, ['', 1.0])
                said = f'as cycle {since}\'s: too few units to be their own peers'
            cycle.drifts[verdict.entry.id] = {
                u.unit: self._drift(verdict.entry, u, before.get(u.unit, ()), memory, alpha,
                                    scale, said)
                for u in judged}
        partition_of = {n: p.name for p in run.state.partitions for n in p.nodes}
        cycle.outcomes = watch_rules.outcomes(
            cycle.verdicts, cycle.drifts, {n: partition_of.get(n, '') for n in cycle.due})

    @staticmethod
    def _drift(entry, judged, accepted, memory, alpha, scale=1.0, scaled_why=''):
        """The Drift of a unit's runs this cycle (a UnitVerdict's), scaled beside its peers
        (hpcbench.acceptance.drift.peer_scale), against its accepted runs, its runs of the
        cycles kept in memory pooled (hpcbench.acceptance.drift.judge_cycle); the memory
        kept, of scaled runs."""
        kept = memory.nodes.setdefault(judged.unit.node, NodeMemory())
        key = f'{entry.id} {judged.unit.key}'
        steady, worse = kept.steady.get(key, []), kept.worse.get(key, [])
        runs = drift.scaled(judged.values, scale)
        found = drift.judge_cycle(entry, judged.unit, runs, accepted, steady, worse, alpha)
        if accepted:
            kept.steady[key], kept.worse[key] = drift.kept_after(
                entry, list(runs), accepted, steady, worse)
        said = '' if scale == 1.0 else f'; its runs x {scale:.4g}: {scaled_why}'
        return replace(found, measured=tuple(judged.values), scale=scale,
                       reason=found.reason + said)

    def _return_to_service(self, cycle, seen, memory, accepted, watched_text):
        """The nodes the suite drained that the site marked repaired (their reason
        watch_rules.REPAIRED_PREFIX), re-tested inside a maintenance reservation (no job of
        anyone else lands first) and resumed where they pass every watched entry against
        their accepted figures (watch_rules.fit_to_return); drained again with the new
        evidence where not. Their own record: cycles/<cycle>-return. {node: what came of
        it}; without `act`, what would be done is said and nothing is."""
        repaired = sorted((n for n, s in seen.items() if s.marked_repaired
                           and memory.nodes.get(n) and memory.nodes[n].drained),
                          key=slurm_cluster.natural_key)[:self.budget]
        if not repaired:
            return {}
        if not self.act:
            for node in repaired:
                self.say(f'{node}: marked repaired: give --act to re-test it in a reservation '
                         'and resume it if it passes')
            return {n: 'marked repaired: re-tested with --act' for n in repaired}
        peers = self._retest_peers(seen, memory, accepted, repaired)
        retest = Cycle(f'{cycle.name}-return', cycle.time, repaired, kind='return')
        contract_file = self.directory / RETEST_CONTRACT
        paths.write_atomically(contract_file, retest_contract(watched_text))
        reservation = slurm_actions.reservation_name(retest.name)
        for argv in [slurm_actions.reserve(reservation, repaired + peers, getpass.getuser(),
                                           RESERVATION_MINUTES),
                     *(slurm_actions.resume(n) for n in repaired)]:
            self.say(slurm_actions.line(argv))
            self.slurm.act(argv)
        try:
            self.slurm.wait_in_service(repaired)
            retest.peers = self._peers_free(peers, seen)
            for node in repaired:
                # Its worse runs before the repair are no evidence of the node it is now;
                # its steady ones, before the fault, are of the node it should be again.
                memory.nodes[node].worse = {}
            self._judge(retest, contract_file, self.directory / CYCLES / retest.name,
                        accepted, memory, (f'--reservation={reservation}',),
                        InReservation(self.slurm))
            returned = self._after_retest(retest, memory)
        except BaseException:
            for node in repaired:
                self.slurm.act(slurm_actions.drain(node, f'{watch_rules.REASON_PREFIX} the '
                                                   're-test after its repair did not finish'))
            raise
        finally:
            self.slurm.act(slurm_actions.release(reservation))
        self._write(retest, self.directory / CYCLES / retest.name, {})
        memory.cycles.append(retest.name)
        return returned

    def _after_retest(self, retest, memory):
        """Each re-tested node resumed (left in service: it was resumed to run) or drained
        again with the new evidence; its memory kept. {node: what came of it}."""
        returned = {}
        for node in retest.due:
            outcome = retest.outcomes.get(node)
            units = [d for found in retest.drifts.values() for d in found.values()
                     if d.unit.node == node]
            fit, why = watch_rules.fit_to_return(outcome, units)
            kept = memory.nodes[node]
            if outcome is None or outcome.outcome == 'NOT_RUN':
                # Its re-test measured nothing: no evidence either way. Drained again, still
                # marked repaired, so that the next cycle re-tests it.
                reason = ' '.join(f'{watch_rules.REPAIRED_PREFIX} (kept by hpcbench watch: its '
                                  f're-test did not run: {why}; re-tested at the next cycle)'
                                  .split())[:watch_rules.MAX_REASON]
                self.slurm.act(slurm_actions.drain(node, reason))
                returned[node] = f'not re-tested: {why}'
                retest.actions.append(watch_rules.Action(node, '', 'drain', reason))
            elif fit:
                kept.drained, kept.streak, kept.baseline_cycle = '', 0, retest.name
                # Its re-test's runs are its accepted ones now, pooled with no cycle before.
                kept.steady, kept.worse = {}, {}
                kept.last_judged = retest.time
                returned[node] = f'resumed: {why}'
                retest.actions.append(watch_rules.Action(node, '', 'resume', why))
            else:
                reason = ' '.join(f'{watch_rules.REASON_PREFIX} still failing after its '
                                  f'repair: {why}'.split())[:watch_rules.MAX_REASON]
                self.slurm.act(slurm_actions.drain(node, reason))
                kept.drained = reason
                returned[node] = f'drained again: {why}'
                retest.actions.append(watch_rules.Action(node, '', 'drain', reason))
            self.say(f'{node}: {returned[node]}')
        retest.acted = True
        return returned

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
        files[WATCH_JUNIT] = junit_xml(cycle.record)
        cycle_dir.mkdir(parents=True, exist_ok=True)
        directories.write(cycle_dir, files, self.key)
