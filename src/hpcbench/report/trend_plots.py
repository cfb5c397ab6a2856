"""The report's trend plots: a figure's median per session over time, with each session's
spread, the baseline's band where one is recorded, regressions marked, and a change of the
software stack drawn as a break (a trend never runs across two stacks)."""
import matplotlib.dates

from hpcbench.report.plots import Plot, no_measurements, plt     # plots chose the backend
from hpcbench.results import changes, trends


# The headline figures whose trend the report plots: (check, variable, the test cases, title).
TRENDS = (
    ('HplCheck', 'gflops', {}, 'HPL GFLOP/s'),
    ('HplCheck', 'efficiency', {}, 'HPL efficiency (% of Rpeak)'),
    ('StreamCheck', 'triad', {}, 'STREAM triad'),
    ('ImbPairCheck', 'latency', {'benchmark': 'PingPong'}, 'IMB PingPong latency'),
    ('ImbPairCheck', 'peak_bandwidth', {'benchmark': 'PingPong'}, 'IMB PingPong bandwidth'),
    ('IorCheck', 'write_max', {'pattern': 'file-per-process', 'api': 'posix'},
     'IOR write, file per process, POSIX'),
    ('IorCheck', 'read_max', {'pattern': 'file-per-process', 'api': 'posix'},
     'IOR read, file per process, POSIX'),
    ('MpiStartupCheck', 'mpi_init', {}, 'MPI_Init time'),
)


def trend(samples, baseline, system, check, variable, wanted, title,
          threshold=changes.THRESHOLD):
    """One headline figure per session over time, as the results layer judged it
    (hpcbench.results.trends): a line per MPI stack and test case (the session's median,
    bars from its lowest to its highest run), its baseline's accepted range as a band, a
    change of stack and each change point marked."""
    fig, ax = plt.subplots(figsize=(10, 4))
    colours, cases_of = {}, {}
    lines = trends.trend_lines(samples, baseline, check, variable, wanted, threshold)
    unit = lines[-1].unit if lines else ''
    for line in lines:
        # A colour per MPI stack, a line style per test case of it.
        colour = colours.setdefault(line.environ, f'C{len(colours) % 10}')
        style = ('-', '--', ':', '-.')[cases_of.get(line.environ, 0) % 4]
        cases_of[line.environ] = cases_of.get(line.environ, 0) + 1
        label = ' '.join([line.environ, *(f'{k}={v}' for k, v in line.parameters
                                          if k not in wanted)])
        ax.errorbar([p.started for p in line.points], [p.median for p in line.points],
                    yerr=[[p.median - p.low for p in line.points],
                          [p.high - p.median for p in line.points]],
                    color=colour, linestyle=style, marker='o', markersize=4, capsize=2,
                    linewidth=1.5, label=label)
        if line.band:
            ax.axhspan(line.band[0], line.band[2], color=colour, alpha=0.12)
            ax.axhline(line.band[1], color=colour, linestyle=(0, (1, 3)), linewidth=1)
        for part in line.parts[1:]:
            first = part.points[0]
            ax.axvline(first.started, color=colour, linestyle=':', linewidth=1.5)
            ax.annotate('stack changed', (first.started, first.median), fontsize=7,
                        color=colour, xytext=(3, -10), textcoords='offset points')
        for change in (c for part in line.parts for c in part.changes):
            ax.axvline(change.at.started, color=colour, linestyle='--', linewidth=1)
            ax.annotate(change.kind, (change.at.started, change.at.median), fontsize=7,
                        color=colour, xytext=(3, 3), textcoords='offset points')
    found = sum(len(part.changes) for line in lines for part in line.parts)
    stack_changes = sum(line.stack_changes for line in lines)

    if not lines:
        no_measurements(ax, f'{check} {variable}')
    else:
        ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter('%m-%d %H:%M'))
        fig.autofmt_xdate()
    ax.set_ylabel(f'{variable} ({unit})' if unit else variable)
    ax.set_xlabel('session start (UTC)')
    ax.set_title(f'{title}, per session: {system}')
    if lines:
        # Beside the axes: the lines are what the plot is about.
        ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1))
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    name = f'trend-{check}-{variable}'.lower()
    return Plot(name, f'{title} per session', fig,
                f'Measured: {check} {variable}, per session the median of its runs (bars: '
                f'lowest to highest run), per MPI stack and test case. Band: the baseline\'s '
                f'accepted range (make baseline), dotted line its median. Dashed vertical '
                f'lines: change points, where the sessions before and after differ by more '
                f'than {threshold:g} % with a one-sided Mann-Whitney U p <= '
                f'{changes.ALPHA:g} ({found} found), sought within one software stack '
                f'only. Dotted vertical lines: the stack changed (another build, BLAS or '
                f'MPI: {stack_changes} found), a change of the software, not of the machine.')


def all_trends(samples, baseline, system, threshold=changes.THRESHOLD):
    """The trend plot of every headline figure (TRENDS), one at a time (each is saved and
    closed before the next is drawn)."""
    for spec in TRENDS:
        yield trend(samples, baseline, system, *spec, threshold=threshold)
