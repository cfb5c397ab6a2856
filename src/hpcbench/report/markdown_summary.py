"""The report's Markdown summary (summary.md): each check's latest figures against their
references, the comparison with earlier sessions, the ceilings, links to the plots; and the
plain-text tables `hpcbench compare` prints."""

from hpcbench.report.contents import (CEILING_HEADER, GPU_HEADER, bounds_text, format_value,
                                      format_margin, blas_mpi_tables, case_title, ceiling_rows,
                                      distribution, reference_rows, summary_rows, title)


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


def markdown(system, cases, reference_set, comparison, saved_plots, generated, ceilings=(),
             gpu=(), between=((), ())):
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
                             f'{format_value(row["value"])} {row["unit"]}', row['measured_as'],
                             format_value(row['ref']), bounds_text(row),
                             format_margin(row['margin']),
                             f'**{row["result"]}**' if row['result'] in ('fail', 'withheld')
                             else row['result'], row['source']])
        out += [_md_table(['test case', 'environ', 'variable', 'value', 'measured as',
                           'reference', 'bounds', 'margin', 'result', 'cited'], rows), '']

    out += ['## Against the node\'s ceilings', '',
            _md_table(CEILING_HEADER, ceiling_rows(cases, ceilings)), '']
    if gpu:
        out += ['## GPUs against their datasheets', '', _md_table(GPU_HEADER, gpu), '']
    rows, matrices = between
    if rows:
        out += ['## GPU to GPU', '', _md_table(GPU_HEADER, rows), '']
        for heading, header, grid in matrices:
            out += [f'### {heading}', '', _md_table(header, grid), '']
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
            format_margin(v.change_percent),
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
