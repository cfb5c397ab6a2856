"""HPL's tuning sweep (T2K §4.4): one setting varied at a time around the base tuning
(sweep_tuning; the process grids by shape, sweep_grids), the performance variable of each
value (sweep_variable), and the best value of each setting from the runs' rates
(sweep_rates, rates_by_setting, tuning_table)."""
import statistics
from dataclasses import replace

from hpcbench.benchmarks.hpl import BCAST_NAMES, FACT_NAMES, HplInputError, process_grid
from hpcbench.benchmarks.reports import Reports


# The settings the sweep varies one at a time around the defaults (T2K §4.4, Tables 2-4;
# TSUBAME Figures 3-1 and 3-6), by Tuning field; the swapping threshold is not an HPL.dat
# list, so each of its values is a run of its own.
SWEEP = {
    'nb': ('nbs', (96, 128, 160, 192, 224, 232, 240, 256, 384)),
    'bcast': ('bcasts', tuple(BCAST_NAMES)),
    'pfact': ('pfacts', tuple(FACT_NAMES)),
    'rfact': ('rfacts', tuple(FACT_NAMES)),
    'nbmin': ('nbmins', (1, 2, 4, 8)),
    'depth': ('depths', (0, 1, 2)),
}


SWAP_THRESHOLDS = (64, 128, 192)


# The process grids the sweep compares (one job: HPL runs every grid of its HPL.dat), named
# by shape so that the names are the same whatever the process count: the suite's rule
# (the nearest square with P <= Q, TSUBAME and T2K), its transpose, one process row and one
# process column. A shape that is an earlier one's grid at this count is left out (at 2
# processes, 1 x 2 is both the nearest square and one row).
GRID_SHAPES = ('nearest-square', 'transposed', 'one-row', 'one-column')


def sweep_grids(ranks):
    """{shape: (P, Q)} of the grids the grid sweep runs with `ranks` processes."""
    p, q = process_grid(ranks)
    candidates = zip(GRID_SHAPES, ((p, q), (q, p), (1, ranks), (ranks, 1)))
    grids = {}
    for shape, grid in candidates:
        if grid not in grids.values():
            grids[shape] = grid
    return grids


def setting_label(name, value):
    names = {'bcast': BCAST_NAMES, 'pfact': FACT_NAMES, 'rfact': FACT_NAMES}.get(name)
    return names[value] if names else str(value)


def sweep_variable(setting, value):
    """HplTuningSweep's performance variable for one swept value: `bcast=2ringM`."""
    return f'{setting}={setting_label(setting, value)}'


def sweep_variables(setting):
    """Every variable a sweep of `setting` may report."""
    if setting == 'swap_threshold':
        return [f'swap_threshold={t}' for t in SWAP_THRESHOLDS]
    if setting == 'grid':
        return [f'grid={shape}' for shape in GRID_SHAPES]

    return [sweep_variable(setting, v) for v in SWEEP[setting][1]]


def sweep_tuning(base, name, values=None):
    """`base` with one setting swept over its candidate values (see SWEEP); the grid is no
    Tuning setting (sweep_grids)."""
    if name == 'grid':
        return base
    if name == 'swap_threshold':
        if values is None or len(values) != 1:
            raise HplInputError('the swapping threshold is swept one run per value')

        return replace(base, swap_threshold=int(values[0]))

    if name not in SWEEP:
        raise HplInputError(f'unknown HPL sweep setting {name!r}; known: '
                            f'{", ".join([*SWEEP, "grid", "swap_threshold"])}')

    field_name, candidates = SWEEP[name]
    return replace(base, **{field_name: tuple(values or candidates)})


def swept_values(setting, tuning, given=(), shapes=None):
    """The values a sweep job of `setting` gives a figure each (sweep_variable): the grids'
    shapes (sweep_grids), the one swapping threshold given, else `tuning`'s swept list."""
    if setting == 'grid':
        return list(shapes)
    if setting == 'swap_threshold':
        return list(given)
    return list(getattr(tuning, SWEEP[setting][0]))


def sweep_rates(runs, name):
    """{value: best Gflops} of a sweep over one HPL.dat setting ((P, Q) for the grid)."""
    rates = {}
    for run in runs:
        value = run.setting(name)
        rates[value] = max(rates.get(value, 0.0), run.gflops)

    return rates


def rates_by_setting(figures):
    """{setting: {value label: [GFLOP/s of each run]}} of a sweep's stored figures, given as
    (variable, the values of its runs) pairs: its rates only (its job reports where HPL's
    time went too), every run of a value counted (--repeat)."""
    rates = {}
    for name, runs in figures:
        if name in SWEPT_VARIABLES:
            setting, label = name.split('=', 1)
            rates.setdefault(setting, {}).setdefault(label, []).extend(runs)
    return rates


def tuning_table(rates_by_setting):
    """The sweep summary, like T2K Tables 2-4: every value's rate, the best marked.

    `rates_by_setting` is {setting: {value label: [GFLOP/s of each run]}}, as the sweep's
    performance variables name them (`bcast=2ringM`; rates_by_setting). A value run
    several times (`--repeat`) is its median, with the lowest and highest beside it, and the
    best is the best median: one run of a drifting machine says little.
    """
    lines = [f'{"setting":<16}{"value":<16}{"GFLOP/s":>10}  runs (lowest to highest)']
    best_values = []
    for name, rates in rates_by_setting.items():
        if not rates:
            continue

        samples = {label: sorted(runs) for label, runs in rates.items()}
        medians = {label: statistics.median(runs) for label, runs in samples.items()}
        best = max(medians, key=medians.get)
        best_values.append(f'{name}={best}')
        for label, runs in samples.items():
            spread = f'  {len(runs)} ({runs[0]:.2f} to {runs[-1]:.2f})' if len(runs) > 1 else ''
            mark = '  <- best' if label == best else ''
            lines.append(f'{name:<16}{label:<16}{medians[label]:>10.2f}{spread}{mark}')

    lines.append('best: ' + ' '.join(best_values))
    return '\n'.join(lines)

# What this module's checks report (hpcbench.benchmarks.reports).
SWEPT_VARIABLES = tuple(v for setting in (*SWEEP, 'grid', 'swap_threshold')
                        for v in sweep_variables(setting))
REPORTS = {'HplTuningSweep': Reports('HPL', SWEPT_VARIABLES,
                                     {v: 'GFLOP/s' for v in SWEPT_VARIABLES})}
