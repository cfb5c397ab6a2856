"""The report's trend plots: a figure's median per session over time, with each session's
spread, the baseline's band where one is recorded, regressions marked, and a change of the
software stack drawn as a break (a trend never runs across two stacks)."""
import datetime
import statistics

import matplotlib.dates

from hpcbench.report.plots import Plot, no_measurements, plt     # plots chose the backend
from hpcbench.results import measured, references, verdicts


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


def _session_points(figure):
    """[(session start, median, min, max)] of a figure (measured.figure_samples' entry),
    oldest first."""
    return [(datetime.datetime.fromtimestamp(started, datetime.timezone.utc),
             statistics.median(values), min(values), max(values))
            for started, _, values in measured.by_session(figure)]


def _baseline_band(baseline, check, partition, environ, match):
    """(low, median, high) of the baseline's accepted range for a test case, else None."""
    if not baseline or 'baseline' not in baseline.sources:
        return None
    found = references.select(baseline, check, partition, environ, match)
    return next(((f.value * (1 + (f.tolerance[0] or 0)), f.value,
                  f.value * (1 + (f.tolerance[1] or 0)))
                 for f in found.values() if f.source == 'baseline'), None)


def trend(samples, baseline, system, check, variable, wanted, title,
          threshold=verdicts.THRESHOLD):
    """One headline figure per session over time: a line per MPI stack and test case (the
    session's median, bars from its lowest to its highest run), its baseline's accepted
    range as a band, its change points (verdicts.change_points) marked."""
    fig, ax = plt.subplots(figsize=(10, 4))
    colours, cases_of = {}, {}
    shown, unit, changes, stack_changes = 0, '', 0, 0
    for (c, partition, environ, parameters, inputs), figures in sorted(samples.items(),
                                                                        key=str):
        params = dict(parameters)
        if c != check or variable not in figures or any(params.get(k) != v
                                                        for k, v in wanted.items()):
            continue
        figure = figures[variable]
        unit = figure['unit']
        points = _session_points(figure)
        times, medians, lows, highs = zip(*points)
        # A colour per MPI stack, a line style per test case of it.
        colour = colours.setdefault(environ, f'C{len(colours) % 10}')
        style = ('-', '--', ':', '-.')[cases_of.get(environ, 0) % 4]
        cases_of[environ] = cases_of.get(environ, 0) + 1
        label = ' '.join([environ, *(f'{k}={v}' for k, v in parameters
                                     if k not in wanted)])
        ax.errorbar(times, medians, yerr=[[m - lo for m, lo in zip(medians, lows)],
                                          [hi - m for m, hi in zip(medians, highs)]],
                    color=colour, linestyle=style, marker='o', markersize=4, capsize=2,
                    linewidth=1.5, label=label)
        # Each stack (the build, its BLAS and MPI) on its own: a change of the software is
        # marked as such, and change points are sought within one stack only.
        parts = measured.by_stack(figure)
        band = _baseline_band(baseline, check, partition, environ,
                              {**params, **({'inputs': inputs} if inputs else {}),
                               'build_spec': list(parts)[-1]})
        if band:
            ax.axhspan(band[0], band[2], color=colour, alpha=0.12)
            ax.axhline(band[1], color=colour, linestyle=(0, (1, 3)), linewidth=1)
        for number, part in enumerate(parts.values()):
            part_times, part_medians = zip(*[(t, m) for t, m, _, _ in _session_points(part)])
            if number:
                stack_changes += 1
                ax.axvline(part_times[0], color=colour, linestyle=':', linewidth=1.5)
                ax.annotate('stack changed', (part_times[0], part_medians[0]), fontsize=7,
                            color=colour, xytext=(3, -10), textcoords='offset points')
            for index, kind in verdicts.change_points(variable, unit, list(part_medians),
                                                      threshold):
                changes += 1
                ax.axvline(part_times[index], color=colour, linestyle='--', linewidth=1)
                ax.annotate(kind, (part_times[index], part_medians[index]), fontsize=7,
                            color=colour, xytext=(3, 3), textcoords='offset points')
        shown += 1

    if not shown:
        no_measurements(ax, f'{check} {variable}')
    else:
        ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter('%m-%d %H:%M'))
        fig.autofmt_xdate()
    ax.set_ylabel(f'{variable} ({unit})' if unit else variable)
    ax.set_xlabel('session start (UTC)')
    ax.set_title(f'{title}, per session: {system}')
    if shown:
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
                f'{verdicts.ALPHA:g} ({changes} found), sought within one software stack '
                f'only. Dotted vertical lines: the stack changed (another build, BLAS or '
                f'MPI: {stack_changes} found), a change of the software, not of the machine.')


def trends(samples, baseline, system, threshold=verdicts.THRESHOLD):
    """The trend plot of every headline figure (TRENDS), one at a time (each is saved and
    closed before the next is drawn)."""
    for spec in TRENDS:
        yield trend(samples, baseline, system, *spec, threshold=threshold)
