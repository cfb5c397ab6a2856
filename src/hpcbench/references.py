"""Performance references as data: references/<system>.yaml, one file per system.

Every figure says where it comes from: a seed paper (file, table or figure, and the
configuration it describes) or a recorded baseline of this suite (session, date, host).
Shared code turns the figures that apply to a test into its ReFrame `reference`.

    system: chic
    about: Performance figures of CHiC from its seed paper, ...  # for the person editing it
    sources:
      chic2007: {seed: 001_ffdfcd1799e692fa.txt, title: Design and Evaluation of ...}
    figures:
    - check: StreamCheck          # the ReFrame test class
      partition: compute
      environ: gcc                # optional: only this ReFrame environment
      match: {num_threads: 1, memory_dimms: 2}  # test parameters/variables (or, for
                                  # hardware, the partition's extras) this figure is for
      variable: triad             # a performance variable of the check
      value: 3294.2               # in the check's unit
      unit: MB/s
      cited: 3294.2               # optional: as the paper prints it when the unit differs
                                  # (76.46 TFlops; checked against value by the tests)
      quote: 1 Thread 2 DIMMs 3294.2 12.6 ...  # a seed's figure: the seed's own words that
                                  # print it (its sentence or table row), so that a clone
                                  # without the seeds still shows where the number stands
      tolerance: [-0.10, null]    # fractions of value; null = unbounded
      source: chic2007
      where: Table 1
      configuration: 1 thread, 2 DIMMs, gcc-4.2 -O3, Opteron 2.6 GHz
      use: reference              # or `comparison`: reported beside results, no bounds

A paper's comparison node that is no partition of the system (CHiC's Intel Woodcrest) is
described under `comparison_machines: {name: description}`; figures on it name it as their
partition and are comparisons.

A test gets at most one `reference` figure per variable; `comparison` figures (a paper's
other configurations) are for reports. What a paper shows only as a plot or says without
a number is kept as `qualitative` statements (check, source, where, statement), never as
a made-up figure; `notes` record the paper's inconsistencies that matter.

Every file is written in one form (to_text; `hpcbench references --rewrite` puts an edited
file back in it): keys in a fixed order, `match` and `tolerance` on one line, long strings
folded, no YAML anchors or aliases. A file is plain data and is refused when it loads if it
has aliases, a key given twice, more than 1 MiB, a value that is not a finite number of 0 or
more, or a tolerance ReFrame could not read.
"""
import datetime
import json
import math
import socket
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

import jsonschema
import yaml

from hpcbench import paths, results


class ReferenceError(ValueError):
    pass


# A references file is data a person reads and reviews: the largest, chic.yaml, is 36 KB.
# Far larger is no such file (a 50 MB one took 91 s and 2.5 GB to load).
MAX_FILE_BYTES = 1 << 20
# Of a value a schema error shows (an expanded value can be huge).
SHOWN_CHARACTERS = 200


class _DataLoader(yaml.SafeLoader):
    """YAML as plain data: no aliases (a few lines of them expand to gigabytes) and no key
    given twice (YAML itself would keep the last, silently)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f'an alias (*{event.anchor}): a references file is plain data, '
                'each value written out', event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'the key {key!r} is given twice in one mapping',
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _shown(value):
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f'{text[:SHOWN_CHARACTERS]}...'


def _check_numbers(item, where):
    """A figure's numbers as ReFrame and the verdicts need them: a finite value, not
    negative (every figure the checks report is a rate, a size, a time or a share), and a
    tolerance ReFrame reads as (lower, upper) fractions of it: lower in [-1, 0], upper 0 or
    more, each finite or null."""
    value = item['value']
    if not math.isfinite(value) or value < 0:
        raise ReferenceError(f'{where}: value {value}: a figure is a finite number, 0 or more')
    lower, upper = item.get('tolerance', (None, None))
    for bound in (lower, upper):
        if bound is not None and not math.isfinite(bound):
            raise ReferenceError(f'{where}: tolerance {[lower, upper]}: each bound is a finite '
                                 'fraction of the value, or null')
    if (lower is not None and not -1 <= lower <= 0) or (upper is not None and upper < 0):
        raise ReferenceError(f'{where}: tolerance {[lower, upper]}: (lower, upper) fractions '
                             'of the value, lower in [-1, 0] and upper 0 or more, e.g. '
                             '[-0.1, 0.1] for 10 % either way')
    for key in ('min', 'max'):
        bound = item.get('sample', {}).get(key)
        if bound is not None and not math.isfinite(bound):
            raise ReferenceError(f'{where}: sample {key} {bound}: a finite number')


_SCALAR = {'type': ['string', 'number', 'boolean']}
SCHEMA = {
    'type': 'object',
    'required': ['system', 'sources', 'figures'],
    'additionalProperties': False,
    'properties': {
        'system': {'type': 'string'},
        # What the file holds and how to read it, for the person who edits it.
        'about': {'type': 'string'},
        # Machines a paper compares with that are no partition of the system (CHiC's Intel
        # Woodcrest node): name -> description. Their figures are comparisons only.
        'comparison_machines': {'type': 'object', 'additionalProperties': {'type': 'string'}},
        'sources': {
            'type': 'object',
            'additionalProperties': {
                'type': 'object',
                'oneOf': [
                    {'required': ['seed', 'title']},
                    {'required': ['baseline_sessions', 'recorded', 'host', 'rule']},
                ],
                'properties': {
                    'seed': {'type': 'string', 'pattern': r'^\d{3}_[0-9a-f]{16}\.txt$'},
                    'title': {'type': 'string'},
                    'year': {'type': 'integer'},
                    'baseline_sessions': {'type': 'array', 'items': {'type': 'string'}},
                    'recorded': {'type': 'string'},
                    'host': {'type': 'string'},
                    'rule': {'type': 'string'},
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
                    'cited': {'type': 'string'},
                    'quote': {'type': 'string', 'minLength': 1},
                    'use': {'enum': ['reference', 'comparison']},
                    # A baseline figure's provenance: the runs it was made from.
                    'sample': {
                        'type': 'object', 'additionalProperties': False,
                        'required': ['runs', 'sessions', 'first', 'last', 'min', 'max',
                                     'bound'],
                        'properties': {
                            'runs': {'type': 'integer', 'minimum': 1},
                            'sessions': {'type': 'integer', 'minimum': 1},
                            'first': {'type': 'string'}, 'last': {'type': 'string'},
                            'min': {'type': 'number'}, 'max': {'type': 'number'},
                            'bound': {'type': 'string'},
                        },
                    },
                },
            },
        },
        'qualitative': {
            'type': 'array',
            'items': {
                'type': 'object', 'additionalProperties': False,
                'required': ['check', 'source', 'where', 'statement'],
                'properties': {k: {'type': 'string'} for k in
                               ('check', 'partition', 'environ', 'source', 'where',
                                'statement')},
            },
        },
        'notes': {
            'type': 'array',
            'items': {
                'type': 'object', 'additionalProperties': False,
                'required': ['source', 'where', 'note'],
                'properties': {k: {'type': 'string'} for k in ('source', 'where', 'note')},
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
    cited: str = None
    quote: str = None
    sample: dict = field(default_factory=dict)

    def applies_to(self, check, partition, environ, attrs):
        """attrs: a test's attribute values by name (missing ones never match)."""
        return (self.check == check and self.partition == partition
                and self.environ in (None, environ)
                and all(match_value(attrs.get(k, object())) == v
                        for k, v in self.match.items()))


def match_value(value):
    """A test attribute as figures name it: a parameter tuple by its elements joined with
    '-' (as ReFrame names the test: sweep=('swap_threshold', 64) -> swap_threshold-64)."""
    if isinstance(value, (tuple, list)):
        return '-'.join(map(str, value))

    return value


@dataclass(frozen=True)
class ReferenceSet:
    system: str
    sources: dict
    figures: list
    path: Path = None
    qualitative: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    comparison_machines: dict = field(default_factory=dict)


# The benchmark each check measures, for counting and reports.
BENCHMARK_OF_CHECK = {
    'HplCheck': 'HPL', 'HplTuningSweep': 'HPL', 'HplNodeScreen': 'HPL',
    'HpccCheck': 'HPCC',
    'StreamCheck': 'STREAM',
    'ImbPairCheck': 'IMB', 'ImbGroupCheck': 'IMB', 'ImbVariability': 'IMB',
    'IorCheck': 'IOR', 'MpiStartupCheck': 'MPI start-up',
}


def reported_variables(check, match=None):
    """Every performance variable `check` may report, whatever its inputs; for an IMB check
    whose figure names its benchmark (`match`), that benchmark's own. What `hpcbench
    references` (make lint) checks a figure's variable against, before any run: the checks
    report these and no others (tests/test_references.py reads their performance functions
    to keep the two one)."""
    from hpcbench import hpcc, hpl, imb, ior, mpi_startup, stream
    if check in ('ImbPairCheck', 'ImbGroupCheck'):
        benchmarks = (imb.PAIR_BENCHMARKS if check == 'ImbPairCheck' else imb.GROUP_BENCHMARKS)
        named = (match or {}).get('benchmark')
        return {v for b in benchmarks if named in (None, b) for v in imb.reported_variables(b)}
    return set({
        'HplCheck': hpl.CHECK_VARIABLES,
        'HplNodeScreen': hpl.RUN_VARIABLES,
        'HplTuningSweep': [v for setting in (*hpl.SWEEP, 'swap_threshold')
                           for v in hpl.sweep_variables(setting)],
        'HpccCheck': hpcc.VARIABLES,
        'StreamCheck': stream.CHECK_VARIABLES,
        'ImbVariability': imb.VARIABILITY_VARIABLES,
        'IorCheck': ior.PERFORMANCE_VARIABLES,
        'MpiStartupCheck': mpi_startup.VARIABLES,
    }[check])


def systems_with_references():
    return sorted(p.stem for p in paths.REFERENCES_DIR.glob('*.yaml'))


def counts(refs):
    """[(benchmark, references, comparisons, qualitative statements)] of a ReferenceSet."""
    table = {}
    for fig in refs.figures:
        row = table.setdefault(BENCHMARK_OF_CHECK.get(fig.check, fig.check), [0, 0, 0])
        row[0 if fig.use == 'reference' else 1] += 1
    for item in refs.qualitative:
        table.setdefault(BENCHMARK_OF_CHECK.get(item['check'], item['check']), [0, 0, 0])[2] += 1

    return [(bench, *row) for bench, row in sorted(table.items())]


def reference_file(system):
    return paths.REFERENCES_DIR / f'{system}.yaml'


def parse(data, where):
    try:
        jsonschema.validate(data, SCHEMA)
    except jsonschema.ValidationError as err:
        location = '/'.join(str(p) for p in err.absolute_path) or 'top level'
        message = err.message.replace(repr(err.instance), _shown(err.instance))
        raise ReferenceError(f'{where}: {location}: {message[:2 * SHOWN_CHARACTERS]}') from None

    figures = []
    for section in ('figures', 'qualitative', 'notes'):
        for i, item in enumerate(data.get(section, [])):
            if item['source'] not in data['sources']:
                raise ReferenceError(f'{where}: {section}/{i}: unknown source '
                                     f'{item["source"]!r}')
            if 'check' in item and item['check'] not in BENCHMARK_OF_CHECK:
                raise ReferenceError(f'{where}: {section}/{i}: unknown check '
                                     f'{item["check"]!r}; the checks: '
                                     f'{", ".join(sorted(BENCHMARK_OF_CHECK))}')

    machines = data.get('comparison_machines', {})
    for i, item in enumerate(data['figures']):
        _check_numbers(item, f'{where}: figures/{i}')
        known = reported_variables(item['check'], item.get('match'))
        if item['variable'] not in known:
            raise ReferenceError(f'{where}: figures/{i}: {item["check"]} reports no '
                                 f'{item["variable"]!r}; it reports: {", ".join(sorted(known))}')
        if 'seed' in data['sources'][item['source']] and 'quote' not in item:
            raise ReferenceError(f'{where}: figures/{i}: a figure from a seed '
                                 f'({item["source"]}) needs `quote`: the seed\'s words that '
                                 'print it')
        if item['partition'] in machines and item.get('use') != 'comparison':
            raise ReferenceError(f'{where}: figures/{i}: {item["partition"]} is a comparison '
                                 'machine, not a partition: its figures are `use: comparison`')
        if 'sample' in item:
            # Measured here (a baseline) before its check gained a parameter: it measured
            # the value that ran then, not every value.
            item = {**item, 'match': results.with_added_parameters(item['check'],
                                                                   item.get('match', {}))}
        figures.append(Figure(**{**item, 'tolerance': tuple(item.get('tolerance',
                                                                     (None, None)))}))

    return ReferenceSet(data['system'], data['sources'], figures,
                        qualitative=data.get('qualitative', []), notes=data.get('notes', []),
                        comparison_machines=machines)


# load()'s result per system and file, with the text it was parsed from (reading is cheap,
# parsing is not): a dry run of a paper system asks for its
# references in the setup of each of its test cases (700 parses of one file, 40 % of a
# TSUBAME dry run).
_LOADED = {}


def load(system, path=None):
    """The references of a system; an empty set when it has no file."""
    path = Path(path) if path else reference_file(system)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ReferenceSet(system, {}, [], path)
    if size > MAX_FILE_BYTES:
        raise ReferenceError(f'{path}: {size / 2**20:.1f} MiB, a references file is at most '
                             f'{MAX_FILE_BYTES >> 20} MiB of reviewed figures')
    text = path.read_text()

    key = (system, str(path.resolve()))
    if _LOADED.get(key, (None,))[0] != text:
        _LOADED[key] = text, _parse_file(system, path, text)
    return _LOADED[key][1]


def _parse_file(system, path, text):
    try:
        data = yaml.load(text, Loader=_DataLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, 'problem_mark', None)
        where = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark else ''
        problem = getattr(err, 'problem', None) or str(err)
        raise ReferenceError(f'{path}: not valid YAML: {where}{" ".join(problem.split())}') \
            from None

    refs = parse(data, str(path))
    if refs.system != system:
        raise ReferenceError(f'{path}: describes system {refs.system!r}, not {system!r}')

    return replace(refs, path=path)


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
    """The test's values of the figures' match keys: its parameters and variables, else its
    partition's extras (hardware such as the DIMMs per node)."""
    keys = {k for fig in figures for k in fig.match}
    extras = test.current_partition.extras
    return {k: getattr(test, k) if hasattr(test, k) else extras[k]
            for k in keys if hasattr(test, k) or k in extras}


def reframe_reference(test):
    """The `reference` dict of a ReFrame test from its system's reference file. A figure
    that applies to the test but names a variable the test does not report is an error
    (ReFrame's, in the test's setup): it would silently never be compared."""
    from reframe.core.exceptions import ReframeError

    system = test.current_system.name
    partition = test.current_partition.name
    check = type(test).__name__
    refs = load(system)
    attrs = _test_attrs(test, refs.figures)
    # Those it reports, and those it reports when the measurement shows them.
    reported = {*test.perf_variables, *getattr(test, 'measured_only_variables', ())}
    unknown = sorted({f'{fig.variable} ({fig.where})' for fig in refs.figures
                      if fig.applies_to(check, partition, test.current_environ.name, attrs)
                      and fig.variable not in reported})
    if unknown:
        raise ReframeError(f'{refs.path}: {check} reports no variable {", ".join(unknown)}; '
                           f'its variables: {", ".join(sorted(reported))}')

    chosen = select(refs, check, partition, test.current_environ.name, attrs)
    return {f'{system}:{partition}': {
        var: (fig.value, *fig.tolerance, fig.unit) for var, fig in chosen.items()
    }}


# --- A paper's run configuration --------------------------------------------------------------

def paper_settings(system, extra, entries, known, attrs=None):
    """What a system's paper ran a check with, from a partition's `extras.<extra>`: one
    cited entry or a list of them, each {'settings': {name: value}, 'source': a source of
    references/<system>.yaml, 'where': its table or figure} and, for what the paper chose
    per run (a node count, an access pattern), 'match': {name: value}, the test's values
    (`attrs`) it applies to. Later entries win. Names not in `known` (the check's
    variables) and uncited entries are errors: site tuning is cited like a figure."""
    if not entries:
        return {}

    sources = load(system).sources
    attrs = attrs or {}
    chosen = {}
    for i, entry in enumerate(entries if isinstance(entries, (list, tuple)) else [entries]):
        where = f'{system}: extras.{extra}[{i}]'
        missing = {'settings', 'source', 'where'} - set(entry)
        if missing:
            raise ReferenceError(f'{where} needs {", ".join(sorted(missing))}: the settings '
                                 'and where the paper gives them')
        unexpected = set(entry) - {'settings', 'source', 'where', 'match'}
        if unexpected:
            raise ReferenceError(f'{where}: unknown key(s) {", ".join(sorted(unexpected))}')
        if entry['source'] not in sources:
            raise ReferenceError(f'{where}: source {entry["source"]!r} is not one of '
                                 f'references/{system}.yaml ({", ".join(sorted(sources))})')
        unknown = set(entry['settings']) - set(known)
        if unknown:
            raise ReferenceError(f'{where}: unknown setting(s) {", ".join(sorted(unknown))}; '
                                 f'known: {", ".join(known)}')
        unmatched = set(entry.get('match', {})) - set(attrs)
        if unmatched:
            raise ReferenceError(f'{where}: cannot match on {", ".join(sorted(unmatched))}; '
                                 f'the check matches on: {", ".join(attrs) or "nothing"}')
        if all(attrs[k] == v for k, v in entry.get('match', {}).items()):
            chosen.update(entry['settings'])

    return chosen


# --- Local baselines ---------------------------------------------------------------------------

# Variables where smaller is better get an upper bound; all others a lower one, except
# those recorded without bounds: properties rather than speeds (a protocol switch point in
# bytes) and run-to-run variation (coefficients of variation), which no fixed fraction of
# a baseline describes.
SMALLER_IS_BETTER_UNITS = {'s', 'ms', 'us', 'ns', 'flop/word'}
UNBOUNDED_UNITS = {'B'}
UNBOUNDED_SUFFIXES = ('_cv',)


def better(variable, unit):
    """'higher' or 'lower': which way a variable improves; None for those that neither
    improve nor regress (properties, run-to-run variation)."""
    if unit in UNBOUNDED_UNITS or variable.endswith(UNBOUNDED_SUFFIXES):
        return None

    return 'lower' if unit in SMALLER_IS_BETTER_UNITS else 'higher'


def check_tolerance(tolerance, what='tolerance'):
    """A baseline's tolerance or margin: a fraction in (0, 1] (ReFrame's lower threshold is
    -it)."""
    if not 0 < tolerance <= 1:      # NaN fails too
        raise ReferenceError(f'{what} {tolerance}: a fraction of the baseline in (0, 1], '
                             'e.g. 0.10 for 10 %')


# A baseline figure's bound (the rule README states): its runs' 5th percentile less MARGIN
# for a figure that should be high (95th percentile plus MARGIN for one that should be
# low), as a fraction of their median. From fewer than BASELINE_SESSIONS sessions the
# spread between sessions (phases of the machine) is unknown: the bound is a guess, at
# least GUESS away from the median.
PERCENTILE = 5
MARGIN = 0.05
GUESS = 0.10
BASELINE_SESSIONS = 3


def baseline_bounds(variable, unit, values, sessions, margin=MARGIN, guess=GUESS):
    """(ReFrame's (lower, upper) thresholds, the rule in words) of a baseline figure whose
    runs gave `values` in `sessions` sessions."""
    direction = better(variable, unit)
    if direction is None:
        return (None, None), 'none: a property, not a speed'

    median = statistics.median(values)
    if not median:
        return (None, None), 'none: the median is 0'
    percentile = PERCENTILE if direction == 'higher' else 100 - PERCENTILE
    # Interpolated between the values, as numpy.percentile's default does.
    edge = (statistics.quantiles(values, n=100, method='inclusive')[percentile - 1]
            if len(values) > 1 else values[0])
    sign = -1 if direction == 'higher' else 1
    fraction = abs(edge / median - 1) + margin
    rule = f'{"p" if sessions >= BASELINE_SESSIONS else "guess: p"}{percentile} ' \
           f'{"-" if sign < 0 else "+"} {margin:.0%}'
    if sessions < BASELINE_SESSIONS:
        fraction = max(fraction, guess)
        rule += (f', at least {guess:.0%} ({sessions} session(s): the spread between '
                 'sessions is unknown)')
    fraction = min(fraction, 1.0) if sign < 0 else fraction   # a speed never goes below 0
    return ((-fraction, None) if sign < 0 else (None, fraction)), rule


def baseline_from_samples(system, samples, started, margin=MARGIN, guess=GUESS, host=None,
                          recorded=None):
    """A ReferenceSet of the system's baseline from its figures over many runs.

    samples: hpcbench.results.figure_samples of the sessions (each figure's values, one per
    run, and the sessions they came from); started: {session UUID: start, ISO 8601}. Each
    figure is the median of its runs, with bounds by baseline_bounds, and says what it was
    made from (`sample`). A figure matches the inputs it was measured with too: a baseline
    of a quick run does not judge a full one, nor one at another -S memory_fraction.
    """
    check_tolerance(margin, 'margin')
    check_tolerance(guess, 'tolerance')
    figures, used = [], set()
    for (check, partition, environ, parameters, inputs), by_variable in samples.items():
        match = {**dict(parameters), **({'inputs': inputs} if inputs else {})}
        params = ', '.join(f'{k}={v}' for k, v in parameters)
        for variable, figure in sorted(by_variable.items()):
            if variable not in reported_variables(check, match):
                continue    # stored by a check that since renamed it: no figure of today's
            # The runs of the newest stack only (another build, BLAS or MPI is another
            # figure), and the figure judges that stack's builds alone.
            stack, figure = list(results.by_stack(figure).items())[-1]
            # A stored value that is no number (NaN, infinite) is no run's figure: left out,
            # and a figure with no other is no reference.
            kept = [(v, u) for v, u in zip(figure['values'], figure['sessions'])
                    if math.isfinite(v) and v >= 0]
            if not kept:
                continue
            values, uuids = [v for v, _ in kept], [u for _, u in kept]
            dates = sorted(started[u] for u in uuids)
            bounds, rule = baseline_bounds(variable, figure['unit'], values, len(set(uuids)),
                                           margin, guess)
            used.update(uuids)
            figures.append(Figure(
                check=check, partition=partition, environ=environ,
                match={**match, **({'build_spec': stack} if stack else {})},
                variable=variable, value=float(statistics.median(values)), unit=figure['unit'],
                tolerance=bounds, source='baseline',
                where=f'median of {len(values)} run(s) in {len(set(uuids))} session(s), '
                      f'{dates[0]} to {dates[-1]}',
                configuration=f'{environ}, {params}' if params else environ,
                sample={'runs': len(values), 'sessions': len(set(uuids)),
                        'first': dates[0], 'last': dates[-1], 'min': float(min(values)),
                        'max': float(max(values)), 'bound': rule},
            ))

    sources = {'baseline': {
        'baseline_sessions': sorted(used, key=lambda u: started[u]),
        'recorded': recorded or datetime.datetime.now().isoformat(timespec='seconds'),
        'host': host or socket.gethostname(),
        'rule': (f'median of the runs; bound: their {PERCENTILE}th percentile (95th for a '
                 f'time) less (plus) {margin:.0%} of the median; from fewer than '
                 f'{BASELINE_SESSIONS} sessions a guess, at least {guess:.0%}'),
    }}
    return ReferenceSet(system, sources, figures)


def dump(refs):
    """A baseline's ReferenceSet as the text of its file (to_text)."""
    figures = []
    for fig in refs.figures:
        item = {k: v for k, v in fig.__dict__.items() if v not in (None, {}, 'reference')}
        item['tolerance'] = list(fig.tolerance)
        figures.append(item)
    return to_text({'system': refs.system, 'sources': refs.sources, 'figures': figures},
                   'generated baseline')


# The order every references file is written in, section by section: what a person looks
# for first comes first (a figure's test case, then its number, then where it is from).
KEY_ORDER = {
    None: ('system', 'about', 'comparison_machines', 'sources', 'figures', 'qualitative',
           'notes'),
    'sources': ('seed', 'title', 'year', 'baseline_sessions', 'recorded', 'host', 'rule'),
    'figures': ('check', 'partition', 'environ', 'match', 'variable', 'value', 'unit', 'cited',
                'tolerance', 'use', 'source', 'where', 'configuration', 'quote', 'sample'),
    'sample': ('runs', 'sessions', 'first', 'last', 'min', 'max', 'bound'),
    'qualitative': ('check', 'partition', 'environ', 'source', 'where', 'statement'),
    'notes': ('source', 'where', 'note'),
}
# Lines are folded at this width (long strings over several lines).
LINE_WIDTH = 96


class _Inline(dict):
    """A figure's `match`: one line, {name: value, ...}."""


class _Pair(list):
    """A figure's tolerance: one line, [lower, upper]."""


class _Writer(yaml.SafeDumper):
    """Plain data: every value written out (no anchors and aliases)."""

    def ignore_aliases(self, data):
        return True


_Writer.add_representer(_Inline, lambda dumper, data: dumper.represent_mapping(
    'tag:yaml.org,2002:map', data.items(), flow_style=True))
_Writer.add_representer(_Pair, lambda dumper, data: dumper.represent_sequence(
    'tag:yaml.org,2002:seq', data, flow_style=True))


def _ordered(item, order):
    return {key: item[key] for key in order if key in item}


def to_text(data, where='references'):
    """The text of a references file holding `data`, in the one form every file has: keys
    in KEY_ORDER, `match` and `tolerance` on one line, long strings folded, no aliases.
    What load() would refuse is refused here (parse), so nothing invalid is ever written;
    writing what a file loads to gives that file back byte for byte."""
    data = json.loads(json.dumps(data))       # a plain copy
    parse(data, where)
    ordered = _ordered(data, KEY_ORDER[None])
    ordered['sources'] = {name: _ordered(source, KEY_ORDER['sources'])
                          for name, source in data['sources'].items()}
    figures = []
    for figure in data['figures']:
        figure = _ordered(figure, KEY_ORDER['figures'])
        if 'match' in figure:
            figure['match'] = _Inline(figure['match'])
        if 'tolerance' in figure:
            figure['tolerance'] = _Pair(figure['tolerance'])
        if 'sample' in figure:
            figure['sample'] = _ordered(figure['sample'], KEY_ORDER['sample'])
        figures.append(figure)
    ordered['figures'] = figures
    for section in ('qualitative', 'notes'):
        if section in data:
            ordered[section] = [_ordered(item, KEY_ORDER[section]) for item in data[section]]
    return yaml.dump(ordered, Dumper=_Writer, sort_keys=False, allow_unicode=True,
                     width=LINE_WIDTH)


def rewrite(system, path=None):
    """Write a system's references file in its one form (to_text); True when it changed."""
    path = Path(path) if path else reference_file(system)
    load(system, path)                          # refused here, with the file's own message
    text = path.read_text()
    written = to_text(yaml.load(text, Loader=_DataLoader), str(path))
    if written != text:
        path.write_text(written)
    return written != text
