"""Accelerator datasheets as cited data (issue 61): references/datasheets/accelerators.yaml,
one entry per model with the names its vendor's tool prints (nvidia-smi, rocm-smi, xpu-smi),
the labels sites give it in Slurm's GRES, and its figures, each with its source; and a site's
own entries (its GPU, or its procurement's figures) in `site-configs/<system>.datasheets.yaml`,
read first, in the same form.

Each file is checked whole when read (`load`): its schema, each figure's unit (`34 TFLOP/s`,
`3.35 TB/s`, `80 GB`, `700 W`, or `not published`), a matrix peak not below the vector one,
and the names each entry says its tools print (`examples`) matched by its own `names` and by
no other entry's: two entries claiming one name are one error. Every error is one
DatasheetError naming the file, the entry and the field.

A model's figures are `hpcbench.core.accelerators.Datasheet` records, per device as the tools
list devices (a package of two dies, AMD's MI250X, has its published figures halved).
"""
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import accelerators, paths
from hpcbench.machine import plain_yaml
from hpcbench.machine.description_schema import DescriptionError, validated

PROJECT_FILE = paths.DATASHEETS_FILE
NOT_PUBLISHED = 'not published'
# A figure's kind -> {unit: its factor to the base unit (FLOP/s, bytes/s, bytes, W)}.
UNITS = {
    'flops': {'GFLOP/s': 1e9, 'TFLOP/s': 1e12, 'PFLOP/s': 1e15},
    'rate': {'MB/s': 1e6, 'GB/s': 1e9, 'TB/s': 1e12},
    'bytes': {'MB': 1e6, 'GB': 1e9, 'TB': 1e12, 'MiB': 2 ** 20, 'GiB': 2 ** 30},
    'power': {'W': 1, 'kW': 1e3},
}
FIGURES = {'memory': 'bytes', 'fp64': 'flops', 'fp64_matrix': 'flops',
           'memory_bandwidth': 'rate', 'host_link_bandwidth': 'rate',
           'gpu_link_bandwidth': 'rate', 'power': 'power'}
# The most a device has of each (a figure beyond is a wrong unit, never a device's).
AT_MOST = {'bytes': 16e12, 'flops': 1e18, 'rate': 1e14, 'power': 1e5}
_FIGURE = {'type': 'string', 'maxLength': 40}
_TEXT = {'type': 'string', 'minLength': 1, 'maxLength': 300}
_PATTERNS = {'type': 'array', 'items': _TEXT, 'maxItems': 32}

ENTRY_SCHEMA = {
    'type': 'object',
    'required': ['model', 'vendor', 'names', 'examples', 'arch', 'memory', 'fp64',
                 'fp64_matrix', 'memory_bandwidth', 'host_link', 'host_link_bandwidth',
                 'power', 'source'],
    'properties': {
        'model': _TEXT, 'vendor': {'enum': ['nvidia', 'amd', 'intel', 'clearspeed', 'other']},
        'kind': {'enum': ['gpu', 'accelerator']},
        'names': {**_PATTERNS, 'minItems': 1}, 'examples': {**_PATTERNS, 'minItems': 1},
        'gres_labels': _PATTERNS, 'arch': _TEXT,
        'devices_per_package': {'type': 'integer', 'minimum': 1, 'maximum': 16},
        **{field: _FIGURE for field in FIGURES},
        'host_link': _TEXT, 'gpu_link': _TEXT,
        'gpu_links': {'type': 'integer', 'minimum': 1, 'maximum': 64},
        'source': _TEXT,
        'figure_sources': {'type': 'object', 'additionalProperties': _TEXT},
    },
    'additionalProperties': False,
}
FILE_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'hpcbench accelerator datasheets',
    'type': 'object',
    'required': ['datasheets'],
    'properties': {
        'about': _TEXT,
        'sources': {'type': 'object', 'additionalProperties': _TEXT},
        'datasheets': {'type': 'array', 'items': ENTRY_SCHEMA, 'maxItems': 1000},
    },
    'additionalProperties': False,
}


class DatasheetError(DescriptionError):
    pass


@dataclass(frozen=True)
class Entry:
    """One model of a datasheets file: its figures, the names its tools print and the GRES
    labels sites give it, as compiled patterns."""
    sheet: accelerators.Datasheet
    names: tuple
    gres_labels: tuple
    examples: tuple
    where: str

    def names_model(self, model):
        return any(p.fullmatch(model.strip()) for p in self.names)


def figure(text, kind, where):
    """The value of figure `text` of `kind` (FIGURES) in its base unit, None where `not
    published`; DatasheetError naming `where` for any other text."""
    if text.strip() == NOT_PUBLISHED:
        return None
    match = re.fullmatch(r'([0-9]+(?:\.[0-9]+)?) ?([A-Za-z/]+)', text.strip())
    units = UNITS[kind]
    if not match or match.group(2) not in units:
        raise DatasheetError(f'{where}: {text!r} is not a figure in {", ".join(units)} (or '
                             f'{NOT_PUBLISHED!r})')
    value = float(match.group(1)) * units[match.group(2)]
    if not 0 < value <= AT_MOST[kind]:
        raise DatasheetError(f'{where}: {text!r} is no device\'s (more than 0, at most '
                             f'{AT_MOST[kind]:g} in {next(iter(units))}\'s base unit)')
    return value


# The longest name pattern (the longest real one is 45 characters).
MAX_PATTERN = 200


def _backtracks(parsed):
    """Whether a parsed pattern repeats something that itself repeats or branches (`(a+)+b`,
    `(a|a)*`): such a pattern backtracks exponentially on a name that almost matches (a
    site's datasheet of `(a+)+b` cost minutes on a GPU's name)."""
    from re import _constants as constants, _parser as parser

    def inside(items, repeated):
        for op, arg in items:
            if op in (constants.MAX_REPEAT, constants.MIN_REPEAT, constants.POSSESSIVE_REPEAT):
                low, high, body = arg
                many = high is constants.MAXREPEAT or high > 1
                if repeated and many:
                    return True
                if inside(body, repeated or many):
                    return True
            elif op == constants.BRANCH:
                if repeated or any(inside(b, repeated) for b in arg[1]):
                    return True
            elif op == constants.SUBPATTERN:
                if inside(arg[-1], repeated):
                    return True
            elif op in (constants.ASSERT, constants.ASSERT_NOT):
                if inside(arg[1], repeated):
                    return True
        return False
    return inside(parser.parse(parsed) if isinstance(parsed, str) else parsed, False)


def _patterns(texts, where):
    compiled = []
    for number, text in enumerate(texts):
        try:
            if len(text) > MAX_PATTERN:
                raise re.error(f'{len(text)} characters, more than {MAX_PATTERN}')
            if _backtracks(text):
                raise re.error('it repeats what repeats or branches, which backtracks without '
                               'bound on a name that almost matches')
            compiled.append(re.compile(text, re.I))
        except re.error as err:
            raise DatasheetError(f'{where}[{number}]: {text[:200]!r} is no regular expression '
                                 f'a name is matched by ({err})') from None
    return tuple(compiled)


def _source(key, sources):
    return sources.get(key, key)


def _entry(data, sources, where):
    figures = {field: figure(data[field], kind, f'{where}.{field}')
               for field, kind in FIGURES.items() if field in data}
    if figures['fp64'] is None and figures['fp64_matrix'] is not None:
        raise DatasheetError(f'{where}.fp64: {NOT_PUBLISHED} while fp64_matrix is published')
    if figures['fp64'] and figures['fp64_matrix'] and figures['fp64_matrix'] < figures['fp64']:
        raise DatasheetError(f'{where}.fp64_matrix: {data["fp64_matrix"]} is below the vector '
                             f'peak {data["fp64"]} (the matrix units run at least as fast)')
    linked = [f for f in ('gpu_link', 'gpu_links', 'gpu_link_bandwidth') if f in data]
    if linked and len(linked) != 3:
        raise DatasheetError(f'{where}: {", ".join(linked)} without '
                             + ', '.join(f for f in ('gpu_link', 'gpu_links',
                                                     'gpu_link_bandwidth') if f not in data)
                             + ' (a GPU-to-GPU link is its generation, links and bandwidth)')
    for field in data.get('figure_sources') or {}:
        if field not in ENTRY_SCHEMA['properties']:
            raise DatasheetError(f'{where}.figure_sources.{field}: no such field')
    devices = data.get('devices_per_package', 1)

    def per_device(value):
        return value / devices if value is not None else None

    cited = {field: _source(key, sources) for field, key in
             (data.get('figure_sources') or {}).items()}
    source = _source(data['source'], sources) + ''.join(
        f'; {field}: {text}' for field, text in cited.items())
    sheet = accelerators.Datasheet(
        model=data['model'], fp64_flops=per_device(figures['fp64']),
        fp64_tensor_flops=per_device(figures['fp64_matrix']),
        memory_bandwidth=per_device(figures['memory_bandwidth']),
        host_link=data['host_link'], host_link_bandwidth=figures['host_link_bandwidth'],
        power_w=per_device(figures['power']), source=source,
        nvlink=data.get('gpu_link'), nvlink_links=data.get('gpu_links'),
        nvlink_bandwidth=figures.get('gpu_link_bandwidth'),
        vendor=data['vendor'], kind=data.get('kind', 'gpu'), arch=data['arch'],
        memory_bytes=per_device(figures['memory']), devices_per_package=devices)
    return Entry(sheet, _patterns(data['names'], f'{where}.names'),
                 _patterns(data.get('gres_labels') or [], f'{where}.gres_labels'),
                 tuple(data['examples']), where)


def load(path):
    """The entries of datasheets file `path`, every field checked (module docstring)."""
    path = Path(path)
    try:
        data = plain_yaml.load(path)
    except plain_yaml.PlainYamlError as err:
        raise DatasheetError(str(err)) from None
    try:
        validated(data, {**FILE_SCHEMA, 'properties': {
            **FILE_SCHEMA['properties'], 'datasheets': {'type': 'array', 'maxItems': 1000}}},
            f'{path}:')
        sources = data.get('sources') or {}
        entries = []
        for number, item in enumerate(data['datasheets']):
            model = item.get('model') if isinstance(item, dict) else None
            where = f'{path}: datasheets[{model if isinstance(model, str) else number}]'
            validated(item, ENTRY_SCHEMA, f'{where}:')
            entries.append(_entry(item, sources, where))
    except DatasheetError:
        raise
    except DescriptionError as err:
        raise DatasheetError(str(err)) from None
    for entry in entries:
        for example in entry.examples:
            if not entry.names_model(example):
                raise DatasheetError(f'{entry.where}.examples: {example!r} is not matched by '
                                     'its names')
            others = [e.sheet.model for e in entries if e is not entry and e.names_model(example)]
            if others:
                raise DatasheetError(f'{entry.where}.names: {example!r} is claimed by '
                                     f'{", ".join(others)} too: one name, one model')
        for label in entry.gres_labels:
            others = [e.sheet.model for e in entries if e is not entry and
                      any(label.pattern == p.pattern for p in e.gres_labels)]
            if others:
                raise DatasheetError(f'{entry.where}.gres_labels: {label.pattern!r} is '
                                     f'{", ".join(others)}\'s too')
    return tuple(entries)


def site_file(system):
    """A site's own datasheets, beside its description."""
    return paths.SITE_CONFIGS_DIR / f'{system}.datasheets.yaml'


def table(system=None):
    """The entries a system's GPUs are looked up in: the site's own (where it has a file),
    then the project's."""
    own = site_file(system) if system else None
    return (load(own) if own is not None and own.exists() else ()) + _project()


_CACHE = {}


def _project():
    key = (PROJECT_FILE, PROJECT_FILE.stat().st_mtime_ns)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = load(PROJECT_FILE)
    return _CACHE[key]


def find(model, entries=None):
    """The datasheet (hpcbench.core.accelerators.Datasheet) of the model a tool named
    `model`, from `entries` (table()); None where none names it."""
    for entry in entries if entries is not None else table():
        if entry.names_model(model):
            return entry.sheet
    return None


def label_key(label):
    """A GRES label as `gres_labels` match it: lower case, no vendor prefix, no - or _."""
    return re.sub(r'[-_ ]', '', re.sub(r'^(?:nvidia|tesla)[-_]', '', label.strip().lower()))


def by_gres_label(label, entries=None):
    """The entry a site's GRES label names (`gpu:h100:4` -> H100 SXM's), or None."""
    key = label_key(label)
    for entry in entries if entries is not None else table():
        if any(p.fullmatch(key) for p in entry.gres_labels):
            return entry
    return None


def gres_model(entries=None):
    """What hpcbench.machine.gpus.from_gres asks of a GRES label: (model as its tool
    prints it, vendor, kind, architecture, memory in bytes) of the entry the label names, or
    None."""
    def known(label):
        entry = by_gres_label(label, entries)
        if entry is None:
            return None
        sheet = entry.sheet
        return (entry.examples[0], sheet.vendor, sheet.kind, sheet.arch,
                int(sheet.memory_bytes or 0))
    return known
