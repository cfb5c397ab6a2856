"""Test cases side by side per MPI stack and BLAS library (`hpcbench compare-stacks`, the
report's comparison tables): each figure's samples per environment, the BLAS x MPI grid of
a check's headline figure, and plain-text tables of them; withheld figures said with their
reason."""

from hpcbench.results.case_builds import DGEMM_FIGURES, stack_of
from hpcbench.results.measured import case_figure


def side_by_side(cases):
    """The same test case's figures per environment (MPI stack), for every case that ran
    in more than one: [(heading, {environ: case})], checks and parameters in order."""
    groups = {}
    for case in cases:
        heading = f'{case.title} on {case.system}:{case.partition}'
        groups.setdefault(heading, {})[case.environ] = case

    return [(heading, group) for heading, group in sorted(groups.items()) if len(group) > 1]


# A provider in a build's provenance line (hpcbench.stack.provenance.build_spec):
# `^mpi=openmpi@4.1.4`, `^blas,lapack=openblas@0.3.21`.
def environment_samples(group, variable):
    """One figure of a side_by_side group as a sample per environment: {environ: (values,
    what they are)}. The case's runs where it ran more than once (--repeat: each run its
    own job), else its job's own repeats where it recorded them (DGEMM's calls, HPL's
    solves: one job, so one phase of the machine), else its one value."""
    samples = {}
    for environ, case in group.items():
        figure = case.figures.get(variable)
        runs = list(figure.runs) if figure else []
        own = list(figure.samples) if figure else []
        if len(runs) > 1:
            samples[environ] = (runs, f'{len(runs)} runs')
        elif len(own) > 1:
            samples[environ] = (own, f"its job's {len(own)} repeats")
        elif runs:
            samples[environ] = (runs, '1 run')
    return samples


def headline_variable(group):
    """The figure a group is ranked and gridded by: `gflops` (HPL's, HPCC's, DGEMM's), else
    the case's first."""
    figures = next(iter(group.values())).figures
    return 'gflops' if 'gflops' in figures else next(iter(figures))


def compared_variables(group):
    """The figures a group's environments are set side by side by (BLAS x MPI grids,
    rankings): its headline, then the DGEMM ceiling where its jobs measured one."""
    figures = next(iter(group.values())).figures
    return [headline_variable(group), *(v for v in DGEMM_FIGURES.values()
                                        if v in figures and v != 'gflops')]


def blas_mpi_grid(group, variable):
    """One figure of a case measured in several environments (side_by_side) as a row per
    BLAS and a column per MPI: (MPIs, [(BLAS, [values or None per MPI])]); None when its
    environments used fewer than two BLAS libraries. A cell holds every environment's
    value for its BLAS and MPI: a case that uses no MPI (DGEMM, column '-') is measured
    once per environment of its BLAS, and each of those is a figure."""
    cells = {}
    for case in group.values():
        stack = stack_of(case)
        if variable in case.figures and 'blas' in stack:
            cells.setdefault((stack['blas'], stack.get('mpi', '-')), []).append(
                case_figure(case, variable))
    blases = list(dict.fromkeys(b for b, _ in cells))
    if len(blases) < 2:
        return None

    mpis = list(dict.fromkeys(m for _, m in cells))
    return mpis, [(b, [cells.get((b, m)) for m in mpis]) for b in blases]


def blas_mpi_grids(groups):
    """Of side_by_side's groups, those run with several BLAS libraries: their compared
    figures (`gflops`: HPL's, HPCC's, DGEMM's, else the first; HPL's DGEMM ceiling) as
    BLAS x MPI: [(heading, variable, unit, grid)]."""
    grids = []
    for heading, group in groups:
        for variable in compared_variables(group):
            unit = next(iter(group.values())).figures[variable].unit
            grid = blas_mpi_grid(group, variable)
            if grid:
                grids.append((heading, variable, unit, grid))
    return grids


def grid_rows(grid, fmt=None):
    """A blas_mpi_grid's rows of cells, '-' where that BLAS did not run on that MPI, each
    environment's value where several measured it ('147.8 / 140.6')."""
    _, rows = grid
    fmt = fmt or _value
    return [[blas, *('-' if v is None else ' / '.join(fmt(x) for x in v) for v in values)]
            for blas, values in rows]


def grid_table(variable, unit, grid):
    """blas_mpi_grid as text."""
    return text_table([f'{variable} [{unit}]: BLAS \\ MPI', *grid[0]], grid_rows(grid))


def _value(number):
    return f'{number:.0f}' if abs(number) >= 1000 else f'{number:.4g}'


def stacks_table(group):
    """One case's figures as a table: a row per performance variable, a column per
    environment; '-' where an environment did not report the variable, `withheld` where it
    withheld it (withheld_lines says why)."""
    environs = list(group)
    units = {}
    for case in group.values():
        for name, figure in case.figures.items():
            units.setdefault(name, figure.unit)
        for name in case.withheld:
            units.setdefault(name, '%')

    header = ['figure', *environs]
    # What each environment built with, where its provenance says (Spack builds).
    stacks = {env: stack_of(case) for env, case in group.items()}
    rows = [[virtual, *(stacks[env].get(virtual, '-') for env in environs)]
            for virtual in ('mpi', 'blas') if any(virtual in s for s in stacks.values())]
    rows += [[f'{name} [{unit}]', *(_cell(group[env], name) for env in environs)]
             for name, unit in units.items()]
    return text_table(header, rows)


def withheld_lines(group):
    """Why each figure a group's environments withheld was withheld: `env variable: why`."""
    return [f'{env} {name} withheld: {why}' for env, case in group.items()
            for name, why in sorted(case.withheld.items())]


def _cell(case, name):
    if name in case.figures:
        return _figure_text(case, name)
    return 'withheld' if name in case.withheld else '-'


def _figure_text(case, variable):
    figure = case.figures[variable]
    if figure.value is None:
        return '-'
    return (f'{_value(figure.session_value)} (median of {len(figure.runs)})'
            if len(figure.runs) > 1 else _value(figure.value))


def text_table(header, rows):
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ['  '.join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(r, widths)))
             for r in [header, *rows]]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(lines)
