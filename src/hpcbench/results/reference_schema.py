"""What a references file may hold, checked before anything uses it: plain YAML data
(DataLoader: no aliases, no duplicate keys, no tags), at most MAX_FILE_BYTES, the shape
SCHEMA gives (jsonschema), finite numbers and ReFrame-shaped tolerances (check_numbers);
every fault is one ReferenceError naming the file and the place in it."""
import math

import jsonschema

from hpcbench.machine import description_schema, plain_yaml


class ReferenceError(ValueError):
    pass


# A references file is read as every description is (hpcbench.machine.plain_yaml).
MAX_FILE_BYTES = plain_yaml.MAX_FILE_BYTES
SHOWN_CHARACTERS = plain_yaml.SHOWN_CHARACTERS
DataLoader = plain_yaml.DataLoader
_shown = plain_yaml.shown


def check_numbers(item, where):
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


def validate_shape(data, where):
    """`data` (a references file's) against SCHEMA; one ReferenceError naming the place."""
    try:
        description_schema.check(data, SCHEMA)
    except jsonschema.ValidationError as err:
        location = '/'.join(str(p) for p in err.absolute_path) or 'top level'
        message = err.message.replace(repr(err.instance), _shown(err.instance))
        raise ReferenceError(f'{where}: {location}: {message[:2 * SHOWN_CHARACTERS]}') from None


def load_yaml(text, path):
    """The data of a references file's text, read as plain data (DataLoader); one
    ReferenceError naming the line and column of what is not valid YAML."""
    try:
        return plain_yaml.loads(text, path)
    except plain_yaml.PlainYamlError as err:
        raise ReferenceError(str(err)) from None
