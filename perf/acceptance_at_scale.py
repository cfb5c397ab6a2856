#!/usr/bin/env python3
"""Benchmark (not a test): the verdicts of a simulated 1,000-node acceptance.

An acceptance directory as `hpcbench accept` leaves it, for a contract of single-node HPL on
every node (median of 3 runs, committed at 0.9 x the real nodes' median), is built from the
real stored screen of the testbed (tests/fixtures/report/screen-session.json: its nodes'
HPL figures, each case padded to a whole stored HPL case, as perf/verdict_history.py pads
them): --nodes nodes, three runs each (the real figures, each run scaled by a small
node- and run-dependent step), --slow of them at half their rate, --drained of them out of
service (no case, named by the controller's reason). Then, each in its own process, as a
user runs them, with wall time and peak memory (the process's maximum resident set, from
wait4): the verdicts, outputs, report page and manifest written from the directory, and
`hpcbench accept --verify DIR`. Last, every unit's verdict is compared with the faults
injected: each slow node must fail or be flagged, each drained one NOT_RUN, every other
one PASS; a wrong verdict is counted and named.

    .venv/bin/python perf/acceptance_at_scale.py [--nodes 1000] [--slow 5] [--drained 3]
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid as uuids
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'perf'))
from verdict_history import FIXTURES, machine_sessions  # noqa: E402

HPCBENCH = ROOT / '.venv' / 'bin' / 'hpcbench'
PYTHON = ROOT / '.venv' / 'bin' / 'python'


def build(directory, nodes, slow, drained):
    """The acceptance directory; (slow nodes, drained nodes)."""
    from hpcbench.acceptance import plan, state as states
    screen = json.loads((FIXTURES / 'screen-session.json').read_text())
    real = [tc for run in screen['runs'] for tc in run['testcases'] if tc.get('perfvalues')]
    full = next(tc for run in machine_sessions()[0]['runs'] for tc in run['testcases']
                if tc['name'].startswith('HplCheck'))
    names = [f'n{index:04d}' for index in range(nodes)]
    step = max(1, nodes // max(1, slow + drained))
    slowed = names[step // 2::step][:slow]
    out = [n for n in names[step // 2 + 1::step] if n not in slowed][:drained]
    cases = []
    for repeat in range(3):
        for index, node in enumerate(names):
            if node in out:
                continue
            source = real[index % len(real)]
            scale = (0.5 if node in slowed else 1.0) * (1 + 0.003 * ((index + repeat) % 3))
            case = {**copy.deepcopy(full), **copy.deepcopy(source)}
            case.update(system='testbed', partition='batch', job_nodelist=[node],
                        display_name=f'HplNodeScreen %.part=testbed:batch %.nid={node} '
                                     f'%.repeat_no={repeat}')
            case['perfvalues'] = {f'testbed:batch:{key.split(":")[-1]}': [v[0] * scale, *v[1:]]
                                  for key, v in source['perfvalues'].items()}
            cases.append(case)
    info = {**machine_sessions()[0]['session_info'], 'uuid': str(uuids.uuid4())}
    template = {'session_info': info, 'restored_cases': []}
    values = sorted(v[0] for tc in real for k, v in tc['perfvalues'].items()
                    if k.endswith(':gflops'))
    session = {**template, 'runs': [{'testcases': cases}]}
    contract = {'system': 'testbed', 'about': f'a simulated {nodes}-node acceptance',
                'entries': [{
                    'id': 'hpl-node', 'check': 'HplNodeScreen', 'figure': 'gflops',
                    'scope': 'node', 'partitions': ['batch'],
                    'committed': {'value': round(0.9 * values[len(values) // 2], 2),
                                  'unit': 'GFLOP/s', 'direction': 'at_least',
                                  'tolerance': 0.05},
                    'statistic': {'median_of': 3},
                    'source': {'kind': 'baseline', 'cite': 'the real screen of the testbed '
                               '(tests/fixtures/report/screen-session.json)',
                               'figure': values[len(values) // 2], 'factor': 0.9},
                    'fault': {'code': 'HPL-NODE', 'action': 'drain; check it'}}]}
    directory.mkdir(parents=True)
    (directory / states.CONTRACT_COPY).write_text(yaml.safe_dump(contract))
    uuid = session['session_info']['uuid']
    (directory / states.SESSIONS).mkdir()
    (directory / states.SESSIONS / f'{uuid}.json').write_text(json.dumps(session))
    states.State('testbed', 'simulated', [plan.PartitionNodes('batch', tuple(names))], [uuid],
                 {n: 'IDLE+DRAIN: drained (simulated)' for n in out}).save(directory)
    return slowed, out


# Written from the directory in a process of its own: what `hpcbench accept` does once its
# runs are stored (the library's own use case, finished again from what the directory holds).
JUDGE = '''
import sys
from hpcbench.acceptance.use_case import Acceptance
from hpcbench.report import acceptance_page
Acceptance.stored(sys.argv[1], page=acceptance_page.files).finish()
'''


def measured(argv):
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    return (time.monotonic() - start, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status), output.strip().splitlines()[-1:] or [''])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=1000)
    parser.add_argument('--slow', type=int, default=5)
    parser.add_argument('--drained', type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / 'acceptance'
        slowed, out = build(directory, args.nodes, args.slow, args.drained)
        print(f'{args.nodes} nodes x 3 runs; slow: {", ".join(slowed)}; drained: '
              f'{", ".join(out)}')
        for name, argv in (('verdicts, outputs, page, manifest',
                            [str(PYTHON), '-c', JUDGE, str(directory)]),
                           ('hpcbench accept --verify',
                            [str(HPCBENCH), 'accept', '--verify', str(directory)])):
            seconds, megabytes, status, last = measured(argv)
            print(f'{name:<36} {seconds:7.2f} s {megabytes:8.1f} MB  exit {status}  {last[0]}')
        written = json.loads((directory / 'verdicts.json').read_text())
        wrong = []
        for unit in written['entries'][0]['units']:
            node = unit['node']
            if node in slowed:
                ok = unit['verdict'] == 'FAIL' and unit['slow']
            elif node in out:
                ok = unit['verdict'] == 'NOT_RUN'
            else:
                ok = unit['verdict'] == 'PASS' and not unit['slow']
            if not ok:
                wrong.append(f'{node}: {unit["verdict"]} {unit["slow"]}')
        counts = written['entries'][0]['counts']
        print(f'verdicts: {counts}; system {written["verdict"]}; wrong: {len(wrong)}'
              + (f' ({"; ".join(wrong[:5])})' if wrong else ''))


if __name__ == '__main__':
    main()
