"""The report as typed sections, built once from a system's picture (hpcbench.results.
picture) and written twice: as Markdown (hpcbench.report.markdown_summary) and as HTML
(hpcbench.report.html_page), each renderer walking the same sections and tables. What each
table holds is hpcbench.report.contents' rows; what is judged (verdicts, trends, slow GPU
pairs) was judged in the results layer."""
from dataclasses import dataclass

from hpcbench.report.contents import (CEILING_HEADER, GPU_HEADER, SESSION_FACTS,
                                      blas_mpi_tables, bounds_text, case_facts, ceiling_rows,
                                      distribution, format_margin, format_value,
                                      gpu_pair_matrices, gpu_rows, gpu_to_gpu_rows,
                                      reference_rows, summary_rows, title)


@dataclass(frozen=True)
class Table:
    """A table of the report: under its own heading where it has one (`anchor`: its id),
    each row with a class (`pass`, `fail`, `regression`, `improvement` or ''), the cell of
    column `strong` set in bold in a row of class `fail` or `regression`, notes below it."""
    header: tuple
    rows: tuple
    heading: str = ''
    anchor: str = ''
    row_classes: tuple = ()
    strong: int = None
    notes: tuple = ()


@dataclass(frozen=True)
class Details:
    """What is one click away in the HTML page (a test case's provenance): a summary line,
    facts as (name, value), and files as (name, text)."""
    summary: str
    facts: tuple
    files: tuple = ()


@dataclass(frozen=True)
class Section:
    """A section of the report: `intro` and `lead` (a sentence and its figure in bold)
    before its tables, `empty` said where it has none; `plots` (plot, file name) and
    `details` where it has them (`intro` a sentence or a tuple of paragraphs); `links` to
    its tables' anchors; `html_only` for what the
    page alone carries (provenance); `banner` (a verdict's class: fail, warn, pass) to set
    its lead and intro apart as the page's verdict; `embed` to show its plots in the
    Markdown as images, not links; `text` a file's text shown as written after its tables."""
    anchor: str
    title: str
    tables: tuple = ()
    intro: str = ''
    lead: tuple = ()
    empty: str = ''
    plots: tuple = ()
    details: tuple = ()
    links: tuple = ()
    html_only: bool = False
    banner: str = ''
    embed: bool = False
    text: str = ''


def paragraphs(intro):
    """A section's `intro` as its paragraphs."""
    return (intro,) if isinstance(intro, str) and intro else tuple(p for p in intro if p)


@dataclass(frozen=True)
class Report:
    system: str
    generated: str
    about: str              # what the page covers, in one sentence
    sections: tuple
    kind: str = 'report'    # the page's heading: `hpcbench <kind>: <system>`
    source: str = "ReFrame's results database"
    markdown_file: str = 'summary.md'
    html_file: str = 'index.html'


COMPARISON_HEADER = ('test case', 'environ', 'variable', 'old', 'new', 'unit', 'change', 'p',
                     'verdict', 'why')
RESULTS_HEADER = ('test case', 'environ', 'variable', 'value', 'unit', 'measured as',
                  'reference', 'bounds', 'margin', 'result', 'cited')
SUMMARY_HEADER = ('check', 'test cases', 'figures', 'pass', 'fail', 'no reference', 'session')
RESULT_CLASSES = {'pass': 'pass', 'fail': 'fail', 'withheld': 'fail'}


def comparison_cells(row):
    """A judged figure (hpcbench.results.changes.Row) as the report's and compare's cells."""
    v = row.verdict
    return [title(row.check, row.parameters), row.environ, v.variable,
            distribution(v.old.values + v.old.not_finite),
            distribution(v.new.values + v.new.not_finite), v.unit,
            format_margin(v.change_percent),
            '-' if v.p_value is None else f'{v.p_value:.3g}', v.verdict,
            v.reason if v.basis == 'runs' else f'{v.reason} ({v.basis})']


def anchor(text):
    return ''.join(ch if ch.isalnum() else '-' for ch in text.lower()).strip('-')


def _results(cases, reference_set):
    tables = []
    for check in sorted({c.check for c in cases}):
        rows = [(case, row) for case in cases if case.check == check
                for row in reference_rows(case, reference_set)]
        tables.append(Table(
            RESULTS_HEADER,
            tuple((case.title, case.environ, row.variable, format_value(row.value), row.unit,
                   row.measured_as, format_value(row.ref), bounds_text(row),
                   format_margin(row.margin), row.result, row.source) for case, row in rows),
            heading=check, anchor=anchor(check),
            row_classes=tuple(RESULT_CLASSES.get(row.result, '') for _, row in rows),
            strong=RESULTS_HEADER.index('result')))
    return Section('results', 'Results against references', tuple(tables),
                   links=tuple((t.heading, t.anchor) for t in tables))


def _comparison(comparison):
    if comparison is None:
        return Section('comparison', 'Comparison with earlier sessions',
                       empty='No earlier session measured this system with the same inputs: '
                             'nothing to compare.')
    verdicts = [r.verdict.verdict for r in comparison.rows]
    return Section('comparison', 'Comparison with earlier sessions', (Table(
        COMPARISON_HEADER, tuple(tuple(comparison_cells(r)) for r in comparison.rows),
        row_classes=tuple(v if v in ('regression', 'improvement') else '' for v in verdicts),
        strong=COMPARISON_HEADER.index('verdict')),),
        lead=(comparison.describe(), f'{len(comparison.regressions)} regression(s)'))


def _provenance(cases, sessions):
    return Section('provenance', 'Provenance', (Table(
        ('session', 'started', 'command', *SESSION_FACTS),
        tuple((s['session_info']['uuid'], s['session_info']['time_start'],
               s['session_info'].get('cmdline', ''),
               *(s['session_info'].get(k, 'not recorded') for k in SESSION_FACTS))
              for s in sessions)),),
        details=tuple(Details(f'{case.title} on {case.partition} with {case.environ}',
                              (*((k, v or 'not recorded') for k, v in case_facts(case)),
                               ('nodes', ', '.join(case.nodes)), ('session', case.session)),
                              tuple(sorted(case.input_files.items())))
                      for case in cases),
        html_only=True)


def build(picture, saved_plots, papers, generated):
    """The Report of `picture`, its plots saved as `saved_plots` ((plot, file name));
    `papers`: the other systems' reference sets (their accelerators beside the GPUs)."""
    cases, refs = picture.cases, picture.references
    checks = {c.check for c in cases}
    failed = sum(r.result == 'fail' for c in cases for r in reference_rows(c, refs))
    summary = summary_rows(cases, refs)
    gpu = gpu_rows(cases, papers)
    between, matrices = gpu_to_gpu_rows(cases), gpu_pair_matrices(cases)
    blas = blas_mpi_tables(cases, picture.ceilings)
    sections = [
        Section('summary', 'Summary', (Table(SUMMARY_HEADER, tuple(map(tuple, summary)),
                                             row_classes=tuple('fail' if row[4] else ''
                                                               for row in summary)),)),
        _results(cases, refs),
        Section('ceilings', 'Against the node\'s ceilings', (Table(
            CEILING_HEADER, tuple(map(tuple, ceiling_rows(cases, picture.ceilings)))),),
            intro='HPL against nominal Rpeak, the sustained peak and its DGEMM ceiling '
                  '(measured in HPL\'s job just before HPL); STREAM\'s all-core triad against '
                  'the bandwidth ceiling (non-temporal stores) and against the same triad '
                  'with the ordinary stores its compiled code makes (their write-allocate '
                  'reads, uncounted, cap it near 3/4 of the ceiling; STREAM with streaming '
                  'stores, stores=nontemporal, does no such reads); each ceiling as measured '
                  'on the node in the same session, with its runs\' spread (on a VM whose '
                  'clock varies, that spread is its variation).'),
    ]
    if gpu:
        sections.append(Section(
            'gpus', 'GPUs against their datasheets', (Table(GPU_HEADER, tuple(map(tuple, gpu))),),
            intro='BabelStream\'s triad against the datasheet memory bandwidth, cuBLAS DGEMM '
                  'against the FP64 peak with tensor cores and per watt drawn during the '
                  'calls, pinned copies against the host link (each the median over the '
                  'node\'s GPUs); below, the papers\' accelerators per watt.'))
    if between:
        sections.append(Section(
            'gpu-to-gpu', 'GPU to GPU',
            (Table(GPU_HEADER, tuple(map(tuple, between))),
             *(Table(tuple(header), tuple(map(tuple, grid)), heading=heading,
                     notes=tuple(notes)) for heading, header, grid, notes in matrices)),
            intro='MPI from device memory between GPU pairs against the link between them '
                  '(the node\'s topology: NVLinks at the datasheet\'s rate, or a PCIe path) '
                  'and against staging through the host (the pinned copy), collectives\' bus '
                  'bandwidth (nccl-tests\' definition) against what a node of these GPUs is '
                  'published to reach; then each node\'s GPU pairs: each pair\'s bandwidth '
                  'one way, its share of its link and the link, the slowest pair named.'))
    sections += [
        Section('blas', 'BLAS x MPI',
                tuple(Table(tuple(header), tuple(map(tuple, rows)), heading=heading)
                      for heading, header, rows in blas),
                intro='The test cases run with several BLAS libraries (HPL and its DGEMM '
                      'ceiling, HPCC: every MPI stack with the default BLAS, one stack with '
                      'each other), their GFLOP/s per BLAS and MPI, as each build\'s '
                      'provenance names them.' if blas else '',
                empty='No test case ran with more than one BLAS.'),
        Section('plots', 'Plots', plots=tuple(saved_plots)),
        _comparison(picture.comparison),
        _provenance(cases, picture.sessions),
    ]
    about = (f'{len(cases)} test case(s) of {len(checks)} check(s), {failed} figure(s) '
             'outside their reference bounds')
    return Report(picture.system, generated, about, tuple(sections))
