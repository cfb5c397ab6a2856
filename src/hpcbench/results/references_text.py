"""A references file written in its one form (to_text): keys in a fixed order (KEY_ORDER), each
figure's `match` and `tolerance` on one line, long strings folded at LINE_WIDTH, no YAML
anchors or aliases; so that `hpcbench references --rewrite` after a hand edit, and a
baseline, write what a person reads and a review diffs."""
import json
import os
from pathlib import Path

import yaml

from hpcbench.core import paths
from hpcbench.results.references import load, parse, reference_file
from hpcbench.results.reference_schema import DataLoader, ReferenceError


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


def comments(text):
    """[(line number, text)] of the YAML comments in `text`: a `#` at a line's start or after
    a blank, outside every scalar (a quote's `#` is no comment)."""
    scalars = [(token.start_mark.index, token.end_mark.index)
               for token in yaml.scan(text, Loader=yaml.SafeLoader)
               if isinstance(token, yaml.ScalarToken)]
    found, start = [], 0
    for number, line in enumerate(text.splitlines(True), 1):
        for column, char in enumerate(line):
            if char == '#' and (column == 0 or line[column - 1] in ' \t') and not any(
                    first <= start + column < last for first, last in scalars):
                found.append((number, line.strip()))
                break
        start += len(line)
    return found


def rewrite(system, path=None):
    """Write a system's references file in its one form (to_text); True when it changed.
    Refused (ReferenceError, one message, nothing written): a file the one form would lose
    something of (comments: it keeps none), a file that is a link (--rewrite writes the
    files of references/, never through a link out of it), a file that cannot be written."""
    path = Path(path) if path else reference_file(system)
    if path.is_symlink():
        raise ReferenceError(f'{path} is a symbolic link (to {os.readlink(path)}): --rewrite '
                             'writes the files of references/ themselves, never through a link')
    load(system, path)                          # refused here, with the file's own message
    text = path.read_text()
    said = comments(text)
    if said:
        listed = '; '.join(f'line {n}: {line[:60]}' for n, line in said[:3])
        raise ReferenceError(
            f'{path} has {len(said)} comment(s) ({listed}{"; ..." if len(said) > 3 else ""}): '
            'the one form keeps none, so --rewrite would drop them; say it in the file\'s '
            '`about`, a figure\'s `where` or `notes`, then rewrite')
    written = to_text(yaml.load(text, Loader=DataLoader), str(path))
    if written == text:
        return False
    # Written beside it and renamed over it: whole or not at all.
    try:
        paths.write_atomically(path, written)
    except OSError as err:
        raise ReferenceError(f'{path} cannot be rewritten ({err.strerror}: '
                             f'{err.filename}): nothing was changed') from None
    return True
