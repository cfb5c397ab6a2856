"""A site's acceptance contract as data (contracts/<system>.yaml): what was committed, entry
by entry, with where each value comes from. One JSON Schema (SCHEMA) and one loader (load,
from_data) that refuses a contract in one message naming the file, the entry and the field
(`contracts/testbed.yaml: entries[hpl-node].committed.value: 0 is less than or equal to the
minimum of 0`), and then what the schema cannot see: a check or figure the suite does not
report, two entries with one id, a contract of another system, a scope the system does not
have (GPU pairs on a partition without GPUs), a unit that is not the one the check
reports its figure in (hpcbench.benchmarks.reports).

An entry: its `id`; the `check` and `figure` (a performance variable the check reports)
and the check's `parameters` that name its test case (`num_nodes: 1`; default: any);
its `scope`, what one verdict is about (node, gpu, gpu_pair, node_pair, partition, system),
the `partitions` it applies to (default: every one the check runs on) and the `environ`
(an MPI stack's committed latency; default: every environment); the `committed`
value, its unit, its direction (at_least, at_most) and a tolerance (a fraction: a figure
short of the value by no more than it is a warning, not a failure); the `statistic` over a
unit's repeats (the median of at least N); the `rule` over the scope (every unit; a
fraction of them; the minimum over them; their median); the run rules it needs; its
`source` (a procurement document and clause, a datasheet or published figure times a
factor, a baseline session times a factor, a paper); a `fault` code and what to do; and
`watch`, where the entry is re-judged on each node after the acceptance (`hpcbench watch`:
hpcbench.acceptance.watch): how often (`period`), what a failing node gets (`action`: drain,
comment or none), after how many failing cycles in a row (`streak`), and the least worsening
beside the node's own accepted figures that is drift (`min_effect`, a fraction), and the
runs a cycle takes of it (`runs`; its statistic's where not named).
"""
from dataclasses import dataclass
from pathlib import Path

from hpcbench.acceptance import scopes
from hpcbench.benchmarks.reports import declared
from hpcbench.core.fact_figures import TEXT_PATTERN
from hpcbench.machine import plain_yaml
from hpcbench.machine.description_schema import DescriptionError, validated

DIRECTIONS = ('at_least', 'at_most')
SOURCE_KINDS = ('procurement', 'datasheet', 'published', 'baseline', 'paper', 'description')
# The runs of a unit its statistic needs where the entry does not say.
DEFAULT_MEDIAN_OF = 3
# The most runs an entry may ask of a unit (its statistic's, its run rules' repeats): each
# run is a test case of every node (2,000 repeats made a dry run of 2,001 cases, 267 s).
MAX_RUNS = 100
# The longest a run rule may ask a run to last, and the most bytes of a node it may ask for.
MAX_RUN_SECONDS = 7 * 86400
MAX_BYTES_PER_NODE = 1 << 50
# A watch's period: a count and its unit (30m, 24h, 7d); the units in seconds.
PERIOD_UNITS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400}
WATCH_ACTIONS = ('drain', 'comment', 'none')
# A watched entry's defaults: two failing cycles in a row act; 5 % worse than the node's
# accepted figures is drift (SuperBench calls a node 5 % below its fleet's baseline defective).
DEFAULT_STREAK = 2
DEFAULT_MIN_EFFECT = 0.05

_TEXT = {'type': 'string', 'minLength': 1}
_ID = {'type': 'string', 'pattern': r'^[A-Za-z0-9][A-Za-z0-9_.-]*$'}
_FRACTION = {'type': 'number', 'minimum': 0, 'maximum': 1}
# A check's parameters and settings reach ReFrame's command line (-n, -S): names as Python
# names, values plain (no spaces, quotes, braces or shell syntax).
_SETTINGS = {'type': 'object',
             'propertyNames': {'pattern': r'^[A-Za-z_][A-Za-z0-9_]*$'},
             'additionalProperties': {'anyOf': [
                 {'type': 'string', 'pattern': r'^[A-Za-z0-9_.+:=/-]+$'},
                 {'type': 'number'}, {'type': 'boolean'}]}}

ENTRY_SCHEMA = {
    'type': 'object',
    'required': ['id', 'check', 'figure', 'scope', 'committed', 'source', 'fault'],
    'properties': {
        'id': _ID,
        'check': _TEXT,
        'figure': _TEXT,
        # The scopes' names (hpcbench.acceptance.scopes.SCOPES), as they are when it is read.
        'scope': {'enum': []},
        'parameters': _SETTINGS,
        'partitions': {'type': 'array', 'items': _ID, 'minItems': 1},
        'environ': _ID,
        'committed': {
            'type': 'object', 'required': ['value', 'unit', 'direction'],
            'properties': {'value': {'type': 'number', 'exclusiveMinimum': 0},
                           'unit': _TEXT,
                           'direction': {'enum': list(DIRECTIONS)},
                           'tolerance': {'type': 'number', 'minimum': 0, 'maximum': 0.5}},
            'additionalProperties': False},
        'statistic': {
            'type': 'object', 'required': ['median_of'],
            # One run is no test: a unit short of the value in one run is a warning
            # (hpcbench.acceptance.judgement.judge_unit).
            'properties': {'median_of': {'type': 'integer', 'minimum': 1,
                                         'maximum': MAX_RUNS}},
            'additionalProperties': False},
        'rule': {
            'type': 'object', 'minProperties': 1, 'maxProperties': 1,
            'properties': {'every': {'const': True}, 'fraction': _FRACTION,
                           'minimum': {'const': True}, 'median': {'const': True}},
            'additionalProperties': False},
        'run_rules': {
            'type': 'object',
            'properties': {'repeats': {'type': 'integer', 'minimum': 1,
                                       'maximum': MAX_RUNS},
                           'settings': _SETTINGS,
                           'minimum_seconds': {'type': 'number', 'exclusiveMinimum': 0,
                                               'maximum': MAX_RUN_SECONDS},
                           'minimum_bytes_per_node': {'type': 'integer', 'minimum': 1,
                                                      'maximum': MAX_BYTES_PER_NODE}},
            'additionalProperties': False},
        'source': {
            'type': 'object', 'required': ['kind', 'cite'],
            'properties': {'kind': {'enum': list(SOURCE_KINDS)}, 'cite': _TEXT,
                           'clause': _TEXT, 'figure': {'type': 'number',
                                                        'exclusiveMinimum': 0},
                           'factor': {'type': 'number', 'exclusiveMinimum': 0,
                                      'maximum': 1}},
            'additionalProperties': False},
        'watch': {
            'type': 'object', 'required': ['period'],
            'properties': {
                'period': {'type': 'string',
                           'pattern': f'^[1-9][0-9]{{0,5}}[{"".join(PERIOD_UNITS)}]$'},
                'action': {'enum': list(WATCH_ACTIONS)},
                'streak': {'type': 'integer', 'minimum': 1, 'maximum': 100},
                'min_effect': {'type': 'number', 'exclusiveMinimum': 0, 'maximum': 0.9},
                'runs': {'type': 'integer', 'minimum': 1, 'maximum': MAX_RUNS}},
            'additionalProperties': False},
        'fault': {
            'type': 'object', 'required': ['code', 'action'],
            'properties': {'code': {'type': 'string', 'pattern': r'^[A-Z0-9][A-Z0-9_-]*$'},
                           'action': _TEXT},
            'additionalProperties': False},
    },
    'additionalProperties': False,
}

# A fact's expectation (hpcbench.core.fact_figures: what a node, GPU or port says of itself
# around every job): as the committed value's directions, `equal`, and `increase_at_most`
# (its increase over a job: errors counted, XIDs logged).
EXPECTATIONS = ('equal', 'at_least', 'at_most', 'increase_at_most')

FACT_ENTRY_SCHEMA = {
    'type': 'object',
    'required': ['id', 'fact', 'scope', 'expect', 'source', 'fault'],
    'properties': {
        'id': _ID,
        'fact': {'type': 'string', 'pattern': r'^[a-z][a-z0-9_]{0,80}$'},
        # The facts of this check's jobs; of any job's where not named.
        'check': _TEXT,
        'scope': {'enum': []},
        'parameters': _SETTINGS,
        'partitions': ENTRY_SCHEMA['properties']['partitions'],
        'environ': _ID,
        # The ports it is about, by name (mlx5_0/1), where a node's ports differ (an
        # InfiniBand port and an Ethernet one); every one where not named.
        'devices': {'type': 'array', 'minItems': 1, 'items': {
            'type': 'string', 'pattern': r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/[1-9][0-9]{0,2}$'}},
        'expect': {'type': 'object', 'minProperties': 1, 'maxProperties': 1,
                   'properties': {kind: {'type': 'number', 'minimum': 0}
                                  for kind in EXPECTATIONS} | {
                       # A text fact (a version, a setting) is expected as it reads.
                       'equal': {'anyOf': [{'type': 'number', 'minimum': 0},
                                           {'type': 'string',
                                            'pattern': f'^{TEXT_PATTERN}$'}]}},
                   'additionalProperties': False},
        'source': ENTRY_SCHEMA['properties']['source'],
        'fault': ENTRY_SCHEMA['properties']['fault'],
        # Read again around each cycle's jobs after the acceptance and judged against its
        # expectation: no runs of its own, no drift (a fact is no sample).
        'watch': {**ENTRY_SCHEMA['properties']['watch'], 'properties': {
            k: v for k, v in ENTRY_SCHEMA['properties']['watch']['properties'].items()
            if k not in ('min_effect', 'runs')}},
    },
    'additionalProperties': False,
}

SCHEMA = {
    'type': 'object',
    'required': ['system', 'entries'],
    'properties': {
        'system': _ID,
        'about': _TEXT,
        'entries': {'type': 'array', 'items': ENTRY_SCHEMA, 'minItems': 1},
    },
    'additionalProperties': False,
}


class ContractError(ValueError):
    """A contract that is not one: one line naming its file, entry and field."""


@dataclass(frozen=True)
class Committed:
    value: float            # a text fact's (a version): its text
    unit: str
    direction: str          # at_least or at_most; a fact's may be equal
    tolerance: float = 0.0  # a fraction of the value: short by no more is a warning

    def met_by(self, value):
        if self.direction == 'equal':
            return value == self.value
        return value >= self.value if self.direction == 'at_least' else value <= self.value

    def within_tolerance(self, value):
        if self.direction == 'equal':
            return self.met_by(value)
        if self.direction == 'at_least':
            return value >= self.value * (1 - self.tolerance)
        return value <= self.value * (1 + self.tolerance)

    def words(self):
        how = {'at_least': 'at least', 'at_most': 'at most', 'equal': 'equal to'}
        if isinstance(self.value, str):
            return f'{how[self.direction]} {self.value}'    # a text fact: a version
        return f'{how[self.direction]} {self.value:g} {self.unit}'


@dataclass(frozen=True)
class Source:
    kind: str
    cite: str
    clause: str = ''
    figure: float = None    # the cited figure a factor scales (a datasheet's, a baseline's)
    factor: float = None

    def words(self):
        parts = [self.cite + (f', {self.clause}' if self.clause else '')]
        if self.figure is not None and self.factor is not None:
            parts.append(f'{self.factor:g} x {self.figure:g}')
        return f'{self.kind}: ' + '; '.join(parts)


@dataclass(frozen=True)
class Watched:
    """How an entry is watched after the acceptance: each node judged at least once a
    `period` (seconds); a node failing it `streak` cycles in a row gets the `action` (drain,
    comment, none); drift is its runs significantly worse than its accepted ones, by at
    least `min_effect` (a fraction of its accepted median), over `runs` runs of it a cycle
    (0: its statistic's). More runs a cycle see a smaller drift sooner: on the 2-core
    testbed, whose HPL spreads 15 % run to run, three runs a cycle caught a node 20 % slow
    within three cycles in 45 % of trials and six in 93 % (its healthy nodes' real runs,
    resampled, 2026-12-05); a site whose figures spread 2 % needs no more than three."""
    period: float
    action: str = 'drain'
    streak: int = DEFAULT_STREAK
    min_effect: float = DEFAULT_MIN_EFFECT
    runs: int = 0

    def words(self):
        runs = f'; {self.runs} run(s) a cycle' if self.runs else ''
        return (f'every {period_words(self.period)}; {self.action} after {self.streak} '
                f'failing cycle(s); drift from {100 * self.min_effect:g} % worse{runs}')


def period_seconds(text):
    """Seconds of a period as a contract writes it ('24h'); ValueError where it is none."""
    text = str(text)
    if len(text) < 2 or text[-1] not in PERIOD_UNITS or not text[:-1].isdigit() \
            or int(text[:-1]) < 1:
        raise ValueError(f'{text!r} is no period (a whole count and a unit of '
                         f'{", ".join(PERIOD_UNITS)}: 30m, 24h, 7d)')
    return int(text[:-1]) * PERIOD_UNITS[text[-1]]


def period_words(seconds):
    """A period in its largest whole unit: 86400 -> '1d', 5400 -> '90m'."""
    for unit, size in sorted(PERIOD_UNITS.items(), key=lambda item: -item[1]):
        if seconds >= size and seconds % size == 0:
            return f'{int(seconds // size)}{unit}'
    return f'{seconds:g}s'


@dataclass(frozen=True)
class Entry:
    id: str
    check: str
    figure: str
    scope: scopes.Scope         # what one verdict is about (hpcbench.acceptance.scopes)
    committed: Committed
    source: Source
    fault_code: str
    action: str
    partitions: tuple = ()      # () : every partition the check runs on
    environ: str = ''           # the environment (MPI stack) it applies to; '' : every one
    parameters: dict = None     # the check's parameters of its test case ({} : any)
    median_of: int = 3          # runs a unit's statistic needs
    rule: tuple = ('every', True)
    run_rules: dict = None
    watch: Watched = None       # None: not re-judged after the acceptance
    # A fact of the node, GPU or port (hpcbench.core.node_facts), read around every job of
    # `check` ('' : of any check): `figure` the fact's figure, `committed` its expectation;
    # every read must meet it. `devices`: the ports it is about (() : every one).
    fact: bool = False
    devices: tuple = ()


@dataclass(frozen=True)
class Contract:
    system: str
    entries: tuple
    path: Path = None
    about: str = ''


def schema():
    """SCHEMA with the scopes the suite knows now (hpcbench.acceptance.scopes.SCOPES): an
    entry naming a `fact` as FACT_ENTRY_SCHEMA, any other as ENTRY_SCHEMA."""
    known = {'scope': {'enum': list(scopes.SCOPES)}}
    entry = {**ENTRY_SCHEMA, 'properties': {**ENTRY_SCHEMA['properties'], **known}}
    fact = {**FACT_ENTRY_SCHEMA, 'properties': {**FACT_ENTRY_SCHEMA['properties'], **known}}
    return {**SCHEMA, 'properties': {**SCHEMA['properties'], 'entries': {
        **SCHEMA['properties']['entries'],
        'items': {'if': {'type': 'object', 'required': ['fact']}, 'then': fact,
                  'else': entry}}}}


def _fact_entry(data, where):
    """The Entry of a fact's (FACT_ENTRY_SCHEMA's) data."""
    from hpcbench.core import fact_figures
    scope = scopes.named(data['scope'])
    (kind, value), = data['expect'].items()
    try:
        figure, unit = fact_figures.fact_figure(scope, data['fact'],
                                                kind == 'increase_at_most')
    except fact_figures.UnknownFact as err:
        raise ContractError(f'{where}.fact: {err}') from None
    direction = 'at_most' if kind == 'increase_at_most' else kind
    if (unit == fact_figures.TEXT_UNIT) != isinstance(value, str):
        raise ContractError(
            f'{where}.expect: {data["fact"]} is ' + (
                f'a text ({fact_figures.TEXT_UNIT}): expect it `equal` to the text it reads, '
                f'quoted (e.g. "{value}")' if unit == fact_figures.TEXT_UNIT else
                f'a figure in {unit}, not a text'))
    if isinstance(value, str) and data.get('watch'):
        raise ContractError(f'{where}.watch: {data["fact"]} is a text, judged in the '
                            'acceptance: the watch judges figures and counts')
    return Entry(
        id=data['id'], check=data.get('check', ''), figure=figure, scope=scope,
        committed=Committed(value if isinstance(value, str) else float(value), unit,
                            direction), source=Source(**data['source']),
        fault_code=data['fault']['code'], action=data['fault']['action'],
        partitions=tuple(data.get('partitions') or ()), environ=data.get('environ', ''),
        parameters=dict(data.get('parameters') or {}), median_of=1, run_rules={},
        fact=True, devices=_devices(scope, data.get('devices'), where),
        watch=_watched(data.get('watch')))


def _devices(scope, names, where):
    if names and scope != scopes.NIC:
        raise ContractError(f'{where}.devices: a {scope} entry is about every one of its '
                            'units; `devices` names the ports of a nic entry')
    return tuple(names or ())


def _entry(data, where=''):
    if 'fact' in data:
        return _fact_entry(data, where)
    committed = data['committed']
    return Entry(
        id=data['id'], check=data['check'], figure=data['figure'],
        scope=scopes.named(data['scope']),
        committed=Committed(float(committed['value']), committed['unit'],
                            committed['direction'], float(committed.get('tolerance', 0))),
        source=Source(**data['source']), fault_code=data['fault']['code'],
        action=data['fault']['action'], partitions=tuple(data.get('partitions') or ()),
        environ=data.get('environ', ''), parameters=dict(data.get('parameters') or {}),
        median_of=(data.get('statistic') or {}).get('median_of', DEFAULT_MEDIAN_OF),
        rule=next(iter((data.get('rule') or {'every': True}).items())),
        run_rules=dict(data.get('run_rules') or {}),
        watch=_watched(data.get('watch')))


def _watched(data):
    if not data:
        return None
    return Watched(float(period_seconds(data['period'])), data.get('action', 'drain'),
                   int(data.get('streak', DEFAULT_STREAK)),
                   float(data.get('min_effect', DEFAULT_MIN_EFFECT)), int(data.get('runs', 0)))


def from_data(data, where, system=None, partitions=None):
    """The Contract of `data` (as its file holds it), checked; ContractError naming `where`
    (its file), the entry and the field of the first fault. `system`: the system it must
    be of; `partitions`: {name: whether its nodes have GPUs} of that system, where the
    scopes are checked against it."""
    try:
        validated(data, schema(), f'{where}:')
    except DescriptionError as err:
        raise ContractError(str(err)) from None
    if system is not None and data['system'] != system:
        raise ContractError(f'{where}: system: {data["system"]!r}: a contract of another '
                            f'system than {system!r}')
    entries = [_entry(e, f'{where}: entries[{e["id"]}]') for e in data['entries']]
    seen = set()
    checks = declared()
    measured = {e.check for e in entries if not e.fact}
    for entry in entries:
        at = f'{where}: entries[{entry.id}]'
        if entry.id in seen:
            raise ContractError(f'{at}.id: two entries are called {entry.id!r}')
        seen.add(entry.id)
        if entry.fact:
            # Facts are read around the jobs the contract's figures run, and run none.
            if entry.check and entry.check not in measured:
                raise ContractError(f'{at}.check: no entry of the contract runs {entry.check}, '
                                    'and a fact is read around the jobs its figures run '
                                    f'(they run: {", ".join(sorted(measured)) or "nothing"})')
        elif entry.check not in checks:
            raise ContractError(f'{at}.check: the suite has no check {entry.check!r} (its '
                                f'checks: {", ".join(sorted(checks))})')
        else:
            _check_figure(entry, checks, at)
        if partitions is not None:
            _check_partitions(entry, partitions, data['system'], at)
    return Contract(data['system'], tuple(entries), Path(where), data.get('about', ''))


def _check_figure(entry, checks, at):
    """A measured figure's entry: its check reports the figure, in the committed unit, and
    a watch only of a unit measured on one node."""
    reported = checks[entry.check].variables_for(entry.parameters)
    if entry.figure not in reported:
        raise ContractError(f'{at}.figure: {entry.check} reports no {entry.figure!r} '
                            f'(it reports: {", ".join(sorted(reported))})')
    unit = checks[entry.check].unit_of(entry.figure, entry.parameters)
    if entry.committed.unit != unit:
        raise ContractError(f'{at}.committed.unit: {entry.committed.unit!r} is not the unit '
                            f'of {entry.check} {entry.figure}, {unit!r}: commit the value '
                            'in the unit the check reports')
    if entry.watch and entry.scope.runs != 'per_node':
        raise ContractError(f'{at}.watch: a {entry.scope} entry is not measured on one '
                            'node at a time, and the watch re-judges node by node: watch '
                            'entries of a node, GPU or GPU pair scope')


def _check_partitions(entry, partitions, system, at):
    """The entry's partitions are the system's, and GPUs' scopes on partitions with GPUs."""
    unknown = [p for p in entry.partitions if p not in partitions]
    if unknown:
        raise ContractError(f'{at}.partitions: {system} has no partition '
                            f'{", ".join(unknown)} (its partitions: '
                            f'{", ".join(sorted(partitions))})')
    named = entry.partitions or tuple(partitions)
    without = [p for p in named if not partitions[p]]
    if entry.scope.needs_gpus and (entry.partitions and without
                                   or not any(partitions[p] for p in named)):
        raise ContractError(f'{at}.scope: {entry.scope} on partition(s) without GPUs: '
                            f'{", ".join(without)}')


def load(path, system=None, partitions=None):
    """The contract in `path` (YAML), checked (from_data)."""
    try:
        data = plain_yaml.load(path)
    except plain_yaml.PlainYamlError as err:
        raise ContractError(str(err)) from None
    return from_data(data, str(path), system, partitions)
