"""Performance references as data: references/<system>.yaml, one file per system.

Every figure says where it comes from: a seed paper (file, table or figure, and the
configuration it describes) or a recorded baseline of this suite (session, date, host).
Shared code turns the figures that apply to a test into its ReFrame `reference`.

    system: chic
    sources:
      chic2007: {seed: 001_ffdfcd1799e692fa.txt, title: Design and Evaluation of ...}
    figures:
    - check: StreamCheck          # the ReFrame test class
      partition: compute
      environ: gcc                # optional: only this ReFrame environment
      match: {num_threads: 1}     # test parameters/variables this figure is for
      variable: triad             # a performance variable of the check
      value: 3294.2
      unit: MB/s
      tolerance: [-0.10, null]    # fractions of value; null = unbounded
      source: chic2007
      where: Table 1
      configuration: 1 thread, 2 DIMMs, gcc-4.2 -O3, Opteron 2.6 GHz
      use: reference              # or `comparison`: reported beside results, no bounds

A test gets at most one `reference` figure per variable; `comparison` figures (a paper's
other configurations) are for reports.
"""
import datetime
import json
import socket
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml

from hpcbench import paths


class ReferenceError(ValueError):
    pass


_SCALAR = {'type': ['string', 'number', 'boolean']}
SCHEMA = {
    'type': 'object',
    'required': ['system', 'sources', 'figures'],
    'additionalProperties': False,
    'properties': {
        'system': {'type': 'string'},
        'sources': {
            'type': 'object',
            'additionalProperties': {
                'type': 'object',
                'oneOf': [
                    {'required': ['seed', 'title']},
                    {'required': ['baseline_session', 'recorded', 'host']},
                ],
                'properties': {
                    'seed': {'type': 'string', 'pattern': r'^\d{3}_[0-9a-f]{16}\.txt$'},
                    'title': {'type': 'string'},
                    'year': {'type': 'integer'},
                    'baseline_session': {'type': 'string'},
                    'recorded': {'type': 'string'},
                    'host': {'type': 'string'},
                },
                'additionalProperties': False,
            },
        },
        'figures': {
            'type': 'array',
            'items': {
                'type': 'object',
                'required': ['check', 'partition', 'variable', 'value', 'unit', 'source',
                             'where', 'configuration'],
                'additionalProperties': False,
                'properties': {
                    'check': {'type': 'string'},
                    'partition': {'type': 'string'},
                    'environ': {'type': 'string'},
                    'match': {'type': 'object', 'additionalProperties': _SCALAR},
                    'variable': {'type': 'string'},
                    'value': {'type': 'number'},
                    'unit': {'type': 'string'},
                    'tolerance': {'type': 'array', 'minItems': 2, 'maxItems': 2,
                                  'items': {'type': ['number', 'null']}},
                    'source': {'type': 'string'},
                    'where': {'type': 'string'},
                    'configuration': {'type': 'string'},
                    'use': {'enum': ['reference', 'comparison']},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Figure:
    check: str
    partition: str
    variable: str
    value: float
    unit: str
    source: str
    where: str
    configuration: str
    environ: str = None
    match: dict = field(default_factory=dict)
    tolerance: tuple = (None, None)
    use: str = 'reference'

    def applies_to(self, check, partition, environ, attrs):
        """attrs: a test's attribute values by name (missing ones never match)."""
        return (self.check == check and self.partition == partition
                and self.environ in (None, environ)
                and all(attrs.get(k, object()) == v for k, v in self.match.items()))


@dataclass(frozen=True)
class ReferenceSet:
    system: str
    sources: dict
    figures: list
    path: Path = None


def reference_file(system):
    return paths.REFERENCES_DIR / f'{system}.yaml'


def parse(data, where):
    try:
        jsonschema.validate(data, SCHEMA)
    except jsonschema.ValidationError as err:
        location = '/'.join(str(p) for p in err.absolute_path) or 'top level'
        raise ReferenceError(f'{where}: {location}: {err.message}') from None

    figures = []
    for i, item in enumerate(data['figures']):
        if item['source'] not in data['sources']:
            raise ReferenceError(f'{where}: figures/{i}: unknown source {item["source"]!r}')

        figures.append(Figure(**{**item, 'tolerance': tuple(item.get('tolerance',
                                                                     (None, None)))}))

    return ReferenceSet(data['system'], data['sources'], figures)


def load(system, path=None):
    """The references of a system; an empty set when it has no file."""
    path = Path(path) if path else reference_file(system)
    if not path.exists():
        return ReferenceSet(system, {}, [], path)

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ReferenceError(f'{path}: not valid YAML: {err}') from None

    refs = parse(data, str(path))
    if refs.system != system:
        raise ReferenceError(f'{path}: describes system {refs.system!r}, not {system!r}')

    return ReferenceSet(refs.system, refs.sources, refs.figures, path)


def select(refs, check, partition, environ, attrs, use='reference'):
    """The figures of `refs` for one test, by variable; two for one variable is an error."""
    chosen = {}
    for fig in refs.figures:
        if fig.use == use and fig.applies_to(check, partition, environ, attrs):
            if use == 'reference' and fig.variable in chosen:
                raise ReferenceError(
                    f'{refs.path}: two reference figures for {check} {fig.variable} on '
                    f'{partition} ({chosen[fig.variable].configuration!r} and '
                    f'{fig.configuration!r}); mark one `use: comparison`')

            chosen.setdefault(fig.variable, fig)

    return chosen


def _test_attrs(test, figures):
    keys = {k for fig in figures for k in fig.match}
    return {k: getattr(test, k) for k in keys if hasattr(test, k)}


def reframe_reference(test):
    """The `reference` dict of a ReFrame test from its system's reference file."""
    system = test.current_system.name
    partition = test.current_partition.name
    refs = load(system)
    chosen = select(refs, type(test).__name__, partition, test.current_environ.name,
                    _test_attrs(test, refs.figures))
    return {f'{system}:{partition}': {
        var: (fig.value, *fig.tolerance, fig.unit) for var, fig in chosen.items()
    }}


# --- Local baselines ---------------------------------------------------------------------------

# Variables where smaller is better get an upper bound; all others a lower one, except
# those recorded without bounds: properties rather than speeds (a protocol switch point in
# bytes) and run-to-run variation (coefficients of variation), which no fixed fraction of
# a baseline describes.
SMALLER_IS_BETTER_UNITS = {'s', 'ms', 'us', 'ns', 'flop/word'}
UNBOUNDED_UNITS = {'B'}
UNBOUNDED_SUFFIXES = ('_cv',)


def baseline_bounds(variable, unit, tolerance):
    """ReFrame's (lower, upper) thresholds of a baseline figure."""
    if unit in UNBOUNDED_UNITS or variable.endswith(UNBOUNDED_SUFFIXES):
        return (None, None)

    return (None, tolerance) if unit in SMALLER_IS_BETTER_UNITS else (-tolerance, None)


def baseline_from_testcases(system, testcases, session_uuid, tolerance, host=None,
                            recorded=None):
    """A ReferenceSet recording these results as the system's baseline.

    testcases: dicts with check, partition, environ, match (the test's parameters) and
    perfvalues {variable: (value, unit)}, as hpcbench.results.measured_cases extracts them
    from ReFrame's results database.
    """
    figures = []
    for case in testcases:
        for variable, (value, unit) in sorted(case['perfvalues'].items()):
            bounds = baseline_bounds(variable, unit, tolerance)
            params = ', '.join(f'{k}={v}' for k, v in sorted(case['match'].items()))
            figures.append(Figure(
                check=case['check'], partition=case['partition'], environ=case['environ'],
                match=dict(case['match']), variable=variable, value=float(value), unit=unit,
                tolerance=bounds, source='baseline', where=f'session {session_uuid}',
                configuration=f'{case["environ"]}, {params}' if params else case['environ'],
            ))

    sources = {'baseline': {
        'baseline_session': session_uuid,
        'recorded': recorded or datetime.datetime.now().isoformat(timespec='seconds'),
        'host': host or socket.gethostname(),
    }}
    return ReferenceSet(system, sources, figures)


def dump(refs):
    figures = []
    for fig in refs.figures:
        item = {k: v for k, v in fig.__dict__.items() if v not in (None, {}, 'reference')}
        item['tolerance'] = list(fig.tolerance)
        figures.append(item)

    data = {'system': refs.system, 'sources': refs.sources, 'figures': figures}
    parse(json.loads(json.dumps(data)), 'generated baseline')   # never write what load rejects
    return yaml.safe_dump(data, sort_keys=False)
