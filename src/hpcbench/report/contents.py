"""What the report shows of a system's picture (hpcbench.results.picture: what it measured),
as rows before any page is written: each case's figures against their references
(reference_rows, margin), the distribution of a figure's samples, the ratios to the node's
ceilings (ceiling_rows), the GPUs against their datasheets, the BLAS x MPI tables."""
import math
import statistics

from hpcbench.benchmarks import gpu_mpi
from hpcbench.results import references, stack_comparison


# Session extras recorded by `make run` (hpcbench provenance), in display order.
SESSION_FACTS = ('project_commit', 'spack_commit', 'spack_lock', 'host', 'blas_default',
                 'blas_default_from')


# Per test case (hpcbench.rfm.plugins.Provenance and the checks' `inputs`).
CASE_FACTS = ('inputs', 'build_spec', 'topology', 'project_commit', 'spack_commit',
              'spack_lock')


def margin(value, reference):
    """Percent of the value above (+) or below (-) its reference; None without one."""
    if not reference:
        return None
    return 100.0 * (value - reference) / abs(reference)


def reference_rows(case, reference_set):
    """A case's figures with their references: dicts with variable, value, unit, ref,
    lower, upper (fractions), result, margin (%), source (the cited figure, if any)."""
    cited = references.select(reference_set, case['check'], case['partition'],
                              case['environ'], case['testcase']) if reference_set else {}
    rows = []
    for variable, (value, unit) in case['perfvalues'].items():
        ref, lower, upper, result = case['references'][variable]
        has_ref = bool(ref) or lower is not None or upper is not None
        fig = cited.get(variable)
        rows.append({
            'variable': variable, 'value': value, 'unit': unit,
            'ref': ref if has_ref else None, 'lower': lower, 'upper': upper,
            'result': result if has_ref else 'no reference',
            'margin': margin(value, ref) if has_ref else None,
            'source': (f'{fig.source} {fig.where}' if fig else ''),
            'measured_as': measured_as(case, variable),
        })
    # A ratio above 100 % of its ceiling is no result: shown as withheld, with why.
    for variable, why in (case['testcase'].get('flagged') or {}).items():
        rows.append({'variable': variable, 'value': None, 'unit': '%', 'ref': None,
                     'lower': None, 'upper': None, 'result': 'withheld', 'margin': None,
                     'source': '', 'measured_as': why})
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
    testcase = case['testcase']
    how = (testcase.get('aggregation') or {}).get(variable, '')
    values = (testcase.get('samples') or {}).get(variable)
    return f'{how}: {distribution(values)}' if values else how


# What the report sets against the node's ceilings: per check, its figure and its ratios
# (variable, what it divides by). The ceilings are measured on the node in the same session:
# the sustained peak and bandwidth ceiling (NodeCeilings, likwid-bench); Rpeak is nominal,
# from the partition's description. HPL's DGEMM ceiling is measured in its own job just
# before HPL (sessions stored before: DgemmCeiling, a check of its own), STREAM's ceilings
# in its own job, round by round.
CEILING_RATIOS = {
    'HplCheck': ('gflops', (('efficiency', 'nominal Rpeak'),
                            ('sustained_peak_efficiency', 'sustained peak'),
                            ('ceiling_efficiency', 'DGEMM ceiling'))),
    'StreamCheck': ('triad', (('triad_ceiling_efficiency', 'bandwidth ceiling'),
                              ('triad_cached_store_efficiency', 'ordinary-store triad'))),
}


CEILING_HEADER = ['test case', 'environ', 'figure', 'against', 'ratio', 'over the stored runs',
                  'how']


def over_runs_text(case, variable):
    """`median 92.3, 88.1 to 95 (n=6, spread 7 %) of this stack's runs`: a case's figure over
    the stored runs of its stack (over_stored_runs); '' for fewer than two."""
    values = (case.get('over_runs') or {}).get(variable) or []
    if len(values) < 2:
        return ''
    return f"{distribution(values)} of this stack's runs"


def ceiling_rows(cases, ceilings):
    """The node's ceilings (`ceilings`: their figures, as measured), then HPL's and STREAM's
    figures in `cases` against them: rows of CEILING_HEADER; a ratio withheld says so."""
    rows = [[case_title(case), case['environ'], f'{variable} = {format_value(value)} {unit}',
             'measured', '', '', measured_as(case, variable)]
            for case in ceilings for variable, (value, unit) in case['perfvalues'].items()]
    for case in cases:
        figure, ratios = CEILING_RATIOS.get(case['check'], (None, ()))
        flagged = case['testcase'].get('flagged') or {}
        present = [r for r in ratios if r[0] in case['perfvalues'] or r[0] in flagged]
        if figure not in case['perfvalues'] or not present:
            continue
        value, unit = case['perfvalues'][figure]
        for variable, against in present:
            ratio = case['perfvalues'].get(variable, (None, ''))[0]
            rows.append([case_title(case), case['environ'],
                         f'{figure} = {format_value(value)} {unit}', against,
                         'withheld' if variable in flagged else f'{ratio:.1f} %',
                         over_runs_text(case, variable),
                         flagged.get(variable) or measured_as(case, variable)])
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
        flagged = case['testcase'].get('flagged') or {}
        for figure, ratio, against in GPU_RATIOS.get(case['check'], ()):
            if figure not in case['perfvalues']:
                continue
            value, unit = case['perfvalues'][figure]
            if ratio is None:
                power = case['perfvalues'].get('power', (None, ''))[0]
                against = against if power is None else f'{format_value(power)} W drawn'
                text = ''
            elif ratio in flagged:
                text = 'withheld'
            elif ratio in case['perfvalues']:
                text = f'{case["perfvalues"][ratio][0]:.1f} %'
            else:
                text = '-'
            rows.append([case_title(case), case['environ'],
                         f'{figure} = {format_value(value)} {unit}', against, text,
                         flagged.get(ratio) or measured_as(case, figure)])
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
    floors = {case['partition']: case['perfvalues'][HOST_STAGED[1]][0] for case in cases
              if case['check'] == HOST_STAGED[0] and HOST_STAGED[1] in case['perfvalues']}
    rows = []
    for case in cases:
        flagged = case['testcase'].get('flagged') or {}
        for figure, ratio, against in GPU_TO_GPU_RATIOS.get(case['check'], ()):
            if figure not in case['perfvalues'] or (ratio and ratio not in case['perfvalues']
                                                    and ratio not in flagged):
                continue
            value, unit = case['perfvalues'][figure]
            text = ('withheld' if ratio in flagged else
                    f'{case["perfvalues"][ratio][0]:.1f} %' if ratio else '')
            rows.append([case_title(case), case['environ'],
                         f'{figure} = {format_value(value)} {unit}', against, text,
                         flagged.get(ratio) or measured_as(case, figure)])
        floor = floors.get(case['partition'])
        if case['check'] in ('DeviceBufferPairCheck', 'OsuPairCheck') and floor and \
                'bandwidth' in case['perfvalues']:
            value = case['perfvalues']['bandwidth'][0]
            rows.append([case_title(case), case['environ'],
                         f'bandwidth = {format_value(value)} GB/s',
                         f'host-staged floor: pinned copy {format_value(floor)} GB/s',
                         f'{100 * value / floor:.1f} %',
                         'the device path beats staging through the host' if value > floor
                         else 'the device path is no faster than staging through the host'])
    return rows


def gpu_pair_matrices(cases):
    """[(title, header, rows)]: each intra-node pair case's bandwidth (DeviceBufferPairCheck's
    PingPong, OsuPairCheck's osu_bw; GB/s) of every GPU pair, its samples in the order the job ran the pairs
    (hpcbench.benchmarks.gpu_mpi.gpu_pairs), as a GPU x GPU matrix, each pair beside its
    link where the run's inputs name it (`links=0-1:NV18,...`: the node's topology)."""
    matrices = []
    for case in cases:
        if case['check'] not in ('DeviceBufferPairCheck', 'OsuPairCheck') or \
                case['match'].get('path') != 'intra-node':
            continue
        values = (case['testcase'].get('samples') or {}).get('bandwidth') or []
        gpus = next((n for n in range(2, 65) if n * (n - 1) // 2 == len(values)), None)
        if not gpus:
            continue
        pairs = [(i, j) for i in range(gpus) for j in range(i + 1, gpus)]
        by_pair = dict(zip(pairs, values))
        links = gpu_mpi.links_of(case['testcase'].get('inputs'))

        def cell(i, j):
            pair = (min(i, j), max(i, j))
            link = f' ({links[pair]})' if pair in links else ''
            return f'{format_value(by_pair[pair])}{link}'
        rows = [[f'GPU{i}', *('-' if i == j else cell(i, j) for j in range(gpus))]
                for i in range(gpus)]
        matrices.append((f'{case_title(case)} ({case["environ"]}): GB/s per pair, with '
                         'its link', ['', *(f'GPU{j}' for j in range(gpus))], rows))
    return matrices


def blas_mpi_tables(cases, ceilings):
    """The test cases measured with several BLAS libraries (HPL and its DGEMM ceiling, HPCC),
    their compared figures as BLAS x MPI: [(heading, header, rows)]."""
    groups = stack_comparison.side_by_side([*cases, *(c for c in ceilings
                                                      if c['check'] == 'DgemmCeiling')])
    return [(heading, [f'{variable} [{unit}]', *grid[0]],
             stack_comparison.grid_rows(grid, format_value))
            for heading, variable, unit, grid in stack_comparison.blas_mpi_grids(groups)]


def summary_rows(cases, reference_set):
    """Per check: test cases, figures, passed, failed, without reference, sessions."""
    rows = []
    for check in sorted({c['check'] for c in cases}):
        mine = [c for c in cases if c['check'] == check]
        judged = [r['result'] for c in mine for r in reference_rows(c, reference_set)]
        rows.append([check, len(mine), len(judged), judged.count('pass'),
                     judged.count('fail'), judged.count('no reference'),
                     ' '.join(sorted({c['session'][:8] for c in mine}))])
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
    if row['ref'] is None:
        return ''
    lower = '-inf' if row['lower'] is None else f'{row["lower"]:+.0%}'
    upper = '+inf' if row['upper'] is None else f'{row["upper"]:+.0%}'
    return f'[{lower}, {upper}]'


def title(check, parameters):
    """A test case as the report names it: the check and its parameters, sorted."""
    params = ' '.join(f'{k}={v}' for k, v in sorted(parameters))
    return f'{check} {params}'.strip()


def case_title(case):
    return title(case['check'], case['match'].items())
