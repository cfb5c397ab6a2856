"""What a stored session measured, read from its record (hpcbench.results.results_db): each
test case's runs and figures with the inputs and build that made them, ratios stored
without a reason withheld, figures keyed by session and by stack (the build's MPI and
BLAS), the DGEMM ceilings per BLAS."""
import math
import re
import statistics
from dataclasses import dataclass, field, replace

from hpcbench.benchmarks import gpu_mpi
from hpcbench.benchmarks.reports import impossible
from hpcbench.core import device_keys
from hpcbench.core.slurm_cluster import NODE_NAME, SlurmDescriptionError, expand_hostlist
from hpcbench.results import case_facts
from hpcbench.results.results_db import session, started_of, stored_sessions, uuid_of

# Test parameters in a case's display name, including --distribute's `.part` and `.nid`.
_PARAM = re.compile(r'%([\w.$]+)=(\S+)')
# The parameter ReFrame's --repeat gives each run of a case (in its display name).
REPEAT_PARAMETER = '.repeat_no'


# Parameters a check gained after sessions were stored, with the value that ran before it
# had them: a session stored earlier stays the same test case as a newer one.
ADDED_PARAMETERS = {'StreamCheck': {'stores': 'compiled'}}


def with_added_parameters(check, match):
    """A case's parameters (`match`, as stored) with those its check gained since, at the
    value that ran before the check had them (ADDED_PARAMETERS)."""
    return {**ADDED_PARAMETERS.get(check, {}), **match}


# Figures that are ratios to a peak or a ceiling (percent): above 100 % the peak or the
# ceiling is wrong, never the figure a result. The checks withhold such a ratio with its
# reason (hpcbench.rfm.plugins.Samples); one stored without (a session from before they did) is
# withheld here, saying so.
PEAK_RATIOS = ('efficiency', 'ceiling_efficiency', 'update_ceiling_efficiency',
               'sustained_peak_efficiency',
               'peak_of_rpeak', 'hpl_efficiency', 'hpl_ceiling_efficiency',
               'triad_ceiling_efficiency', 'triad_cached_store_efficiency',
               # The GPU checks' ratios to their device's datasheet.
               'triad_datasheet_efficiency', 'fp64_peak_efficiency',
               'host_to_device_link_efficiency', 'device_to_host_link_efficiency')


UNEXPLAINED_RATIO = ('{value:.1f} % of its peak or ceiling, stored without a reason (a '
                     'session from before the suite withheld such ratios): above 100 % the '
                     'peak is wrong (a nominal clock below the one the cores run at, a '
                     'ceiling measured low), so it is no result')


# Variables where smaller is better; all others improve upwards, except those that are
# properties rather than speeds (a protocol switch point in bytes), run-to-run variation
# (coefficients of variation), shares of a run's time (HPL's phases: one's gain is
# another's loss) and what a model says rather than a measurement: they neither improve
# nor regress.
SMALLER_IS_BETTER_UNITS = {'s', 'ms', 'us', 'ns', 'flop/word'}
UNBOUNDED_UNITS = {'B'}
UNBOUNDED_SUFFIXES = ('_cv', '_share')
MODELLED = {'model_ceiling_efficiency'}


def better(variable, unit):
    """'higher' or 'lower': which way a variable improves; None for those that neither
    improve nor regress (properties, run-to-run variation, shares, a model's bound)."""
    if unit in UNBOUNDED_UNITS or variable.endswith(UNBOUNDED_SUFFIXES) or \
            variable in MODELLED:
        return None
    return 'lower' if unit in SMALLER_IS_BETTER_UNITS else 'higher'


@dataclass(frozen=True)
class Figure:
    """One figure of a test case as its run reported it, with ReFrame's judgement of it."""
    name: str
    value: float            # None where the run stored none
    unit: str
    reference: float = None  # ReFrame's reference; None where the case had none
    lower: float = None      # its bounds, fractions of the reference (None: unbounded)
    upper: float = None
    result: str = 'no reference'    # 'pass' or 'fail' as ReFrame judged it
    how: str = ''           # how the job aggregated it from its samples (`best of 3 solves`)
    samples: tuple = ()     # the values the job measured it from, in order
    runs: tuple = ()        # its value in each run of the session (--repeat gives several)
    over_runs: tuple = ()   # its values over the stored runs of its stack (the picture's)

    @property
    def better(self):
        return better(self.name, self.unit)

    @property
    def has_reference(self):
        return self.result != 'no reference'

    @property
    def session_value(self):
        """The figure in its session: the median of its runs where it ran more than once
        (--repeat), else its one value."""
        return statistics.median(self.runs) if len(self.runs) > 1 else self.value


@dataclass(frozen=True)
class DeviceFigures:
    """The figures a job measured of one GPU, GPU pair or network port (`key`: hpcbench.
    core.device_keys.Gpu, GpuPair or Nic), and for a pair the link its GPUs share ('' unknown)."""
    key: object
    figures: dict           # {variable: value}
    link: str = ''


@dataclass(frozen=True)
class Provenance:
    """What made a case's figures (hpcbench.rfm.plugins.Provenance): the build's spec, the
    node's topology as the check read it, the project's and Spack's commits, the lock."""
    build_spec: str = ''
    topology: str = ''
    project_commit: str = ''
    spack_commit: str = ''
    spack_lock: str = ''

    FIELDS = ('build_spec', 'topology', 'project_commit', 'spack_commit', 'spack_lock')


@dataclass(frozen=True)
class MeasuredCase:
    """A test case as a session measured it: what it is (check, system, partition,
    environment, parameters), where it ran (its nodes; its GPUs and GPU pairs with their
    own figures), its figures and those withheld with why, what it ran with (its inputs,
    rank count, input files, the test's variables as stored) and what built it."""
    check: str
    system: str
    partition: str
    environ: str
    parameters: dict                    # {name: value}
    figures: dict                       # {variable: Figure}
    nodes: tuple = ()
    pinned: tuple = ()                  # the nodes it was given by name (pinned_nodes)
    devices: tuple = ()                 # DeviceFigures, GPUs and GPU pairs in key order
    withheld: dict = field(default_factory=dict)    # {variable: why}
    inputs: str = ''
    num_tasks: int = 1
    provenance: Provenance = Provenance()
    input_files: dict = field(default_factory=dict)
    curve: dict = None                  # IMB's per-size table, where the check keeps one
    variables: dict = field(default_factory=dict)   # the test's variables, as stored
    session: str = ''                   # the UUID of the session it comes from
    # The nodes' health facts over the job (hpcbench.rfm.hardware_facts): each node's fact
    # figures by its own name {node: {name: value}}, each GPU's and port's (DeviceFigures).
    node_facts: dict = field(default_factory=dict)
    device_facts: tuple = ()
    # Their text facts (versions, settings): {node: {name: text}}, {device key: {name: text}}.
    node_texts: dict = field(default_factory=dict)
    device_texts: dict = field(default_factory=dict)

    @property
    def key(self):
        """What makes two runs the same test case: check, partition, environment,
        parameters."""
        return (self.check, self.partition, self.environ,
                tuple(sorted(self.parameters.items())))

    @property
    def title(self):
        """The check and its parameters, sorted: `HplCheck layout_name=pure-mpi`."""
        params = ' '.join(f'{k}={v}' for k, v in sorted(self.parameters.items()))
        return f'{self.check} {params}'.strip()

    def value(self, variable, default=None):
        """A figure's value as reported, or `default` where the case has no such figure."""
        figure = self.figures.get(variable)
        return default if figure is None else figure.value

    @property
    def gpus(self):
        return tuple(d for d in self.devices if isinstance(d.key, device_keys.Gpu))

    @property
    def pairs(self):
        return tuple(d for d in self.devices if isinstance(d.key, device_keys.GpuPair))

    @property
    def nics(self):
        return tuple(d for d in self.devices if isinstance(d.key, device_keys.Nic))

    def slow_pairs(self, goal=gpu_mpi.LINK_GOAL_PERCENT):
        """The GPU pairs below `goal` percent of their link (link_efficiency), slowest first;
        and the slowest pair of all, where the pairs have that share: (slow, slowest)."""
        shares = [p for p in self.pairs if 'link_efficiency' in p.figures]
        shares.sort(key=lambda p: p.figures['link_efficiency'])
        slow = [p for p in shares if p.key in {k for k in gpu_mpi.slow_pairs(
            {p.key: p.figures['link_efficiency'] for p in shares}, goal)}]
        return slow, (shares[0] if shares else None)

    @property
    def stack(self):
        """The software that produced its figures: its build's spec as recorded (package,
        variants, target, hash, compiler, MPI and BLAS with versions; a registry binary's
        package and version); '' where none was recorded."""
        return self.provenance.build_spec


def _nodes(tc):
    """The nodes a stored test case ran on: the job's own word (`ran_on`: the allocation
    its scheduler gave it, printed by the job: hpcbench.rfm.plugins.JobNodes) where it
    said it; else ReFrame's `job_nodelist`, a snapshot of its last poll of the scheduler
    (sessions stored before the jobs said where they ran). ReFrame stores that as a list,
    or abbreviated in one string, `nid[001-003]` (read as a list of characters, `vm` was
    two nodes). Each name checked as Slurm's where it is read: RuntimeError in one line
    naming the case, before anything is judged or written from it (a name Slurm refuses
    stopped an acceptance after half its outputs)."""
    said = tc.get('ran_on')
    nodelist = said if said else tc.get('job_nodelist')
    where = (f'test case {str(tc.get("display_name") or tc.get("name"))[:120]}'
             + (f' of session {tc["session_uuid"]}' if tc.get('session_uuid') else ''))
    try:
        # Sorted as ReFrame's own nodelist_expand sorts what it expands.
        nodes = tuple(sorted(expand_hostlist(nodelist)) if isinstance(nodelist, str)
                      and nodelist else (nodelist or ()))
    except SlurmDescriptionError as err:
        raise RuntimeError(f'{where}: its nodes {err}') from None
    bad = [n for n in nodes if not isinstance(n, str) or not NODE_NAME.fullmatch(n)]
    if bad:
        raise RuntimeError(f'{where}: {str(bad[0])[:80]!r} is no node name (a letter or digit, '
                           'then letters, digits, . _ -): the record is not a run\'s')
    return nodes


def no_result(figure):
    """Why a stored Figure is no run's result, in words ('' where it may be one): its value
    is not finite, or nothing or less where no run measures that (hpcbench.benchmarks.
    reports.impossible)."""
    why = figure.value is not None and impossible(figure.value, figure.unit)
    return f'{figure.value:g} {figure.unit} as stored: {why}, so it is no result' if why else ''


def _pinned(tc):
    """The nodes a stored test case was pinned to (its `pinned_nodes`), as names."""
    pinned = tc.get('pinned_nodes')
    return tuple(n for n in pinned if isinstance(n, str)) if isinstance(pinned, list) else ()


def _number(value):
    return None if value is None else float(value)


def _devices(tc, variable='device_figures'):
    """The DeviceFigures of a stored test case (its device_figures and pair_links; or, of
    `variable` device_facts, its devices' fact figures)."""
    devices = []
    links = tc.get('pair_links') or {}
    for text, figures in sorted((tc.get(variable) or {}).items()):
        try:
            key = device_keys.parse(text)
        except device_keys.DeviceKeyError as err:
            session_uuid = tc.get('session_uuid')
            raise RuntimeError(f'test case {tc.get("display_name") or tc.get("name")}'
                               + (f' of session {session_uuid}' if session_uuid else '')
                               + f': {err}') from None
        devices.append(DeviceFigures(key, {k: float(v) for k, v in figures.items()},
                                     links.get(text, '')))
    return tuple(sorted(devices, key=lambda d: (type(d.key).__name__, d.key)))


def measured_runs(session_data, fixtures=False):
    """Every valid run of the session's test cases, in order (ReFrame's --repeat and
    --reruns give a case several), each a MeasuredCase: those that passed, and those that
    failed only against their references (their figures are real; re-baselining is how a
    new level is accepted). A case that failed anything else (build, run, sanity) measured
    nothing. `fixtures`: the fixtures' too (the ceilings the checks divide by). A ratio to
    a peak above 100 % is never among the figures: it is withheld, with its reason
    (PEAK_RATIOS). This is the one place that reads ReFrame's records of test cases."""
    for run in session_data['runs']:
        for tc in run['testcases']:
            valid = tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'
            if (tc['fixture'] and not fixtures) or not valid or not tc.get('perfvalues'):
                continue
            yield _decoded(tc)


def _decoded(tc):
    """The MeasuredCase of one stored test case."""
    check = tc['name'].split()[0]
    # Typed values where the case records them (parameters), else the name's text. A
    # case of --distribute is stored under its check's bare name; its partition and node
    # (%.part, %.nid) are in its display name only. --repeat's runs (%.repeat_no there
    # too) are runs of one case.
    named = tc.get('display_name') or tc['name']
    parameters = with_added_parameters(
        check, {p: tc.get(p, text) for p, text in _PARAM.findall(named)
                if p != REPEAT_PARAMETER})
    samples = tc.get('samples') or {}
    aggregation = tc.get('aggregation') or {}
    figures = {}
    for key, (value, ref, lower, upper, unit, result) in tc['perfvalues'].items():
        name = key.rsplit(':', 1)[1]
        # A reference of 0 with no bounds is no reference.
        has_ref = bool(ref) or lower is not None or upper is not None
        figures[name] = Figure(
            name, _number(value), unit, _number(ref) if has_ref else None,
            _number(lower), _number(upper), result if has_ref else 'no reference',
            aggregation.get(name, ''), tuple(samples.get(name) or ()))
    withheld = dict(tc.get('flagged') or {})
    for name, figure in list(figures.items()):
        why = no_result(figure)
        # One that is no number (NaN, infinite) stays a figure: compare and the report show
        # it as it is, unjudged (hpcbench.results.changes); an acceptance holds its unit
        # INVALID all the same (hpcbench.acceptance.judgement.withheld_units).
        if why and math.isfinite(figure.value) and name not in withheld:
            withheld[name] = why
            del figures[name]
            continue
        if (name in PEAK_RATIOS and figure.unit == '%' and figure.value is not None
                and figure.value > 100 and name not in withheld):
            withheld[name] = UNEXPLAINED_RATIO.format(value=figure.value)
            del figures[name]
    curve = tc.get('curve')
    return MeasuredCase(
        check=check, system=tc['system'], partition=tc['partition'], environ=tc['environ'],
        parameters=parameters, figures=figures, nodes=_nodes(tc), pinned=_pinned(tc),
        devices=_devices(tc), withheld=withheld, inputs=tc.get('inputs') or '',
        num_tasks=int(tc.get('num_tasks') or 1),
        provenance=Provenance(**{name: tc.get(name) or '' for name in Provenance.FIELDS}),
        input_files=dict(tc.get('input_files') or {}),
        curve=curve if isinstance(curve, dict) else None, variables=tc,
        node_facts=case_facts.node_facts(tc), device_facts=_devices(tc, 'device_facts'),
        **case_facts.texts(tc))


@dataclass(frozen=True)
class FailedRun:
    """A run of a test case that measured nothing: it failed in a phase before its figures
    (setup, build, run, sanity), with ReFrame's reason."""
    check: str
    system: str
    partition: str
    environ: str
    parameters: dict
    nodes: tuple
    phase: str
    reason: str
    pinned: tuple = ()      # the nodes it was given by name (its pinned_nodes), if any
    # What its nodes' hardware said around it, as a measured case's (a job that failed
    # read its nodes' facts all the same: a failed HPL and the memory error during it).
    node_facts: dict = field(default_factory=dict)
    device_facts: tuple = ()
    node_texts: dict = field(default_factory=dict)
    device_texts: dict = field(default_factory=dict)


def failed_runs(session_data):
    """Every run of the session's test cases that failed before its figures (FailedRun):
    what it printed is no figure (a sanity check that refused it), or it never ran."""
    for run in session_data['runs']:
        for tc in run['testcases']:
            if tc['fixture'] or tc['result'] != 'fail' or tc.get('fail_phase') == 'performance':
                continue
            check = tc['name'].split()[0]
            named = tc.get('display_name') or tc['name']
            yield FailedRun(check, tc['system'], tc['partition'], tc['environ'],
                            with_added_parameters(check, {
                                p: tc.get(p, text) for p, text in _PARAM.findall(named)
                                if p != REPEAT_PARAMETER}),
                            _nodes(tc), tc.get('fail_phase') or '',
                            ' '.join(str(tc.get('fail_reason') or '').split()), _pinned(tc),
                            case_facts.node_facts(tc), _devices(tc, 'device_facts'),
                            **case_facts.texts(tc))


def measured_cases(session_data, fixtures=False):
    """The session's measured test cases (measured_runs), the last run of each, each figure
    with its value in every run (Figure.runs: --repeat gives several)."""
    cases, runs = {}, {}
    for case in measured_runs(session_data, fixtures):
        cases[case.key] = case
        for name, figure in case.figures.items():
            if figure.value is not None:
                runs.setdefault(case.key, {}).setdefault(name, []).append(figure.value)
    return [replace(case, figures={name: replace(figure, runs=tuple(
                runs.get(key, {}).get(name, ())))
                for name, figure in case.figures.items()})
            for key, case in cases.items()]


@dataclass(frozen=True)
class Series:
    """One figure of one test case over runs, oldest session first: each run's value, its
    session's UUID and start (Unix time), and the software that produced it (its stack)."""
    unit: str
    values: tuple = ()
    sessions: tuple = ()
    times: tuple = ()
    stacks: tuple = ()

    def plus(self, value, session, time, stack):
        return replace(self, values=(*self.values, value), sessions=(*self.sessions, session),
                       times=(*self.times, time), stacks=(*self.stacks, stack))

    def runs(self):
        """(value, session, time, stack) of each run, in the order stored."""
        return list(zip(self.values, self.sessions, self.times, self.stacks))

    def of_runs(self, runs):
        return Series(self.unit, *(tuple(column) for column in zip(*runs))) if runs else \
            Series(self.unit)


def figure_samples(sessions, system):
    """Every figure of `system` measured in `sessions`, as a sample over their runs:
    {(check, partition, environ, parameters, inputs): {variable: Series}}, one entry per
    run. Runs of other inputs (a quick run and a full one, another -S) are other samples: a
    figure is compared only with itself; runs of another stack are told apart by
    by_stack."""
    samples = {}
    for data in sessions:
        uuid, started = uuid_of(data), started_of(data)
        for case in measured_runs(data):
            if case.system != system:
                continue
            figures = samples.setdefault((*case.key, case.inputs), {})
            for variable, figure in case.figures.items():
                if figure.value is None:
                    continue
                series = figures.get(variable) or Series(figure.unit)
                figures[variable] = series.plus(figure.value, uuid, started, case.stack)
    return samples


def by_session(series):
    """A Series session by session, oldest first: [(session start, UUID, [its runs'
    values])]."""
    sessions = {}
    for value, uuid, started in zip(series.values, series.sessions, series.times):
        sessions.setdefault((started, uuid), []).append(value)
    return [(started, uuid, values) for (started, uuid), values
            in sorted(sessions.items(), key=lambda item: item[0][0] or 0)]


def by_stack(series):
    """A Series split by the stack of its runs: {stack: the Series of those runs only}, in
    the order the stacks first ran."""
    parts = {}
    for run in sorted(series.runs(), key=lambda run: run[2] or 0):
        parts.setdefault(run[3], []).append(run)
    return {stack: series.of_runs(runs) for stack, runs in parts.items()}


def case_figure(case, variable):
    """A case's figure in its session (Figure.session_value)."""
    return case.figures[variable].session_value


def check_cases(config, check, uuid=None):
    """Measured cases of one check in a stored session (default: the newest that ran it)."""
    if uuid:
        data = [session(config, uuid)]
    else:
        data = stored_sessions(config)

    for candidate in data:
        cases = [c for c in measured_cases(candidate) if c.check == check]
        if cases:
            return candidate['session_info']['uuid'], cases

    raise RuntimeError(f'no stored session has results of {check}'
                       + (f' (session {uuid})' if uuid else ''))
