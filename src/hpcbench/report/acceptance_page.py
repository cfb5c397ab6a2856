"""The acceptance report, one page to sign off (acceptance.html, and acceptance.md beside
it, the same content): first the system's verdict as a banner with its counts and one
sentence naming what failed, then every unit in one picture (hpcbench.report.
acceptance_grid), the failing, invalid, not-run and slow nodes, GPUs and pairs worst first
with their figure, the committed value, the cause and what to do; then each entry's
verdict, the sources cited once (numbered), each node's GPU-pair matrix, the node pairs'
blame, the nodes out of service, every unit, and the contract as the site wrote it. Built as
report sections (hpcbench.report.sections) and written by the report's own renderers; what
is judged was judged in hpcbench.acceptance.judgement."""
import datetime
import math

from hpcbench.acceptance import drift, scopes
from hpcbench.acceptance.judgement import FAILING, VERDICTS, system_verdict
from hpcbench.core import device_keys, paths, slurm_cluster
from hpcbench.report import acceptance_grid, html_page, markdown_summary
from hpcbench.report.sections import Report, Section, Table

MARKDOWN, HTML = 'acceptance.md', 'acceptance.html'
_CLASS = {'PASS': 'pass', 'WARN': '', 'FAIL': 'fail', 'INVALID': 'fail', 'NOT_RUN': 'fail'}
# Nodes and figures the verdict's sentence names before it counts the rest.
NAMED_IN_SENTENCE = 6
FIGURES_IN_SENTENCE = 3
# The largest contract text the page shows as written.
MAX_CONTRACT_TEXT = 1 << 20


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


def _cited(source):
    """What a source's number stands for: its kind and what it cites (a document, a
    datasheet, baseline sessions); the clause and figure an entry takes of it are the
    entry's own."""
    return source.kind, source.cite


def sources(verdicts, entries=()):
    """{(kind, cite): its number}, numbered in the order the entries judged (then those of
    the contract, `entries`) cite them: each source (a procurement document, a datasheet,
    a paper, baseline sessions) cited once."""
    numbers = {}
    for entry in [e.entry for e in verdicts] + list(entries):
        numbers.setdefault(_cited(entry.source), len(numbers) + 1)
    return numbers


def _source_cell(source, numbers):
    """`[2]` with the clause and the figure the entry takes of it (`[2] B.3.1`, `[1] the
    median of 12 value(s); 0.5 x 28.83`)."""
    taken = [source.clause] if source.clause else []
    if source.figure is not None:
        taken.append(f'{source.factor:g} x {source.figure:.4g}' if source.factor is not None
                     else f'{source.figure:.4g}')
    return f'[{numbers[_cited(source)]}]' + (f' {"; ".join(taken)}' if taken else '')


def _sources_table(numbers):
    return Table(('', 'kind', 'cite'), tuple(
        (f'[{n}]', kind, cite) for (kind, cite), n in numbers.items()))


def _entry_class(e):
    """An entry's row: failed where a unit failed or was invalid; grey where it failed only
    for units that did not run; green where it passed."""
    counts = e.counts()
    if counts['FAIL'] or counts['INVALID']:
        return 'fail'
    return {'NOT_RUN': 'notrun', 'FAIL': 'notrun', 'PASS': 'pass'}.get(e.verdict, '')


def _entries_table(verdicts, numbers):
    rows = []
    for e in verdicts:
        counts = e.counts()
        rows.append((e.entry.id, _what(e.entry), str(e.entry.scope),
                     e.entry.committed.words(), _source_cell(e.entry.source, numbers), _rule(e.entry),
                     ', '.join(f'{counts[v]} {v}' for v in VERDICTS if counts[v]) or 'no unit',
                     str(sum(bool(u.slow) for u in e.units)), e.verdict, e.reason))
    return Table(('entry', 'figure', 'scope', 'committed', 'source', 'rule', 'units', 'slow',
                  'verdict', 'why'), tuple(rows),
                 row_classes=tuple(_entry_class(e) for e in verdicts), strong=8)


def _worse_by(entry, median):
    """How far a median falls short of its committed value, as a fraction of it (larger
    worse; a unit without a median worst; a text fact 0)."""
    value = entry.committed.value
    if median is None:
        return math.inf
    if isinstance(value, str) or isinstance(median, str):
        return 0.0
    return drift.worsening(median, value, entry.committed.direction)


def _worst_first(verdicts, out_of_service):
    """(EntryVerdict, UnitVerdict, state) of every failing, invalid, not-run or slow unit,
    worst first: FAIL, INVALID, NOT_RUN, out of service, then slow; within each the one
    furthest from its committed value first."""
    found = [(e, u, acceptance_grid.state(u, out_of_service)) for e in verdicts
             for u in e.units if u.verdict in FAILING or u.slow]
    return sorted(found, key=lambda f: (
        acceptance_grid.STATES.index(f[2]) if f[1].verdict in FAILING else len(
            acceptance_grid.STATES), -_worse_by(f[0].entry, f[1].median),
        slurm_cluster.natural_key(acceptance_grid.label(f[1].unit)), f[0].entry.id))


def _failing_table(verdicts, out_of_service, numbers):
    """The failing, invalid, not-run and slow units worst first; a node out of service is
    one row (every unit of it that did not run: its own, its GPUs'), not one per entry."""
    rows, classes, outs = [], [], {}
    for e, u, state in _worst_first(verdicts, out_of_service):
        if state == 'OUT' and u.unit.node in out_of_service:
            # Its node's units of every scope (the node's, its GPUs') in the node's row.
            outs.setdefault(u.unit.node, []).append((e, u))
            if len(outs[u.unit.node]) > 1:
                continue
            rows.append(u.unit.node)       # filled in below, once its entries are counted
            classes.append('notrun')
            continue
        cause = u.reason + (f'; slow beside its peers: {u.slow}' if u.slow else '') + (
            f'; the hardware said: {u.hardware}' if u.hardware else '')
        rows.append((str(u.unit), u.unit.partition, e.entry.id, u.verdict,
                     _number(u.median), e.entry.committed.words(),
                     _source_cell(e.entry.source, numbers), cause,
                     f'{e.entry.fault_code}: {e.entry.action}'))
        classes.append(_CLASS[u.verdict] if u.verdict in FAILING else '')
    for i, row in enumerate(rows):
        if isinstance(row, str):
            entries = {e.entry.id for e, _ in outs[row]}
            count = f'{len(entries)} entr{"y" if len(entries) == 1 else "ies"}' + (
                f', {len(outs[row])} units' if len(outs[row]) > len(entries) else '')
            rows[i] = (f'node {row}', ', '.join(sorted({u.unit.partition
                                                        for _, u in outs[row]})),
                count, 'NOT_RUN', '-',
                '-', '-', f'out of service: {out_of_service[row]}',
                'return it to service and run the acceptance again: it resumes and runs '
                'only what is missing')
    return Table(('unit', 'partition', 'entry', 'verdict', 'median', 'committed', 'source',
                  'cause', 'what to do'), tuple(rows), row_classes=tuple(classes), strong=3)


def _figures_words(figures):
    figures = list(dict.fromkeys(figures))
    if len(figures) > FIGURES_IN_SENTENCE:
        figures = figures[:FIGURES_IN_SENTENCE] + [
            f'{len(figures) - FIGURES_IN_SENTENCE} more']
    return _and(figures)


def _and(words):
    words = list(words)
    return words[0] if len(words) == 1 else f'{", ".join(words[:-1])} and {words[-1]}'


def sentence(verdicts, out_of_service, blame=None):
    """What failed, in one sentence: each node (or unit without one) with a problem, worst
    first, the figures it fails, is invalid in, did not run and is slow in, and whether the
    node pairs blame it; the nodes out of service; NAMED_IN_SENTENCE of them, the rest
    counted. 'Every one of N units met its entry.' where nothing failed."""
    blame = blame or {}
    said, order = {}, []
    for e, u, state in _worst_first(verdicts, out_of_service):
        if state == 'OUT' or (e.entry.scope.blamed_in_pairs and any(
                n in blame for n in u.unit.nodes)):
            continue            # said as out of service, or as blamed by the pairs
        who = u.unit.node or str(u.unit)
        if who not in said:
            said[who] = {'fails': [], 'is invalid in': [], 'did not run': [],
                         'is slow in': []}
            order.append(who)
        how = ('fails' if u.verdict == 'FAIL' else 'is invalid in' if u.verdict == 'INVALID'
               else 'did not run' if u.verdict == 'NOT_RUN' else 'is slow in')
        said[who][how].append(e.entry.figure)
    for node in sorted(blame, key=slurm_cluster.natural_key):
        if node not in said:
            said[node] = {}
            order.append(node)
    parts = []
    for who in order[:NAMED_IN_SENTENCE]:
        doing = [f'{how} {_figures_words(figures)}' for how, figures in said[who].items()
                 if figures]
        if who in blame:
            doing.append('is blamed by node pairs')
        parts.append(f'{who} {_and(doing)}')
    if len(order) > NAMED_IN_SENTENCE:
        parts.append(f'{len(order) - NAMED_IN_SENTENCE} more units have problems (listed '
                     'below)')
    units = {n for e in verdicts for u in e.units for n in u.unit.nodes}
    out = sorted((n for n in out_of_service if n in units or not units),
                 key=slurm_cluster.natural_key)
    if out:
        parts.append(f'{_and(out)} {"was" if len(out) == 1 else "were"} out of service')
    if not parts:
        return f'Every one of {sum(len(e.units) for e in verdicts)} units met its entry.'
    return '; '.join(parts) + '.'


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


def _contract_table(the_contract, numbers):
    rows = []
    for entry in the_contract.entries:
        rows.append((entry.id, entry.check, entry.figure, ' '.join(
            f'{k}={v}' for k, v in sorted((entry.parameters or {}).items())) or '-',
            str(entry.scope), ', '.join(entry.partitions) or 'every one', entry.environ or 'any',
            entry.committed.words(), f'{100 * entry.committed.tolerance:g} %',
            f'median of {entry.median_of}', _rule(entry), _source_cell(entry.source, numbers),
            f'{entry.fault_code}: {entry.action}'))
    return Table(('id', 'check', 'figure', 'parameters', 'scope', 'partitions', 'environ',
                  'committed', 'tolerance', 'statistic', 'rule', 'source', 'fault'),
                 tuple(rows))


def _contract_text(the_contract):
    """The contract's file as the site wrote it, '' where it cannot be read."""
    if the_contract.path is None:
        return ''
    try:
        return paths.read_regular(the_contract.path, MAX_CONTRACT_TEXT,
                                  'the contract').decode('utf-8', 'replace')
    except (OSError, ValueError):
        return ''


def _first_screen(verdicts, out_of_service, where, pair_blamed, grids, numbers):
    """What the person who signs reads first: the verdict's banner, every unit in one
    picture, the problems worst first."""
    units = [u for e in verdicts for u in e.units]
    counts = ', '.join(f'{sum(u.verdict == v for u in units)} {v}' for v in VERDICTS)
    verdict = system_verdict(verdicts)
    failing = _failing_table(verdicts, out_of_service, numbers)
    return [
        Section('verdict', 'Verdict', banner=verdict.lower(),
                intro=(sentence(verdicts, out_of_service, pair_blamed),
                       f'{len(verdicts)} contract entries over {len(units)} units: {counts}, '
                       f'{sum(bool(u.slow) for u in units)} slow beside their peers.'),
                lead=(f'The system\'s verdict against {where or "its contract"}', verdict)),
        Section('glance', 'Every unit at a glance', plots=tuple(grids or ()), embed=True,
                intro='Each cell a unit\'s verdict in an entry, a dot where it is slow beside '
                      'its peers; problems first, healthy units after them.',
                empty='No unit to draw.'),
        Section('failing', 'Failing, not run, invalid or slow, worst first', (failing,)
                if failing.rows else (),
                empty='Every unit met its entry; none is slow beside its peers.'),
    ]


def _contract_section(the_contract, numbers):
    """The contract as the site wrote it (its file's text); as a table of its entries where
    the file cannot be read."""
    text = _contract_text(the_contract)
    return Section('contract', 'The contract', () if text else (
        _contract_table(the_contract, numbers),), intro=the_contract.about, text=text)


def build(the_contract, verdicts, out_of_service, generated, where='', pair_blamed=None,
          grids=None):
    """The acceptance's sections.Report. `pair_blamed`: {node: why} of the nodes the node
    pairs blame (their failing pairs' nodes paired again with nodes that passed); `grids`:
    the pictures of every unit ([(Plot, file name)], acceptance_grid.plots), none where not
    given."""
    numbers = sources(verdicts, the_contract.entries)
    sections = _first_screen(verdicts, out_of_service, where, pair_blamed, grids, numbers) + [
        Section('entries', 'Each entry', (_entries_table(verdicts, numbers),),
                intro='A unit that did not run counts as failed. Sources: the numbers of '
                      'the table below.'),
        Section('sources', 'Sources', (_sources_table(numbers),),
                intro='Each source the contract\'s entries cite, once.'),
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
            ('node', 'why'), tuple(sorted(out_of_service.items(),
                                          key=lambda i: slurm_cluster.natural_key(i[0])))),)
            if out_of_service else (), empty='Every node was in service.'),
        Section('units', 'Every unit', tuple(_units_table(e) for e in verdicts)),
        _contract_section(the_contract, numbers),
    ]
    return Report(the_contract.system, generated, 'the verdicts of every node, GPU and pair '
                  'against what was committed', tuple(sections), kind='acceptance',
                  source='the sessions of this acceptance (sessions/)',
                  markdown_file=MARKDOWN, html_file=HTML)


def texts(report):
    """{acceptance.md: its text, acceptance.html: its text} of `report`."""
    return {MARKDOWN: markdown_summary.markdown(report), HTML: html_page.render_html(report)}


def files(the_contract, assessed, out_of_service, where=''):
    """The page's files ({path: text}: the page, its Markdown, its pictures under plots/)
    of an acceptance's hpcbench.acceptance.assessment.Assessment, generated now: what an
    Acceptance is given to render its page with (hpcbench.acceptance.use_case.Acceptance's
    `page`)."""
    generated = datetime.datetime.now().isoformat(timespec='seconds')
    grids = acceptance_grid.plots(assessed.verdicts, out_of_service)
    out = texts(build(the_contract, assessed.verdicts, out_of_service, generated, where,
                      assessed.blame, grids))
    out.update({f'plots/{name}': acceptance_grid.svg(plot) for plot, name in grids})
    return out

