"""What each check reports, declared once, beside the pure module it delegates to: each
benchmark module names its checks in `REPORTS` ({check class: Reports}); the references
registry (hpcbench.results.references) and everything that counts figures per benchmark
read them through `declared()`, a loop over this package. A new check adds its entry to
its own module's REPORTS, nowhere else."""
import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Callable, Union


@dataclass(frozen=True)
class Reports:
    #: The benchmark the check measures, as reports and counts name it ('HPL', 'IMB').
    benchmark: str
    #: Every performance variable it may report, whatever its inputs; or, where what it
    #: reports depends on a parameter a figure names in its `match` (IMB's benchmark), a
    #: function of that match giving them.
    variables: Union[tuple, Callable]
    #: The unit of each variable ({variable: unit}), or a function of a figure's `match`
    #: giving them: what the check's performance functions declare (tests/benchmarks/
    #: test_reports.py holds them to it and to the units of real stored runs).
    units: Union[dict, Callable] = None

    def variables_for(self, match=None):
        """The variables the check reports for a figure of `match` (its parameters)."""
        if callable(self.variables):
            return set(self.variables(match or {}))
        return set(self.variables)

    def unit_of(self, variable, match=None):
        """The unit of `variable` of a figure of `match`; None where it is not declared."""
        units = self.units(match or {}) if callable(self.units) else (self.units or {})
        return units.get(variable)


# Units of what a run measures as more than nothing: a time, a rate, a bandwidth, a power,
# a balance. A stored latency of -5 or 0 us is no run's (an edited or damaged record), and
# met every `at most`.
POSITIVE_UNITS = ('s', 'ms', 'us', 'ns', 'GB/s', 'MB/s', 'MiB/s', 'GFLOP/s', 'TFLOP/s',
                  'GFLOP/s/W', 'W', 'flop/word', 'msg/s')


def impossible(value, unit):
    """Why no run can have measured `value` in `unit` (not finite; nothing or less of a
    time or rate; less than none of a share or a size); '' where one can."""
    if not math.isfinite(value):
        return 'not a finite number'
    if unit in POSITIVE_UNITS and value <= 0:
        return f'no run measures a {unit} figure of nothing or less'
    if value < 0:
        return 'no run measures less than nothing'
    return ''


def declared(package_name=__package__):
    """{check class name: Reports} of every module of the benchmarks package; a check
    declared twice is an error naming both modules."""
    package = importlib.import_module(package_name)
    checks, where = {}, {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f'{package_name}.{info.name}')
        for check, reports in getattr(module, 'REPORTS', {}).items():
            if check in checks:
                raise ValueError(f'{check} is declared by {where[check]} and {info.name}')
            checks[check], where[check] = reports, info.name
    return checks
