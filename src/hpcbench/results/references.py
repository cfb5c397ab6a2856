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
                                  # hardware, the partition's description) this figure is for
      variable: triad             # a performance variable of the check
      value: 3294.2               # in the check's unit
      unit: MB/s
      cited: 3294.2               # optional: as the paper prints it when the unit differs
                                  # (76.46 TFlops), or the arithmetic on the paper's figures
                                  # that gives it (50 of 96 GFlops: a percentage; 50 GFlops
                                  # per 25 Watts); checked against value by the tests
      quote: 1 Thread 2 DIMMs 3294.2 12.6 ...  # a seed's figure: the seed's own words that
                                  # print it (its sentence or table row), so that a clone
                                  # without the seeds still shows where the number stands
      tolerance: [-0.10, null]    # fractions of value; null = unbounded
      source: chic2007
      where: Table 1
      configuration: 1 thread, 2 DIMMs, gcc-4.2 -O3, Opteron 2.6 GHz
      use: reference              # or `comparison`: reported beside results_db, no bounds

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
from dataclasses import dataclass, field, replace
from pathlib import Path


from hpcbench.benchmarks import reports
from hpcbench.core import paths
from hpcbench.machine.from_reframe import partition_description
from hpcbench.results import measured
from hpcbench.results.reference_schema import (MAX_FILE_BYTES, ReferenceError, check_numbers,
                                               load_yaml, validate_shape)


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


# What each check reports, as its benchmark module declares it (hpcbench.benchmarks.reports).
DECLARED = reports.declared()
# The benchmark each check measures, for counting and reports.
BENCHMARK_OF_CHECK = {check: declared.benchmark for check, declared in DECLARED.items()}


def reported_variables(check, match=None):
    """Every performance variable `check` may report, whatever its inputs; for an IMB check
    whose figure names its benchmark (`match`), that benchmark's own. What `hpcbench
    references` (make lint) checks a figure's variable against, before any run: the checks
    report these and no others (tests/results/test_references.py reads their performance
    functions to keep the two one)."""
    return DECLARED[check].variables_for(match)


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
    validate_shape(data, where)

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
        check_numbers(item, f'{where}: figures/{i}')
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
            item = {**item, 'match': measured.with_added_parameters(item['check'],
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
    # Read as every description is: a regular file (a FIFO is never read), bounded.
    try:
        text = paths.read_regular(path, MAX_FILE_BYTES, 'a references file').decode()
    except (paths.UnreadableFileError, UnicodeDecodeError) as err:
        raise ReferenceError(str(err) if isinstance(err, paths.UnreadableFileError)
                             else f'{path}: not text ({err.reason})') from None

    key = (system, str(path.resolve()))
    if _LOADED.get(key, (None,))[0] != text:
        _LOADED[key] = text, _parse_file(system, path, text)
    return _LOADED[key][1]


def _parse_file(system, path, text):
    data = load_yaml(text, path)
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
    partition's description (hardware such as the DIMMs per node)."""
    keys = {k for fig in figures for k in fig.match}
    described = partition_description(test.current_partition)
    hardware = {k: getattr(described, k, None) for k in keys}
    return {k: getattr(test, k) if hasattr(test, k) else hardware[k]
            for k in keys if hasattr(test, k) or hardware[k] is not None}


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
    """What a system's paper ran a check with, from a partition's description's `<extra>`: one
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
        where = f'{system}: {extra}[{i}]'
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


def check_tolerance(tolerance, what='tolerance'):
    """A baseline's tolerance or margin: a fraction in (0, 1] (ReFrame's lower threshold is
    -it)."""
    if not 0 < tolerance <= 1:      # NaN fails too
        raise ReferenceError(f'{what} {tolerance}: a fraction of the baseline in (0, 1], '
                             'e.g. 0.10 for 10 %')
