#!/usr/bin/env python3
"""Benchmark (not a test): what a verdict costs as the history grows.

Results databases in ReFrame's layout (schema 1.0) are filled with nightly sessions made from
real stored sessions of this machine (tests/fixtures/report/session-new.json and
session-old.json, one a night, alternately, each with its own UUID and start), at 2, 30, 120
and 365 nights; and a simulated year of a 1,000-node nightly screen: each night's session
holds one HplNodeScreen case per node, made from the real screening session
(screen-session.json: its nodes' figures) and padded with the fields of a real stored HPL
case (session-new.json), so that each case is as large as a stored one.

For each, the commands run as a user runs them, each in its own process, and print their
wall time and peak memory (the process's maximum resident set, from wait4):
`hpcbench compare` (the newest night against the 30 before), `hpcbench baseline` then
`hpcbench compare --baseline`, and `hpcbench report`. Nothing of the project is written:
every database, references file and report lies in a scratch directory.

    .venv/bin/python perf/verdict_history.py [--nights 2 30 120 365] [--nodes 1000]
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid as uuids
from pathlib import Path

from hpcbench.core import paths
from hpcbench.devtools import history

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / 'tests' / 'fixtures' / 'report'
HPCBENCH = ROOT / '.venv' / 'bin' / 'hpcbench'


def machine_sessions():
    return [json.loads((FIXTURES / f'session-{name}.json').read_text())
            for name in ('new', 'old')]


def screen_template(nodes):
    """One night of a `nodes`-node screen: the real screening session's cases, each padded
    to a whole stored HPL case, one per node (its figures those of a real node in turn,
    scaled by a node-dependent 0.5 % step so that the nodes differ)."""
    screen = json.loads((FIXTURES / 'screen-session.json').read_text())
    real = [tc for run in screen['runs'] for tc in run['testcases']]
    full = next(tc for run in machine_sessions()[0]['runs'] for tc in run['testcases']
                if tc['name'].startswith('HplCheck'))
    cases = []
    for index in range(nodes):
        source = real[index % len(real)]
        node = f'n{index:04d}'
        case = {**copy.deepcopy(full), **copy.deepcopy(source)}
        case.update(system='testbed', partition='batch', job_nodelist=[node],
                    display_name=f'HplNodeScreen %.part=testbed:batch %.nid={node}')
        scale = 1 + 0.005 * (index % 7)
        case['perfvalues'] = {key.replace('mycluster:', 'testbed:'): [v[0] * scale, *v[1:]]
                              for key, v in source['perfvalues'].items()}
        cases.append(case)
    info = {**machine_sessions()[0]['session_info'], 'uuid': str(uuids.uuid4())}
    return {'session_info': info, 'runs': [{'testcases': cases}], 'restored_cases': []}


def fill(var, templates, nights):
    """var/results.db with `nights` sessions, one a night up to now, the templates in turn;
    its size."""
    var.mkdir(parents=True)
    (var / paths.VAR_MARKER).write_text('A results directory of perf/verdict_history.py\n')
    history.fill(var / 'results.db', templates, nights)
    return (var / 'results.db').stat().st_size


def measured(argv, env):
    """(seconds, peak resident MB, exit status, last line of its output) of one command."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.monotonic() - start
    lines = [line for line in output.splitlines() if line.strip()]
    return elapsed, usage.ru_maxrss / 1024, proc.returncode, lines[-1] if lines else ''


def run_commands(scratch, system, commands):
    env = {**os.environ, 'HPCBENCH_VAR': str(scratch / 'var'),
           'HPCBENCH_REFERENCES': str(scratch / 'references')}
    shutil.copytree(ROOT / 'references', scratch / 'references')
    rows = []
    for name, args in commands:
        argv = [str(HPCBENCH), *args, '--system', system]
        if name == 'report':
            argv += ['--output', str(scratch / 'report')]
        seconds, megabytes, status, last = measured(argv, env)
        rows.append((name, seconds, megabytes, status, last))
    return rows


COMMANDS = (('compare', ['compare']),
            ('baseline', ['baseline']),
            ('compare --baseline', ['compare', '--baseline']),
            ('report', ['report']))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nights', type=int, nargs='+', default=[2, 30, 120, 365])
    parser.add_argument('--nodes', type=int, default=1000,
                        help='nodes of the simulated screen (0: none)')
    parser.add_argument('--screen-nights', type=int, default=365)
    args = parser.parse_args()
    if not HPCBENCH.exists():
        sys.exit(f'{HPCBENCH} is missing: make venv first')
    print(f'{"history":<28} {"database":>9}  {"command":<20} {"seconds":>8} {"peak MB":>8}  '
          'exit')
    cases = []
    for nights in args.nights:
        cases.append((f'{nights} nights (machine)', 'local', machine_sessions(), nights,
                      COMMANDS))
    if args.nodes:
        cases.append((f'{args.screen_nights} nights x {args.nodes} nodes', 'testbed',
                      [screen_template(args.nodes)], args.screen_nights,
                      (('compare', ['compare']),)))
    for label, system, templates, nights, commands in cases:
        with tempfile.TemporaryDirectory(prefix='hpcbench-history-') as scratch:
            scratch = Path(scratch)
            size = fill(scratch / 'var', templates, nights)
            for name, seconds, megabytes, status, last in run_commands(scratch, system,
                                                                       commands):
                print(f'{label:<28} {size / 2**20:>7.0f}MB  {name:<20} {seconds:>8.1f} '
                      f'{megabytes:>8.0f}  {status}' + (f'  ({last[:100]})' if status else ''),
                      flush=True)


if __name__ == '__main__':
    main()
