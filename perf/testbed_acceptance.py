#!/usr/bin/env python3
"""Benchmark (not a test): the testbed's acceptance at scale, end to end, with its faults
injected for real (issue 63's goal: 32 nodes within 15 minutes on this machine).

The Slurm testbed with --nodes CPU nodes (`ci/testbed/testbed start --nodes N`; one running
with another count is refused by it); node --slow given --cpu-share of one CPU
(hpcbench.devtools.testbed_slowdown: its slurmd, and so its jobs, in a CPU cgroup with a
quota), --drained drained through Slurm before the run and --drained-during drained --after
seconds into it; --memory-uncorrected and --port-half-rate given those faults in their
hardware (`testbed fault`; judged by the contract's fact entries, the committed one's since
2026-12-05). Then `hpcbench accept --system testbed` with the contract (the committed
contracts/testbed.yaml unless --contract) into --output, timed as a user runs it. Then:

- where the time went: each ReFrame run of the acceptance (its report: start, end, test
  cases), and the rest (ReFrame asked what the system is, the verdicts and outputs);
- every unit's verdict against the faults: a drained node NOT_RUN in every entry and every
  pair with it NOT_RUN; the slow node failing at least one entry; the nodes whose hardware
  was given a fault (--memory-uncorrected, --port-half-rate: hpcbench.devtools.
  testbed_facts) failing exactly the facts it touches; the drain list naming those nodes
  and nothing else; every other node and pair PASS, not flagged slow. A verdict that
  disagrees is counted and named.

Afterwards the slow node gets its CPU back, the faulted nodes are mended and the nodes this
drained are resumed; the testbed keeps running (`make testbed-stop`). A directory given to
--output that holds an acceptance is resumed, as `hpcbench accept` does (give a new one for
a fresh run).

    .venv/bin/python perf/testbed_acceptance.py [--nodes 32] [--slow n7 --cpu-share 0.25]
        [--drained n20] [--drained-during n25 --after 120] [--memory-uncorrected n11]
        [--port-half-rate n13] [--load 1 --duty 0.7] [--output DIR]
"""
import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HPCBENCH = ROOT / '.venv' / 'bin' / 'hpcbench'
TESTBED = ROOT / 'ci' / 'testbed' / 'testbed'
sys.path.insert(0, str(ROOT / 'src'))


def scontrol(env, node, state, reason=None):
    command = ['scontrol', 'update', f'NodeName={node}', f'State={state}']
    if reason:
        command.append(f'Reason={reason}')
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)


def runs_of(directory):
    """(label, seconds, test cases) of each ReFrame run the acceptance made, in order."""
    runs = []
    for report in sorted((directory / 'reports').glob('run-*.json'),
                         key=lambda p: int(p.stem.split('-')[1])):
        data = json.loads(report.read_text())
        cases = [tc for run in data['runs'] for tc in run['testcases'] if not tc['fixture']]
        names = sorted({tc['name'] for tc in cases})
        runs.append((', '.join(names) or report.stem, data['session_info']['time_elapsed'],
                     len(cases)))
    return runs


# The facts each injected fault (hpcbench.devtools.testbed_facts) makes miss a contract's
# expectation, where the contract has an entry of them: (fact figure, port or None).
FAULT_FACTS = {'memory-uncorrected': {('edac_uncorrected', None)},
               'port-half-rate': {('rate_gbps', 'mlx4_0/1'), ('width', 'mlx4_0/1'),
                                  ('symbol_error_increase', 'mlx4_0/1')}}


def _port(key):
    return f'{key["device"]}/{key["port"]}' if isinstance(key, dict) and 'port' in key \
        else None


def wrong_verdicts(verdicts, drain_list, slow, drained, faults=None):
    """[why] for every verdict that disagrees with the faults injected: `slow`, `drained`,
    and `faults` ({node: fault}: its hardware's, testbed_facts.FAULTS), whose node fails
    exactly the facts the fault touches (FAULT_FACTS) and passes the rest."""
    faults = faults or {}
    wrong = []
    failed_slow = False
    missed = {(node, *fact) for node, fault in faults.items() for fact in FAULT_FACTS[fault]}
    judged = {(node, *fact) for node, fault in faults.items() for fact in FAULT_FACTS[fault]
              if any(e.get('fact') and e['figure'] == fact[0] for e in verdicts['entries'])}
    for entry in verdicts['entries']:
        for unit in entry['units']:
            nodes = set(unit['nodes'])
            name = f'{entry["id"]} {unit["unit"]}'
            fact = (unit['node'], entry['figure'], _port(unit['key']))
            if nodes & set(drained):
                # A node drained during the run read its facts in the jobs it ran before:
                # they are what its hardware said, judged as any node's.
                if unit['verdict'] != 'NOT_RUN' and not (entry.get('fact') and
                                                         unit['verdict'] == 'PASS'):
                    wrong.append(f'{name}: {unit["verdict"]}, its node drained')
            elif entry.get('fact') and fact in missed:
                judged.discard(fact)
                if unit['verdict'] != 'FAIL':
                    wrong.append(f'{name}: {unit["verdict"]}, its fault '
                                 f'{faults[unit["node"]]} injected')
            elif slow in nodes:
                failed_slow |= unit['verdict'] == 'FAIL'
            elif unit['verdict'] != 'PASS' or unit['slow']:
                flagged = ' (flagged slow)' if unit['slow'] else ''
                wrong.append(f'{name}: {unit["verdict"]}{flagged}, a healthy '
                             f'{"pair" if len(nodes) > 1 else "node"}'
                             f'{" (of its figures)" if unit["node"] in faults else ""}')
    if slow and not failed_slow:
        wrong.append(f'{slow}: made slow, and no entry failed it')
    for node, figure, port in sorted(judged, key=str):
        wrong.append(f'{node}: {faults[node]} injected, and no verdict of its {figure}'
                     f'{f" of port {port}" if port else ""}')
    named = sorted(line.split()[2].split('=', 1)[1] for line in drain_list
                   if line.startswith('scontrol'))
    expected = sorted({*([slow] if slow else []), *faults})
    if named != expected:
        wrong.append(f'the drain list names {named or "nothing"}, not {expected or "nothing"}')
    return wrong


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=32)
    parser.add_argument('--slow', default='n7', help="a node made slow ('' : none)")
    parser.add_argument('--cpu-share', type=float, default=0.25,
                        help='of one CPU, for the slow node (0.25: a quarter of one)')
    parser.add_argument('--drained', default='n20', help="drained before ('' : none)")
    parser.add_argument('--drained-during', default='n25', help="drained during ('' : none)")
    parser.add_argument('--after', type=float, default=120,
                        help='seconds into the run at which --drained-during is drained')
    # The hardware's faults are judged by a contract's fact entries (a draft's: hpcbench
    # contract init): none unless asked.
    parser.add_argument('--memory-uncorrected', default='',
                        help="a node given an uncorrected memory error (none unless named)")
    parser.add_argument('--port-half-rate', default='',
                        help="a node whose InfiniBand port runs at half its rate, its symbol "
                        "errors rising (none unless named)")
    parser.add_argument('--load', type=float, default=0,
                        help='other work on the host meanwhile: this many cores kept busy, '
                        'each busy --duty of every second (0: none)')
    parser.add_argument('--duty', type=float, default=0.7,
                        help='the share of each second a --load core is busy')
    parser.add_argument('--contract', default=str(ROOT / 'contracts' / 'testbed.yaml'))
    parser.add_argument('--output', default=str(ROOT / 'var' / 'acceptance' / 'testbed-scale'))
    args = parser.parse_args()

    from hpcbench.devtools import testbed_daemons, testbed_facts, testbed_slowdown
    from hpcbench.stack import testbed_system
    subprocess.run([str(TESTBED), 'start', '--nodes', str(args.nodes)], check=True,
                   stdout=subprocess.DEVNULL)
    layout = testbed_system.Layout(testbed_system.state_dir())
    env = testbed_system.layout_environment(layout)
    drained = [n for n in (args.drained, args.drained_during) if n]
    faults = {node: fault for node, fault in ((args.memory_uncorrected, 'memory-uncorrected'),
                                              (args.port_half_rate, 'port-half-rate')) if node}
    directory = Path(args.output)
    timer = None
    # Another job on the host: busy loops outside the testbed's nodes, so that ReFrame's
    # polls, Slurm's daemons and the jobs all run late by turns.
    load = [subprocess.Popen([sys.executable, '-c', (
        'import time\nwhile True:\n    end = time.monotonic() + %f\n'
        '    while time.monotonic() < end: pass\n    time.sleep(%f)\n')
        % (args.duty, 1 - args.duty)]) for _ in range(int(args.load))]
    try:
        if args.slow:
            testbed_slowdown.slow(layout, args.slow, args.cpu_share)
        for node, fault in faults.items():
            print(testbed_facts.inject(layout, node, fault), flush=True)
        if args.drained:
            scontrol(env, args.drained, 'DRAIN', 'benchmark: drained before the run')
        if args.drained_during:
            timer = threading.Timer(args.after, scontrol, (
                env, args.drained_during, 'DRAIN', 'benchmark: drained during the run'))
            timer.start()
        print(f'testbed of {args.nodes} nodes: {args.slow or "no node"} at '
              f'{args.cpu_share:g} of one CPU, {args.drained or "none"} drained, '
              f'{args.drained_during or "none"} drained {args.after:g} s into the run, '
              f'{len(load)} core(s) of the host kept busy {args.duty:g} of each second',
              flush=True)
        start = time.monotonic()
        done = subprocess.run([str(HPCBENCH), 'accept', '--system', 'testbed', '--contract',
                               args.contract, '--output', str(directory)], cwd=ROOT,
                              text=True, capture_output=True)
        wall = time.monotonic() - start
    finally:
        for process in load:
            process.kill()
            process.wait()
        if timer:
            timer.cancel()
        if args.slow:
            testbed_slowdown.restore(layout, args.slow)
        hardware = testbed_daemons.node_hardware(args.nodes)
        for node in faults:
            testbed_facts.mend(layout, node, *hardware[node])
        for node in drained:
            subprocess.run(['scontrol', 'update', f'NodeName={node}', 'State=RESUME'],
                           env=env, capture_output=True, timeout=60)
    print(done.stdout[-6000:], done.stderr[-3000:], sep='\n')
    if done.returncode not in (0, 1):
        sys.exit(f'hpcbench accept failed (exit {done.returncode})')

    runs = runs_of(directory)
    print(f'\nwall: {wall:.0f} s ({wall / 60:.1f} min) for {args.nodes} nodes')
    for label, seconds, cases in runs:
        print(f'  {seconds:7.1f} s  {cases:4d} test case(s)  {label}')
    in_runs = sum(seconds for _, seconds, _ in runs)
    print(f'  {wall - in_runs:7.1f} s  outside ReFrame runs (the system asked, verdicts, '
          'outputs)')
    verdicts = json.loads((directory / 'verdicts.json').read_text())
    drain_list = (directory / 'drain-list.sh').read_text().splitlines()
    wrong = wrong_verdicts(verdicts, drain_list, args.slow, drained, faults)
    units = sum(len(e['units']) for e in verdicts['entries'])
    print(f'verdicts: system {verdicts["verdict"]}, {units} unit verdict(s), '
          f'{len(wrong)} wrong')
    for why in wrong:
        print(f'  wrong: {why}')
    sys.exit(1 if wrong else 0)


if __name__ == '__main__':
    main()
