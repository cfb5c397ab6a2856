"""The report's plots: this system's measured results beside the papers' figures.

Each function takes measured cases (hpcbench.results.measured.measured_cases) and the papers'
reference sets (hpcbench.results.references.load) and returns a matplotlib Figure whose caption
cites every paper point it shows. A plot without local measurements still shows the
papers' points and says that nothing was measured: the report always has every plot.
"""
from dataclasses import dataclass

import matplotlib
import matplotlib.patches
import matplotlib.ticker

matplotlib.use('Agg')   # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from hpcbench.benchmarks import hpcc  # noqa: E402

MIB = 2**20


@dataclass
class Plot:
    name: str          # file stem
    title: str
    figure: object     # matplotlib Figure
    caption: str       # what is shown and where the papers' points come from


def _source_label(refs, fig):
    """'chic2007 Table 1': the paper's key and the place of the figure in it."""
    return f'{fig.source} {fig.where}'


def _paper_figures(reference_sets, check, variable, required_match=()):
    """(reference set, figure) of every paper figure of `check`'s `variable` whose match
    names every key of required_match."""
    return [(refs, fig) for refs in reference_sets for fig in refs.figures
            if fig.check == check and fig.variable == variable
            and all(k in fig.match for k in required_match)]


def _citations(pairs):
    cited = sorted({f'{refs.system}: {_source_label(refs, fig)} '
                    f'(seed {refs.sources[fig.source].get("seed", "?")})'
                    for refs, fig in pairs})
    return '; '.join(cited)


def no_measurements(ax, what):
    ax.text(0.5, 0.5, f'no {what} measured on this system yet', transform=ax.transAxes,
            ha='center', va='center', color='0.4', fontsize=9,
            bbox={'facecolor': 'white', 'edgecolor': '0.7'})


def _finish(fig, ax, handles=None):
    handles = handles or ax.get_legend_handles_labels()[0]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc='best')
    ax.grid(True, which='both', alpha=0.3)
    fig.tight_layout()
    return fig


def _counts_axis(ax):
    """A log2 axis of counts (nodes, threads, ranks) labelled 1, 2, 4, ... (every power of
    two, so that 1 has its label too)."""
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2, numticks=40))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f'{v:g}'))


def _dodge(series):
    """Series that share x values (several MPI stacks and layouts at 1 node) moved apart a
    little on a log axis, so that no marker hides another: {label: points}."""
    count = len(series)
    return {label: [(x * 2 ** (0.08 * (i - (count - 1) / 2)), y) for x, y in points]
            for i, (label, points) in enumerate(series.items())}


def _measured(cases, check, predicate=lambda case: True):
    return [c for c in cases if c.check == check and predicate(c)]


def _hpcc_points(cases, variable, x, scale=1.0):
    """{label: sorted [(x(case), value * scale)]} of HPCC's `variable` per environment: HPCC
    measures HPL, STREAM and PingPong too (the registry-only path's only HPL)."""
    points = {}
    for case in _measured(cases, 'HpccCheck'):
        if variable in case.figures:
            points.setdefault(f'{case.environ} HPCC', []).append(
                (x(case), case.value(variable) * scale))
    return {label: sorted(p) for label, p in sorted(points.items())}


def _draw_hpcc(ax, points_by_label, system, what=''):
    """HPCC's figures as stars beside a check's curves."""
    for label, points in points_by_label.items():
        ax.plot(*zip(*points), marker='*', markersize=11, linestyle='',
                label=f'{system} {label}{what} (measured)')


def _ranks(case):
    return case.num_tasks


def _series(cases, key, x, variable):
    """{label: sorted [(x, y)]} of the cases grouped by key(case)."""
    series = {}
    for case in cases:
        if variable in case.figures:
            series.setdefault(key(case), []).append((x(case), case.value(variable)))

    return {label: sorted(points) for label, points in sorted(series.items())}


def hpl_efficiency(cases, reference_sets, system):
    measured = _measured(cases, 'HplCheck')
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    series = _series(measured, lambda c: f'{system} {c.environ} '
                                         f'{c.parameters.get("layout_name", "")}',
                     lambda c: int(c.parameters.get('num_nodes', 1)), 'efficiency')
    for label, points in _dodge(series).items():
        ax.plot(*zip(*points), marker='o', linewidth=2, label=f'{label} (measured)')
    # HPCC's HPL runs on one node.
    hpcc_hpl = _hpcc_points(cases, 'hpl_efficiency', lambda c: 1)
    _draw_hpcc(ax, hpcc_hpl, system, ' HPL')

    papers = _paper_figures(reference_sets, 'HplCheck', 'efficiency', ('num_nodes',))
    groups = {}
    for refs, f in papers:
        label = f'{refs.system} {f.partition} [{_source_label(refs, f)}]'
        groups.setdefault(label, []).append((int(f.match['num_nodes']), f.value))
    for (label, points), marker in zip(sorted(groups.items()), 'sD^v<>ph*'):
        ax.plot(*zip(*sorted(points)), marker=marker, linestyle='--', alpha=0.8, label=label)

    if not series and not hpcc_hpl:
        no_measurements(ax, 'HPL')
    _counts_axis(ax)
    ax.set_xlabel('nodes')
    ax.set_ylabel('HPL efficiency, Rmax / Rpeak (%)')
    ax.set_ylim(0, 100)
    ax.set_title('HPL efficiency against node count')
    return Plot('hpl-efficiency', 'HPL efficiency against node count', _finish(fig, ax),
                f'Measured: HplCheck efficiency per MPI stack and layout, and HPCC\'s HPL '
                f'(one node, one rank per core). Papers: '
                f'{_citations(papers)}.')


def stream_triad(cases, reference_sets, system):
    measured = _measured(cases, 'StreamCheck')
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    series = _series(measured, lambda c: f'{system} {c.environ} {c.parameters["stores"]} stores',
                     lambda c: int(c.parameters['num_threads']), 'triad')
    for label, points in series.items():
        ax.plot(*zip(*points), marker='o', linewidth=2, label=f'{label} (measured)')
    # HPCC's StarSTREAM: every rank runs STREAM at once; its figure is per rank (GB/s).
    star = {label: [(ranks, value * ranks) for ranks, value in points]
            for label, points in _hpcc_points(cases, 'star_stream_triad', _ranks,
                                              1000).items()}
    _draw_hpcc(ax, star, system, ' StarSTREAM triad x ranks')

    papers = _paper_figures(reference_sets, 'StreamCheck', 'triad', ('num_threads',))
    groups = {}
    for refs, f in papers:
        others = ', '.join(f'{k}={v}' for k, v in sorted(f.match.items()) if k != 'num_threads')
        kind = 'reference' if f.use == 'reference' else 'other configurations'
        label = f'{refs.system} {others} {kind} [{_source_label(refs, f)}]'
        groups.setdefault((f.use, label), []).append((int(f.match['num_threads']), f.value))
    for (use, label), points in sorted(groups.items(), reverse=True):
        if use == 'reference':
            ax.plot(*zip(*sorted(points)), marker='s', linestyle='--', label=label)
        else:
            ax.scatter(*zip(*points), marker='x', alpha=0.6, label=label)

    if not series and not star:
        no_measurements(ax, 'STREAM')
    _counts_axis(ax)
    ax.set_xlabel('OpenMP threads (HPCC: processes)')
    ax.set_ylabel('STREAM triad (MB/s)')
    ax.set_title('STREAM triad against threads')
    return Plot('stream-triad', 'STREAM triad against threads', _finish(fig, ax),
                f'Measured: StreamCheck triad per environment, with the stores the compiler '
                f'made and with streaming stores, and HPCC\'s StarSTREAM triad '
                f'(per process) times its processes. Papers: {_citations(papers)} '
                '(each DIMM count and compiler a configuration of the paper).')


def _imb_curves(cases, benchmark):
    """{label: the check's curve (hpcbench.benchmarks.imb.curve columns)} of `benchmark`'s
    cases."""
    curves = {}
    for case in cases:
        if case.check in ('ImbPairCheck', 'ImbGroupCheck') and \
                case.parameters.get('benchmark') == benchmark:
            columns = case.curve
            layout = case.parameters.get('layout_name')
            # Sessions stored by an older check may hold no curve, or another shape.
            if isinstance(columns, dict) and columns.get('bytes'):
                curves[case.environ + (f' {layout}' if layout else '')] = columns
    return curves


def imb(cases, reference_sets, system, benchmark):
    """Bandwidth and time against message size per MPI stack (each where IMB reports it),
    as CHiC's Figures 4-9 show them."""
    curves = _imb_curves(cases, benchmark)
    panels = [(column, label) for column, label in
              (('mbytes_per_sec', 'bandwidth (MB/s)'), ('t_avg', 't_avg (us)'))
              if not curves or any(column in c for c in curves.values())]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    axes = dict(zip((column for column, _ in panels), axes[0]))
    for (column, ylabel), ax in zip(panels, axes.values()):
        for label, columns in sorted(curves.items()):
            # Barrier's single row has no size: a log axis cannot show 0 bytes.
            points = [(b, v) for b, v in zip(columns['bytes'], columns.get(column, []))
                      if b > 0] or list(zip([1.0], columns.get(column, [])))
            if points:
                ax.plot(*zip(*points), marker='.', label=f'{system} {label}')
        ax.set_xscale('log', base=2)
        ax.set_xlabel('message size (bytes)')
        ax.set_ylabel(ylabel)
        ax.set_title(f'IMB {benchmark}: {ylabel.split(" (")[0]}')
        if column == 't_avg':
            ax.set_yscale('log')

    # HPCC's PingPong: bandwidth with 2,000,000-byte messages, latency with 8-byte ones.
    hpcc_points = {}
    if benchmark == 'PingPong':
        hpcc_points = {'mbytes_per_sec': _hpcc_points(cases, 'pingpong_bandwidth',
                                               lambda c: hpcc.PINGPONG_BANDWIDTH_BYTES, 1000),
                't_avg': _hpcc_points(cases, 'pingpong_latency',
                                        lambda c: hpcc.PINGPONG_LATENCY_BYTES)}
        for column, ax in axes.items():
            _draw_hpcc(ax, hpcc_points.get(column, {}), system)

    papers = [pair for variable in ('peak_bandwidth', 'bandwidth_4MiB')
              for pair in _paper_figures(reference_sets, 'ImbPairCheck', variable)
              if pair[1].match.get('benchmark') == benchmark]
    bandwidth_ax = axes.get('mbytes_per_sec')
    for i, (refs, f) in enumerate(papers if bandwidth_ax else [], start=len(curves)):
        label = f'{refs.system} {f.environ or "all MPIs"} {f.variable} [{_source_label(refs, f)}]'
        colour = f'C{i % 10}'
        if f.variable == 'peak_bandwidth':
            bandwidth_ax.axhline(f.value, linestyle=':', color=colour, label=label)
        else:
            bandwidth_ax.plot([4 * MIB], [f.value], marker='D', linestyle='', color=colour,
                              label=label)

    if not curves and not any(hpcc_points.values()):
        no_measurements(list(axes.values())[-1], f'IMB {benchmark}')
    for ax in axes.values():
        _finish(fig, ax)
    caption = ('Measured: the fastest of the launches at each message size, per MPI stack '
               '(the check\'s `curve`).')
    if any(hpcc_points.values()):
        caption += (' HPCC\'s PingPong: bandwidth at 2,000,000 bytes and latency at 8 bytes, '
                    'between two processes.')
    if papers:
        caption += f' Papers: {_citations(papers)}.'
    return Plot(f'imb-{benchmark.lower()}', f'IMB {benchmark} against message size', fig,
                caption)


def ior(cases, reference_sets, system):
    """Write and read bandwidth per access pattern, measured and the papers'."""
    bars = []   # (label, phase, value, measured?)
    for case in _measured(cases, 'IorCheck'):
        where = (f'{system} {case.environ} {case.parameters.get("pattern")} '
                 f'{case.parameters.get("api")}')
        for phase in ('write', 'read'):
            if f'{phase}_max' in case.figures:
                bars.append((where, phase, case.value(f'{phase}_max'), True))

    papers = [pair for variable in ('write_max', 'read_max')
              for pair in _paper_figures(reference_sets, 'IorCheck', variable)]
    for refs, f in papers:
        m = f.match
        nodes = f'{m["num_nodes"]} nodes' if 'num_nodes' in m else ''
        per_node = f' x {m["tasks_per_node"]}' if 'tasks_per_node' in m else ''
        where = (f'{refs.system} {f.environ or ""} {m.get("pattern", "")} {m.get("api", "")} '
                 f'{nodes}{per_node} [{_source_label(refs, f)}]')
        bars.append((' '.join(where.split()), f.variable.split('_')[0], f.value, False))

    colours = {('write', True): 'tab:blue', ('read', True): 'tab:orange',
               ('write', False): 'lightsteelblue', ('read', False): 'navajowhite'}
    labels = [f'{where} - {phase}' for where, phase, _, _ in bars]
    # Wide enough for the longest label (7 pt: about 0.055 in a character) and the bars, so
    # that the title and the axis label are not cut off on the right.
    fig, ax = plt.subplots(figsize=(max(9.0, 5.0 + 0.055 * max(map(len, labels), default=0)),
                                    max(3.0, 0.32 * len(bars) + 1.2)))
    ax.barh(range(len(bars)), [b[2] for b in bars],
            color=[colours[(b[1], b[3])] for b in bars])
    ax.set_yticks(range(len(bars)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale('log')
    ax.set_xlabel('bandwidth (MiB/s, best of the repetitions)')
    ax.set_title('IOR write and read per access pattern')
    # Swatches of their own: empty bars would all take the default colour.
    swatches = [matplotlib.patches.Patch(color=colours[key], label=text)
                for key, text in ((('write', True), 'write, measured'),
                                  (('read', True), 'read, measured'),
                                  (('write', False), 'write, paper'),
                                  (('read', False), 'read, paper'))]
    if not any(b[3] for b in bars):
        no_measurements(ax, 'IOR')
    return Plot('ior', 'IOR write and read per access pattern', _finish(fig, ax, swatches),
                f'Measured: IorCheck write_max and read_max per pattern and API. Papers: '
                f'{_citations(papers)}.')


def mpi_startup(cases, reference_sets, system):
    measured = _measured(cases, 'MpiStartupCheck')
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for variable, marker in (('mpi_init', 'o'), ('hello_world', 's')):
        series = _series(measured, lambda c: f'{system} {c.environ} {variable}',
                         lambda c: c.num_tasks, variable)
        for label, points in series.items():
            ax.plot(*zip(*points), marker=marker, linewidth=2, label=f'{label} (measured)')

    papers = [pair for variable in ('mpi_init', 'hello_world')
              for pair in _paper_figures(reference_sets, 'MpiStartupCheck', variable,
                                         ('num_nodes', 'ranks_per_node'))]
    groups = {}
    for refs, f in papers:
        label = (f'{refs.system} {f.environ} {f.variable} {f.use} '
                 f'[{_source_label(refs, f)}]')
        ranks = int(f.match['num_nodes']) * int(f.match['ranks_per_node'])
        groups.setdefault(label, []).append((ranks, f.value))
    for label, points in sorted(groups.items()):
        style = '--' if len(points) > 1 else ''
        ax.plot(*zip(*sorted(points)), marker='D', linestyle=style, alpha=0.8, label=label)

    if not measured:
        no_measurements(ax, 'MPI start-up')
    _counts_axis(ax)
    ax.set_yscale('log')
    ax.set_xlabel('MPI ranks')
    ax.set_ylabel('time (s)')
    ax.set_title('MPI start-up time against rank count')
    return Plot('mpi-startup', 'MPI start-up time against rank count', _finish(fig, ax),
                f'Measured: MpiStartupCheck mpi_init (MPI_Init alone) and hello_world (launch '
                f'to exit) per MPI stack. Papers: {_citations(papers)}.')


def all_plots(cases, reference_sets, system):
    """Every plot of the report, in its order."""
    benchmarks = sorted({c.parameters.get('benchmark') for c in cases
                         if c.check in ('ImbPairCheck', 'ImbGroupCheck')} - {None},
                        key=lambda b: (b != 'PingPong', b))
    return [hpl_efficiency(cases, reference_sets, system),
            stream_triad(cases, reference_sets, system),
            *(imb(cases, reference_sets, system, b) for b in benchmarks or ['PingPong']),
            ior(cases, reference_sets, system),
            mpi_startup(cases, reference_sets, system)]


# --- trends over sessions ---------------------------------------------------------------------


def save(plot, directory, dpi=100):
    """Write a plot as PNG into directory; returns the file's name."""
    name = f'{plot.name}.png'
    plot.figure.savefig(directory / name, dpi=dpi)
    plt.close(plot.figure)
    return name

