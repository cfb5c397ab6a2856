"""IOR: access patterns and APIs (CHiC §4: file per process, shared file segmented and
strided on Lustre, 1 MiB transfers = the stripe size; Oakforest-PACS: IOR-easy, file per
process, 2 MiB transfers), sizes derived from the nodes, the free-space guard, and parsing
of IOR's "Summary of all tests".

IOR reports MiB/s (2^20 B/s): the figures keep IOR's unit.
"""
import math
import os
import re
from dataclasses import dataclass, replace

from hpcbench.core import job_script
from hpcbench.core.node import READ_CACHE_POLICIES
from hpcbench.core.parsing import any_newlines, measured_value
from hpcbench.benchmarks.reports import Reports

MIB = 1 << 20
GIB = 1 << 30

# IOR options of each access pattern; B = block per task, T = transfer size.
#   file-per-process: one file per task, B contiguous bytes each (-F);
#   shared-segmented: one file, each task's B bytes contiguous (one segment);
#   shared-strided:   one file, tasks interleaved T bytes at a time (B/T segments).
PATTERNS = ('file-per-process', 'shared-segmented', 'shared-strided')
APIS = {
    'posix': ('-a', 'POSIX'),
    'mpiio': ('-a', 'MPIIO'),
    'mpiio-collective': ('-a', 'MPIIO', '-c'),
}
# CHiC's Lustre stripe and transfer size.
DEFAULT_TRANSFER = 1 * MIB
# Data per node against its memory when the size alone keeps reads out of the page cache.
CACHE_FACTOR = 1.5
# Free space the guard keeps beyond the data (a share of the data, at least this much).
SPACE_MARGIN = 0.10
MIN_SPACE_MARGIN = 1 * GIB

SUMMARY_COLUMNS = ('Operation', 'Max(MiB)', 'Min(MiB)', 'Mean(MiB)', 'StdDev', 'Max(OPs)',
                   'Min(OPs)', 'Mean(OPs)', 'StdDev', 'Mean(s)', 'Stonewall(s)',
                   'Stonewall(MiB)', 'Test#', '#Tasks', 'tPN', 'reps', 'fPP', 'reord',
                   'reordoff', 'reordrand', 'seed', 'segcnt', 'blksiz', 'xsize', 'aggs(MiB)',
                   'API', 'RefNum')


class IorInputError(ValueError):
    pass


class IorOutputError(ValueError):
    pass


# The check's performance variables (MiB/s): best and mean of the repetitions per phase.
PERFORMANCE_VARIABLES = {f'{phase}_{stat}': (phase, stat)
                         for phase in ('write', 'read') for stat in ('max', 'mean')}


def block_size(node_memory_bytes, tasks_per_node, transfer, factor=CACHE_FACTOR):
    """Bytes per task so that a node's tasks write `factor` times its memory: more than the
    page cache can hold, so that reading it back reaches the file system. A whole number of
    transfers."""
    if transfer <= 0 or tasks_per_node <= 0:
        raise IorInputError(f'transfer {transfer} B and {tasks_per_node} task(s) per node: '
                            'both must be positive')

    wanted = factor * node_memory_bytes / tasks_per_node
    return math.ceil(wanted / transfer) * transfer


# How reads avoid the page cache: hpcbench.core.node.READ_CACHE_POLICIES.
# Data per task when the policy does not size it: large enough for steady streaming.
DEFAULT_BLOCK = 512 * MIB
DROP_CACHES = 'sync && echo 3 > /proc/sys/vm/drop_caches'
# IOR's data verification: read back what was written (-W) and read twice (-R), against a
# fixed signature (-G) so that a separate read run checks the write run's data.
VERIFY_SIGNATURE = '20070101'


def verify_options(phases):
    """IOR's verification options for a run with these phase options."""
    return [*(['-W'] if '-w' in phases else []), *(['-R'] if '-r' in phases else []),
            '-G', VERIFY_SIGNATURE]


def check_policy(policy, api, nodes, is_root):
    """Refuse a read-cache policy that cannot work for this API and placement."""
    if policy not in READ_CACHE_POLICIES:
        raise IorInputError(f'read cache policy {policy!r}: one of '
                            f'{", ".join(READ_CACHE_POLICIES)}')
    if policy == 'reorder' and nodes < 2:
        raise IorInputError('reorder reads another node\'s data: it needs two or more nodes')
    if policy == 'direct' and api != 'posix':
        raise IorInputError(f'direct I/O: IOR has O_DIRECT for POSIX only, not {api}')
    if policy == 'drop-caches' and not is_root:
        raise IorInputError('drop-caches writes /proc/sys/vm/drop_caches: it needs root')


def phase_options(policy, repetitions):
    """(IOR's phase options per run, how many times the job repeats those runs): one run
    writing then reading `repetitions` times; or, with drop-caches, a write run keeping its
    files and a read run, repeated with the cache dropped before each read."""
    if policy == 'drop-caches':
        return [['-w', '-e', '-k', '-i', '1'], ['-r', '-i', '1']], repetitions

    extra = {'reorder': ['-C'], 'direct': ['--posix.odirect']}.get(policy, [])
    return [['-w', '-r', '-e', *extra, '-i', str(repetitions)]], 1


def job_prologue(directory, stripe_count, stripe_size):
    """Shell lines that make the job's own directory under `directory`, remove it whatever
    happens (end, failure, interruption), and stripe it on Lustre. `$workdir` is it."""
    return [
        *job_script.removed_at_exit('workdir', directory, 'hpcbench-ior'),
        'fstype=$(stat -f -c %T "$workdir")',
        f'if [ "$fstype" = lustre ]; then lfs setstripe -c {int(stripe_count)} '
        f'-S {int(stripe_size)} "$workdir" || exit 1; else echo "hpcbench: $workdir is on '
        '$fstype, not Lustre: no striping set"; fi',
    ]


def ior_options(pattern, api, block, transfer):
    """IOR's options for one pattern and API (without the phases): block and transfer
    sizes."""
    if pattern not in PATTERNS:
        raise IorInputError(f'pattern {pattern!r}: one of {", ".join(PATTERNS)}')
    if api not in APIS:
        raise IorInputError(f'API {api!r}: one of {", ".join(APIS)}')
    if block % transfer:
        raise IorInputError(f'block {block} B is not a whole number of {transfer} B transfers')

    layout = {
        'file-per-process': ('-F', '-b', str(block), '-s', '1'),
        'shared-segmented': ('-b', str(block), '-s', '1'),
        'shared-strided': ('-b', str(transfer), '-s', str(block // transfer)),
    }[pattern]
    return [*APIS[api], *layout, '-t', str(transfer)]


def size_text(nbytes):
    """Bytes in the largest binary unit that keeps a whole number in front (1.5 MiB,
    20.0 GiB): small sizes do not vanish into "0.0 GiB"."""
    for unit, scale in (('TiB', 1 << 40), ('GiB', GIB), ('MiB', MIB), ('KiB', 1 << 10)):
        if abs(nbytes) >= scale:
            return f'{nbytes / scale:.1f} {unit}'

    return f'{int(nbytes)} B'


def check_writable(directory):
    """Refuse a directory IOR could not write in (read-only mount, permissions): by making
    and removing a directory there, as the job would."""
    import tempfile
    try:
        os.rmdir(tempfile.mkdtemp(prefix='.hpcbench-write-test.', dir=directory))
    except OSError as err:
        raise IorInputError(f'IOR cannot write in {directory}: {err.strerror}') from None


def space_needed(total_bytes):
    """What the guard requires free: the data plus its margin."""
    return total_bytes + max(SPACE_MARGIN * total_bytes, MIN_SPACE_MARGIN)


def check_space(directory, total_bytes, free_bytes):
    """Refuse a run whose data would not fit in the directory's free space with a margin."""
    needed = space_needed(total_bytes)
    if needed > free_bytes:
        raise IorInputError(
            f'IOR would write {size_text(total_bytes)} to {directory}, which has '
            f'{size_text(free_bytes)} free; with the margin it needs {size_text(needed)} '
            '(make the block smaller, e.g. -S block_size=..., or choose another directory)')


@dataclass(frozen=True)
class Phase:
    max_mib_s: float
    min_mib_s: float
    mean_mib_s: float
    repetitions: int
    rates: tuple = ()     # MiB/s of each repetition, in order


_SUMMARY = re.compile(r'^Summary of all tests:\s*\n(Operation .*)\n((?:(?:write|read) .*\n?)+)',
                      re.M)
_ERROR = re.compile(r'^ERROR.*$', re.M)
# Every warning IOR prints means its figures are not to be trusted: data that did not verify
# ("Incorrect data on read (N errors found)"), short or retried transfers, failed fsyncs,
# O_DIRECT refused, file sizes that differ between tasks.
_WARNING = re.compile(r'^WARNING:.*$', re.M)


_BANNER = re.compile(r'^IOR-\S+: MPI Coordinated Test of Parallel I/O', re.M)


def _parse_run(text, tasks, repetitions):
    """The phases of one IOR run (its summary rows), checked."""
    error = _ERROR.search(text) or _WARNING.search(text)
    if error:
        raise IorOutputError(f'IOR reported: {error.group(0).strip()}')

    match = _SUMMARY.search(text)
    if not match:
        raise IorOutputError('IOR printed no "Summary of all tests"')

    header = tuple(match.group(1).split())
    if header != SUMMARY_COLUMNS:
        raise IorOutputError(f'summary columns {" ".join(header)} are not IOR 4\'s')

    phases = {}
    for line in match.group(2).strip().split('\n'):
        values = line.split()
        if len(values) != len(header):
            raise IorOutputError(f'summary row {line.strip()!r}: {len(values)} columns, the '
                                 f'header has {len(header)}')
        row = dict(zip(header, values))
        where = f'IOR {values[0]}'
        if int(row['#Tasks']) != tasks or int(row['reps']) != repetitions:
            raise IorOutputError(f'{where}: {row["#Tasks"]} tasks x {row["reps"]} repetitions, '
                                 f'the job asked for {tasks} x {repetitions}')
        figures = [measured_value(row[column], IorOutputError, where)
                   for column in ('Max(MiB)', 'Min(MiB)', 'Mean(MiB)')]
        phases[values[0]] = Phase(*figures, repetitions)

    # One result line per phase and repetition before the summary: `access bw(MiB/s) IOPS
    # Latency(s) block(KiB) xfer(KiB) open(s) wr/rd(s) close(s) total(s) iter`.
    rates = {phase: [] for phase in phases}
    for line in re.findall(r'^(?:write|read) .*$', text[:match.start()], re.M):
        values = line.split()
        if len(values) != 11 or values[0] not in rates:
            raise IorOutputError(f'result line {line.strip()!r} does not fit the summary')
        where = f'IOR {values[0]} repetition {values[10]}'
        for value in values[2:10]:
            measured_value(value, IorOutputError, where)
        rates[values[0]].append(measured_value(values[1], IorOutputError, where))
    for phase, measured in rates.items():
        if len(measured) != repetitions:
            raise IorOutputError(f'IOR printed {len(measured)} {phase} result(s), the job '
                                 f'asked for {repetitions}')
        phases[phase] = replace(phases[phase], rates=tuple(measured))

    if not re.search(r'^Finished\s*:', text[match.end():], re.M):
        raise IorOutputError('IOR did not finish (no "Finished" after the summary)')

    return phases


@any_newlines
def parse(text, tasks, repetitions, runs=1):
    """{'write': Phase, 'read': Phase} over the IOR runs of a job: one run doing both phases
    `repetitions` times, or `runs` write runs and read runs of repetitions/runs each (the
    drop-caches policy). Checked: no ERROR or WARNING line, the task and repetition counts the job
    asked for, one finite result per repetition, finite summary figures, every run reached
    "Finished"."""
    starts = [m.start() for m in _BANNER.finditer(text)]
    if not starts:
        raise IorOutputError('no IOR run in the output')

    runs_per_phase = {}
    for begin, end in zip(starts, starts[1:] + [len(text)]):
        for phase, figures in _parse_run(text[begin:end], tasks,
                                         repetitions // runs).items():
            runs_per_phase.setdefault(phase, []).append(figures)

    missing = {'write', 'read'} - set(runs_per_phase)
    if missing:
        raise IorOutputError(f'IOR summary has no {" or ".join(sorted(missing))} phase')

    phases = {}
    for phase, measured in runs_per_phase.items():
        if len(measured) != runs:
            raise IorOutputError(f'{len(measured)} IOR run(s) measured {phase}, the job made '
                                 f'{runs}')
        phases[phase] = Phase(max(p.max_mib_s for p in measured),
                              min(p.min_mib_s for p in measured),
                              sum(p.mean_mib_s * p.repetitions for p in measured) / repetitions,
                              repetitions, tuple(r for p in measured for r in p.rates))

    return phases

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'IorCheck': Reports('IOR', tuple(PERFORMANCE_VARIABLES),
                               {v: 'MiB/s' for v in PERFORMANCE_VARIABLES})}
