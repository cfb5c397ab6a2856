"""What a watch keeps and reads (hpcbench.acceptance.watch runs it): its directory (claimed
as the user's own and locked while a cycle runs), its memory between cycles (watch.json:
each node's NodeMemory), the accepted figures it judges against (an acceptance's
directory, read once its manifest holds), the watched entries as a contract of their own,
the nodes ReFrame's --distribute reaches, and each cycle's findings (Cycle) and record
(cycle.json)."""
import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from hpcbench.acceptance import contract as contracts, directory as directories, manifest
from hpcbench.acceptance.assessment import judge
from hpcbench.acceptance.state import AcceptanceError
from hpcbench.acceptance.watch_rules import NodeMemory
from hpcbench.core import paths, slurm_cluster

WATCH_DIR = 'watch'
MEMORY = 'watch.json'
CYCLES = 'cycles'
CYCLE_RECORD = 'cycle.json'
WATCHED_CONTRACT = 'watched-contract.yaml'
RETEST_CONTRACT = 'retest-contract.yaml'
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
    # {entry id: [cycle, scale]}: the last cycle whose units were scaled beside their peers
    # (hpcbench.acceptance.drift.peer_scale) and its scale; a re-test of a node or two, too
    # few to be their own peers, is scaled as it was.
    scales: dict = field(default_factory=dict)

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
    if all(e.fact for e in watched):
        raise WatchError(f'{contract_path}: only facts are watched, and a fact is read around '
                         'the jobs of a watched figure: watch a figure too')
    data = yaml.safe_load(Path(contract_path).read_text())
    runs = {e.id: e.watch.runs for e in watched}
    data['entries'] = [e for e in data['entries'] if e['id'] in runs]
    for entry in data['entries']:
        if runs[entry['id']] and 'fact' not in entry:
            # A cycle's runs of the entry: the watch's, where it names them.
            rules = entry.setdefault('run_rules', {})
            rules['repeats'] = max(rules.get('repeats', 0), runs[entry['id']])
    data['about'] = f'The watched entries of {contract_path} (hpcbench watch).'
    return contract, yaml.safe_dump(data, sort_keys=False)


# A re-test after a repair runs each watched entry this many times its statistic's runs:
# on the testbed's HPL (a fifth between runs of one node), nine runs beside nine accepted
# (three of the acceptance, six of steady cycles) caught 96 % of nodes still 20 % slow and
# kept 3.5 % of healthy ones drained (resampled from the 32-node acceptance's runs, as if
# exchangeable); the site marks such a node repaired again. A node whose baseline is its
# three accepted runs alone is kept more often where those were lucky (the testbed's
# healthy n2, 15 % below its accepted median at p = 0.005, 2026-12-06): the entry's
# min_effect must exceed that.
RETEST_RUNS = 3


def retest_contract(watched_text):
    """The watched entries' contract for a re-test after a repair: each entry's runs
    RETEST_RUNS times its statistic's (more runs than a cycle's)."""
    data = yaml.safe_load(watched_text)
    for entry in (e for e in data['entries'] if 'fact' not in e):     # a fact has no runs
        needed = (entry.get('statistic') or {}).get('median_of', contracts.DEFAULT_MEDIAN_OF)
        rules = entry.setdefault('run_rules', {})
        rules['repeats'] = min(contracts.MAX_RUNS, max(rules.get('repeats', 0),
                                                       RETEST_RUNS * needed))
    data['about'] = f'The watched entries, each run {RETEST_RUNS} x its statistic: a re-test.'
    return yaml.safe_dump(data, sort_keys=False)


def node_partitions(reframe, watched):
    """{partition: [nodes]} of the Slurm partitions ReFrame's --distribute runs the `watched`
    entries' checks on (those the entries name; every one where they name none); a node
    of two such partitions is the first's (one node, one judgement a cycle)."""
    found, taken = {}, set()
    for partition in reframe.partitions():
        checks = sorted({e.check for e in watched if not e.fact
                         and (not e.partitions or partition.name in e.partitions)})
        if not partition.distributes or not checks:
            continue
        nodes = {n for check in checks for n in reframe.distributed_nodes(partition.name,
                                                                           check)} - taken
        if nodes:
            found[partition.name] = sorted(nodes, key=slurm_cluster.natural_key)
            taken |= nodes
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
    kind: str = 'watch'                              # or 'return': re-tests after repairs
    returned: dict = field(default_factory=dict)     # {node: what its re-test gave}
    peers: list = field(default_factory=list)        # healthy nodes run beside a re-test


def _unit(unit):
    return {'unit': str(unit), 'scope': unit.scope.name, 'partition': unit.partition,
            'node': unit.node}


def cycle_record(system, cycle, acceptance_dir, partition_of):
    """The watch's record of a cycle (cycle.json): plain data."""
    return {
        'format': 1, 'system': system, 'cycle': cycle.name, 'kind': cycle.kind,
        'time': cycle.time, 'returned': dict(sorted(cycle.returned.items())),
        'acceptance': str(acceptance_dir), 'due': list(cycle.due), 'peers': list(cycle.peers),
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
                    'p_value': d.p_value, 'alpha': d.alpha, 'measured': list(d.measured),
                    'scale': d.scale, 'reason': d.reason}
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


WATCH_JUNIT = 'watch-junit.xml'


def junit_xml(record):
    """JUnit XML of a cycle (its record): a test case per node judged or left out; a node
    that failed (a clause, or drift) a failure with its evidence, one not run (drained,
    stale, never accepted, out of service) skipped with why, its action in its output."""
    import xml.etree.ElementTree as ET
    from hpcbench.acceptance.outputs import printable
    nodes = record['nodes']
    failed = [n for n, o in nodes.items() if o['outcome'] == 'FAIL']
    left = {**record['not_run'], **{n: 'stale: not judged within its period'
                                    for n in record['stale']}}
    suite = ET.Element('testsuite', name=f'hpcbench watch of {record["system"]}: cycle '
                       f'{record["cycle"]}', tests=str(len(nodes) + len(left)),
                       failures=str(len(failed)), errors='0', skipped=str(len(left)))
    acted = {a['node']: a for a in record['actions']}
    for node in sorted({*nodes, *left}, key=slurm_cluster.natural_key):
        case = ET.SubElement(suite, 'testcase', name=node,
                             classname=f'{record["system"]}.watch.'
                                       f'{nodes.get(node, {}).get("partition") or "-"}')
        if node in left:
            ET.SubElement(case, 'skipped', message=printable(left[node]))
            continue
        outcome = nodes[node]
        if outcome['outcome'] == 'FAIL':
            said = printable('; '.join(f'{f["entry"]} {f["how"]}: {f["evidence"]}'
                                       for f in outcome['failing']))
            ET.SubElement(case, 'failure', message=said[:500],
                          type='/'.join(sorted({f['fault'] for f in outcome['failing']}))
                          ).text = said
        action = acted.get(node)
        out = [outcome['outcome']] + [f'slow: {printable(s)}' for s in outcome['slow']]
        if action:
            out.append(f'action: {action["kind"]} '
                       + ('done' if action['run'] else f'not done: {action["held"] or "no --act"}'))
        ET.SubElement(case, 'system-out').text = '\n'.join(out)
    return ET.tostring(suite, encoding='unicode', xml_declaration=True) + '\n'


def verify(directory, allowed_signers=None, identity=None):
    """What does and does not hold of a cycle's directory (manifest.Verification): every
    file's sha256 and the signature, the contract's verdicts judged again from its sessions
    (hpcbench.acceptance.directory.verify, where the cycle ran anything), and each drift of
    cycle.json judged again from the runs and accepted runs it records, at its level, and
    its runs checked to be its recorded measured runs times the one scale recorded for its
    entry: a drift or effect that differs, a unit scaled apart, is named. The scale itself is
    not derived again here (it needs the acceptance's runs apart from the steady cycles'):
    what holds is that one factor, as recorded, scaled every unit of the entry."""
    from hpcbench.acceptance import drift
    from hpcbench.acceptance.scopes import Unit
    directory = Path(directory)
    ran = (directory / 'verdicts.json').is_file()
    checked = (directories.verify if ran else manifest.verify)(directory, allowed_signers,
                                                               identity)
    try:
        record = json.loads(paths.read_regular(directory / CYCLE_RECORD, 1 << 30,
                                               'a cycle\'s record'))
        entries = {e.id: e for e in contracts.load(directory / 'contract.yaml').entries} \
            if ran else {}
        judged = {}
        for d in record['drifts']:
            unit = Unit(d['scope'], d['partition'], d['unit'])
            judged.setdefault(d['entry'], {})[unit] = (d, drift.judge_drift(
                entries[d['entry']], unit, d['runs'], d['accepted'], d['alpha']))
        for entry_id, found in judged.items():
            scales = {w['scale'] for w, _ in found.values()}
            if len(scales) > 1:
                checked.problems.append(f'{CYCLE_RECORD}: {entry_id}: its units\' runs were '
                                        f'scaled by {len(scales)} different factors, not one')
            for unit, (written, again) in found.items():
                scale = written['scale']
                mine = [v * scale for v in written['measured']]
                if written['runs'][:len(mine)] != mine:
                    checked.problems.append(
                        f'{CYCLE_RECORD}: {entry_id} {unit.key}: its runs are not its measured '
                        f'runs x {scale:g}')
                if again.verdict != written['verdict'] or again.effect != written['effect']:
                    checked.problems.append(
                        f'{CYCLE_RECORD}: {entry_id} {unit.key}: {written["verdict"]} as '
                        f'written, {again.verdict} judged again from its runs')
    except (OSError, ValueError, KeyError, TypeError, contracts.ContractError) as err:
        checked.problems.append(f'{CYCLE_RECORD} cannot be judged again: '
                                f'{type(err).__name__}: {str(err)[:300]}')
    return checked
