"""Intel MPI Benchmarks (IMB-MPI1): placement, message sizes, output parsing and the figures
the checks report.

CHiC (§4, Figures 4-9) compared four MPIs with PingPong and PingPing between two nodes (one
core each) and SendRecv, Allreduce, Alltoall and Bcast on 32 nodes, and saw the eager to
rendezvous switch between 8 and 16 KB in the PingPong bandwidth. Oakforest-PACS reported
Barrier and 16 B Allreduce latencies and their run-to-run variability.

IMB prints one table per benchmark and process count. Its columns, in the order IMB prints
them, are named by the table's own header (t_min, t_max, t_avg: minimum, maximum and mean
over the processes); the parser maps each header label to its field rather than trusting
positions, and checks t_min <= t_avg <= t_max on every row. "Mbytes/sec" is 10^6 bytes/s
(IMB 2019 and later: 4194304 B in 352.82 us is printed as 11887.92).
"""
import math
import re
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines, measured_value
from hpcbench.benchmarks.reports import Reports

# Pairs: two ranks, one on each of two nodes when the partition has two (CHiC Figures 4-5).
PAIR_BENCHMARKS = ('PingPong', 'PingPing', 'Uniband', 'Biband')
# Groups: every rank of the placement (CHiC Figures 6-9: 32 nodes, one core each).
GROUP_BENCHMARKS = ('Sendrecv', 'Exchange', 'Allreduce', 'Alltoall', 'Bcast', 'Barrier')
BENCHMARKS = PAIR_BENCHMARKS + GROUP_BENCHMARKS

# The columns of each benchmark's table, as IMB 2021 prints them.
_PINGPONG = ('#bytes', '#repetitions', 't[usec]', 'Mbytes/sec')
_TRANSFER = ('#bytes', '#repetitions', 't_min[usec]', 't_max[usec]', 't_avg[usec]',
             'Mbytes/sec')
_COLLECTIVE = ('#bytes', '#repetitions', 't_min[usec]', 't_max[usec]', 't_avg[usec]')
_BARRIER = ('#repetitions', 't_min[usec]', 't_max[usec]', 't_avg[usec]')
_MULTI_PAIR = ('#bytes', '#repetitions', 'Mbytes/sec', 'Msg/sec')
COLUMNS = {
    'PingPong': _PINGPONG, 'PingPing': _PINGPONG,
    'Sendrecv': _TRANSFER, 'Exchange': _TRANSFER,
    'Allreduce': _COLLECTIVE, 'Alltoall': _COLLECTIVE, 'Bcast': _COLLECTIVE,
    'Barrier': _BARRIER,
    'Uniband': _MULTI_PAIR, 'Biband': _MULTI_PAIR,
}
_FIELDS = {'#bytes': 'size', '#repetitions': 'repetitions', 't[usec]': 't_avg',
           't_min[usec]': 't_min', 't_max[usec]': 't_max', 't_avg[usec]': 't_avg',
           'Mbytes/sec': 'mbytes_per_sec', 'Msg/sec': 'msgs_per_sec'}

# Reductions run only sizes that hold whole elements of IMB's reduction type (MPI_FLOAT).
REDUCTIONS = ('Allreduce',)
REDUCTION_ELEMENT_BYTES = 4

MIB = 1 << 20
GIB = 1 << 30
INT_MAX = 2 ** 31 - 1
# IMB's own default limit on a process's message buffers (MAX_MEM_USAGE, in GiB).
IMB_DEFAULT_MEMORY_GIB = 1.0
# Share of a node's memory the suite lets IMB's buffers use (-mem), over its ranks.
MEMORY_SHARE = 0.5

# Sizes the collective figures are reported at: 8 B, 16 B (Oakforest-PACS) and 1 MiB.
COLLECTIVE_SIZES = {'t_avg_8B': 8, 't_avg_16B': 16, 't_avg_1MiB': MIB}
BANDWIDTH_SIZE = 4 * MIB

# A protocol switch shows as bandwidth falling although the message doubled: at least this
# fraction lower than at the previous size, before the curve is near its peak (a drop after
# that is the memory hierarchy, not the protocol). The first such drop is the switch.
SWITCH_DROP = 0.20
SWITCH_BELOW_PEAK = 0.80

# Launches whose fastest run at each size gives the figures: three where the curve's shape
# is read (the protocol switch), so that a moment of interference does not shape it.
BEST_OF = {'PingPong': 3, 'PingPing': 3}

# IMB's repetitions per message size (-iter's first field) by default.
DEFAULT_REPETITIONS = 1000
# Uniband and Biband send a window of 64 messages per repetition, so IMB's default volume
# per message size (40 MB of repetitions) moves 64 times that: about 2 s per size from
# 8 KiB up here, 23-73 s a job. Quick mode gives them this volume (-iter 1000,8): the same
# bandwidth within 0.2 % at 1 and 4 MiB on Open MPI (13170 against 13171, 12832 against
# 12851 MB/s) in a fifth of the time (0.75 against 2.1 s per size).
WINDOWED = ('Uniband', 'Biband')
QUICK_WINDOWED_VOLUME_MB = 8

_END = '# All processes entering MPI_Finalize'
# "Intel(R) MPI Benchmarks 2021.7"; IMB 2017 and 2018 print "Intel (R) MPI Benchmarks".
_BANNER = re.compile(r'^#\s+Intel ?\(R\) MPI Benchmarks', re.M)
_BLOCK = re.compile(r'^# Benchmarking (\S+)\s*\n# #processes = (\d+)\s*\n', re.M)
_IMB_FAILURE = re.compile(r'(out-of-mem|time-out|int-overflow)')


class ImbInputError(ValueError):
    pass


class ImbOutputError(ValueError):
    pass


@dataclass(frozen=True)
class Placement:
    nodes: int
    ranks_per_node: int

    @property
    def ranks(self):
        return self.nodes * self.ranks_per_node

    def describe(self):
        return f'{self.nodes} node(s) x {self.ranks_per_node} rank(s)'


def pair_placement(partition_nodes):
    """Two ranks: one on each of two nodes when there are two, else both on one node."""
    return Placement(2, 1) if partition_nodes >= 2 else Placement(1, 2)


def group_placement(partition_nodes, ranks_per_node):
    """Every node of the partition with `ranks_per_node` ranks each."""
    return Placement(partition_nodes, ranks_per_node)


def message_sizes(benchmark, min_log, max_log):
    """The sizes IMB runs with `-msglog min_log:max_log`: 0, then 2^min_log .. 2^max_log
    (reductions skip sizes that are not whole elements); Barrier has none."""
    if benchmark == 'Barrier':
        return ()
    if not 0 <= min_log <= max_log <= 30:
        raise ImbInputError(f'message sizes 2^{min_log}..2^{max_log}: need '
                            '0 <= min <= max <= 30')

    sizes = [0] + [1 << i for i in range(min_log, max_log + 1)]
    if benchmark in REDUCTIONS:
        sizes = [s for s in sizes if s % REDUCTION_ELEMENT_BYTES == 0]

    return tuple(sizes)


def buffer_bytes(benchmark, processes, size):
    """The message buffers IMB allocates per process for one size (IMB_mem_manager.c)."""
    if benchmark == 'Alltoall':
        return 2 * processes * size
    if benchmark == 'Exchange':
        return 3 * size
    if benchmark == 'Barrier':
        return 0

    return 2 * size


def memory_limit_gib(node_memory_bytes, ranks_per_node):
    """IMB's -mem for a placement: a share of the node's memory per rank, and at least
    IMB's default."""
    return max(IMB_DEFAULT_MEMORY_GIB,
               math.floor(100 * MEMORY_SHARE * node_memory_bytes / ranks_per_node / GIB) / 100)


def feasible_max_log(benchmark, processes, max_log, memory_gib):
    """The largest size exponent <= max_log that IMB can run within its buffer limit and
    MPI's int counts (larger sizes would be printed as out-of-mem or int-overflow rows)."""
    log = max_log
    while log > 0 and (buffer_bytes(benchmark, processes, 1 << log) > memory_gib * GIB
                       or (benchmark == 'Alltoall' and processes * (1 << log) > INT_MAX)):
        log -= 1

    return log


@dataclass(frozen=True)
class Row:
    size: int            # bytes (None for Barrier)
    repetitions: int
    t_min: float         # microseconds over the processes
    t_max: float
    t_avg: float
    mbytes_per_sec: float
    msgs_per_sec: float


@dataclass(frozen=True)
class Table:
    benchmark: str
    processes: int
    rows: tuple

    @property
    def sizes(self):
        return tuple(r.size for r in self.rows)

    def row(self, size):
        for r in self.rows:
            if r.size == size:
                return r

        raise KeyError(size)


def _parse_table(name, processes, body):
    lines = body.split('\n')
    # Lines between the block's title and the header: "( n additional processes waiting
    # in MPI_Barrier)" and rules.
    while lines and lines[0].startswith('#'):
        lines.pop(0)
    if not lines or not lines[0].strip():
        raise ImbOutputError(f'{name} ({processes} processes): table has no header')

    header = tuple(lines.pop(0).split())
    expected = COLUMNS.get(name)
    if expected and header != expected:
        raise ImbOutputError(f'{name}: columns {" ".join(header)}, expected '
                             f'{" ".join(expected)}')

    rows = []
    for line in lines:
        if not line.strip() or line.startswith('#'):
            break

        where = f'{name} ({processes} processes) row {line.strip()!r}'
        failure = _IMB_FAILURE.search(line)
        if failure:
            raise ImbOutputError(f'{where}: IMB did not measure this size ({failure.group(1)})')

        values = line.split()
        if len(values) != len(header):
            raise ImbOutputError(f'{where}: {len(values)} columns, the header has {len(header)}')

        fields = dict.fromkeys(('size', 't_min', 't_max', 'mbytes_per_sec', 'msgs_per_sec'))
        for label, text in zip(header, values):
            field = _FIELDS[label]
            fields[field] = measured_value(text, ImbOutputError, where,
                                           int if label.startswith('#') else float)

        if fields['t_min'] is None:
            fields['t_min'] = fields['t_max'] = fields.get('t_avg')
        if fields.get('t_avg') is not None:
            # Printed with two decimals: allow their rounding.
            if not fields['t_min'] - 0.01 <= fields['t_avg'] <= fields['t_max'] + 0.01:
                raise ImbOutputError(f'{where}: t_min <= t_avg <= t_max does not hold')
        else:
            fields['t_avg'] = None
        rows.append(Row(**fields))

    if not rows:
        raise ImbOutputError(f'{name} ({processes} processes): table has no rows')

    return Table(name, processes, tuple(rows))


@any_newlines
def parse(text):
    """Tables of one complete IMB run: {(benchmark, processes): Table}.

    Raises ImbOutputError when the run did not reach MPI_Finalize (truncated, crashed) or a
    table is malformed: unknown columns, a short row, a value that is not a finite number,
    a size IMB skipped (out-of-mem, time-out, int-overflow).
    """
    if _END not in text:
        raise ImbOutputError('IMB did not finish (no "All processes entering MPI_Finalize")')

    runs = len(_BANNER.findall(text))
    if runs > 1:
        raise ImbOutputError(f'the output holds {runs} IMB runs: read them with parse_runs')

    blocks = list(_BLOCK.finditer(text))
    tables = {}
    for i, block in enumerate(blocks):
        end = blocks[i + 1].start() if i + 1 < len(blocks) else text.index(_END, block.end())
        name, processes = block.group(1), int(block.group(2))
        tables[(name, processes)] = _parse_table(name, processes, text[block.end():end])

    return tables


@any_newlines
def parse_runs(text, launches):
    """Each IMB run of a job that launched IMB `launches` times, all of them complete."""
    starts = [m.start() for m in _BANNER.finditer(text)]
    # The banner is framed by rule lines: a run starts at the rule before its banner.
    starts = [text.rfind('\n#-', 0, s) + 1 for s in starts]
    runs = [parse(text[s:e]) for s, e in zip(starts, starts[1:] + [len(text)])]
    if len(runs) != launches:
        raise ImbOutputError(f'{len(runs)} IMB run(s) in the output, the job made {launches}')

    return runs


def complete_table(tables, benchmark, processes, sizes):
    """The table of `benchmark` at `processes`, checked to hold exactly `sizes` (every
    size once, in order)."""
    table = tables.get((benchmark, processes))
    if table is None:
        found = ', '.join(f'{b}/{p}' for b, p in sorted(tables)) or 'none'
        raise ImbOutputError(f'no {benchmark} table for {processes} processes (tables: {found})')

    if benchmark == 'Barrier':
        if len(table.rows) != 1:
            raise ImbOutputError(f'Barrier: {len(table.rows)} rows, expected 1')
        return table

    if table.sizes != tuple(sizes):
        missing = sorted(set(sizes) - set(table.sizes))
        raise ImbOutputError(
            f'{benchmark} ({processes} processes): message sizes '
            + (f'{", ".join(map(str, missing))} missing' if missing
               else f'{table.sizes} differ from the expected {tuple(sizes)}'))

    return table


def best_of(tables):
    """One table from several runs of the same benchmark: at each size the row of the run
    that was fastest there (lowest t_avg; highest bandwidth where IMB prints no time), so
    that a moment of interference in one run does not shape the curve."""
    first = tables[0]
    for other in tables[1:]:
        if other.sizes != first.sizes or other.benchmark != first.benchmark:
            raise ImbOutputError(f'{first.benchmark}: runs measured different sizes')

    def speed(row):
        if row.t_avg is not None:
            return (-row.t_avg,)
        return (row.mbytes_per_sec, row.msgs_per_sec)     # at 0 B only the rate differs

    rows = tuple(max((t.rows[i] for t in tables), key=speed) for i in range(len(first.rows)))
    return Table(first.benchmark, first.processes, rows)


def protocol_switch(table):
    """The first message size sent with the rendezvous protocol, detected in a PingPong or
    PingPing bandwidth curve (see SWITCH_DROP), or None when the curve shows no switch.

    A drop whose next size takes less time than the drop's own is a spike (interference),
    not a change of protocol, which costs from then on."""
    rows = [r for r in table.rows if r.size and r.mbytes_per_sec]
    peak = max((r.mbytes_per_sec for r in rows), default=0)
    for before, after, following in zip(rows, rows[1:], [*rows[2:], None]):
        # The first such drop: the protocol switches once; later dips are other effects.
        if (after.mbytes_per_sec <= (1 - SWITCH_DROP) * before.mbytes_per_sec
                and before.mbytes_per_sec <= SWITCH_BELOW_PEAK * peak
                and (following is None or following.t_avg >= after.t_avg)):
            return after.size

    return None


def performance_units(benchmark, sizes):
    """The performance variables a table of `benchmark` with `sizes` yields, with units."""
    if benchmark == 'Barrier':
        return {'t_avg': 'us'}

    units = {}
    if benchmark in ('Uniband', 'Biband'):
        units['message_rate'] = 'msg/s'
    elif benchmark in ('Allreduce', 'Alltoall', 'Bcast'):
        units.update({name: 'us' for name, size in COLLECTIVE_SIZES.items() if size in sizes})
        return units
    else:
        units['latency'] = 'us'

    if BANDWIDTH_SIZE in sizes:
        units['bandwidth_4MiB'] = 'MB/s'
    units['peak_bandwidth'] = 'MB/s'
    return units


def reported_variables(benchmark):
    """Every variable a check of `benchmark` may report, whatever its sizes (PingPong and
    PingPing add `switch_size` when the curve shows the switch)."""
    every_size = {BANDWIDTH_SIZE, *COLLECTIVE_SIZES.values()}
    switch = ('switch_size',) if benchmark in ('PingPong', 'PingPing') else ()
    return (*performance_units(benchmark, every_size), *switch)


def figures(table):
    """The values of performance_units() measured in a complete table; for PingPong and
    PingPing also `switch_size` (bytes) when the bandwidth curve shows the switch."""
    if table.benchmark == 'Barrier':
        return {'t_avg': table.rows[0].t_avg}

    sizes = table.sizes
    values = {}
    if table.benchmark in ('Allreduce', 'Alltoall', 'Bcast'):
        for name, size in COLLECTIVE_SIZES.items():
            if size in sizes:
                values[name] = table.row(size).t_avg
        return values

    smallest = table.rows[0]
    if table.benchmark in ('Uniband', 'Biband'):
        values['message_rate'] = smallest.msgs_per_sec
    else:
        values['latency'] = smallest.t_avg

    if BANDWIDTH_SIZE in sizes:
        values['bandwidth_4MiB'] = table.row(BANDWIDTH_SIZE).mbytes_per_sec
    values['peak_bandwidth'] = max(r.mbytes_per_sec for r in table.rows)
    if table.benchmark in ('PingPong', 'PingPing'):
        switch = protocol_switch(table)
        if switch:
            values['switch_size'] = switch

    return values


# The columns of a table a curve keeps, when every row has them: t_avg in microseconds,
# mbytes_per_sec in 10^6 bytes/s, msgs_per_sec.
CURVE_COLUMNS = ('t_avg', 'mbytes_per_sec', 'msgs_per_sec')


def curve(table):
    """A table as columns: `bytes` (0 for Barrier, which has no size) and those of
    CURVE_COLUMNS that every row measured (Uniband and Biband report no time)."""
    columns = {'bytes': [float(r.size or 0) for r in table.rows]}
    for name in CURVE_COLUMNS:
        values = [getattr(r, name) for r in table.rows]
        if all(v is not None for v in values):
            columns[name] = [float(v) for v in values]
    return columns


def _variables_of(benchmarks, match):
    """The variables of `benchmarks`, or of the one a figure's match names."""
    named = match.get('benchmark')
    return {v for b in benchmarks if named in (None, b) for v in reported_variables(b)}


# What this module's checks report (hpcbench.benchmarks.reports).
def _units_of(benchmarks, match):
    every_size = {BANDWIDTH_SIZE, *COLLECTIVE_SIZES.values()}
    named = [match['benchmark']] if match.get('benchmark') in benchmarks else benchmarks
    units = {'switch_size': 'B'}
    for benchmark in named:
        units.update(performance_units(benchmark, every_size))
    return units


REPORTS = {
    'ImbPairCheck': Reports('IMB', lambda match: _variables_of(PAIR_BENCHMARKS, match),
                            lambda match: _units_of(PAIR_BENCHMARKS, match)),
    'ImbGroupCheck': Reports('IMB', lambda match: _variables_of(GROUP_BENCHMARKS, match),
                             lambda match: _units_of(GROUP_BENCHMARKS, match)),
}
