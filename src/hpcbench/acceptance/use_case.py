"""`hpcbench accept SYSTEM`, the use case: an Acceptance runs what the contract names and
nothing else, through ReFrame as `make run` does, judges it, blames nodes, and writes and
signs what it stands on in one directory. What it asks of the outside comes through two
ports it is given (tests give fakes of the same methods): ReFrame
(hpcbench.rfm.reframe_port.ReFrame) and the controller's word on which nodes can run
(NodeStates: Slurm's).

- The system as ReFrame sees it (its partitions, each partition's GPUs, and on a Slurm
  partition the nodes ReFrame's --distribute would run on), the nodes out of service as the
  controller says (named, never run, NOT_RUN in the verdicts).
- Per-node entries on every node in service, in batches (hpcbench.acceptance.plan); node
  pairs disjoint first, then each node of a failing pair with a node that passed; the rest
  once. Each batch a ReFrame run whose session the results database keeps; its UUID goes
  into the acceptance's state (state.json) as soon as it is stored. Each unit runs once a
  pass, passes until each has its repeats: a unit's runs a pass apart.
- It resumes: run again with the same directory, it counts what the stored sessions already
  measured and runs only what is left (an interrupted batch's nodes again).
- The directory then holds what the verdicts are judged from (the contract, each session's
  record, the plan: partitions, nodes, pairs, nodes out of service and why), so that
  `hpcbench accept --verify DIR` judges them again and checks every file's sha256.
"""
import json
import re
import shutil
from pathlib import Path

from hpcbench.acceptance import assessment, contract as contracts, directory as directories
from hpcbench.acceptance import judgement, plan
from hpcbench.acceptance.state import CONTRACT_COPY, STATE, AcceptanceError, State
from hpcbench.core import paths, slurm_cluster
from hpcbench.machine import slurm_query
from hpcbench.results import results_db
from hpcbench.rfm import reframe_port, run_modes
from hpcbench.stack import testbed_system

# Where acceptances go by default: var/acceptance/<system>/.
ACCEPTANCE_DIR = 'acceptance'


class NodeStates:
    """The port to the controller's word on which nodes can run now: Slurm's, with the
    system's environment (the testbed's own controller)."""

    def __init__(self, system):
        self.system = system

    def out_of_service(self, nodes, in_reservation=False):
        """{node: why} of `nodes` the controller says cannot run now (drained, down); for a
        job in a reservation (`in_reservation`), a node reserved can."""
        if not nodes:
            return {}
        try:
            return slurm_query.nodes_out_of_service(
                sorted(nodes), testbed_system.slurm_environment(self.system),
                in_reservation=in_reservation)
        except slurm_cluster.SlurmDescriptionError as err:
            raise AcceptanceError(f'the controller does not say which nodes can run: {err}') \
                from None


def runs_done(cases, group):
    """runs_done(partition, unit) for plan.batches: the runs of `group`'s check measured
    so far on a node, a pair of nodes, or the partition."""
    counts = {}
    for case in cases:
        if not judgement.covers(group.check, dict(group.parameters), group.environ,
                                group.partitions, case):
            continue
        for unit in ({case.partition} if group.kind == 'once' else
                     {tuple(sorted(case.nodes))} if group.kind == 'node_pair' else
                     set(case.nodes[:1]) if len(case.nodes) == 1 else set()):
            counts[case.partition, unit] = counts.get((case.partition, unit), 0) + 1
    return lambda partition, unit: counts.get((partition, unit), 0)


class Acceptance:
    """One acceptance of `system` against the contract at `contract_path`, kept in
    `directory`: `run()` (or `dry_run()`), then `finish()` judges, blames, and writes the
    record, the page and the manifest (signed with a key where given), all or none.
    `reframe` and `node_states`: the ports (default: ReFrame's command on the system, Slurm's
    word); `page`: what renders the page's files from (contract, Assessment, nodes out of
    service, the contract's path) (hpcbench.report.acceptance_page.files), none without;
    `say`: where progress goes. `nodes`: the only nodes of its Slurm partitions it runs on
    (a watch cycle's: hpcbench.acceptance.watch; None: every one); `job_options`: options
    every job gets (-J: a reservation)."""

    def __init__(self, system, contract_path, directory, *, reframe=None, node_states=None,
                 batch_nodes=None, mode=None, page=None, say=print, nodes=None,
                 job_options=()):
        self.system, self.contract_path = system, Path(contract_path)
        self.directory = Path(directory)
        self.reframe = reframe or reframe_port.ReFrame(system)
        self.node_states = node_states or NodeStates(system)
        self.batch_nodes = batch_nodes or plan.DEFAULT_BATCH_NODES
        self.mode, self.page, self.say = mode, page, say
        self.nodes, self.job_options = nodes, tuple(job_options)
        self.contract = self.state = None
        self.records = {}

    @classmethod
    def stored(cls, directory, page=None, say=print):
        """The acceptance a directory holds, as it stands (to finish it again): its
        contract, state and records (hpcbench.acceptance.directory.stored)."""
        the_contract, state, records = directories.stored(directory)
        acceptance = cls(state.system, Path(directory) / CONTRACT_COPY, directory, page=page,
                         say=say)
        acceptance.contract, acceptance.state, acceptance.records = \
            the_contract, state, records
        return acceptance

    # --- planning ------------------------------------------------------------------------

    def _partitions(self):
        """The system's partitions as the acceptance plans them (plan.PartitionNodes)."""
        return [plan.PartitionNodes(p.name, (p.host,) if p.host else (), p.gpus_per_node,
                                    p.distributes) for p in self.reframe.partitions()]

    def _begin(self, dry_run):
        """The contract read, the groups planned and the state begun or resumed: groups."""
        directories.check_directory(self.directory, dry_run)
        partitions = self._partitions()
        self.contract = contracts.load(self.contract_path, self.system,
                                       {p.name: p.gpus_per_node > 0 for p in partitions})
        self.directory.mkdir(parents=True, exist_ok=True)
        digest = paths.file_sha256(self.contract_path)
        groups = plan.run_groups(self.contract, self.reframe.check_kinds(
            {e.check for e in self.contract.entries if e.parameters}))
        if (self.directory / STATE).exists() and not dry_run:
            self.state = State.load(self.directory)
            if self.state.contract_sha256 != digest or self.state.system != self.system:
                raise AcceptanceError(
                    f'{self.directory} holds an acceptance of {self.state.system} against '
                    f'another contract (sha256 {self.state.contract_sha256[:16]}...): give '
                    'another --output, or the contract it ran')
            self.say(f'resuming the acceptance in {self.directory}: '
                     f'{len(self.state.sessions)} session(s) stored so far')
        else:
            self.state = State(self.system, digest, [self._with_nodes(p, groups, dry_run)
                                                     for p in partitions])
        shutil.copyfile(self.contract_path, self.directory / CONTRACT_COPY)
        self._note_out_of_service()
        if any(g.kind == 'node_pair' for g in groups):
            for partition in self.state.partitions:
                if partition.name not in self.state.node_pairs:
                    in_service = [n for n in partition.nodes
                                  if n not in self.state.out_of_service]
                    self.state.node_pairs[partition.name] = [
                        list(p) for p in plan.disjoint_pairs(in_service)]
        if not dry_run:
            self.state.save(self.directory)
        return groups

    def _with_nodes(self, partition, groups, dry_run):
        """A Slurm partition with the nodes ReFrame's --distribute runs its checks on."""
        if not partition.distributes:
            return partition
        checks = sorted({g.check for g in groups
                         if not g.partitions or partition.name in g.partitions})
        nodes = sorted({n for check in checks
                        for n in self.reframe.distributed_nodes(partition.name, check,
                                                                self.job_options)},
                       key=slurm_cluster.natural_key)
        if self.nodes is not None:
            nodes = [n for n in nodes if n in self.nodes]
        return plan.PartitionNodes(partition.name, tuple(nodes), partition.gpus_per_node,
                                   bool(nodes) and not dry_run)

    def _note_out_of_service(self):
        """The nodes the controller says cannot run now into the state, as first seen."""
        nodes = {n for p in self.state.partitions if p.distributes for n in p.nodes}
        for name, why in self.node_states.out_of_service(nodes).items():
            self.state.out_of_service.setdefault(name, why)

    # --- running -------------------------------------------------------------------------

    def _stored_runs(self):
        """The measured runs of the state's sessions so far; their records kept."""
        self.records = {uuid: self.records.get(uuid) or self.reframe.stored_session(uuid)
                        for uuid in self.state.sessions}
        return assessment.runs_of(self.records)[0]

    def _run_passes(self, group, pairs):
        """Each unit of `group` once a pass until each has its repeats (a unit whose run
        fails is run once a pass too: `repeats` passes at most)."""
        for _ in range(group.repeats):
            left = plan.batches(group, self.state.partitions,
                                runs_done(self._stored_runs(), group),
                                self.state.out_of_service, pairs, self.batch_nodes)
            if not left:
                break
            for batch in left:
                self._run_batch(batch)

    def run(self):
        """Every batch the contract needs (resuming what the directory holds); then the
        contract, the state and the records are the acceptance's."""
        groups = self._begin(dry_run=False)
        for name, why in sorted(self.state.out_of_service.items()):
            self.say(f'{name}: out of service ({why}): not run, NOT_RUN in the verdicts')
        for group in groups:
            self._run_passes(group, self.state.node_pairs)
        self._stored_runs()
        # A node drained or down while the acceptance ran: named, where it has no figure.
        self._note_out_of_service()
        self.state.save(self.directory)
        if any(g.kind == 'node_pair' for g in groups):
            self._second_round(groups)
        return self

    def _second_round(self, groups):
        """The second round of node pairs, planned once the first has run (each node of a
        failing pair beside nodes that passed); run again, what is left of it."""
        if not self.state.second_pairs:
            for partition in self.state.partitions:
                first = assessment.first_round_outcomes(self.contract, self.state,
                                                        self.records, partition.name)
                again = plan.repairs(first, [n for n in partition.nodes
                                             if n not in self.state.out_of_service])
                if again:
                    self.state.second_pairs[partition.name] = [list(p) for p in again]
                    self.say(f'{partition.name}: {len(again)} node(s) of failing pairs paired '
                             'again with nodes that passed')
            self.state.save(self.directory)
        for group in groups:
            if group.kind == 'node_pair':
                self._run_passes(group, self.state.second_pairs)
        self._stored_runs()

    def dry_run(self):
        """Every job the contract's runs would start written, none run (nothing judged)."""
        groups = self._begin(dry_run=True)
        for merged in plan.dry_runs(groups, self.state.partitions):
            self._run_batch(merged, dry_run=True)

    def _options(self, batch, report, dry_run):
        # The mode's sizes, not its choice of checks (it leaves out the screens: the
        # contract names what runs); the contract's settings after them win.
        sizes = {m['name']: m['options'] for m in run_modes.MODES}[
            self.mode or run_modes.default_mode(self.system)]
        options = [*run_modes.execution_options(self.system), *sizes,
                   *batch.reframe_options(), *(f'-J{o}' for o in self.job_options),
                   '--report-file', str(report)]
        if dry_run:
            return [*options, '--dry-run']
        from hpcbench.stack.machine_systems import session_extras
        return [*options, '-r', '--session-extras', session_extras(self.system)]

    def _run_batch(self, batch, dry_run=False):
        """One ReFrame run of a batch; its stored session's UUID into the state at once."""
        reports = self.directory / 'reports'
        reports.mkdir(exist_ok=True)
        report = reports / f'run-{len(list(reports.glob("run-*.json"))) + 1}.json'
        self.say(f'{"dry run" if dry_run else "running"}: {batch.label}')
        try:
            done = self.reframe.run(batch.partition, self._options(batch, report, dry_run))
        except KeyboardInterrupt:
            # Interrupted (Ctrl-C, SIGTERM): ReFrame, sent SIGTERM, cancels its jobs and
            # stores the runs that finished; that session is the acceptance's, so that run
            # again it counts them and runs what is left (a round of pairs is one run).
            if not dry_run and report.exists():
                try:
                    self._stored(self.reframe.stored_run(report))
                except RuntimeError as err:
                    self.say(f'  the interrupted run kept nothing: {err}')
            raise
        summary = [line for line in results_db.without_colours(done.stdout).splitlines()
                   if re.match(r'\[\s*(PASSED|FAILED|SKIP|  PASSED)', line.strip())
                   or 'Ran ' in line]
        for line in summary[-3:]:
            self.say(f'  {line.strip()}')
        if dry_run:
            if done.returncode != 0 or not report.exists():
                raise AcceptanceError(f'the dry run of {batch.label} failed (exit '
                                      f'{done.returncode}): {done.stdout[-600:]}'
                                      f'{done.stderr[-400:]}')
            _every_group_has_a_job(batch, report)
            return
        if not report.exists():
            raise AcceptanceError(f'ReFrame stopped before running {batch.label} (exit '
                                  f'{done.returncode}): {(done.stderr or done.stdout)[-600:]}')
        self._stored(self.reframe.stored_run(report))

    def _stored(self, uuid):
        self.state.sessions.append(uuid)
        self.state.save(self.directory)

    # --- judging and writing -------------------------------------------------------------

    def assess(self):
        """The Assessment of what ran: the contract judged and the node pairs' blame."""
        return assessment.assess(self.contract, self.state, self.records)

    def finish(self, key=None):
        """The Assessment, and the directory's record written from it all or none: the
        sessions, verdicts, JUnit, drain list, the page (where the acceptance renders one),
        the manifest and, with `key` (an SSH private key), its signature."""
        assessed = self.assess()
        files = directories.record_files(self.contract, self.state, self.records, assessed)
        if self.page:
            files.update(self.page(self.contract, assessed, self.state.out_of_service,
                                   str(self.contract_path)))
        directories.write(self.directory, files, key)
        return assessed


def _every_group_has_a_job(dry_run, report):
    """AcceptanceError naming each group of a dry run that wrote no job: its entries select
    no test case of the suite on the partition (parameters the check does not take, an
    environment the partition lacks)."""
    written = [tc['display_name'].replace(' ', '') for run in json.loads(report.read_text())[
        'runs'] for tc in run['testcases'] if not tc['fixture'] and tc.get('job_stdout')]
    missing = [g for g in dry_run.groups
               if not any(re.search(g.name_filter(), name) for name in written)]
    if missing:
        raise AcceptanceError(
            '; '.join(f'entries {", ".join(g.entries)} select no test case of the suite on '
                      f'{dry_run.partition} ({g.label}): no job written' for g in missing))

