"""HPL's output: every result line and its residual check parsed (parse), with HPL's own
timers of its phases where its build prints them (Phases), the runs summarized (summarize),
and single-node runs screened for slow nodes (screen_nodes, T2K §4.2)."""
import math
import re
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.hpl import FACT_LETTERS
from hpcbench.benchmarks.hpl_model import update_flops


class HplOutputError(ValueError):
    """An HPL output that does not prove a complete, correct run."""


# T/V encodes the variant of each result line: W, process mapping, depth, broadcast,
# recursive factorization, NDIV, panel factorization, NBMIN (HPL_pdtest.c).
_RESULT = re.compile(
    r'^(?P<tv>W(?P<pmap>[RC])(?P<depth>\d)(?P<bcast>[0-5])(?P<rfact>[LCR])(?P<ndiv>\d+)'
    r'(?P<pfact>[LCR])(?P<nbmin>\d+))\s+(?P<n>\d+)\s+(?P<nb>\d+)\s+(?P<p>\d+)\s+(?P<q>\d+)'
    r'\s+(?P<seconds>\S+)\s+(?P<gflops>\S+)\s*$', re.M)


_RESIDUAL = re.compile(r'^\|\|Ax-b\|\|_oo/\(eps\*\(\|\|A\|\|_oo\*\|\|x\|\|_oo\+\|\|b\|\|_oo\)'
                       r'\*N\)=\s*(?P<value>\S+)\s+\.+\s+(?P<verdict>PASSED|FAILED)\s*$', re.M)


_END = 'End of Tests.'

# HPL built with HPL_DETAILED_TIMING prints, after each result, the most seconds any process
# spent in each phase (HPL_pdtest.c), a line only where that time is above zero: `+` marks a
# part of the phase above it.
_TIMER = re.compile(r'^(?:\+ )?Max aggregated wall time (?P<phase>rfact|pfact|mxswp|update|'
                    r'laswp|up tr sv)[ .]*:\s*(?P<seconds>\S+)\s*$', re.M)
_TIMERS_HEAD = '--VVV--VVV--'
_PHASE_NAMES = {'rfact': 'rfact', 'pfact': 'pfact', 'mxswp': 'mxswp', 'update': 'update',
                'laswp': 'laswp', 'up tr sv': 'uptrsv'}


@dataclass(frozen=True)
class Phases:
    """Where a solve's time went, by HPL's own timers (seconds, the most of any process):
    the panel factorizations (`rfact`; their column factorization `pfact` and its pivot
    search and exchange `mxswp` within it), the trailing updates (`update`; their row swaps
    `laswp` within it) and the back substitution (`uptrsv`). What no timer covers (the
    panels' broadcasts and the waits for them) is the solve's time less these."""
    rfact: float = 0.0
    pfact: float = 0.0
    mxswp: float = 0.0
    update: float = 0.0
    laswp: float = 0.0
    uptrsv: float = 0.0

    def update_gflops(self, n, nb):
        """The rate of the trailing updates' arithmetic (their flops, hpl_model.update_flops, over
        their time less their row swaps); None where that time is none."""
        seconds = self.update - self.laswp
        return update_flops(n, nb) / seconds / 1e9 if seconds > 0 else None

    def untimed(self, seconds):
        """The seconds of a solve of `seconds` that no timer covers (0 where the timers,
        each the most of any process, add up to more)."""
        return max(0.0, seconds - self.rfact - self.update - self.uptrsv)


@dataclass(frozen=True)
class Run:
    tv: str
    n: int
    nb: int
    p: int
    q: int
    seconds: float
    gflops: float
    residual: float
    depth: int
    bcast: int
    rfact: int
    ndiv: int
    pfact: int
    nbmin: int
    phases: Phases = None       # None where HPL was built without its detailed timers

    def setting(self, name):
        """The value of a swept setting, by Tuning's singular name ('nb', 'bcast', ...), or
        the process grid ('grid': (P, Q))."""
        return (self.p, self.q) if name == 'grid' else getattr(self, name)


def _number(text, what, line):
    try:
        value = float(text)
    except ValueError:
        raise HplOutputError(f'{what} is not a number in: {line.strip()}') from None

    if not math.isfinite(value):
        raise HplOutputError(f'{what} is not finite in: {line.strip()}')

    return value


@any_newlines
def parse(output, expected_results=None):
    """Every result of an HPL output, each proven by its residual check.

    Raises HplOutputError when a residual check FAILED, a result has no residual line (the
    run was cut short), a figure is not a finite positive number, the run did not reach
    'End of Tests.', or (when given) the number of results differs from what HPL.dat asked.
    """
    matches = list(_RESULT.finditer(output))
    if not matches:
        raise HplOutputError('no HPL result line (T/V N NB P Q Time Gflops) in the output')

    runs = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(output)
        residuals = list(_RESIDUAL.finditer(output, match.end(), end))
        line = match.group(0)
        if not residuals:
            raise HplOutputError(f'no residual check after: {line.strip()} (run cut short?)')

        residual = residuals[0]
        if residual.group('verdict') != 'PASSED':
            raise HplOutputError(f'residual check FAILED for: {line.strip()} '
                                 f'({residual.group(0).strip()})')

        seconds = _number(match.group('seconds'), 'Time', line)
        gflops = _number(match.group('gflops'), 'Gflops', line)
        if seconds <= 0 or gflops <= 0:
            raise HplOutputError(f'non-positive time or Gflops in: {line.strip()}')

        phases = _phases(output[match.end():residual.start()], seconds, line)
        runs.append(Run(
            tv=match.group('tv'), n=int(match.group('n')), nb=int(match.group('nb')),
            p=int(match.group('p')), q=int(match.group('q')), seconds=seconds,
            gflops=gflops, residual=_number(residual.group('value'), 'residual', line),
            depth=int(match.group('depth')), bcast=int(match.group('bcast')),
            rfact=FACT_LETTERS[match.group('rfact')], ndiv=int(match.group('ndiv')),
            pfact=FACT_LETTERS[match.group('pfact')], nbmin=int(match.group('nbmin')),
            phases=phases))

    if _END not in output:
        raise HplOutputError(f'HPL did not reach "{_END}" (run cut short?)')

    if expected_results is not None and len(runs) != expected_results:
        raise HplOutputError(f'{len(runs)} HPL results, but HPL.dat asked for '
                             f'{expected_results}')

    return runs


def _phases(text, seconds, line):
    """The Phases of one solve's timer lines (`text`: between its result and its residual
    line); None where HPL printed none."""
    if _TIMERS_HEAD not in text:
        return None
    found = {}
    for timer in _TIMER.finditer(text):
        phase = _PHASE_NAMES[timer.group('phase')]
        if phase in found:
            raise HplOutputError(f'two {timer.group("phase")} timers after: {line.strip()}')
        value = _number(timer.group('seconds'), f'the {timer.group("phase")} timer', line)
        # A timer is a share of its solve: none above the solve's own time (HPL prints
        # seconds to 0.01, so a phase of a short solve may round up to it).
        if value < 0 or value > seconds + 0.01:
            raise HplOutputError(f'the {timer.group("phase")} timer ({value:g} s) is no part '
                                 f'of its solve of {seconds:g} s: {line.strip()}')
        found[phase] = value
    if not found:
        raise HplOutputError(f'HPL\'s timer header but no timer after: {line.strip()}')
    return Phases(**found)


@dataclass(frozen=True)
class Summary:
    best_gflops: float
    mean_gflops: float
    min_gflops: float
    best_seconds: float
    spread_percent: float      # (max - min) / mean over the repeats


def summarize(runs):
    rates = [r.gflops for r in runs]
    mean = sum(rates) / len(rates)
    best = max(runs, key=lambda r: r.gflops)
    return Summary(best.gflops, mean, min(rates), best.seconds,
                   100 * (max(rates) - min(rates)) / mean)


@dataclass(frozen=True)
class Screening:
    median: float
    slow: dict            # {node: (rate, percent below the median)}
    rates: dict           # {node: rate}


def screen_nodes(rates, threshold_percent=5.0):
    """Those of `rates` ({node: rate}) more than `threshold_percent` below their median:
    T2K's screening by single-node HPL (§4.2), and the suite's by each node's slowest GPU
    and of a node's GPUs (hpcbench.benchmarks.gpu_screen)."""
    if not rates:
        raise ValueError('no results to screen')

    values = sorted(rates.values())
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    slow = {}
    for name, rate in rates.items():
        below = 100 * (median - rate) / median
        if below > threshold_percent:
            slow[name] = (rate, below)

    return Screening(median, slow, dict(rates))
