"""`hpcbench accept SYSTEM`: runs what the contract names and nothing else, through ReFrame
as `make run` does, and keeps what an acceptance stands on in one directory.

- The system as ReFrame sees it (its partitions, each partition's GPUs, and on a Slurm
  partition the nodes ReFrame's --distribute would run on), the nodes out of service as the
  controller says (named, never run, NOT_RUN in the verdicts).
- Per-node entries on every node in service, in batches (hpcbench.acceptance.plan); node
  pairs disjoint first, then each node of a failing pair with a node that passed; the rest
  once. Each batch a ReFrame run whose session the results database keeps; its UUID goes
  into the acceptance's state (state.json) as soon as it is stored.
- It resumes: run again with the same directory, it counts what the stored sessions already
  measured and runs only what is left (an interrupted batch's nodes again).
- The directory then holds what the verdicts are judged from (the contract, each session's
  record, the plan: partitions, nodes, pairs, nodes out of service and why), so that
  `hpcbench accept --verify DIR` judges them again and checks every file's sha256.
"""
import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcbench.acceptance import contract as contracts
from hpcbench.acceptance import judgement, plan
from hpcbench.core import child_processes, paths, slurm_cluster
from hpcbench.machine import description_schema, slurm_query
from hpcbench.results import measured, results_db
from hpcbench.rfm import run_modes
from hpcbench.stack import testbed_system

STATE = 'state.json'
CONTRACT_COPY = 'contract.yaml'
SESSIONS = 'sessions'
# Where acceptances go by default: var/acceptance/<system>/.
ACCEPTANCE_DIR = 'acceptance'
_NID = re.compile(r'%[.$]nid=([^\s%/]+)')


class AcceptanceError(RuntimeError):
    """An acceptance that cannot go on: one sentence saying why."""


@dataclass
class State:
    """What an acceptance has done so far (state.json in its directory)."""
    system: str
    contract_sha256: str
    partitions: list                            # plan.Partition, as seen when it began
    sessions: list = field(default_factory=list)        # stored sessions' UUIDs, in order
    out_of_service: dict = field(default_factory=dict)  # {node: why}, as first seen
    node_pairs: dict = field(default_factory=dict)      # {partition: [[a, b], ...]}
    second_pairs: dict = field(default_factory=dict)    # {partition: [[a, b], ...]}

    def save(self, directory):
        """Into state.json whole or not at all: written beside it, then renamed over it (a
        kill or a full disk mid-write left one cut mid-string, and no resuming)."""
        paths.write_atomically(Path(directory) / STATE,
                               json.dumps(asdict(self), indent=1, sort_keys=True) + '\n')

    @classmethod
    def load(cls, directory):
        """The state in `directory`; AcceptanceError in one line where it is none."""
        path = Path(directory) / STATE
        try:
            data = json_data(paths.read_regular(path, MAX_SESSION_BYTES, 'a state'),
                             str(path))
            data['partitions'] = [plan.Partition(str(p['name']), tuple(map(str, p['nodes'])),
                                                 int(p['gpus_per_node']),
                                                 bool(p['distributes']))
                                  for p in data['partitions']]
            state = cls(**data)
        except (ValueError, KeyError, TypeError) as err:
            raise AcceptanceError(f'{path} is no acceptance\'s state ({type(err).__name__}: '
                                  f'{str(err)[:200]}): give another --output') from None
        if not all(isinstance(u, str) and results_db.UUID.fullmatch(u)
                   for u in state.sessions):
            raise AcceptanceError(f'{path} is no acceptance\'s state: its sessions are not '
                                  'UUIDs: give another --output')
        return state


def reframe_command(system):
    """ReFrame on the system's site config and the suite's checks, as `make run` calls it."""
    return [str(Path(sys.executable).parent / 'reframe'), '-C',
            str(paths.SITE_CONFIGS_DIR / f'{system}.py'), '-c', str(paths.PROJECT_ROOT /
                                                                 'reframe-checks')]


def _reframe(system, *options, timeout=None):
    # In a process group of its own, ended by SIGTERM when the acceptance is interrupted
    # (hpcbench.core.child_processes), not killed as subprocess.run kills its child.
    return child_processes.run([*reframe_command(system), *options], capture_output=True,
                               text=True, errors='replace', timeout=timeout)


def configured_partitions(system):
    """The system's partitions as ReFrame configures them (its --show-config: scheduler,
    processor, devices, the description's extras)."""
    done = _reframe(system, '--system', system, '--show-config=systems/0/partitions',
                    timeout=300)
    try:
        return json.loads(done.stdout[done.stdout.index('['):])
    except ValueError:
        raise AcceptanceError(f'ReFrame does not show the partitions of {system} (exit '
                              f'{done.returncode}): {(done.stderr or done.stdout)[-400:]}') \
            from None


def system_partitions(system):
    """The system's partitions (plan.Partition): each one's GPUs per node (its `devices`);
    a Slurm partition's nodes are asked for later (slurm_nodes), a local one is this host."""
    partitions = []
    for p in configured_partitions(system):
        gpus = sum(d.get('num_devices', 1) for d in p.get('devices', [])
                   if d.get('type') == 'gpu')
        if p['scheduler'] in ('slurm', 'squeue'):
            partitions.append(plan.Partition(p['name'], (), gpus, True))
        else:
            partitions.append(plan.Partition(p['name'], (socket.gethostname(),), gpus, False))
    return partitions


_PARAMETER = re.compile(r'%([A-Za-z_]\w*)=')


def check_kinds(system, checks):
    """{check: (its parameters' names, its variables' names)} as ReFrame describes the
    checks on `system` (--describe: each variant's display name shows its parameters, its
    attributes are its variables); a check it does not describe is left out."""
    if not checks:
        return {}
    names = '|'.join(re.escape(c) for c in sorted(checks))
    done = _reframe(system, '--system', system, '-n', f'^({names})(?=%|$)', '--describe',
                    timeout=600)
    try:
        described = json.loads(done.stdout[done.stdout.index('['):])
    except ValueError:
        return {}
    kinds = {}
    for variant in described:
        check = variant.get('@class') or variant['display_name'].split()[0]
        parameters = set(_PARAMETER.findall(variant['display_name'].replace(' ', '')))
        found = kinds.setdefault(check, (set(), set()))
        found[0].update(parameters)
        found[1].update(k for k in variant if not k.startswith(('@', '_')))
    return {check: (frozenset(p), frozenset(v - p)) for check, (p, v) in kinds.items()}


def slurm_nodes(system, partition, check):
    """The nodes ReFrame's --distribute runs `check` on in `partition` (every state), in
    Slurm's order; () where its scheduler cannot be asked (a paper's system here)."""
    done = _reframe(system, '--system', f'{system}:{partition}', '-n',
                    f'^{re.escape(check)}(?=%|$)', '--distribute=all', '-l', timeout=300)
    nodes = sorted(set(_NID.findall(done.stdout)), key=slurm_cluster.natural_key) \
        if done.returncode == 0 else []
    return tuple(nodes)


def runs_done(groups_cases, group):
    """runs_done(partition, unit) for plan.batches: the runs of `group`'s check measured
    so far on a node, a pair of nodes, or the partition."""
    counts = {}
    for case in groups_cases:
        if not judgement.covers(group.check, dict(group.parameters), group.environ,
                                group.partitions, case):
            continue
        for unit in ({case.partition} if group.kind == 'once' else
                     {tuple(sorted(case.nodes))} if group.kind == 'node_pair' else
                     set(case.nodes[:1]) if len(case.nodes) == 1 else set()):
            counts[case.partition, unit] = counts.get((case.partition, unit), 0) + 1
    return lambda partition, unit: counts.get((partition, unit), 0)


def _sessions_runs(config, uuids):
    """(measured runs, failed runs, {uuid: the session's record}) of the stored sessions."""
    runs, failed, records = [], [], {}
    for uuid in uuids:
        data = results_db.session(config, uuid)
        data = data if isinstance(data, dict) else results_db.Store(config).decoded(uuid)
        records[uuid] = data
        runs += list(measured.measured_runs(data))
        failed += list(measured.failed_runs(data))
    return runs, failed, records


def judge(the_contract, state, records):
    """The EntryVerdicts of the contract on the sessions `records` ({uuid: record}) and
    what the state says of the system (its partitions, nodes out of service, pairs)."""
    runs, failed = [], []
    for data in records.values():
        runs += list(measured.measured_runs(data))
        failed += list(measured.failed_runs(data))
    pairs = {name: [tuple(p) for p in (state.node_pairs.get(name, []) +
                                       state.second_pairs.get(name, []))]
             for name in {*state.node_pairs, *state.second_pairs}}
    verdicts = []
    for entry in the_contract.entries:
        expected = plan.expected_units(entry, state.partitions, state.system, pairs)
        not_run = {unit: f'out of service: {state.out_of_service[unit.node]}'
                   for unit in expected if unit.node in state.out_of_service}
        for unit in expected:
            if unit.scope == 'node_pair' and set(unit.key) & set(state.out_of_service):
                down = sorted(set(unit.key) & set(state.out_of_service))
                not_run[unit] = f'out of service: {", ".join(down)}'
        verdicts.append(judgement.judge_entry(entry, runs, expected, not_run,
                                              judgement.invalid_units(entry, failed)))
    return verdicts


def _out_of_service(system, partitions):
    """{node: why} of the partitions' nodes the controller says cannot run now."""
    nodes = sorted({n for p in partitions if p.distributes for n in p.nodes})
    if not nodes:
        return {}
    try:
        return slurm_query.nodes_out_of_service(nodes, testbed_system.slurm_environment(system))
    except slurm_cluster.SlurmDescriptionError as err:
        raise AcceptanceError(f'the controller does not say which nodes can run: {err}') \
            from None


def _pair_passed(unit_verdict):
    return unit_verdict.verdict in ('PASS', 'WARN') and not unit_verdict.slow


def pair_outcomes(verdicts):
    """{Unit of a node pair: passed} over every node-pair entry: a pair passed where each
    entry's verdict of it is PASS or WARN and none flags it slow. A pair not run (a node
    out of service) is left out: no evidence against either node."""
    passed = {}
    for e in verdicts:
        if e.entry.scope != 'node_pair':
            continue
        for u in e.units:
            if u.verdict != 'NOT_RUN':
                passed[u.unit] = passed.get(u.unit, True) and _pair_passed(u)
    return passed


def _first_round_passed(the_contract, state, records, partition):
    """{(a, b): passed} of the first round's pairs on `partition` (pair_outcomes)."""
    first = {tuple(sorted(p)) for p in state.node_pairs.get(partition, [])}
    return {unit.key: ok for unit, ok in pair_outcomes(judge(the_contract, state,
                                                             records)).items()
            if unit.partition == partition and unit.key in first}


# The file that makes a directory an acceptance's of the suite, and its lock: held while an
# acceptance runs and writes there (one directory, one acceptance at a time).
MARKER = '.hpcbench-acceptance'


def check_directory(directory, dry_run=False):
    """AcceptanceError where `directory` is not one an acceptance may use: a directory of
    other files (a `contract.yaml` of the user's own was overwritten), or, for a dry run,
    one that holds an acceptance (a dry run of another contract replaced a signed one's
    contract and added runs). New, empty, or the suite's acceptance (its MARKER, or its
    state from before the marker) is one."""
    from hpcbench.acceptance import manifest
    directory = Path(directory)
    try:
        entries = sorted(os.listdir(directory))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise AcceptanceError(f'{directory} is a file: give --output a directory') from None
    ours = MARKER in entries or STATE in entries
    if entries and not ours:
        raise AcceptanceError(
            f'{directory} holds other files ({", ".join(entries[:5])}'
            f'{", ..." if len(entries) > 5 else ""}) and no acceptance of the suite (no '
            f'{MARKER}): give --output a new or empty directory')
    if dry_run and (STATE in entries or manifest.MANIFEST in entries):
        raise AcceptanceError(f'{directory} holds an acceptance: a dry run writes its jobs '
                              'beside another --output, never into one')


@contextlib.contextmanager
def claimed(directory, dry_run=False):
    """`directory` checked (check_directory), made and marked as an acceptance's, and
    locked while the block runs: AcceptanceError where another acceptance holds it."""
    directory = Path(directory)
    check_directory(directory, dry_run)
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / MARKER
    if marker.is_symlink():
        raise AcceptanceError(f'{marker} is a link: {directory} is not the suite\'s')
    with open(marker, 'a+') as fp:
        try:
            fcntl.flock(fp, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AcceptanceError(f'{directory} is in use by another acceptance (it holds '
                                  f'{MARKER}\'s lock): one directory, one acceptance at a '
                                  'time') from None
        fp.seek(0)
        if not fp.read():
            fp.write('An acceptance of hpcbench: its contract, state, sessions and '
                     'verdicts.\n')
            fp.flush()
        yield directory


def accept(system, contract_path, directory, *, dry_run=False, batch_nodes=None, say=print,
           mode=None):
    """Run the contract's acceptance of `system` into `directory` (resuming what is
    there); (contract, state, records) once every batch has run. A dry run writes every
    job and runs none (nothing is judged)."""
    directory = Path(directory)
    check_directory(directory, dry_run)
    partitions = system_partitions(system)
    the_contract = contracts.load(contract_path, system,
                                  {p.name: p.gpus_per_node > 0 for p in partitions})
    directory.mkdir(parents=True, exist_ok=True)
    digest = paths.file_sha256(contract_path)
    groups = plan.run_groups(the_contract, check_kinds(
        system, {e.check for e in the_contract.entries if e.parameters}))
    if (directory / STATE).exists() and not dry_run:
        state = State.load(directory)
        if state.contract_sha256 != digest or state.system != system:
            raise AcceptanceError(
                f'{directory} holds an acceptance of {state.system} against another contract '
                f'(sha256 {state.contract_sha256[:16]}...): give another --output, or the '
                'contract it ran')
        say(f'resuming the acceptance in {directory}: {len(state.sessions)} session(s) '
            'stored so far')
    else:
        listed = []
        for p in partitions:
            if p.distributes:
                checks = sorted({g.check for g in groups
                                 if not g.partitions or p.name in g.partitions})
                nodes = sorted({n for check in checks for n in slurm_nodes(system, p.name,
                                                                          check)},
                               key=slurm_cluster.natural_key)
                p = plan.Partition(p.name, tuple(nodes), p.gpus_per_node,
                                   bool(nodes) and not dry_run)
            listed.append(p)
        state = State(system, digest, listed)
    shutil.copyfile(contract_path, directory / CONTRACT_COPY)
    config = results_db.site_config(system)
    for name, why in _out_of_service(system, state.partitions).items():
        state.out_of_service.setdefault(name, why)
    for partition in state.partitions:
        if partition.name not in state.node_pairs and any(g.kind == 'node_pair'
                                                          for g in groups):
            in_service = [n for n in partition.nodes if n not in state.out_of_service]
            state.node_pairs[partition.name] = [list(p) for p in
                                                plan.disjoint_pairs(in_service)]
    if not dry_run:
        state.save(directory)
    for name, why in sorted(state.out_of_service.items()):
        say(f'{name}: out of service ({why}): not run, NOT_RUN in the verdicts')

    def run_passes(group, pairs):
        # Each unit once a pass, until each has the group's repeats (a unit whose run fails
        # is run once a pass too: `repeats` passes at most).
        for _ in range(group.repeats):
            runs, _, _ = _sessions_runs(config, state.sessions)
            left = plan.batches(group, state.partitions, runs_done(runs, group),
                                state.out_of_service, pairs,
                                batch_nodes or plan.DEFAULT_BATCH_NODES)
            if not left:
                break
            for batch in left:
                _run_batch(system, batch, directory, state, config, dry_run, say, mode)

    def run_batches(rounds):
        for group in groups:
            if group.kind in rounds:
                run_passes(group, state.node_pairs)

    if dry_run:
        for merged in plan.dry_runs(groups, state.partitions):
            _run_batch(system, merged, directory, state, config, dry_run, say, mode)
        return the_contract, state, {}
    run_batches(('per_node', 'once', 'node_pair'))
    _, _, records = _sessions_runs(config, state.sessions)
    # A node drained or down while the acceptance ran: named, where it has no figure.
    for name, why in _out_of_service(system, state.partitions).items():
        state.out_of_service.setdefault(name, why)
    state.save(directory)
    if any(g.kind == 'node_pair' for g in groups):
        # The second round, planned once the first has run; run again, what is left of it.
        if not state.second_pairs:
            for partition in state.partitions:
                first = _first_round_passed(the_contract, state, records, partition.name)
                again = plan.repairs(first, [n for n in partition.nodes
                                             if n not in state.out_of_service])
                if again:
                    state.second_pairs[partition.name] = [list(p) for p in again]
                    say(f'{partition.name}: {len(again)} node(s) of failing pairs paired '
                        'again with nodes that passed')
            state.save(directory)
        for group in groups:
            if group.kind == 'node_pair':
                run_passes(group, state.second_pairs)
        _, _, records = _sessions_runs(config, state.sessions)
    return the_contract, state, records


def _run_batch(system, batch, directory, state, config, dry_run, say, mode):
    """One ReFrame run of a batch; its stored session's UUID into the state at once."""
    from hpcbench.stack.machine_systems import session_extras
    reports = directory / 'reports'
    reports.mkdir(exist_ok=True)
    report = reports / f'run-{len(list(reports.glob("run-*.json"))) + 1}.json'
    # The mode's sizes, not its choice of checks (it leaves out the screens: the contract
    # names what runs); the contract's settings after them win.
    sizes = {m['name']: m['options'] for m in run_modes.MODES}[
        mode or run_modes.default_mode(system)]
    options = [*run_modes.execution_options(system), *sizes,
               *batch.reframe_options(system), '--report-file', str(report)]
    if dry_run:
        options.append('--dry-run')
    else:
        options += ['-r', '--session-extras', session_extras(system)]
    say(f'{"dry run" if dry_run else "running"}: {batch.label}')
    try:
        done = _reframe(system, *options)
    except KeyboardInterrupt:
        # Interrupted (Ctrl-C, SIGTERM): ReFrame, sent SIGTERM, cancels its jobs and stores
        # the runs that finished; that session is the acceptance's, so that run again it
        # counts them and runs what is left (a round of pairs is one ReFrame run).
        if not dry_run and report.exists():
            try:
                state.sessions.append(results_db.this_run(config, report))
                state.save(directory)
            except RuntimeError as err:
                say(f'  the interrupted run kept nothing: {err}')
        raise
    summary = [line for line in results_db.without_colours(done.stdout).splitlines()
               if re.match(r'\[\s*(PASSED|FAILED|SKIP|  PASSED)', line.strip())
               or 'Ran ' in line]
    for line in summary[-3:]:
        say(f'  {line.strip()}')
    if dry_run:
        if done.returncode != 0 or not report.exists():
            raise AcceptanceError(f'the dry run of {batch.label} failed (exit '
                                  f'{done.returncode}): {done.stdout[-600:]}{done.stderr[-400:]}')
        _every_group_has_a_job(batch, report)
        return None
    if not report.exists():
        raise AcceptanceError(f'ReFrame stopped before running {batch.label} (exit '
                              f'{done.returncode}): {(done.stderr or done.stdout)[-600:]}')
    uuid = results_db.this_run(config, report)
    state.sessions.append(uuid)
    state.save(directory)
    return uuid


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




VERDICTS_JSON = 'verdicts.json'
JUNIT_XML = 'junit.xml'
DRAIN_LIST = 'drain-list.sh'


def pair_blame(verdicts, state):
    """{node: why} of the nodes to blame for failing node pairs: of the first round's
    disjoint pairs, a node whose pair failed and whose second pair, beside a node that
    passed, failed again (plan.blamed); where no second round ran, both of a failing pair.
    A pair not run is evidence against neither node, and a node out of service is named
    as such, not blamed."""
    second = {tuple(sorted(p)) for pairs in state.second_pairs.values() for p in pairs}
    rounds = ({}, {})
    for unit, ok in pair_outcomes(verdicts).items():
        rounds[unit.key in second][unit.key] = ok
    entries = {}
    for e in verdicts:
        for u in e.units:
            if e.entry.scope == 'node_pair' and u.verdict != 'NOT_RUN' and not \
                    _pair_passed(u):
                entries.setdefault(u.unit.key, set()).add(e.entry.fault_code)
    how = 'failed again beside a node that passed' if rounds[1] else 'of a failing pair'
    blame = {}
    for node in (n for n in plan.blamed(*rounds) if n not in state.out_of_service):
        codes = sorted({code for pair, found in entries.items() if node in pair
                        for code in found})
        blame[node] = f'{"/".join(codes)} (node pairs: {how})'
    return blame


def output_files(the_contract, state, records):
    """(EntryVerdicts, {node: why the node pairs blame it}, {path in the directory: text})
    of what the verdicts stand on and say:
    each session's record, the description and the Spack lock of the system, the project's
    commit, and the verdicts as JSON (checked against its schema), JUnit XML and a drain
    list. Computed whole before anything is written (write_outputs): a node name Slurm
    refuses stopped an acceptance after half its outputs were written."""
    from hpcbench.acceptance import outputs
    from hpcbench.stack import provenance
    files = {f'{SESSIONS}/{uuid}.json': json.dumps(data, indent=1, sort_keys=True)
             for uuid, data in records.items()}
    for source, name in ((paths.SITE_CONFIGS_DIR / f'{state.system}.yaml', 'description.yaml'),
                         (paths.SPACK_ENVS_DIR / state.system / 'spack.lock', 'spack.lock'),
                         (paths.SPACK_ENVS_DIR / state.system / 'spack.yaml', 'spack.yaml')):
        if source.is_file():
            files[name] = source.read_bytes()
    files['project-commit.txt'] = f'{provenance.project_commit()}\n'
    verdicts = judge(the_contract, state, records)
    document = outputs.as_json(state.system, verdicts)
    # What --verify and a site's tools read back: checked against its schema first.
    description_schema.check(json.loads(json.dumps(document)), outputs.JSON_SCHEMA)
    files[VERDICTS_JSON] = json.dumps(document, indent=1) + '\n'
    files[JUNIT_XML] = outputs.junit_xml(state.system, verdicts)
    blame = pair_blame(verdicts, state)
    lines = outputs.drain_lines(verdicts, blame)
    files[DRAIN_LIST] = ('# The nodes this acceptance blames, for the site to drain (the suite '
                         'drains none):\n' + ''.join(f'{line}\n' for line in lines))
    return verdicts, blame, files


def write_outputs(directory, files, key=None):
    """Write `files` ({path in `directory`: text or bytes}), then the manifest over the
    directory and, with `key`, its signature: all or none. The old manifest and signature go
    first (they sign what is about to change); each file is written whole
    (paths.write_atomically); where one cannot be written (a full disk), those written now
    are removed and OSError names the file."""
    from hpcbench.acceptance import manifest
    directory = Path(directory)
    for stale in (manifest.SIGNATURE, manifest.MANIFEST):
        (directory / stale).unlink(missing_ok=True)
    written = []
    try:
        for name, data in files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            existed = path.exists()
            paths.write_atomically(path, data)
            if not existed:
                written.append(path)
        manifest.write(directory)
        if key:
            manifest.sign(directory, key)
    except (OSError, manifest.ManifestError):
        for path in written + [directory / manifest.MANIFEST, directory / manifest.SIGNATURE]:
            path.unlink(missing_ok=True)
        raise


def write_records(directory, the_contract, state, records):
    """output_files written into the acceptance's directory (no page, no manifest); the
    EntryVerdicts."""
    verdicts, _, files = output_files(the_contract, state, records)
    for name, data in files.items():
        (Path(directory) / name).parent.mkdir(parents=True, exist_ok=True)
        paths.write_atomically(Path(directory) / name, data)
    return verdicts


# The most one stored session's record holds (the 32-node testbed's sessions are 1 to 6 MB).
MAX_SESSION_BYTES = 1 << 30


def stored(directory):
    """(contract, state, records) an acceptance's directory holds: the records of the
    state's sessions, in its order (the order they ran, which a unit's runs keep); each a
    regular file (a FIFO or a device is never read: UnreadableFileError), checked as a
    record of ReFrame's (hpcbench.results.results_db.checked_record)."""
    directory = Path(directory)
    state = State.load(directory)
    the_contract = contracts.load(directory / CONTRACT_COPY, state.system)
    records = {}
    for uuid in state.sessions:
        name = f'{SESSIONS}/{uuid}.json'
        text = paths.read_regular(directory / name, MAX_SESSION_BYTES, 'a session record')
        records[uuid] = results_db.checked_record(json_data(text, name), name)
    return the_contract, state, records


def verify(directory, allowed_signers=None, identity=None):
    """What does and does not hold of an acceptance's directory (manifest.Verification: the
    problems, one line each, [] where it holds; what was checked of its signature): every
    file's sha256 and the signature (hpcbench.acceptance.manifest.verify), and the verdicts
    judged again from the contract, the plan and the session records it holds."""
    from hpcbench.acceptance import manifest, outputs
    from hpcbench.stack import provenance
    directory = Path(directory)
    checked = manifest.verify(directory, allowed_signers, identity)
    problems = checked.problems
    try:
        the_contract, state, records = stored(directory)
        again = outputs.as_json(state.system, judge(the_contract, state, records))
        written = json_data(paths.read_regular(directory / VERDICTS_JSON, MAX_SESSION_BYTES,
                                               'a verdicts document'), VERDICTS_JSON)
        # Compared with what is judged again, whatever fields another commit wrote: a
        # mapping of entries, each a mapping, is what a comparison needs.
        if not (isinstance(written, dict) and isinstance(written.get('entries'), list)
                and all(isinstance(e, dict) for e in written['entries'])):
            raise ValueError(f'{VERDICTS_JSON}: no mapping of entries (its schema: '
                             'hpcbench.acceptance.outputs.JSON_SCHEMA)')
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, RecursionError,
            contracts.ContractError) as err:
        problems.append(f'the verdicts cannot be judged again from {directory}: '
                        f'{type(err).__name__}: {str(err)[:400]}')
        return checked
    if again != written:
        differ = [e['id'] for e, w in zip(again['entries'], written['entries']) if e != w]
        differ += [str(w.get('id'))[:80] for w in written['entries'][len(again['entries']):]]
        # Judged again by this checkout's rules: a directory another commit wrote may differ
        # because the rules did (a field added, a test changed), which says so.
        commit = provenance.project_commit()
        wrote = (directory / 'project-commit.txt').read_text().strip() \
            if (directory / 'project-commit.txt').is_file() else ''
        rules = (f'; judged by the rules of project commit {commit[:12] or "unknown"}, '
                 f'written by {wrote[:12] or "an unknown one"}: the rules may have changed '
                 'since' if wrote.split('-')[0] != commit.split('-')[0] else '')
        problems.append(f'{VERDICTS_JSON}: not what its contract, plan and sessions give '
                        f'(entries {", ".join(differ) or "listed differently"}; system '
                        f'{again["verdict"]}, written {written.get("verdict")}){rules}')
    return checked


def json_data(data, where):
    """The JSON document of `data` (bytes or text) from `where`; ValueError in one line
    where it is none (cut mid-string, nested past Python's stack)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f'{where}: nested too deep to be a record of the suite\'s') from None
    except ValueError as err:
        raise ValueError(f'{where}: not JSON ({err})') from None
