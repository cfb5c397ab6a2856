"""The report of a system's stored results (`make report`, `hpcbench report`): an HTML page
and a Markdown summary built from ReFrame's results database.

- per check, its latest results against their references: pass or fail as ReFrame judged
  them, and the margin to the reference;
- plots of the results beside the papers' figures (hpcbench.plots);
- the newest session judged against the sessions before it, figure by figure, with
  a significance test (hpcbench.verdicts): regressions highlighted;
- the provenance each result carries (hpcbench.provenance): session extras and the
  build, inputs and node of every test case.

Everything here works on data (sessions as `reframe --describe-stored-sessions` prints
them); `from_database` fetches them.
"""
import datetime
import html
import itertools
import math
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hpcbench import plots, references, results, verdicts

# Session extras recorded by `make run` (hpcbench provenance), in display order.
SESSION_FACTS = ('project_commit', 'spack_commit', 'spack_lock', 'host', 'blas_default',
                 'blas_default_from')
# Per test case (hpcbench.rfm.Provenance and the checks' `inputs`).
CASE_FACTS = ('inputs', 'build_spec', 'topology', 'project_commit', 'spack_commit',
              'spack_lock')


@dataclass
class Comparison:
    new: list                    # session UUIDs
    old: list
    rows: list = field(default_factory=list)   # hpcbench.verdicts.Row
    threshold: float = verdicts.THRESHOLD

    @property
    def regressions(self):
        return [r for r in self.rows if r.verdict.verdict == 'regression']

    def describe(self):
        """One sentence: what was compared, how, and how it came out."""
        tally = ', '.join(f'{n} {name}' for name, n in verdicts.counts(self.rows).items() if n)
        return (f'{len(self.new)} new session(s) ({", ".join(u[:8] for u in self.new)}) '
                f'against {len(self.old)} earlier one(s); a figure regressed when its median '
                f'got worse by more than {self.threshold:g} % and a one-sided Mann-Whitney '
                f'U test gives p <= {verdicts.ALPHA:g}, over the sessions\' medians where '
                f'each side has {verdicts.MIN_SESSIONS} sessions, else over the runs (and '
                f'then outside the earlier sessions\' medians when there are '
                f'{verdicts.MIN_SESSIONS}); the runs of a build only against runs of the same '
                f'build (another BLAS, MPI or recipe: \'stack changed\', not judged). '
                f'{tally or "no figure in common"}.')


def system_cases(session_data, system):
    return [c for c in results.measured_cases(session_data) if c['system'] == system]


def latest_cases(sessions, system):
    """Per check, its cases from the newest session that measured it on `system`
    (sessions newest first), each marked with its session's UUID; and those sessions."""
    newest = {}
    for data in sessions:
        for case in system_cases(data, system):
            newest.setdefault(case['check'], data['session_info']['uuid'])

    cases, used = [], []
    for data in sessions:
        uuid = data['session_info']['uuid']
        mine = [c for c in system_cases(data, system) if newest[c['check']] == uuid]
        for case in mine:
            case['session'] = uuid
        if mine:
            cases += mine
            used.append(data)
    return cases, used


def margin(value, reference):
    """Percent of the value above (+) or below (-) its reference; None without one."""
    if not reference:
        return None
    return 100.0 * (value - reference) / abs(reference)


def reference_rows(case, reference_set):
    """A case's figures with their references: dicts with variable, value, unit, ref,
    lower, upper (fractions), result, margin (%), source (the cited figure, if any)."""
    cited = references.select(reference_set, case['check'], case['partition'],
                              case['environ'], case['testcase']) if reference_set else {}
    rows = []
    for variable, (value, unit) in case['perfvalues'].items():
        ref, lower, upper, result = case['references'][variable]
        has_ref = bool(ref) or lower is not None or upper is not None
        fig = cited.get(variable)
        rows.append({
            'variable': variable, 'value': value, 'unit': unit,
            'ref': ref if has_ref else None, 'lower': lower, 'upper': upper,
            'result': result if has_ref else 'no reference',
            'margin': margin(value, ref) if has_ref else None,
            'source': (f'{fig.source} {fig.where}' if fig else ''),
            'measured_as': measured_as(case, variable),
        })
    # A ratio above 100 % of its ceiling is no result: shown as withheld, with why.
    for variable, why in (case['testcase'].get('flagged') or {}).items():
        rows.append({'variable': variable, 'value': None, 'unit': '%', 'ref': None,
                     'lower': None, 'upper': None, 'result': 'withheld', 'margin': None,
                     'source': '', 'measured_as': why})
    return rows


def distribution(values):
    """Values as the report shows a sample: `median 47.9, 47.4 to 53.4 (n=3, spread 12 %)`,
    the spread being (max - min) / median; values that are no number (NaN, infinite) as
    they are, beside the others."""
    broken = [v for v in values if not math.isfinite(v)]
    if broken:
        values = [v for v in values if math.isfinite(v)]
        shown = ', '.join(map(str, broken))
        return f'{distribution(values)}; not finite: {shown}' if values else f'{shown} (no number)'
    median = statistics.median(values)
    if len(values) == 1:
        return f'{_fmt(median)} (n=1)'
    spread = f', spread {100 * (max(values) - min(values)) / abs(median):.0f} %' if median else ''
    return (f'median {_fmt(median)}, {_fmt(min(values))} to {_fmt(max(values))} '
            f'(n={len(values)}{spread})')


def measured_as(case, variable):
    """How the job measured a figure and what it measured (hpcbench.rfm.Samples): `best of
    3 solve(s): median 47.9, 47.4 to 53.4 (n=3, spread 12 %)`; '' when the check does not
    say."""
    testcase = case['testcase']
    how = (testcase.get('aggregation') or {}).get(variable, '')
    values = (testcase.get('samples') or {}).get(variable)
    return f'{how}: {distribution(values)}' if values else how


# What the report sets against the node's ceilings: per check, its figure and its ratios
# (variable, what it divides by). The ceilings are measured on the node in the same session:
# the sustained peak and bandwidth ceiling (NodeCeilings, likwid-bench); Rpeak is nominal,
# from the partition's description. HPL's DGEMM ceiling is measured in its own job just
# before HPL (sessions stored before: DgemmCeiling, a check of its own), STREAM's ceilings
# in its own job, round by round.
CEILING_RATIOS = {
    'HplCheck': ('gflops', (('efficiency', 'nominal Rpeak'),
                            ('sustained_peak_efficiency', 'sustained peak'),
                            ('ceiling_efficiency', 'DGEMM ceiling'))),
    'StreamCheck': ('triad', (('triad_ceiling_efficiency', 'bandwidth ceiling'),
                              ('triad_cached_store_efficiency', 'ordinary-store triad'))),
}
CEILING_CHECKS = ('NodeCeilings', 'DgemmCeiling')
CEILING_HEADER = ['test case', 'environ', 'figure', 'against', 'ratio', 'how']


def ceiling_cases(sessions, system):
    """The ceilings measured in `sessions` on `system` (fixtures: CEILING_CHECKS)."""
    return [case for data in sessions for case in results.measured_cases(data, fixtures=True)
            if case['check'] in CEILING_CHECKS and case['system'] == system]


def ceiling_rows(cases, ceilings):
    """The node's ceilings (`ceilings`: their figures, as measured), then HPL's and STREAM's
    figures in `cases` against them: rows of CEILING_HEADER; a ratio withheld says so."""
    rows = [[case_title(case), case['environ'], f'{variable} = {_fmt(value)} {unit}',
             'measured', '', measured_as(case, variable)]
            for case in ceilings for variable, (value, unit) in case['perfvalues'].items()]
    for case in cases:
        figure, ratios = CEILING_RATIOS.get(case['check'], (None, ()))
        flagged = case['testcase'].get('flagged') or {}
        present = [r for r in ratios if r[0] in case['perfvalues'] or r[0] in flagged]
        if figure not in case['perfvalues'] or not present:
            continue
        value, unit = case['perfvalues'][figure]
        for variable, against in present:
            ratio = case['perfvalues'].get(variable, (None, ''))[0]
            rows.append([case_title(case), case['environ'], f'{figure} = {_fmt(value)} {unit}',
                         against, 'withheld' if variable in flagged else f'{ratio:.1f} %',
                         flagged.get(variable) or measured_as(case, variable)])
    return rows


def blas_mpi_tables(cases, ceilings):
    """The test cases measured with several BLAS libraries (HPL and its DGEMM ceiling, HPCC),
    their compared figures as BLAS x MPI: [(heading, header, rows)]."""
    groups = results.side_by_side([*cases, *(c for c in ceilings
                                             if c['check'] == 'DgemmCeiling')])
    return [(heading, [f'{variable} [{unit}]', *grid[0]], results.grid_rows(grid, _fmt))
            for heading, variable, unit, grid in results.blas_mpi_grids(groups)]


def summary_rows(cases, reference_set):
    """Per check: test cases, figures, passed, failed, without reference, sessions."""
    rows = []
    for check in sorted({c['check'] for c in cases}):
        mine = [c for c in cases if c['check'] == check]
        judged = [r['result'] for c in mine for r in reference_rows(c, reference_set)]
        rows.append([check, len(mine), len(judged), judged.count('pass'),
                     judged.count('fail'), judged.count('no reference'),
                     ' '.join(sorted({c['session'][:8] for c in mine}))])
    return rows


def _fmt(value, digits=4):
    if value is None:
        return '-'
    if isinstance(value, float):
        return f'{value:.0f}' if abs(value) >= 10000 else f'{value:.{digits}g}'
    return str(value)


def _fmt_margin(value):
    return '-' if value is None else f'{value:+.1f} %'


def _bounds(row):
    if row['ref'] is None:
        return ''
    lower = '-inf' if row['lower'] is None else f'{row["lower"]:+.0%}'
    upper = '+inf' if row['upper'] is None else f'{row["upper"]:+.0%}'
    return f'[{lower}, {upper}]'


def title(check, parameters):
    """A test case as the report names it: the check and its parameters, sorted."""
    params = ' '.join(f'{k}={v}' for k, v in sorted(parameters))
    return f'{check} {params}'.strip()


def case_title(case):
    return title(case['check'], case['match'].items())


# --- Markdown ------------------------------------------------------------------------------


def _md_table(header, rows):
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(str(c).replace('|', '\\|') for c in row) + ' |'
              for row in rows]
    return '\n'.join(lines)


def text_table(header, rows):
    """Rows as aligned columns for a terminal."""
    rows = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


def markdown(system, cases, reference_set, comparison, saved_plots, generated, ceilings=()):
    out = [f'# hpcbench report: {system}', '', f'Generated {generated} from ReFrame\'s '
           f'results database. HTML report with plots: [index.html](index.html).', '']
    out += ['## Summary', '', _md_table(['check', 'test cases', 'figures', 'pass', 'fail',
                                        'no reference', 'session'],
                                       summary_rows(cases, reference_set)), '']
    out += ['## Results against references', '']
    for check in sorted({c['check'] for c in cases}):
        out += [f'### {check}', '']
        rows = []
        for case in [c for c in cases if c['check'] == check]:
            for row in reference_rows(case, reference_set):
                rows.append([case_title(case), case['environ'], row['variable'],
                             f'{_fmt(row["value"])} {row["unit"]}', row['measured_as'],
                             _fmt(row['ref']), _bounds(row), _fmt_margin(row['margin']),
                             f'**{row["result"]}**' if row['result'] in ('fail', 'withheld')
                             else row['result'], row['source']])
        out += [_md_table(['test case', 'environ', 'variable', 'value', 'measured as',
                           'reference', 'bounds', 'margin', 'result', 'cited'], rows), '']

    out += ['## Against the node\'s ceilings', '',
            _md_table(CEILING_HEADER, ceiling_rows(cases, ceilings)), '']
    out += ['## BLAS x MPI', '']
    for heading, header, rows in blas_mpi_tables(cases, ceilings):
        out += [f'### {heading}', '', _md_table(header, rows), '']
    out += ['## Plots', '']
    out += [f'- [{p.title}](plots/{name})' for p, name in saved_plots]
    out += ['', '## Comparison with earlier sessions', '']
    out += _md_comparison(comparison)
    return '\n'.join(out) + '\n'


def comparison_cells(row):
    v = row.verdict
    return [title(row.check, row.parameters), row.environ, v.variable,
            distribution(v.old.values + v.old.not_finite),
            distribution(v.new.values + v.new.not_finite), v.unit,
            _fmt_margin(v.change_percent),
            '-' if v.p_value is None else f'{v.p_value:.3g}', v.verdict,
            v.reason if v.basis == 'runs' else f'{v.reason} ({v.basis})']


COMPARISON_HEADER = ['test case', 'environ', 'variable', 'old', 'new', 'unit',
                     'change', 'p', 'verdict', 'why']


def _md_comparison(comparison):
    if comparison is None:
        return ['No earlier session measured this system with the same inputs: nothing to '
                'compare.']
    rows = []
    for row in comparison.rows:
        cells = comparison_cells(row)
        if cells[8] == 'regression':
            cells[8] = '**regression**'
        rows.append(cells)
    return [comparison.describe(), '', _md_table(COMPARISON_HEADER, rows)]


# --- HTML ----------------------------------------------------------------------------------

_STYLE = '''
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { background: #e3f4e3; } .fail { background: #f9d6d5; font-weight: bold; }
.regression { background: #f9d6d5; font-weight: bold; } .improvement { background: #e3f4e3; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #444; }
pre { background: #f6f6f6; padding: 0.5em; font-size: 0.8em; overflow-x: auto; }
nav a { margin-right: 1em; } code { font-size: 0.9em; }
'''


def _e(value):
    return html.escape(str(value))


def _html_table(header, rows, row_classes=None):
    out = ['<table><tr>' + ''.join(f'<th>{_e(h)}</th>' for h in header) + '</tr>']
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ''
        cells = ''.join(f'<td class="num">{_e(c)}</td>' if isinstance(c, (int, float))
                        or (isinstance(c, str) and c[:1] in '+-0123456789' and c != '-')
                        else f'<td>{_e(c)}</td>' for c in row)
        out.append(f'<tr{cls}>{cells}</tr>')
    return '\n'.join(out + ['</table>'])


def _anchor(text):
    return ''.join(ch if ch.isalnum() else '-' for ch in text.lower()).strip('-')


def render_html(system, cases, sessions, reference_set, comparison, saved_plots, generated,
                ceilings=()):
    checks = sorted({c['check'] for c in cases})
    failed = sum(r['result'] == 'fail' for c in cases for r in reference_rows(c, reference_set))
    out = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           f'<title>hpcbench report: {_e(system)}</title><style>{_STYLE}</style></head><body>',
           f'<h1>hpcbench report: {_e(system)}</h1>',
           f'<p>Generated {_e(generated)} from ReFrame\'s results database: '
           f'{len(cases)} test case(s) of {len(checks)} check(s), {failed} figure(s) '
           f'outside their reference bounds. Markdown summary: '
           f'<a href="summary.md">summary.md</a>.</p>',
           '<nav><a href="#summary">Summary</a><a href="#ceilings">Ceilings</a>'
           '<a href="#blas">BLAS x MPI</a><a href="#plots">Plots</a>'
           '<a href="#comparison">Comparison</a><a href="#results">Results</a>'
           '<a href="#provenance">Provenance</a></nav>']

    out.append('<h2 id="summary">Summary</h2>')
    summary = summary_rows(cases, reference_set)
    out.append(_html_table(['check', 'test cases', 'figures', 'pass', 'fail',
                            'no reference', 'session'], summary,
                           ['fail' if row[4] else '' for row in summary]))
    out.append('<h2 id="ceilings">Against the node\'s ceilings</h2>')
    out.append('<p>HPL against nominal Rpeak, the sustained peak and its DGEMM ceiling '
               '(measured in HPL\'s job just before HPL); STREAM\'s '
               'all-core triad against the bandwidth ceiling (non-temporal stores) and against '
               'the same triad with the ordinary stores its compiled code makes (their '
               'write-allocate reads, uncounted, cap it near 3/4 of the ceiling; STREAM with '
               'streaming stores, stores=nontemporal, does no such reads); each ceiling '
               'as measured on the '
               'node in the same session, with its runs\' spread (on a VM whose clock varies, '
               'that spread is its variation).</p>')
    out.append(_html_table(CEILING_HEADER, ceiling_rows(cases, ceilings)))
    out.append('<h2 id="blas">BLAS x MPI</h2>')
    tables = blas_mpi_tables(cases, ceilings)
    out.append('<p>The test cases run with several BLAS libraries (HPL and its DGEMM '
               'ceiling, HPCC: every MPI stack with the default BLAS, one stack with each '
               'other), their GFLOP/s per BLAS and MPI, as each build\'s provenance names them.'
               '</p>' if tables else '<p>No test case ran with more than one BLAS.</p>')
    for heading, header, rows in tables:
        out += [f'<h3>{_e(heading)}</h3>', _html_table(header, rows)]
    out.append('<h2 id="plots">Plots</h2>')
    for plot, name in saved_plots:
        out.append(f'<figure id="plot-{_e(plot.name)}"><a href="plots/{_e(name)}">'
                   f'<img src="plots/{_e(name)}" alt="{_e(plot.title)}"></a>'
                   f'<figcaption>{_e(plot.title)}. {_e(plot.caption)}</figcaption></figure>')

    out.append('<h2 id="comparison">Comparison with earlier sessions</h2>')
    if comparison is None:
        out.append('<p>No earlier session measured this system with the same inputs: '
                   'nothing to compare.</p>')
    else:
        out.append(f'<p>{_e(comparison.describe())} '
                   f'<strong>{len(comparison.regressions)} regression(s)</strong>.</p>')
        out.append(_html_table(
            COMPARISON_HEADER, [comparison_cells(r) for r in comparison.rows],
            [r.verdict.verdict if r.verdict.verdict in ('regression', 'improvement') else ''
             for r in comparison.rows]))

    out.append('<h2 id="results">Results against references</h2>')
    out.append('<p>' + ' '.join(f'<a href="#{_anchor(c)}">{_e(c)}</a>' for c in checks)
               + '</p>')
    for check in checks:
        out.append(f'<h3 id="{_anchor(check)}">{_e(check)}</h3>')
        rows, classes = [], []
        for case in [c for c in cases if c['check'] == check]:
            for row in reference_rows(case, reference_set):
                rows.append([case_title(case), case['environ'], row['variable'],
                             _fmt(row['value']), row['unit'], row['measured_as'],
                             _fmt(row['ref']), _bounds(row), _fmt_margin(row['margin']),
                             row['result'], row['source']])
                classes.append({'pass': 'pass', 'fail': 'fail', 'withheld': 'fail'}.get(
                    row['result'], ''))
        out.append(_html_table(['test case', 'environ', 'variable', 'value', 'unit',
                                'measured as', 'reference', 'bounds', 'margin', 'result',
                                'cited'], rows, classes))

    out.append('<h2 id="provenance">Provenance</h2>')
    out.append(_html_table(
        ['session', 'started', 'command', *SESSION_FACTS],
        [[s['session_info']['uuid'], s['session_info']['time_start'],
          s['session_info'].get('cmdline', ''),
          *(s['session_info'].get(k, 'not recorded') for k in SESSION_FACTS)]
         for s in sessions]))
    for case in cases:
        tc = case['testcase']
        facts = ''.join(f'<tr><th>{_e(k)}</th><td>{_e(tc.get(k) or "not recorded")}</td></tr>'
                        for k in CASE_FACTS)
        facts += (f'<tr><th>nodes</th><td>{_e(", ".join(case["nodelist"]))}</td></tr>'
                  f'<tr><th>session</th><td>{_e(case["session"])}</td></tr>')
        files = ''.join(f'<p>{_e(name)}</p><pre>{_e(text)}</pre>'
                        for name, text in sorted((tc.get('input_files') or {}).items()))
        out.append(f'<details><summary>{_e(case_title(case))} on '
                   f'{_e(case["partition"])} with {_e(case["environ"])}</summary>'
                   f'<table>{facts}</table>{files}</details>')

    out.append('</body></html>')
    return '\n'.join(out) + '\n'


# --- Writing -------------------------------------------------------------------------------


# Marks a directory as a report's: only such a directory (or a new or empty one) is
# written into, and its plots/ replaced.
MARKER = '.hpcbench-report'


def claim_directory(directory):
    """Make `directory` a report's, or refuse one that holds anything else: a report
    replaces index.html, summary.md and plots/, which must never be a user's files."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RuntimeError(f'{directory} is not a directory')
    if (directory.is_dir() and any(directory.iterdir())
            and not (directory / MARKER).exists()):
        raise RuntimeError(f'{directory} holds files that no hpcbench report wrote: give '
                           '--output a new or empty directory (nothing was written)')
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text('Written by `hpcbench report`: it replaces index.html, '
                                    'summary.md and plots/ here.\n')


def write(directory, system, sessions, compared=None, threshold=verdicts.THRESHOLD,
          stored=None):
    """Write index.html, summary.md and plots/ for `system` into directory (replacing an
    earlier report there; refusing a directory with other files: claim_directory):
    the results of `sessions` (newest first), and `compared`, (new UUIDs, old UUIDs)
    among `stored` (default: `sessions`), judged. Returns the path of index.html."""
    directory = Path(directory)
    cases, used = latest_cases(sessions, system)
    if not cases:
        raise RuntimeError(f'no stored session has results of {system}: run the suite first')

    reference_set = references.load(system)
    papers = [references.load(s) for s in references.systems_with_references()
              if s != system]
    comparison = None
    if compared:
        rows = verdicts.compare(stored or sessions, system, *compared, threshold=threshold)
        comparison = Comparison(*compared, rows, threshold) if rows else None

    claim_directory(directory)
    plot_dir = directory / 'plots'
    shutil.rmtree(plot_dir, ignore_errors=True)
    plot_dir.mkdir(parents=True)
    history = results.figure_samples(stored or sessions, system)
    saved = [(plot, plots.save(plot, plot_dir))
             for plot in itertools.chain(plots.all_plots(cases, papers, system),
                                         plots.trends(history, reference_set, system,
                                                      threshold))]
    generated = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    ceilings = ceiling_cases(used, system)
    (directory / 'summary.md').write_text(
        markdown(system, cases, reference_set, comparison, saved, generated, ceilings))
    index = directory / 'index.html'
    index.write_text(render_html(system, cases, used, reference_set, comparison, saved,
                                 generated, ceilings))
    return index


def from_database(system, directory, session=None, against=None,
                  threshold=verdicts.THRESHOLD, days=verdicts.DAYS):
    """The report of `system` from its results database: the latest results of every check
    (or those of `session`), and that session (default: the newest) judged against
    `against` (default: the sessions of the `days` before it)."""
    if Path(directory).exists():
        claim_directory(directory)      # refused before the database is even read
    config = results.site_config(system)
    stored = results.stored_sessions(config)
    session = session and results.resolve(stored, [session], '--session')[0]
    against = against and results.resolve(stored, [against], '--against')[0]

    compared = verdicts.sessions_to_judge(stored, system, session and [session],
                                          against and [against], days)
    shown = [s for s in stored if s['session_info']['uuid'] == session] if session else stored
    return write(directory, system, shown, compared, threshold, stored)
