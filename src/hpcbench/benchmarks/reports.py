"""What each check reports, declared once, beside the pure module it delegates to: each
benchmark module names its checks in `REPORTS` ({check class: Reports}); the references
registry (hpcbench.results.references) and everything that counts figures per benchmark
read them through `declared()`, a loop over this package. A new check adds its entry to
its own module's REPORTS, nowhere else."""
import importlib
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

    def variables_for(self, match=None):
        """The variables the check reports for a figure of `match` (its parameters)."""
        if callable(self.variables):
            return set(self.variables(match or {}))
        return set(self.variables)


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
