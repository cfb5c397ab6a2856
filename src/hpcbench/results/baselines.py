"""A machine's own references (`make baseline`): each figure the median of its stored runs,
bounded by their spread (baseline_bounds: the runs' 5th percentile less MARGIN for a figure
that should be high, the 95th plus MARGIN for one that should be low; at least GUESS away
from the median from fewer than BASELINE_SESSIONS sessions)."""
import datetime
import math
import socket
import statistics

from hpcbench.results import measured
# Which way a figure improves is the measured figure's own (Figure.better).
from hpcbench.results.measured import better
from hpcbench.results.references import (Figure, ReferenceSet, check_tolerance,
                                         reported_variables)


# A baseline figure's bound (the rule docs/results.md states): its runs' 5th percentile less MARGIN
# for a figure that should be high (95th percentile plus MARGIN for one that should be
# low), as a fraction of their median. From fewer than BASELINE_SESSIONS sessions the
# spread between sessions (phases of the machine) is unknown: the bound is a guess, at
# least GUESS away from the median.
PERCENTILE = 5


MARGIN = 0.05


GUESS = 0.10


BASELINE_SESSIONS = 3


def baseline_bounds(variable, unit, values, sessions, margin=MARGIN, guess=GUESS):
    """(ReFrame's (lower, upper) thresholds, the rule in words) of a baseline figure whose
    runs gave `values` in `sessions` sessions."""
    direction = better(variable, unit)
    if direction is None:
        return (None, None), 'none: a property, not a speed'

    median = statistics.median(values)
    if not median:
        return (None, None), 'none: the median is 0'
    percentile = PERCENTILE if direction == 'higher' else 100 - PERCENTILE
    # Interpolated between the values, as numpy.percentile's default does.
    edge = (statistics.quantiles(values, n=100, method='inclusive')[percentile - 1]
            if len(values) > 1 else values[0])
    sign = -1 if direction == 'higher' else 1
    fraction = abs(edge / median - 1) + margin
    rule = f'{"p" if sessions >= BASELINE_SESSIONS else "guess: p"}{percentile} ' \
           f'{"-" if sign < 0 else "+"} {margin:.0%}'
    if sessions < BASELINE_SESSIONS:
        fraction = max(fraction, guess)
        rule += (f', at least {guess:.0%} ({sessions} session(s): the spread between '
                 'sessions is unknown)')
    fraction = min(fraction, 1.0) if sign < 0 else fraction   # a speed never goes below 0
    return ((-fraction, None) if sign < 0 else (None, fraction)), rule


def baseline_from_samples(system, samples, started, margin=MARGIN, guess=GUESS, host=None,
                          recorded=None):
    """A ReferenceSet of the system's baseline from its figures over many runs.

    samples: hpcbench.results.measured.figure_samples of the sessions (each figure's
    values, one per run, and the sessions they came from); started: {session UUID: start,
    ISO 8601}. Each figure is the median of its runs, with bounds by baseline_bounds, and
    says what it was made from (`sample`). A figure matches the inputs it was measured with
    too: a baseline of a quick run does not judge a full one, nor one at another -S
    memory_fraction.
    """
    check_tolerance(margin, 'margin')
    check_tolerance(guess, 'tolerance')
    figures, used = [], set()
    for (check, partition, environ, parameters, inputs), by_variable in samples.items():
        match = {**dict(parameters), **({'inputs': inputs} if inputs else {})}
        params = ', '.join(f'{k}={v}' for k, v in parameters)
        for variable, figure in sorted(by_variable.items()):
            if variable not in reported_variables(check, match):
                continue    # stored by a check that since renamed it: no figure of today's
            # The runs of the newest stack only (another build, BLAS or MPI is another
            # figure), and the figure judges that stack's builds alone.
            stack, figure = list(measured.by_stack(figure).items())[-1]
            # A stored value that is no number (NaN, infinite) is no run's figure: left out,
            # and a figure with no other is no reference.
            kept = [(v, u) for v, u in zip(figure.values, figure.sessions)
                    if math.isfinite(v) and v >= 0]
            if not kept:
                continue
            values, uuids = [v for v, _ in kept], [u for _, u in kept]
            dates = sorted(started[u] for u in uuids)
            bounds, rule = baseline_bounds(variable, figure.unit, values, len(set(uuids)),
                                           margin, guess)
            used.update(uuids)
            figures.append(Figure(
                check=check, partition=partition, environ=environ,
                match={**match, **({'build_spec': stack} if stack else {})},
                variable=variable, value=float(statistics.median(values)), unit=figure.unit,
                tolerance=bounds, source='baseline',
                where=f'median of {len(values)} run(s) in {len(set(uuids))} session(s), '
                      f'{dates[0]} to {dates[-1]}',
                configuration=f'{environ}, {params}' if params else environ,
                sample={'runs': len(values), 'sessions': len(set(uuids)),
                        'first': dates[0], 'last': dates[-1], 'min': float(min(values)),
                        'max': float(max(values)), 'bound': rule},
            ))

    sources = {'baseline': {
        'baseline_sessions': sorted(used, key=lambda u: started[u]),
        'recorded': recorded or datetime.datetime.now().isoformat(timespec='seconds'),
        'host': host or socket.gethostname(),
        'rule': (f'median of the runs; bound: their {PERCENTILE}th percentile (95th for a '
                 f'time) less (plus) {margin:.0%} of the median; from fewer than '
                 f'{BASELINE_SESSIONS} sessions a guess, at least {guess:.0%}'),
    }}
    return ReferenceSet(system, sources, figures)
