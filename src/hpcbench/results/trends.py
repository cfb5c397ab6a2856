"""A headline figure over sessions, judged (the report's trend plots draw it): per test case
and MPI stack a line of session medians with each session's lowest and highest run, split
where the software changed (another build, BLAS or MPI: a trend never runs across two
stacks), the change points of each part (hpcbench.results.changes.change_points) and the
baseline's accepted band where one is recorded."""
import datetime
import statistics
from dataclasses import dataclass

from hpcbench.results import changes, measured, references


@dataclass(frozen=True)
class SessionPoint:
    """A figure in one session: when it started (UTC), its runs' median, lowest, highest."""
    started: datetime.datetime
    median: float
    low: float
    high: float


@dataclass(frozen=True)
class ChangePoint:
    at: SessionPoint        # the first session after the change
    kind: str               # 'regression' or 'improvement'


@dataclass(frozen=True)
class StackPart:
    """The sessions of one software stack, with the change points found among them."""
    stack: str
    points: tuple           # SessionPoint, oldest first
    changes: tuple = ()     # ChangePoint


@dataclass(frozen=True)
class TrendLine:
    """One test case's figure over sessions: `parts` one per stack, oldest first."""
    environ: str
    parameters: tuple       # ((name, value), ...) of the case
    unit: str
    points: tuple           # SessionPoint of every session, oldest first
    parts: tuple            # StackPart
    band: tuple = None      # (low, median, high) of the baseline's accepted range

    @property
    def stack_changes(self):
        return len(self.parts) - 1


def session_points(series):
    """[SessionPoint] of a measured.Series, oldest first."""
    return [SessionPoint(datetime.datetime.fromtimestamp(started, datetime.timezone.utc),
                         statistics.median(values), min(values), max(values))
            for started, _, values in measured.by_session(series)]


def baseline_band(baseline, check, partition, environ, match):
    """(low, median, high) of the baseline's accepted range for a test case, else None."""
    if not baseline or 'baseline' not in baseline.sources:
        return None
    found = references.select(baseline, check, partition, environ, match)
    return next(((f.value * (1 + (f.tolerance[0] or 0)), f.value,
                  f.value * (1 + (f.tolerance[1] or 0)))
                 for f in found.values() if f.source == 'baseline'), None)


def trend_lines(samples, baseline, check, variable, wanted, threshold=changes.THRESHOLD):
    """[TrendLine] of `check`'s `variable` in every test case whose parameters hold `wanted`
    (samples: measured.figure_samples), each stack's sessions searched for change points
    on their own."""
    lines = []
    for (c, partition, environ, parameters, inputs), figures in sorted(samples.items(),
                                                                        key=str):
        params = dict(parameters)
        if c != check or variable not in figures or any(params.get(k) != v
                                                        for k, v in wanted.items()):
            continue
        series = figures[variable]
        stacks = measured.by_stack(series)
        band = baseline_band(baseline, check, partition, environ,
                             {**params, **({'inputs': inputs} if inputs else {}),
                              'build_spec': list(stacks)[-1]})
        parts = []
        for stack, part in stacks.items():
            points = session_points(part)
            found = [ChangePoint(points[index], kind) for index, kind in
                     changes.change_points(variable, series.unit,
                                           [p.median for p in points], threshold)]
            parts.append(StackPart(stack, tuple(points), tuple(found)))
        lines.append(TrendLine(environ, parameters, series.unit,
                               tuple(session_points(series)), tuple(parts), band))
    return lines
