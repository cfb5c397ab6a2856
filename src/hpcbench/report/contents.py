"""What the report shows of a system's picture (hpcbench.results.picture: what it measured),
as rows before any page is written: each case's figures against their references
(reference_rows, margin), the distribution of a figure's samples, the ratios to the node's
ceilings (ceiling_rows), the GPUs against their datasheets, the BLAS x MPI tables."""
import math
import statistics
from dataclasses import dataclass

from hpcbench.benchmarks import gpu_mpi
from hpcbench.results import references, stack_comparison


# Session extras recorded by `make run` (hpcbench provenance), in display order.
SESSION_FACTS = ('project_commit', 'spack_commit', 'spack_lock', 'host', 'blas_default',
                 'blas_default_from')


def case_facts(case):
    """[(name, value)] of what made a case's figures: its inputs and its provenance
    (hpcbench.rfm.plugins.Provenance), each '' where not recorded."""
    return [('inputs', case.inputs),
            *((name, getattr(case.provenance, name)) for name in case.provenance.FIELDS)]


def margin(value, reference):
    """Percent of the value above (+) or below (-) its reference; None without one."""
    if not reference:
        return None
    return 100.0 * (value - reference) / abs(reference)


@dataclass(frozen=True)
class ReferenceRow:
    """One figure of a case against its reference: lower and upper are fractions of the
    reference, margin percent of it; source the cited figure, if any."""
    variable: str
    value: float
    unit: str
    ref: float = None
    lower: float = None
    upper: float = None
    result: str = 'no reference'
    margin: float = None
    source: str = ''
    measured_as: str = ''


def reference_rows(case, reference_set):
    """A case's figures with their references (ReferenceRow), those withheld after them."""
    cited = references.select(reference_set, case.check, case.partition, case.environ,
                              case.variables) if reference_set else {}
    rows = []
    for variable, figure in case.figures.items():
        fig = cited.get(variable)
        rows.append(ReferenceRow(
            variable, figure.value, figure.unit, figure.reference, figure.lower,
            figure.upper, figure.result,
            margin(figure.value, figure.reference) if figure.has_reference else None,
            f'{fig.source} {fig.where}' if fig else '', measured_as(case, variable)))
    # A ratio above 100 % of its ceiling is no result: shown as withheld, with why.
    rows += [ReferenceRow(variable, None, '%', result='withheld', measured_as=why)
             for variable, why in case.withheld.items()]
    return rows


def distribution(values):
    """Values as the report shows a sample: `median 47.9, 47.4 to 53.4 (n=3, spread 12 %)`,
    the spread being (max - min) / median; values that are no number (NaN, infinite) as
    they are, beside the others."""
    broken = [v for v in values if not math.isfinite(v)]
    if broken:
        values = [v for v in values if math.isfinite(v)]
        shown = ', '.join(map(str, broken))
        return f'{distribution(values)}; not finite: {shown}' if values else f'{shown} (no number)'
    median = statistics.median(values)
    if len(values) == 1:
        return f'{format_value(median)} (n=1)'
    spread = f', spread {100 * (max(values) - min(values)) / abs(median):.0f} %' if median else ''
    return (f'median {format_value(median)}, {format_value(min(values))} to '
            f'{format_value(max(values))} (n={len(values)}{spread})')


def measured_as(case, variable):
    """How the job measured a figure and what it measured (hpcbench.rfm.plugins.Samples):
    `best of 3 solve(s): median 47.9, 47.4 to 53.4 (n=3, spread 12 %)`; '' when the check
    does not say."""
    figure = case.figures.get(variable)
    if figure is None:
        return ''
    return f'{figure.how}: {distribution(figure.samples)}' if figure.samples else figure.how


# What the report sets against the node's ceilings: per check, its figure and its ratios
# (variable, what it divides by). The ceilings are measured on the node in the same session:
# the sustained peak and bandwidth ceiling (NodeCeilings, likwid-bench); Rpeak is nominal,
# from the partition's description. HPL's DGEMM ceiling is measured in its own job just
# before HPL (sessions stored before: DgemmCeiling, a check of its own), STREAM's ceilings
# in its own job, round by round.
CEILING_RATIOS = {
    'HplCheck': ('gflops', (('efficiency', 'nominal Rpeak'),
                            ('sustained_peak_efficiency', 'sustained peak'),
                            ('ceiling_efficiency', 'DGEMM ceiling'),
                            # Beside it, the most the model says HPL can reach there
                            # (hpcbench.benchmarks.hpl_model), and the updates' own rate.
                            ('model_ceiling_efficiency', 'DGEMM ceiling: the model\'s bound'),
                            ('update_ceiling_efficiency', 'DGEMM ceiling: the updates\' '
                             'arithmetic'))),
    'StreamCheck': ('triad', (('triad_ceiling_efficiency', 'bandwidth ceiling'),
                              ('triad_cached_store_efficiency', 'ordinary-store triad'))),
}


CEILING_HEADER = ['test case', 'environ', 'figure', 'against', 'ratio', 'over the stored runs',
                  'how']


def over_runs_text(case, variable):
    """`median 92.3, 88.1 to 95 (n=6, spread 7 %) of this stack's runs`: a case's figure over
    the stored runs of its stack (over_stored_runs); '' for fewer than two."""
    figure = case.figures.get(variable)
    values = figure.over_runs if figure else ()
    if len(values) < 2:
        return ''
    return f"{distribution(values)} of this stack's runs"


def ceiling_rows(cases, ceilings):
    """The node's ceilings (`ceilings`: their figures, as measured), then HPL's and STREAM's
    figures in `cases` against them: rows of CEILING_HEADER; a ratio withheld says so."""
    rows = [[case.title, case.environ, f'{name} = {format_value(f.value)} {f.unit}',
             'measured', '', '', measured_as(case, name)]
            for case in ceilings for name, f in case.figures.items()]
    for case in cases:
        figure, ratios = CEILING_RATIOS.get(case.check, (None, ()))
        present = [r for r in ratios if r[0] in case.figures or r[0] in case.withheld]
        if figure not in case.figures or not present:
            continue
        shown = case.figures[figure]
        for variable, against in present:
            rows.append([case.title, case.environ,
                         f'{figure} = {format_value(shown.value)} {shown.unit}', against,
                         'withheld' if variable in case.withheld
                         else f'{case.value(variable):.1f} %',
                         over_runs_text(case, variable),
                         case.withheld.get(variable) or measured_as(case, variable)])
    return rows


# The GPU checks' figures against their device's datasheet (hpcbench.core.accelerators):
# per check, (figure, its ratio, what the ratio divides by).
GPU_RATIOS = {
    'BabelStreamCheck': (('triad_bandwidth', 'triad_datasheet_efficiency',
                          'datasheet memory bandwidth'),),
    'GpuDgemmCheck': (('tflops', 'fp64_peak_efficiency', 'datasheet FP64 peak'),
                      ('gflops_per_watt', None, 'power drawn during the calls')),
    'HostDeviceBandwidthCheck': (
        ('host_to_device_pinned', 'host_to_device_link_efficiency', 'datasheet host link'),
        ('device_to_host_pinned', 'device_to_host_link_efficiency', 'datasheet host link')),
}


GPU_HEADER = ['test case', 'environ', 'figure', 'against', 'ratio', 'how']


def gpu_rows(cases, papers=()):
    """The GPU checks' figures in `cases` against their datasheets (GPU_RATIOS), GFLOP/s per
    watt with the power it was measured at; then, where there is any, the papers'
    accelerators' GFLOP/s per watt beside them (`papers`: reference sets; TSUBAME's
    ClearSpeed board, 2 in 2006). Rows of GPU_HEADER; [] without a GPU case."""
    rows = []
    for case in cases:
        for figure, ratio, against in GPU_RATIOS.get(case.check, ()):
            if figure not in case.figures:
                continue
            shown = case.figures[figure]
            if ratio is None:
                power = case.value('power')
                against = against if power is None else f'{format_value(power)} W drawn'
                text = ''
            elif ratio in case.withheld:
                text = 'withheld'
            elif ratio in case.figures:
                text = f'{case.value(ratio):.1f} %'
            else:
                text = '-'
            rows.append([case.title, case.environ,
                         f'{figure} = {format_value(shown.value)} {shown.unit}', against,
                         text, case.withheld.get(ratio) or measured_as(case, figure)])
    if not rows:
        return []
    for refs in papers:
        for fig in refs.figures:
            if fig.check == 'GpuDgemmCheck' and fig.variable == 'gflops_per_watt':
                year = refs.sources[fig.source].get('year', '')
                rows.append([f'{refs.system}:{fig.partition} ({year})', '',
                             f'{fig.variable} = {format_value(fig.value)} {fig.unit}',
                             'the paper\'s figures', '', f'{fig.where}: {fig.configuration}'])
    return rows


# The GPU-to-GPU checks' figures against what they cross (hpcbench.benchmarks.gpu_mpi,
# nccl_tests): per check, (figure, its ratio or None, what the ratio divides by).
GPU_TO_GPU_RATIOS = {
    'DeviceBufferPairCheck': (('bandwidth', 'link_efficiency', 'the pair\'s link (topology)'),
                              ('bandwidth', 'slowest_pair_link_efficiency',
                               'the slowest pair\'s link'),
                              ('bidirectional_bandwidth', None, 'both ways at once'),
                              ('latency', None, 'half a round trip')),
    'OsuPairCheck': (('bandwidth', 'link_efficiency', 'the pair\'s link (topology)'),
                     ('bandwidth', 'slowest_pair_link_efficiency', 'the slowest pair\'s link'),
                     ('bidirectional_bandwidth', None, 'both ways at once'),
                     ('latency', None, 'at 8 bytes')),
    'DeviceBufferCollectiveCheck': (('busbw', None, 'bus bandwidth, MPI'),),
    'OsuAllreduceCheck': (('latency_8B', None, 'all-reduce, MPI'),),
    'NcclTestsCheck': (('busbw', 'published_busbw_ratio', 'published 8-GPU node'),),
}
# The floor a device path must beat: the node's pinned host-device copy.
HOST_STAGED = ('HostDeviceBandwidthCheck', 'host_to_device_pinned')


def gpu_to_gpu_rows(cases):
    """The GPU-to-GPU figures in `cases` against the link they cross (GPU_TO_GPU_RATIOS), and
    each device-buffer pair bandwidth against the same partition's pinned host-device copy
    (the host-staged floor): rows of GPU_HEADER; [] without such a case."""
    floors = {case.partition: case.value(HOST_STAGED[1]) for case in cases
              if case.check == HOST_STAGED[0] and HOST_STAGED[1] in case.figures}
    rows = []
    for case in cases:
        for figure, ratio, against in GPU_TO_GPU_RATIOS.get(case.check, ()):
            if figure not in case.figures or (ratio and ratio not in case.figures
                                              and ratio not in case.withheld):
                continue
            shown = case.figures[figure]
            text = ('withheld' if ratio in case.withheld else
                    f'{case.value(ratio):.1f} %' if ratio else '')
            rows.append([case.title, case.environ,
                         f'{figure} = {format_value(shown.value)} {shown.unit}', against,
                         text, case.withheld.get(ratio) or measured_as(case, figure)])
        floor = floors.get(case.partition)
        if case.check in PAIR_CHECKS and floor and 'bandwidth' in case.figures:
            value = case.value('bandwidth')
            rows.append([case.title, case.environ,
                         f'bandwidth = {format_value(value)} GB/s',
                         f'host-staged floor: pinned copy {format_value(floor)} GB/s',
                         f'{100 * value / floor:.1f} %',
                         'the device path beats staging through the host' if value > floor
                         else 'the device path is no faster than staging through the host'])
    return rows


# The checks that measure every GPU pair of a node.
PAIR_CHECKS = ('DeviceBufferPairCheck', 'OsuPairCheck')


def gpu_pair_matrices(cases):
    """[(title, header, rows, notes)]: each intra-node pair case's figures of every GPU pair
    of each node it ran on (DeviceBufferPairCheck's PingPong, OsuPairCheck's osu_bw: GB/s
    one way, and the pair's share of its link) as a GPU x GPU matrix, each pair beside the
    link it crossed (the node's topology); the notes name the slowest pair and those below
    the goal (hpcbench.benchmarks.gpu_mpi.LINK_GOAL_PERCENT)."""
    matrices = []
    for case in cases:
        if case.check not in PAIR_CHECKS or case.parameters.get('path') != 'intra-node':
            continue
        nodes = {}
        for pair in case.pairs:
            if not pair.key.other_node and 'bandwidth' in pair.figures:
                nodes.setdefault(pair.key.node, {})[pair.key.gpus] = pair
        for node, pairs in sorted(nodes.items()):
            gpus = 1 + max(max(ij) for ij in pairs)

            def cell(i, j):
                pair = pairs.get((min(i, j), max(i, j)))
                if pair is None:
                    return 'not run'
                share = pair.figures.get('link_efficiency')
                return (format_value(pair.figures['bandwidth'])
                        + (f', {share:.0f} %' if share is not None else '')
                        + (f' ({pair.link})' if pair.link else ''))
            rows = [[f'GPU{i}', *('-' if i == j else cell(i, j) for j in range(gpus))]
                    for i in range(gpus)]
            matrices.append((f'{case.title} ({case.environ}) on {node}: GB/s per pair, its '
                             'share of its link, the link', ['', *(f'GPU{j}' for j in
                                                                    range(gpus))],
                             rows, slow_pair_notes(case, node)))
    return matrices


def slow_pair_notes(case, node):
    """What the report says of a node's pairs: the slowest, and those below the goal."""
    slow, slowest = case.slow_pairs()
    notes = []
    if slowest and slowest.key.node == node:
        notes.append(f'slowest pair: {slowest.key.words()}, {_pair_text(slowest)}')
    below = [p for p in slow if p.key.node == node]
    if below:
        notes.append(f'below {gpu_mpi.LINK_GOAL_PERCENT:g} % of its link: '
                     + '; '.join(f'{p.key.words()} ({_pair_text(p)})' for p in below))
    elif slowest and slowest.key.node == node:
        notes.append(f'every pair at {gpu_mpi.LINK_GOAL_PERCENT:g} % of its link or more')
    return notes


def _pair_text(pair):
    return (f'{format_value(pair.figures["bandwidth"])} GB/s, '
            f'{pair.figures["link_efficiency"]:.1f} % of its link'
            + (f' ({pair.link})' if pair.link else ''))


def blas_mpi_tables(cases, ceilings):
    """The test cases measured with several BLAS libraries (HPL and its DGEMM ceiling, HPCC),
    their compared figures as BLAS x MPI: [(heading, header, rows)]."""
    groups = stack_comparison.side_by_side([*cases, *(c for c in ceilings
                                                      if c.check == 'DgemmCeiling')])
    return [(heading, [f'{variable} [{unit}]', *grid[0]],
             stack_comparison.grid_rows(grid, format_value))
            for heading, variable, unit, grid in stack_comparison.blas_mpi_grids(groups)]


def summary_rows(cases, reference_set):
    """Per check: test cases, figures, passed, failed, without reference, sessions."""
    rows = []
    for check in sorted({c.check for c in cases}):
        mine = [c for c in cases if c.check == check]
        judged = [r.result for c in mine for r in reference_rows(c, reference_set)]
        rows.append([check, len(mine), len(judged), judged.count('pass'),
                     judged.count('fail'), judged.count('no reference'),
                     ' '.join(sorted({c.session[:8] for c in mine}))])
    return rows


def format_value(value, digits=4):
    if value is None:
        return '-'
    if isinstance(value, float):
        return f'{value:.0f}' if abs(value) >= 10000 else f'{value:.{digits}g}'
    return str(value)


def format_margin(value):
    return '-' if value is None else f'{value:+.1f} %'


def bounds_text(row):
    if row.ref is None:
        return ''
    lower = '-inf' if row.lower is None else f'{row.lower:+.0%}'
    upper = '+inf' if row.upper is None else f'{row.upper:+.0%}'
    return f'[{lower}, {upper}]'


def title(check, parameters):
    """A test case as the report names it: the check and its parameters, sorted."""
    params = ' '.join(f'{k}={v}' for k, v in sorted(parameters))
    return f'{check} {params}'.strip()

