"""Every unit of an acceptance in one picture: for each scope of the contract's entries
(nodes, GPUs, GPU pairs, node pairs, ports), its units as columns and its entries as rows,
each cell coloured by the unit's verdict, a unit slow beside its peers marked with a dot,
one whose node was out of service shown as such; units with a problem first, so that they
are found without scrolling past healthy ones. Beyond MAX_COLUMNS units the problems are
still named one by one (up to MAX_NAMED) and the healthy ones drawn as runs of consecutive
units, one column each, so that one bad node stands out among a thousand. Drawn with the
report's plotting library (hpcbench.report.plots) as SVG, with its words as alt text."""
import io
from dataclasses import dataclass

import matplotlib.colors
import matplotlib.patches

from hpcbench.acceptance import scopes
from hpcbench.core import slurm_cluster
from hpcbench.report.plots import Plot, plt

# A cell's state, worst first; OUT is NOT_RUN on a node out of service, NONE no unit.
STATES = ('FAIL', 'INVALID', 'NOT_RUN', 'OUT', 'WARN', 'PASS', 'NONE')
COLOURS = {'FAIL': '#c0392b', 'INVALID': '#8e44ad', 'NOT_RUN': '#e67e22', 'OUT': '#4d4d4d',
           'WARN': '#f1c40f', 'PASS': '#6abf69', 'NONE': '#ffffff'}
WORDS = {'FAIL': 'FAIL', 'INVALID': 'INVALID', 'NOT_RUN': 'NOT_RUN',
         'OUT': 'out of service', 'WARN': 'WARN (within tolerance)', 'PASS': 'PASS',
         'NONE': 'no such unit'}
# Columns of one picture (a page 1,200 pixels wide), and how many problems among them
# are named one by one; the rest of the problems share one column.
MAX_COLUMNS = 64
MAX_NAMED = 40


@dataclass(frozen=True)
class Column:
    """A unit (or a run of healthy ones: `count`) and its cells, one per row: (state,
    slow)."""
    label: str
    cells: tuple
    count: int = 1

    @property
    def problem(self):
        return any(state not in ('PASS', 'NONE') or slow for state, slow in self.cells)

    def rank(self):
        """Worst first: its worst state, then how many cells are not PASS."""
        states = [s for s, _ in self.cells]
        slow = any(s for _, s in self.cells)
        worst = min(STATES.index(s) for s in states)
        if worst == STATES.index('PASS') and slow:
            worst = STATES.index('WARN')
        return (worst, -sum(s not in ('PASS', 'NONE') or w for s, w in self.cells),
                slurm_cluster.natural_key(self.label))


def label(unit):
    """A unit's column label: its key (`n7`, `n3:2`), a pair of nodes `n7-n8`."""
    key = unit.key
    return '-'.join(map(str, key)) if isinstance(key, tuple) else str(key)


def state(unit_verdict, out_of_service):
    """A UnitVerdict's cell state: its verdict, OUT where it did not run and a node of it was
    out of service."""
    if unit_verdict.verdict == 'NOT_RUN' and any(n in out_of_service
                                                 for n in unit_verdict.unit.nodes):
        return 'OUT'
    return unit_verdict.verdict


def columns(verdicts, out_of_service):
    """{scope name: (entry verdicts of that scope, [Column], worst first)} of an acceptance's
    EntryVerdicts, in the order of hpcbench.acceptance.scopes.SCOPES (nodes first)."""
    out = {}
    order = list(scopes.SCOPES)     # nodes first, the system last
    for scope in sorted({str(e.entry.scope) for e in verdicts}, key=lambda name: (
            order.index(name) if name in order else len(order), name)):
        rows = [e for e in verdicts if str(e.entry.scope) == scope and e.units]
        if not rows:
            continue
        cells = {}
        for i, e in enumerate(rows):
            for u in e.units:
                cells.setdefault(label(u.unit), [('NONE', False)] * len(rows))[i] = (
                    state(u, out_of_service), bool(u.slow))
        made = [Column(name, tuple(c)) for name, c in cells.items()]
        out[scope] = (rows, sorted(made, key=Column.rank))
    return out


def grouped(made, max_columns=MAX_COLUMNS, max_named=MAX_NAMED):
    """`made` (Columns, worst first) within `max_columns`: as they are where they fit; else
    the problems named (at most `max_named`; the others in one column of their worst
    cells) and the healthy units in runs of consecutive names, one column a run."""
    if len(made) <= max_columns:
        return list(made)
    problems = [c for c in made if c.problem]
    healthy = sorted((c for c in made if not c.problem),
                     key=lambda c: slurm_cluster.natural_key(c.label))
    named, rest = problems[:max_named], problems[max_named:]
    out = list(named)
    if rest:
        worst = tuple(min((c.cells[i] for c in rest), key=lambda cell: (
            STATES.index(cell[0]), not cell[1])) for i in range(len(rest[0].cells)))
        out.append(Column(f'{len(rest)} more with problems', worst, len(rest)))
    runs = max(1, max_columns - len(out))
    size = -(-len(healthy) // runs) if healthy else 0
    for start in range(0, len(healthy), size or 1):
        run = healthy[start:start + size]
        cells = tuple(min((c.cells[i] for c in run), key=lambda cell: STATES.index(cell[0]))
                      for i in range(len(run[0].cells)))
        name = run[0].label if len(run) == 1 else f'{run[0].label}..{run[-1].label}'
        out.append(Column(f'{name} ({len(run)})' if len(run) > 1 else name, cells, len(run)))
    return out


def words(scope_words, rows, made):
    """The picture in words (its alt text and caption): how many units by how many
    entries, each problem named with its states, the healthy counted."""
    units = sum(c.count for c in made)
    problems = [c for c in made if c.problem]
    said = []
    for c in problems[:12]:
        counts = {}
        for s, slow in c.cells:
            if s not in ('PASS', 'NONE'):
                counts[WORDS[s]] = counts.get(WORDS[s], 0) + 1
            if slow:
                counts['slow'] = counts.get('slow', 0) + 1
        said.append(f'{c.label}: ' + ', '.join(f'{k} in {v}' for k, v in counts.items()))
    more = sum(c.count for c in problems[12:])
    text = (f'{units} {scope_words} unit(s) by {len(rows)} contract entr'
            f'{"y" if len(rows) == 1 else "ies"}, problems first. ')
    text += '; '.join(said) + (f'; and {more} more with problems' if more else '')
    healthy = units - sum(c.count for c in problems)
    return text + (f'{"; " if said else ""}{healthy} met every entry.' if healthy
                   else '.')


def draw(rows, made):
    """The matplotlib Figure of one scope's grid (`rows`: its EntryVerdicts, `made`: its
    Columns as grouped)."""
    codes = [[STATES.index(c.cells[i][0]) for c in made] for i in range(len(rows))]
    width = min(11.5, 3.2 + 0.2 * len(made))
    longest = max(len(c.label) for c in made)
    # Rows a fifth of an inch: a node's dozen entries and its legend within the first screen.
    height = 0.9 + 0.2 * len(rows) + 0.06 * min(longest, 24)
    fig, ax = plt.subplots(figsize=(width, height))
    cmap = matplotlib.colors.ListedColormap([COLOURS[s] for s in STATES])
    ax.imshow(codes, cmap=cmap, vmin=-0.5, vmax=len(STATES) - 0.5, aspect='auto',
              interpolation='nearest')
    slow = [(x, y) for x, c in enumerate(made) for y, (_, s) in enumerate(c.cells) if s]
    if slow:
        ax.scatter([x for x, _ in slow], [y for _, y in slow], s=14, c='black', marker='o',
                   zorder=3)
    ax.set_xticks(range(len(made)), [c.label for c in made], rotation=90, fontsize=6)
    ax.set_yticks(range(len(rows)), [e.entry.id[:48] for e in rows], fontsize=6)
    ax.set_xticks([x - 0.5 for x in range(1, len(made))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which='minor', color='white', linewidth=0.8)
    ax.tick_params(which='minor', length=0)
    seen = {STATES[code] for row in codes for code in row} - {'NONE'}
    handles = [matplotlib.patches.Patch(color=COLOURS[s], label=WORDS[s])
               for s in STATES if s in seen]
    if slow:
        handles.append(plt.Line2D([], [], marker='o', color='black', linestyle='',
                                  markersize=4, label='slow beside its peers'))
    ax.legend(handles=handles, fontsize=6, loc='lower left', bbox_to_anchor=(0, 1.0),
              ncol=len(handles), frameon=False, borderaxespad=0.2)
    fig.tight_layout()
    return fig


def plots(verdicts, out_of_service):
    """[(Plot, file name)] of an acceptance's EntryVerdicts, one per scope; the figures
    closed once written (svg)."""
    out = []
    for scope, (rows, made) in columns(verdicts, out_of_service).items():
        made = grouped(made)
        scope_words = rows[0].entry.scope.words
        out.append((Plot(f'grid-{scope}', f'Every {scope_words} by entry',
                         draw(rows, made), words(scope_words, rows, made)),
                    f'grid-{scope}.svg'))
    return out


def svg(plot):
    """The SVG text of `plot`, without a date (the same verdicts draw the same file); its
    figure closed."""
    buffer = io.StringIO()
    plot.figure.savefig(buffer, format='svg', metadata={'Date': None})
    plt.close(plot.figure)
    return buffer.getvalue()
