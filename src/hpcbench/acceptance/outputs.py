"""What an acceptance leaves for a site's tools, beside its report: a JSON document of every
verdict (JSON_SCHEMA), JUnit XML (GitLab and Jenkins show it as test results: one test
suite per contract entry, one test case per unit; a unit that failed, did not run or is
invalid is a failure, never a skip) and a drain list (`scontrol update NodeName=...
State=DRAIN Reason=...` lines for the site to run: the suite never drains a node)."""
import shlex
import xml.etree.ElementTree as ET

from hpcbench.acceptance.judgement import FAILING, VERDICTS, system_verdict
from hpcbench.core import slurm_cluster

JSON_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'required': ['system', 'verdict', 'entries'],
    'properties': {
        'system': {'type': 'string'},
        'verdict': {'enum': ['PASS', 'WARN', 'FAIL']},
        'entries': {'type': 'array', 'items': {
            'type': 'object',
            'required': ['id', 'check', 'figure', 'scope', 'committed', 'source', 'fault',
                         'verdict', 'reason', 'counts', 'units'],
            'properties': {
                'id': {'type': 'string'}, 'check': {'type': 'string'},
                'figure': {'type': 'string'}, 'scope': {'type': 'string'},
                'committed': {'type': 'string'}, 'source': {'type': 'string'},
                'fault': {'type': 'string'}, 'verdict': {'enum': list(VERDICTS)},
                'reason': {'type': 'string'},
                'counts': {'type': 'object', 'additionalProperties': {'type': 'integer'}},
                'units': {'type': 'array', 'items': {
                    'type': 'object',
                    'required': ['unit', 'partition', 'node', 'nodes', 'verdict', 'values',
                                 'median', 'p_value', 'reason', 'slow'],
                    'properties': {
                        'unit': {'type': 'string'}, 'partition': {'type': 'string'},
                        # The node to blame (a node's, a GPU's), null for a pair of nodes;
                        # `nodes`: every node the unit is on (a node pair's two).
                        'node': {'type': ['string', 'null']},
                        'nodes': {'type': 'array', 'items': {'type': 'string'}},
                        'verdict': {'enum': list(VERDICTS)},
                        'values': {'type': 'array', 'items': {'type': 'number'}},
                        'median': {'type': ['number', 'null']},
                        'p_value': {'type': ['number', 'null']},
                        'reason': {'type': 'string'}, 'slow': {'type': 'string'}},
                    'additionalProperties': False}}},
            'additionalProperties': False}},
    },
    'additionalProperties': False,
}


def as_json(system, entry_verdicts):
    """The acceptance's verdicts as data (JSON_SCHEMA)."""
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
                               else [])
            ET.SubElement(case, 'system-out').text = '\n'.join(out)
    return ET.tostring(suites, encoding='unicode', xml_declaration=True) + '\n'


# The longest drain reason written: Slurm keeps a node's reason whole, but `sinfo -R` and
# `scontrol show node` show a line of it; a reason per fault code, not per entry.
MAX_REASON = 200


def _reason(reasons):
    """A node's reasons as one drain reason: each once, in order, cut at MAX_REASON saying
    how many more there are."""
    said = list(dict.fromkeys(' '.join(printable(r).split()) for r in reasons))
    text = 'hpcbench acceptance: ' + '; '.join(said)
    for kept in range(len(said) - 1, 0, -1):
        if len(text) <= MAX_REASON:
            break
        text = (f'hpcbench acceptance: {"; ".join(said[:kept])}; and '
                f'{len(said) - kept} more (see its acceptance)')
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + '...'


def drain_lines(entry_verdicts, pair_blamed=None):
    """`scontrol update NodeName=N State=DRAIN Reason="..."` for each node to blame: a unit
    that failed or was invalid, or flagged slow beside its peers, with the entry's fault
    code; a node the node pairs blame (`pair_blamed`: {node: why}); one line per node, its
    reasons joined, each fault code and verdict once (two entries of one code said it
    twice) within MAX_REASON characters. A unit that did not run is out of service
    already, or never reached: named in the report, not drained again. Each node name
    checked against Slurm's grammar and each reason quoted for the shell."""
    reasons = {node: [why] for node, why in (pair_blamed or {}).items()}
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
            reasons.setdefault(node, []).append(f'{e.entry.fault_code} {what} ({u.unit})')
    return [f'scontrol update NodeName={node} State=DRAIN Reason={shlex.quote(_reason(why))}'
            for node, why in sorted(reasons.items(), key=lambda item: item[0])]
