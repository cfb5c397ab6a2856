"""The acceptance report, one page to sign off (acceptance.html, and acceptance.md beside
it): the system's verdict at a glance and the counts, every failing, invalid, not-run or
slow node, GPU or pair with its figure, the committed value and its source, the cause and
what to do; each node's GPU-pair matrix of each GPU-pair entry; every unit's verdict; the
nodes out of service; the contract. Built as report sections (hpcbench.report.sections)
and written by the report's own renderers; what is judged was judged in
hpcbench.acceptance.judgement."""
import datetime
from pathlib import Path

from hpcbench.acceptance import scopes
from hpcbench.acceptance.judgement import FAILING, VERDICTS, system_verdict
from hpcbench.core import device_keys
from hpcbench.report import html_page, markdown_summary
from hpcbench.report.sections import Report, Section, Table

MARKDOWN, HTML = 'acceptance.md', 'acceptance.html'
_CLASS = {'PASS': 'pass', 'WARN': '', 'FAIL': 'fail', 'INVALID': 'fail', 'NOT_RUN': 'fail'}


def _number(value):
    if isinstance(value, str):
        return value            # a text fact: a version as it reads
    return '-' if value is None else f'{value:.4g}'


def _rule(entry):
    name, value = entry.rule
    return {'every': 'every unit', 'minimum': 'the worst unit', 'median': 'the median unit',
            'fraction': f'{100 * value:g} % of the units' if name == 'fraction' else ''}[name]


def _what(entry):
    """`HpccCheck hpl`; a fact's `fact pcie_width` (`around HpccCheck` where it names a
    check)."""
    if entry.fact:
        return f'fact {entry.figure}' + (f' around {entry.check}' if entry.check else '')
    return f'{entry.check} {entry.figure}'


def _entries_table(verdicts):
    rows, classes = [], []
    for e in verdicts:
        counts = e.counts()
        rows.append((e.entry.id, _what(e.entry), str(e.entry.scope),
                     e.entry.committed.words(), e.entry.source.words(), _rule(e.entry),
                     *(str(counts[v]) for v in VERDICTS),
                     str(sum(bool(u.slow) for u in e.units)), e.verdict, e.reason))
        classes.append(_CLASS[e.verdict])
    return Table(('entry', 'figure', 'scope', 'committed', 'source', 'rule', *VERDICTS, 'slow',
                  'verdict', 'why'), tuple(rows), row_classes=tuple(classes), strong=12)


def _failing_table(verdicts):
    rows, classes = [], []
    for e in verdicts:
        for u in e.units:
            if u.verdict not in FAILING and not u.slow:
                continue
            cause = u.reason + (f'; slow beside its peers: {u.slow}' if u.slow else '') + (
                f'; the hardware said: {u.hardware}' if u.hardware else '')
            rows.append((str(u.unit), u.unit.partition, e.entry.id, u.verdict,
                         _number(u.median), e.entry.committed.words(), e.entry.source.words(),
                         cause, f'{e.entry.fault_code}: {e.entry.action}'))
            classes.append(_CLASS[u.verdict] if u.verdict in FAILING else '')
    return Table(('unit', 'partition', 'entry', 'verdict', 'median', 'committed', 'source',
                  'cause', 'what to do'), tuple(rows), row_classes=tuple(classes), strong=3)


def _pair_matrices(verdicts):
    """Each node's GPU-pair matrix of each GPU-pair entry: a pair's median and verdict."""
    tables = []
    for e in verdicts:
        if e.entry.scope != scopes.GPU_PAIR:
            continue
        by_node = {}
        for u in e.units:
            if isinstance(u.unit.key, device_keys.GpuPair) and not u.unit.key.other_node:
                by_node.setdefault(u.unit.key.node, {})[u.unit.key.gpus] = u
        for node, pairs in sorted(by_node.items()):
            gpus = sorted({g for pair in pairs for g in pair})
            rows = []
            for a in gpus:
                cells = []
                for b in gpus:
                    u = pairs.get((min(a, b), max(a, b))) if a != b else None
                    cells.append('X' if a == b else '' if u is None else
                                 f'{_number(u.median)} {u.verdict}' + (' slow' if u.slow
                                                                        else ''))
                rows.append((f'GPU {a}', *cells))
            tables.append(Table(('', *(f'GPU {b}' for b in gpus)), tuple(rows),
                                heading=f'{e.entry.id}: {node} ({e.entry.figure}, '
                                        f'{e.entry.committed.unit}; committed '
                                        f'{e.entry.committed.words()})'))
    return tuple(tables)


def _units_table(e):
    rows = tuple((str(u.unit), u.unit.partition, u.verdict, ', '.join(_number(v)
                                                                        for v in u.values),
                  _number(u.median), '-' if u.p_value is None else f'{u.p_value:.3g}',
                  u.reason, u.slow) for u in e.units)
    return Table(('unit', 'partition', 'verdict', 'runs', 'median', 'p', 'why', 'slow'), rows,
                 heading=f'{e.entry.id}: {_what(e.entry)} ({e.entry.scope})',
                 row_classes=tuple(_CLASS[u.verdict] for u in e.units), strong=2)


def _contract_table(the_contract):
    rows = []
    for entry in the_contract.entries:
        rows.append((entry.id, entry.check, entry.figure, ' '.join(
            f'{k}={v}' for k, v in sorted((entry.parameters or {}).items())) or '-',
            str(entry.scope), ', '.join(entry.partitions) or 'every one', entry.environ or 'any',
            entry.committed.words(), f'{100 * entry.committed.tolerance:g} %',
            f'median of {entry.median_of}', _rule(entry), entry.source.words(),
            f'{entry.fault_code}: {entry.action}'))
    return Table(('id', 'check', 'figure', 'parameters', 'scope', 'partitions', 'environ',
                  'committed', 'tolerance', 'statistic', 'rule', 'source', 'fault'),
                 tuple(rows))


def build(the_contract, verdicts, out_of_service, generated, where='', pair_blamed=None):
    """The acceptance's sections.Report. `pair_blamed`: {node: why} of the nodes the node
    pairs blame (their failing pairs' nodes paired again with nodes that passed)."""
    verdict = system_verdict(verdicts)
    units = [u for e in verdicts for u in e.units]
    counts = ', '.join(f'{sum(u.verdict == v for u in units)} {v}' for v in VERDICTS)
    failing = _failing_table(verdicts)
    sections = [
        Section('verdict', 'Verdict', (_entries_table(verdicts),),
                intro=(f'{len(verdicts)} contract entries over {len(units)} units '
                       f'({counts}; {sum(bool(u.slow) for u in units)} flagged slow beside '
                       'their peers). A unit that did not run counts as failed.'),
                lead=(f'The system\'s verdict against {where or "its contract"}', verdict)),
        Section('failing', 'Failing, not run, invalid or slow', (failing,) if failing.rows
                else (), empty='Every unit met its entry; none is slow beside its peers.'),
    ]
    matrices = _pair_matrices(verdicts)
    if matrices:
        sections.append(Section('gpu-pairs', 'GPU pairs, node by node', matrices,
                                intro='Each pair\'s median and verdict.'))
    if any(e.entry.scope.blamed_in_pairs for e in verdicts):
        sections.append(Section(
            'node-pairs', 'Node pairs: the nodes to blame', (Table(
                ('node', 'why'), tuple(sorted((pair_blamed or {}).items())),
                row_classes=tuple('fail' for _ in (pair_blamed or {}))),) if pair_blamed
            else (), intro='Pairs first disjoint; each node of a failing pair then paired '
                           'with a node that passed, so that the slow node is named and not '
                           'its partner.', empty='No node pair failed.'))
    sections += [
        Section('not-run', 'Nodes out of service', (Table(
            ('node', 'why'), tuple(sorted(out_of_service.items()))),) if out_of_service
            else (), empty='Every node was in service.'),
        Section('units', 'Every unit', tuple(_units_table(e) for e in verdicts)),
        Section('contract', 'The contract', (_contract_table(the_contract),),
                intro=the_contract.about),
    ]
    return Report(the_contract.system, generated, 'the verdicts of every node, GPU and pair '
                  'against what was committed', tuple(sections), kind='acceptance',
                  source='the sessions of this acceptance (sessions/)',
                  markdown_file=MARKDOWN, html_file=HTML)


def texts(report):
    """{acceptance.md: its text, acceptance.html: its text} of `report`."""
    return {MARKDOWN: markdown_summary.markdown(report), HTML: html_page.render_html(report)}


def files(the_contract, assessed, out_of_service, where=''):
    """The page's files ({name: text}) of an acceptance's hpcbench.acceptance.assessment.
    Assessment, generated now: what an Acceptance is given to render its page with
    (hpcbench.acceptance.use_case.Acceptance's `page`)."""
    generated = datetime.datetime.now().isoformat(timespec='seconds')
    return texts(build(the_contract, assessed.verdicts, out_of_service, generated, where,
                       assessed.blame))


def write(directory, report):
    """acceptance.md and acceptance.html of `report` into `directory`."""
    directory = Path(directory)
    for name, text in texts(report).items():
        (directory / name).write_text(text)
    return directory / HTML
