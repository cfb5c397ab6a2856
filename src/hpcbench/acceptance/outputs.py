"""What an acceptance leaves for a site's tools, beside its report: a JSON document of every
verdict (JSON_SCHEMA), JUnit XML (GitLab and Jenkins show it as test results: one test
suite per contract entry, one test case per unit; a unit that failed, did not run or is
invalid is a failure, never a skip) and a drain list (`scontrol update NodeName=...
State=DRAIN Reason=...` lines for the site to run: the suite never drains a node)."""
import dataclasses
import shlex
import xml.etree.ElementTree as ET

from hpcbench.acceptance.judgement import FAILING, VERDICTS, system_verdict
from hpcbench.core import fact_figures, slurm_cluster

# The format of verdicts.json this suite writes; 1 (no `format` field): entries' committed
# value, source and fault as sentences, which --verify of an acceptance written then still
# compares in (as_json's `version`).
FORMAT = 2
_NUMBER = {'type': 'number'}
# A fact's value: a figure, or a text (a version: hpcbench.core.fact_figures).
_VALUE = {'type': ['number', 'string']}
_TEXT = {'type': 'string'}
_UNIT_FIELDS = {
    'unit': _TEXT, 'partition': _TEXT,
    # The node to blame (a node's, a GPU's), null for a pair of nodes; `nodes`: every node
    # the unit is on (a node pair's two).
    'node': {'type': ['string', 'null']},
    'nodes': {'type': 'array', 'items': _TEXT},
    'verdict': {'enum': list(VERDICTS)},
    'values': {'type': 'array', 'items': _VALUE},
    'median': {'type': ['number', 'string', 'null']},
    'p_value': {'type': ['number', 'null']},
    'reason': _TEXT, 'slow': _TEXT,
    # What the node's hardware said around the unit's runs (hpcbench.core.fact_figures),
    # where it explains a failing or slow figure: written only then (a verdicts.json of
    # format 2 written before holds none).
    'hardware': _TEXT}
_V1_ENTRY_FIELDS = {
    'id': _TEXT, 'check': _TEXT, 'figure': _TEXT, 'scope': _TEXT, 'committed': _TEXT,
    'source': _TEXT, 'fault': _TEXT, 'verdict': {'enum': list(VERDICTS)}, 'reason': _TEXT,
    'counts': {'type': 'object', 'additionalProperties': {'type': 'integer'}}}


def _object(fields, required=None, **more):
    return {'type': 'object', 'required': list(required or fields), 'properties': fields,
            'additionalProperties': False, **more}


_UNIT = _object({**_UNIT_FIELDS, 'scope': _TEXT, 'key': {}, 'runs': {'type': 'integer'}},
                required=[*(f for f in _UNIT_FIELDS if f != 'hardware'), 'scope', 'key',
                          'runs'])
_ENTRY_FIELDS = {
    **_V1_ENTRY_FIELDS,
    'parameters': {'type': 'object'},
    'partitions': {'type': 'array', 'items': _TEXT},
    'environ': _TEXT,
    'committed': _object({'value': _VALUE, 'unit': _TEXT,
                          'direction': {'enum': ['at_least', 'at_most', 'equal']},
                          'tolerance': _NUMBER}),
    'statistic': _object({'median_of': {'type': 'integer'}}),
    'rule': {'type': 'object', 'minProperties': 1, 'maxProperties': 1},
    'source': _object({'kind': _TEXT, 'cite': _TEXT, 'clause': _TEXT,
                       'figure': {'type': ['number', 'null']},
                       'factor': {'type': ['number', 'null']}}),
    'fault': _object({'code': _TEXT, 'action': _TEXT}),
    'units': {'type': 'array', 'items': _UNIT},
    # A fact's entry (hpcbench.acceptance.contract): `figure` the fact's, `committed` its
    # expectation; written only for one.
    'fact': {'const': True}}
_ENTRY = _object(_ENTRY_FIELDS, required=[f for f in _ENTRY_FIELDS if f != 'fact'])
JSON_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    **_object({'format': {'const': FORMAT}, 'system': _TEXT,
               'verdict': {'enum': ['PASS', 'WARN', 'FAIL']},
               'entries': {'type': 'array', 'items': _ENTRY}}),
}


def _key(unit):
    """A unit's key as data: a node's or partition's name, a node pair's two names, a GPU's
    or GPU pair's fields."""
    key = unit.key
    if dataclasses.is_dataclass(key):
        return dataclasses.asdict(key)
    return list(key) if isinstance(key, tuple) else key


def as_json(system, entry_verdicts, version=FORMAT):
    """The acceptance's verdicts as data (JSON_SCHEMA): each entry's committed value, unit,
    direction and tolerance, statistic, rule, source and fault as fields; each unit's
    scope, key, runs, median and p-value. `version` 1: as acceptances written before FORMAT
    2 hold them (the committed value, source and fault as sentences), for --verify of
    those."""
    if version == 1:
        return _as_json_v1(system, entry_verdicts)
    entries = []
    for e in entry_verdicts:
        entry, committed, source = e.entry, e.entry.committed, e.entry.source
        entries.append({
            'id': entry.id, 'check': entry.check, 'figure': entry.figure,
            'scope': str(entry.scope), 'parameters': dict(entry.parameters or {}),
            'partitions': list(entry.partitions), 'environ': entry.environ,
            'committed': {'value': committed.value, 'unit': committed.unit,
                          'direction': committed.direction,
                          'tolerance': committed.tolerance},
            'statistic': {'median_of': entry.median_of},
            'rule': {entry.rule[0]: entry.rule[1]},
            'source': {'kind': source.kind, 'cite': source.cite, 'clause': source.clause,
                       'figure': source.figure, 'factor': source.factor},
            'fault': {'code': entry.fault_code, 'action': entry.action},
            'verdict': e.verdict, 'reason': e.reason, 'counts': e.counts(),
            'units': [{'unit': str(u.unit), 'scope': str(u.unit.scope),
                       'partition': u.unit.partition, 'key': _key(u.unit),
                       'node': u.unit.node, 'nodes': list(u.unit.nodes),
                       'verdict': u.verdict, 'runs': len(u.values),
                       'values': list(u.values), 'median': u.median, 'p_value': u.p_value,
                       'reason': u.reason, 'slow': u.slow,
                       **({'hardware': u.hardware} if u.hardware else {})}
                      for u in e.units],
            **({'fact': True} if entry.fact else {})})
    return {'format': FORMAT, 'system': system, 'verdict': system_verdict(entry_verdicts),
            'entries': entries}


def _as_json_v1(system, entry_verdicts):
    return {
        'system': system, 'verdict': system_verdict(entry_verdicts),
        'entries': [{
            'id': e.entry.id, 'check': e.entry.check, 'figure': e.entry.figure,
            'scope': str(e.entry.scope), 'committed': e.entry.committed.words(),
            'source': e.entry.source.words(),
            'fault': f'{e.entry.fault_code}: {e.entry.action}', 'verdict': e.verdict,
            'reason': e.reason, 'counts': e.counts(),
            'units': [{'unit': str(u.unit), 'partition': u.unit.partition,
                       'node': u.unit.node, 'nodes': list(u.unit.nodes),
                       'verdict': u.verdict, 'values': list(u.values),
                       'median': u.median, 'p_value': u.p_value, 'reason': u.reason,
                       'slow': u.slow} for u in e.units]}
            for e in entry_verdicts]}


def printable(text):
    """`text` with each character XML 1.0 and a terminal cannot hold as itself (a control
    character: a Slurm reason's `\\x1b[31m`, a failed run's `\\x07`) written as `\\xNN`;
    tabs and newlines kept. A control character made junit.xml not well-formed."""
    return ''.join(c if c.isprintable() or c in '\t\n' else f'\\x{ord(c):02x}'
                   for c in str(text))


def junit_xml(system, entry_verdicts):
    """JUnit XML of the acceptance: a test suite per entry, a test case per unit; FAIL and
    NOT_RUN are failures, INVALID an error, a slow unit's flag in its output. Every text
    printable (printable())."""
    suites = ET.Element('testsuites', name=f'hpcbench acceptance of {system}',
                        tests=str(sum(len(e.units) for e in entry_verdicts)),
                        failures=str(sum(u.verdict in ('FAIL', 'NOT_RUN')
                                         for e in entry_verdicts for u in e.units)),
                        errors=str(sum(u.verdict == 'INVALID'
                                       for e in entry_verdicts for u in e.units)))
    for e in entry_verdicts:
        suite = ET.SubElement(
            suites, 'testsuite', name=e.entry.id, tests=str(len(e.units)),
            failures=str(sum(u.verdict in ('FAIL', 'NOT_RUN') for u in e.units)),
            errors=str(sum(u.verdict == 'INVALID' for u in e.units)), skipped='0')
        for u in e.units:
            case = ET.SubElement(suite, 'testcase', name=str(u.unit),
                                 classname=f'{system}.{e.entry.id}.{u.unit.partition}')
            message = printable(f'{u.verdict}: {u.reason}')
            action = printable(e.entry.action)
            if u.verdict in ('FAIL', 'NOT_RUN'):
                failure = ET.SubElement(case, 'failure', message=message,
                                        type=e.entry.fault_code)
                failure.text = f'{message}\nwhat to do: {action}'
            elif u.verdict == 'INVALID':
                ET.SubElement(case, 'error', message=message, type=e.entry.fault_code).text = \
                    f'{message}\nwhat to do: {action}'
            out = [message] + ([f'slow beside its peers: {printable(u.slow)}'] if u.slow
                               else []) + ([f'hardware: {printable(u.hardware)}']
                                           if u.hardware else [])
            ET.SubElement(case, 'system-out').text = '\n'.join(out)
    return ET.tostring(suites, encoding='unicode', xml_declaration=True) + '\n'


# The longest drain reason written: Slurm keeps a node's reason whole, but `sinfo -R` and
# `scontrol show node` show a line of it; a reason per fault code, not per entry.
MAX_REASON = 200


def _reason(reasons):
    """A node's reasons as one drain reason: each once, in order, within MAX_REASON. Cut, it
    keeps the first reasons whole and names each one it cut by its fault code and verdict
    (what `sinfo -R` must still show: IB-SYMBOL FAIL, not "1 more"), each once; where even
    those do not fit, it says how many more there are."""
    said = list(dict.fromkeys(' '.join(printable(r).split()) for r in reasons))
    heads = [r.split(' (', 1)[0] for r in said]
    prefix = 'hpcbench acceptance: '
    texts = [prefix + '; '.join(said)]
    texts += [prefix + '; '.join(said[:kept] + [
        f'also {", ".join(dict.fromkeys(heads[kept:]))} (see its acceptance)'])
              for kept in range(len(said) - 1, 0, -1)]
    texts += [prefix + '; '.join(said[:kept] + [f'and {len(said) - kept} more '
                                                '(see its acceptance)'])
              for kept in range(len(said) - 1, 0, -1)]
    text = next((t for t in texts if len(t) <= MAX_REASON), texts[-1])
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + '...'


def drain_lines(entry_verdicts, pair_blamed=None):
    """`scontrol update NodeName=N State=DRAIN Reason="..."` for each node to blame: a unit
    that failed or was invalid, or flagged slow beside its peers, with the entry's fault
    code (a fact's with its value first: it says what is wrong; a figure's with what the
    hardware said around its runs); a node the node pairs blame (`pair_blamed`: {node: why}); one line per node, its
    reasons joined, each fault code and verdict once (two entries of one code said it
    twice) within MAX_REASON characters. A unit that did not run is out of service
    already, or never reached: named in the report, not drained again. Each node name
    checked against Slurm's grammar and each reason quoted for the shell."""
    reasons = {node: [why] for node, why in (pair_blamed or {}).items()}
    facts = {}
    for node in reasons:
        if not slurm_cluster.NODE_NAME.fullmatch(node):
            raise ValueError(f'{node!r} is no Slurm node name: no drain line is written')
    for e in entry_verdicts:
        for u in e.units:
            node = u.unit.node
            if node is None or not (u.verdict in ('FAIL', 'INVALID') or u.slow):
                continue
            if not slurm_cluster.NODE_NAME.fullmatch(node):
                raise ValueError(f'{node!r} is no Slurm node name: no drain line is written')
            what = u.verdict if u.verdict in FAILING else 'slow'
            if e.entry.fact and u.median is not None:
                # The fact itself, which says what is wrong before any figure does.
                found = (f'{fact_figures.shown(u.median, e.entry.committed.unit)}, '
                         f'expected {e.entry.committed.words()}')
                facts.setdefault(node, []).append(f'{e.entry.fault_code} {what} ({u.unit}: '
                                                  f'{found})')
                continue
            hardware = f'; {u.hardware}' if u.hardware else ''
            reasons.setdefault(node, []).append(f'{e.entry.fault_code} {what} ({u.unit}'
                                                f'{hardware})')
    reasons = {node: facts.get(node, []) + reasons.get(node, [])
               for node in sorted({*reasons, *facts})}
    return [f'scontrol update NodeName={node} State=DRAIN Reason={shlex.quote(_reason(why))}'
            for node, why in sorted(reasons.items(), key=lambda item: item[0])]
