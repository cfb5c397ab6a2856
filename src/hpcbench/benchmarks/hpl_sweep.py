"""HPL's tuning sweep (T2K §4.4): one setting varied at a time around the base tuning
(sweep_tuning), the performance variable of each value (sweep_variable), and the best value
of each setting from the runs' rates (sweep_rates, tuning_table)."""
from dataclasses import replace

from hpcbench.benchmarks.hpl import BCAST_NAMES, FACT_NAMES, HplInputError
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

    return [sweep_variable(setting, v) for v in SWEEP[setting][1]]


def sweep_tuning(base, name, values=None):
    """`base` with one setting swept over its candidate values (see SWEEP)."""
    if name == 'swap_threshold':
        if values is None or len(values) != 1:
            raise HplInputError('the swapping threshold is swept one run per value')

        return replace(base, swap_threshold=int(values[0]))

    if name not in SWEEP:
        raise HplInputError(f'unknown HPL sweep setting {name!r}; known: '
                            f'{", ".join([*SWEEP, "swap_threshold"])}')

    field_name, candidates = SWEEP[name]
    return replace(base, **{field_name: tuple(values or candidates)})


def sweep_rates(runs, name):
    """{value: best Gflops} of a sweep over one HPL.dat setting."""
    rates = {}
    for run in runs:
        value = run.setting(name)
        rates[value] = max(rates.get(value, 0.0), run.gflops)

    return rates


def tuning_table(rates_by_setting):
    """The sweep summary, like T2K Tables 2-4: every value's rate, the best marked.

    `rates_by_setting` is {setting: {value label: Gflops}}, as the sweep's performance
    variables name them (`bcast=2ringM`).
    """
    lines = [f'{"setting":<16}{"value":<16}{"GFLOP/s":>10}']
    best_values = []
    for name, rates in rates_by_setting.items():
        if not rates:
            continue

        best = max(rates, key=rates.get)
        best_values.append(f'{name}={best}')
        for label, rate in rates.items():
            mark = '  <- best' if label == best else ''
            lines.append(f'{name:<16}{label:<16}{rate:>10.2f}{mark}')

    lines.append('best: ' + ' '.join(best_values))
    return '\n'.join(lines)

# What this module's checks report (hpcbench.benchmarks.reports).
_SWEPT = tuple(v for setting in (*SWEEP, 'swap_threshold') for v in sweep_variables(setting))
REPORTS = {'HplTuningSweep': Reports('HPL', _SWEPT, {v: 'GFLOP/s' for v in _SWEPT})}
