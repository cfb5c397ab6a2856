"""YAML files a person writes and reviews (a system's description, a references file), read
as plain data: no aliases (a few lines of them expand to gigabytes: a dry run over one never
ended), no key given twice (YAML itself keeps the last, silently: `memory_bytes: 4 GiB`, then
`400 TiB`), no tags beyond YAML's own, from a regular file of at most MAX_FILE_BYTES (a
FIFO is never read, a link to a large file never loaded). Every fault is one PlainYamlError
naming the file and, for what is not valid YAML, the line and column."""
import math
from pathlib import Path

import yaml

from hpcbench.core import paths

# A description or references file is data a person reads: the largest, chic.yaml, is 36 KB.
# Far larger is no such file (a 50 MB one took 91 s and 2.5 GB to load).
MAX_FILE_BYTES = 1 << 20
# Of a value a message shows (a file's whole text can be one YAML scalar).
SHOWN_CHARACTERS = 200


class PlainYamlError(ValueError):
    pass


def shown(value):
    """`value` as a message shows it: its repr, cut at SHOWN_CHARACTERS."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f'{text[:SHOWN_CHARACTERS]}...'


# How deep a person's data nests: the deepest file, a paper's description, is 6 levels.
# 5,000 nested `[` ran Python out of stack (RecursionError: every ReFrame command stopped).
MAX_DEPTH = 64
# Digits of an integer: a figure or a count has a few; 5,000 passed Python's limit on
# reading an integer (a ValueError where a file should be one message).
MAX_DIGITS = 30


class DataLoader(yaml.SafeLoader):
    """YAML as plain data: no aliases, no key given twice or that is not a scalar (`? [a,
    b]`), no number that is not finite (.nan, .inf, 1.0e+400) or longer than MAX_DIGITS,
    nothing nested deeper than MAX_DEPTH."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f'an alias (*{event.anchor}): this file is plain data, each value '
                'written out', event.start_mark)
        self._depth = getattr(self, '_depth', 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f'nested more than {MAX_DEPTH} levels deep: this file is plain '
                    'data, as a person writes it', self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f'an integer of {digits} digits: no figure or count has more than '
                f'{MAX_DIGITS}', node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f'{shown(node.value)} is not a finite number (a figure, a fraction, '
                'a count is one)', node.start_mark)
        return value

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, 'a key that is a list or a mapping: a key is a name',
                    key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'the key {shown(key)} is given twice in one mapping',
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


DataLoader.add_constructor('tag:yaml.org,2002:int', DataLoader.construct_yaml_int)
DataLoader.add_constructor('tag:yaml.org,2002:float', DataLoader.construct_yaml_float)


def loads(text, where):
    """The data of YAML `text` (of the file `where` names); PlainYamlError naming the line
    and column of what is not plain YAML data."""
    try:
        return yaml.load(text, Loader=DataLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, 'problem_mark', None)
        place = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark else ''
        problem = getattr(err, 'problem', None) or str(err)
        raise PlainYamlError(f'{where}: not valid YAML: {place}{" ".join(problem.split())}') \
            from None


def load(path, where=None):
    """The data of the YAML file `path` (named `where` in messages, else as given)."""
    where = where or str(path)
    try:
        data = paths.read_regular(Path(path), MAX_FILE_BYTES, 'a description or references '
                                  'file')
    except paths.UnreadableFileError as err:
        raise PlainYamlError(str(err)) from None
    except OSError as err:
        raise PlainYamlError(f'{where}: {err.strerror or err}') from None
    try:
        text = data.decode()
    except UnicodeDecodeError as err:
        raise PlainYamlError(f'{where}: not text (byte {err.start} is no UTF-8)') from None
    return loads(text, where)
