"""IMB's variability over repeated launches (Oakforest-PACS's Allreduce at 16 B and
Barrier, ImbVariability): each launch's time, and their mean, range and coefficient of
variation; the launches' outputs parsed by hpcbench.benchmarks.imb."""
import statistics
from dataclasses import dataclass

from hpcbench.benchmarks.imb import ImbOutputError, complete_table, parse_runs
from hpcbench.benchmarks.reports import Reports


@dataclass(frozen=True)
class Variability:
    mean: float
    min: float
    max: float
    cv_percent: float     # sample standard deviation / mean
    values: tuple = ()    # one per launch, in order

    @classmethod
    def of(cls, samples):
        if len(samples) < 2:
            raise ImbOutputError(f'{len(samples)} sample(s): variability needs at least 2')
        mean = statistics.fmean(samples)
        return cls(mean, min(samples), max(samples),
                   100 * statistics.stdev(samples) / mean if mean else 0.0, tuple(samples))


# What the variability check repeats (Oakforest-PACS: 16 B Allreduce and Barrier).
VARIABILITY_SIZE = 16


# ImbVariability's performance variables: {name: (figure, statistic, unit)}.
VARIABILITY_VARIABLES = {
    f'{name}_{stat}': (name, stat_key, unit)
    for name in ('barrier', 'allreduce_16B')
    for stat, stat_key, unit in (('mean', 'mean', 'us'), ('min', 'min', 'us'),
                                 ('max', 'max', 'us'), ('cv', 'cv_percent', '%'))
}


def variability(text, processes, repeats):
    """{'allreduce_16B': Variability, 'barrier': Variability} over the `repeats` IMB runs of
    a variability job (each: Allreduce at 16 B and Barrier at `processes`)."""
    runs = parse_runs(text, repeats)
    allreduce, barrier = [], []
    for tables in runs:
        allreduce.append(complete_table(tables, 'Allreduce', processes,
                                        (VARIABILITY_SIZE,)).rows[0].t_avg)
        barrier.append(complete_table(tables, 'Barrier', processes, ()).rows[0].t_avg)

    return {'allreduce_16B': Variability.of(allreduce), 'barrier': Variability.of(barrier)}


# What this module's check reports (hpcbench.benchmarks.reports).
REPORTS = {'ImbVariability': Reports('IMB', tuple(VARIABILITY_VARIABLES), {
    v: unit for v, (_, _, unit) in VARIABILITY_VARIABLES.items()})}
