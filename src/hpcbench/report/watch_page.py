"""The watch's page (`hpcbench watch SYSTEM --report`: var/watch/SYSTEM/report/index.html
and summary.md beside it): the newest cycle (every node that did not simply pass, with its
evidence and what was done), its drifts, the cycles so far, and the history of every node
that ever failed, drifted or was re-tested beside its accepted figures (a plot each). Read
from the cycles' records (cycle.json), built as report sections (hpcbench.report.sections)
and written by the report's own renderers."""
import datetime
import json
import shutil
from pathlib import Path

from hpcbench.report import html_page, markdown_summary, plots, watch_history
from hpcbench.report.sections import Report, Section, Table

MARKDOWN, HTML = 'summary.md', 'index.html'


def records(directory):
    """The cycles' records of a watch directory, oldest first."""
    found = []
    for path in sorted(Path(directory, 'cycles').glob('*/cycle.json')):
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:
            continue
    return sorted(found, key=lambda r: r['time'])


def _cycles_table(found):
    rows = []
    for r in found:
        outcomes = [n['outcome'] for n in r['nodes'].values()]
        rows.append((r['cycle'], r.get('kind', 'watch'), str(len(r['due'])),
                     str(outcomes.count('PASS')), str(outcomes.count('FAIL')),
                     str(len(r['not_run'])), str(len(r['stale'])),
                     '; '.join(f'{a["node"]} {a["kind"]}' + ('' if a['run'] else ' (not run)')
                               for a in r['actions']) or '-'))
    return Table(('cycle', 'kind', 'judged', 'pass', 'fail', 'not run', 'stale', 'actions'),
                 tuple(rows), row_classes=tuple('fail' if row[4] != '0' else '' for row in rows))


def _newest_table(record):
    rows, classes = [], []
    acted = {a['node']: a for a in record['actions']}
    for node, outcome in sorted(record['nodes'].items()):
        if outcome['outcome'] == 'PASS' and not outcome['slow']:
            continue
        action = acted.get(node)
        rows.append((node, outcome['outcome'],
                     '; '.join(f'{f["entry"]} {f["how"]}: {f["evidence"]}'
                               for f in outcome['failing']) or '; '.join(outcome['slow']),
                     '-' if not action else f'{action["kind"]}: ' + (
                         'done' if action['run'] else action['held'] or 'printed')))
        classes.append('fail' if outcome['outcome'] == 'FAIL' else '')
    for node, why in sorted({**record['not_run'],
                             **{n: 'stale' for n in record['stale']}}.items()):
        rows.append((node, 'NOT_RUN', why, '-'))
        classes.append('')
    return Table(('node', 'outcome', 'why', 'action'), tuple(rows), row_classes=tuple(classes))


def _drift_table(record):
    drifts = sorted(record['drifts'], key=lambda d: -(d['effect'] or 0))
    return Table(('entry', 'target', 'median', 'accepted median', 'worse', 'p', 'drift'),
                 tuple((d['entry'], d['unit'], _number(d['median']),
                        _number(d['accepted_median']),
                        '-' if d['effect'] is None else f'{100 * d["effect"]:+.1f} %',
                        _number(d['p_value']), d['verdict']) for d in drifts),
                 row_classes=tuple('fail' if d['verdict'] == 'DRIFT' else '' for d in drifts))


def _number(value):
    return '-' if value is None else f'{value:.4g}'


def build(system, directory, saved_plots, generated):
    """The watch's sections.Report, its history plots saved as `saved_plots`."""
    found = records(directory)
    newest = next((r for r in reversed(found) if r.get('kind', 'watch') == 'watch'), None)
    sections = []
    if newest:
        newest_table = _newest_table(newest)
        sections += [
            Section('newest', f'The newest cycle, {newest["cycle"]}',
                    (newest_table,) if newest_table.rows else (),
                    intro=f'{len(newest["due"])} node(s) judged against the contract and '
                          'their own accepted figures.',
                    empty='Every node judged passed; none is out of service.'),
            Section('drift', 'Drift from the accepted figures',
                    (_drift_table(newest),) if newest['drifts'] else (),
                    empty='No node was judged in this cycle.')]
    sections += [
        Section('cycles', 'The cycles', (_cycles_table(found),) if found else (),
                empty='No cycle has run.'),
        Section('history', 'Nodes that failed, drifted or were re-tested, over the cycles',
                plots=tuple(saved_plots),
                empty='No node ever failed, drifted or was re-tested.')]
    return Report(system, generated, 'each node against the contract and its own accepted '
                  'figures, cycle by cycle', tuple(sections), kind='watch',
                  source='the cycles of the watch (cycles/*/cycle.json)',
                  markdown_file=MARKDOWN, html_file=HTML)


def noted(found):
    """The nodes that ever failed, drifted or were re-tested."""
    nodes = set()
    for r in found:
        nodes |= {n for n, o in r['nodes'].items() if o['outcome'] == 'FAIL'}
        nodes |= {d['node'] for d in r['drifts'] if d['verdict'] == 'DRIFT' and d['node']}
        nodes |= set(r.get('returned', {}))
    return sorted(nodes)


def write(system, directory):
    """index.html, summary.md and plots/ of the watch in `directory`, under its report/
    (replaced whole); the page's path."""
    out = Path(directory) / 'report'
    shutil.rmtree(out, ignore_errors=True)
    (out / 'plots').mkdir(parents=True)
    saved = []
    for node in noted(records(directory)):
        points, _ = watch_history.history(directory, node)
        if points:
            made = watch_history.figure(points, node)
            saved.append((made, plots.save(made, out / 'plots')))
    generated = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    report = build(system, directory, saved, generated)
    (out / MARKDOWN).write_text(markdown_summary.markdown(report))
    (out / HTML).write_text(html_page.render_html(report))
    return out / HTML
