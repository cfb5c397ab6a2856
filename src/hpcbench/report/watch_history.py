"""A node's history under the watch (`hpcbench watch SYSTEM --history NODE`): its figures of
every cycle beside its accepted ones, read from the cycles' records (cycle.json:
hpcbench.acceptance.watch_record), as lines and as a plot (one panel per entry: each
cycle's runs and median, the accepted median as a line, drift and drains marked)."""
import datetime
import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib.dates

from hpcbench.report.plots import Plot, plt     # plots chose the backend


@dataclass(frozen=True)
class Point:
    """One cycle's figure of one target (a node, a GPU) of the node, for one entry."""
    cycle: str
    time: float
    entry: str
    target: str
    unit: str
    verdict: str
    median: float
    runs: tuple
    accepted_median: float = None
    effect: float = None
    drift: str = ''


def history(directory, node):
    """(the node's Points over the cycles in order, {cycle: why it was not run}) of the watch
    in `directory` (a record that is no cycle's is passed over)."""
    points, not_run = [], {}
    for path in sorted(Path(directory, 'cycles').glob('*/cycle.json')):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        drifts = {(d['entry'], d['unit']): d for d in record.get('drifts', [])}
        for f in record.get('figures', []):
            if f.get('node') != node or f.get('median') is None:
                continue
            d = drifts.get((f['entry'], f['unit']), {})
            points.append(Point(record['cycle'], record['time'], f['entry'], f['unit'],
                                f['unit_of_figure'], f['verdict'], f['median'],
                                tuple(f['runs']), d.get('accepted_median'), d.get('effect'),
                                d.get('verdict', '')))
        if node in record.get('not_run', {}):
            not_run[record['cycle']] = record['not_run'][node]
    points.sort(key=lambda p: p.time)
    return points, not_run


def lines(points, not_run):
    """One line per cycle and entry: the median, verdict, accepted median and drift."""
    said = []
    for p in points:
        accepted = '-' if p.accepted_median is None else f'{p.accepted_median:.4g}'
        worse = '' if p.effect is None else f'{100 * p.effect:+.1f} % worse'
        said.append(f'{p.cycle}  {p.entry:<28} {p.verdict:<8} {p.median:10.4g} {p.unit:<8} '
                    f'accepted {accepted:>10}  {worse}  {p.drift}'.rstrip())
    said += [f'{cycle}  not run: {why}' for cycle, why in sorted(not_run.items())]
    return said


def figure(points, node):
    """The node's history as a Plot (hpcbench.report.plots): a panel per entry and target."""
    series = {}
    for p in points:
        series.setdefault((p.entry, p.target), []).append(p)
    fig, axes = plt.subplots(len(series), 1, figsize=(10, 3.2 * len(series)), squeeze=False)
    for ax, ((entry, target), found) in zip(axes[:, 0], sorted(series.items())):
        when = [datetime.datetime.fromtimestamp(p.time, datetime.timezone.utc) for p in found]
        for moment, p in zip(when, found):
            ax.scatter([moment] * len(p.runs), p.runs, s=10, color='C0', alpha=0.5)
        ax.plot(when, [p.median for p in found], marker='o', color='C0',
                label='median of the cycle\'s runs')
        accepted = [p.accepted_median for p in found if p.accepted_median is not None]
        if accepted:
            ax.axhline(accepted[0], color='C2', linestyle='--',
                       label=f'accepted median ({accepted[0]:.4g})')
        for moment, p in zip(when, found):
            if p.drift == 'DRIFT' or p.verdict in ('FAIL', 'INVALID'):
                ax.annotate('drift' if p.drift == 'DRIFT' else p.verdict, (moment, p.median),
                            xytext=(3, 3), textcoords='offset points', fontsize=7,
                            color='C3')
        ax.set_title(f'{node}: {entry} ({target})', fontsize=9)
        ax.set_ylabel(found[0].unit)
        ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter('%m-%d %H:%M'))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel('cycle (UTC)')
    fig.tight_layout()
    return Plot(f'history-{node}', f'{node} over the cycles', fig,
                f'{node}\'s runs of each cycle of the watch (points) and their median (line), '
                'beside its accepted median (dashed); drift and failures of the contract '
                'marked.')


def plot(points, node, path):
    """The node's history as a PNG at `path`."""
    made = figure(points, node)
    made.figure.savefig(path, dpi=100)
    plt.close(made.figure)
    return path
