"""The report's HTML page (index.html): the same sections as the Markdown summary, with the
plots inline, regressions highlighted, and every test case's provenance (session extras,
build, inputs, node) one click away. Plain HTML and CSS, no script."""
import html

from hpcbench.report.contents import (CASE_FACTS, CEILING_HEADER, GPU_HEADER, SESSION_FACTS,
                                      blas_mpi_tables, bounds_text, case_title, ceiling_rows,
                                      format_margin, format_value, reference_rows,
                                      summary_rows)
from hpcbench.report.markdown_summary import COMPARISON_HEADER, comparison_cells


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
                ceilings=(), gpu=(), between=((), ())):
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
           + ('<a href="#gpus">GPUs</a>' if gpu else '')
           + ('<a href="#gpu-to-gpu">GPU to GPU</a>' if between[0] else '') +
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
    if gpu:
        out.append('<h2 id="gpus">GPUs against their datasheets</h2>')
        out.append('<p>BabelStream\'s triad against the datasheet memory bandwidth, cuBLAS DGEMM '
                   'against the FP64 peak with tensor cores and per watt drawn during the '
                   'calls, pinned copies against the host link (each the median over the '
                   'node\'s GPUs); below, the papers\' accelerators per watt.</p>')
        out.append(_html_table(GPU_HEADER, gpu))
    rows, matrices = between
    if rows:
        out.append('<h2 id="gpu-to-gpu">GPU to GPU</h2>')
        out.append('<p>MPI from device memory between GPU pairs against the link between them '
                   '(the node\'s topology: NVLinks at the datasheet\'s rate, or a PCIe path) '
                   'and against staging through the host (the pinned copy), collectives\' bus '
                   'bandwidth (nccl-tests\' definition) against what a node of these GPUs is '
                   'published to reach; then each node\'s pair bandwidths.</p>')
        out.append(_html_table(GPU_HEADER, rows))
        for heading, header, grid in matrices:
            out += [f'<h3>{_e(heading)}</h3>', _html_table(header, grid)]
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
                             format_value(row['value']), row['unit'], row['measured_as'],
                             format_value(row['ref']), bounds_text(row),
                             format_margin(row['margin']), row['result'], row['source']])
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
