#!/usr/bin/env python3
"""Benchmark (not a test): the watch at 1,000 nodes (issue 72's goals).

1. The schedule, simulated (hpcbench.acceptance.watch_rules.due): --nodes nodes, a period
   of --period hours, a cycle every --every hours taking at most --budget nodes, a share
   --busy of the nodes running someone's job at each cycle (drawn anew each cycle, a fixed
   seed), for --days days: the longest any node waited between judgements, beside the
   period.
2. A cycle's work outside ReFrame: an acceptance of --nodes nodes on --entries watched
   entries (HPCC's figures of the 32-node testbed acceptance's real runs, tests/fixtures/
   acceptance/testbed-32-nodes-hpcc-session.json, served by the tests' fake port to
   ReFrame: tests/watch_fakes.py), then one cycle of the watch at --budget nodes and one
   of every node, each in a process of its own: wall time and peak memory (the process's
   maximum resident set, from wait4).
3. The metrics of the cycle of every node (--nodes x --entries figures) as prometheus-client
   writes them (a textfile, and the text VictoriaMetrics imports), and imported into a
   VictoriaMetrics at --victoria-metrics where one answers (the testbed's).

    .venv/bin/python perf/watch_at_scale.py [--nodes 1000] [--entries 20] [--budget 100]
"""
import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / '.venv' / 'bin' / 'python'
sys.path.insert(0, str(ROOT / 'src'))
sys.path.insert(0, str(ROOT / 'tests'))
sys.path.insert(0, str(ROOT / 'perf'))
from acceptance_at_scale import measured  # noqa: E402

FIGURES = ('hpl', 'star_dgemm', 'star_stream_triad', 'pingpong_bandwidth', 'pingpong_latency',
           'random_ring_bandwidth', 'random_ring_latency')
UNITS = {'hpl': 'GFLOP/s', 'star_dgemm': 'GFLOP/s', 'star_stream_triad': 'GB/s',
         'pingpong_bandwidth': 'GB/s', 'random_ring_bandwidth': 'GB/s',
         'pingpong_latency': 'us', 'random_ring_latency': 'us'}


def schedule(nodes, period_h, every_h, budget, busy, days):
    """The longest wait between judgements of any node, in hours, and the judgements."""
    from hpcbench.acceptance.watch_rules import NodeMemory, SeenNode, due
    rng = random.Random(72)
    memory = {f'n{i:04d}': NodeMemory() for i in range(nodes)}
    longest, judged, now = 0.0, 0, 0.0
    while now < days * 24:
        seen = [SeenNode(n, 'batch', 'ALLOCATED' if rng.random() < busy else 'IDLE')
                for n in memory]
        for name in due(seen, memory, period_h, budget, now):
            if memory[name].last_judged is not None:
                longest = max(longest, now - memory[name].last_judged)
            memory[name].last_judged = now
            judged += 1
        now += every_h
    never = sum(m.last_judged is None for m in memory.values())
    return longest, judged, never


def contract(entries):
    """--entries watched per-node entries of HPCC's figures (each figure under several ids)."""
    made = []
    for index in range(entries):
        figure = FIGURES[index % len(FIGURES)]
        made.append({
            'id': f'{figure}-{index}', 'check': 'HpccCheck', 'figure': figure,
            'scope': 'node', 'partitions': ['srun'], 'environ': 'openmpi',
            'committed': {'value': 0.001 if UNITS[figure] != 'us' else 1e6,
                          'unit': UNITS[figure],
                          'direction': 'at_most' if UNITS[figure] == 'us' else 'at_least'},
            'watch': {'period': '1d', 'streak': 2},
            'source': {'kind': 'procurement', 'cite': 'a benchmark of the suite'},
            'fault': {'code': 'HPCC-NODE', 'action': 'see to it'}})
    return {'system': 'testbed', 'entries': made}


CYCLE = '''
import sys, json, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from watch_fakes import Clock, FakeReFrame, FakeSlurm
from hpcbench.acceptance import watch
nodes = [f'n{i:04d}' for i in range(int(sys.argv[3]))]
clock = Clock()
clock.now = time.time()
cycle = watch.Watch('testbed', Path(sys.argv[2]) / 'contract.yaml',
                    Path(sys.argv[2]) / 'acceptance', Path(sys.argv[2]) / sys.argv[5],
                    reframe=FakeReFrame(nodes), slurm=FakeSlurm(nodes), clock=clock,
                    budget=int(sys.argv[4]), say=lambda text: None, act=True).cycle()
print(json.dumps({'judged': len(cycle.due), 'figures': len(cycle.record['figures'])}))
'''


def accept(scratch, nodes, entries):
    from hpcbench.acceptance import directory as directories
    from hpcbench.acceptance.use_case import Acceptance
    from watch_fakes import FakeReFrame, FakeSlurm
    names = [f'n{i:04d}' for i in range(nodes)]
    (scratch / 'contract.yaml').write_text(yaml.safe_dump(contract(entries)))
    with directories.claimed(scratch / 'acceptance'):
        Acceptance('testbed', scratch / 'contract.yaml', scratch / 'acceptance',
                   reframe=FakeReFrame(names), node_states=FakeSlurm(names),
                   say=lambda text: None).run().finish()


def metrics(scratch, victoria_metrics):
    from hpcbench.report import watch_metrics
    directory = scratch / 'every'
    cycle = sorted((directory / 'cycles').iterdir())[-1]
    record = json.loads((cycle / 'cycle.json').read_text())
    memory = json.loads((directory / 'watch.json').read_text())['nodes']
    started = time.monotonic()
    text = watch_metrics.exposition(record, memory, timestamps=True)
    made = time.monotonic() - started
    delivered = {}
    for name, store in (
            ('VictoriaMetrics', watch_metrics.MetricsStore(
                scratch / 'spool', victoria_metrics=victoria_metrics, say=lambda t: None)),
            ('a textfile', watch_metrics.MetricsStore(scratch / 'spool', textfile_dir=scratch,
                                                      say=lambda t: None))):
        started = time.monotonic()
        done = store.deliver(record, memory)
        delivered[name] = (round(time.monotonic() - started, 2), done)
    return len(record['figures']), text.count(b'\n'), made, delivered


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=1000)
    parser.add_argument('--entries', type=int, default=20)
    parser.add_argument('--budget', type=int, default=100)
    parser.add_argument('--period', type=float, default=24)
    parser.add_argument('--every', type=float, default=1)
    parser.add_argument('--busy', type=float, default=0.3)
    parser.add_argument('--days', type=float, default=7)
    parser.add_argument('--victoria-metrics', default='http://127.0.0.1:18428')
    args = parser.parse_args()
    longest, judged, never = schedule(args.nodes, args.period, args.every, args.budget,
                                      args.busy, args.days)
    print(f'schedule: {args.nodes} nodes, a cycle every {args.every:g} h of at most '
          f'{args.budget}, {100 * args.busy:g} % busy each cycle, {args.days:g} days: '
          f'{judged} judgements, longest wait {longest:g} h (period {args.period:g} h), '
          f'{never} never judged')
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        started = time.monotonic()
        accept(scratch, args.nodes, args.entries)
        print(f'acceptance of {args.nodes} nodes x {args.entries} entries built in '
              f'{time.monotonic() - started:.1f} s')
        for name, budget in (('budget', args.budget), ('every', args.nodes)):
            seconds, megabytes, status, last = measured(
                [str(PYTHON), '-c', CYCLE, str(ROOT / 'tests'), str(scratch), str(args.nodes),
                 str(budget), name])
            print(f'a cycle of {budget} nodes x {args.entries} entries outside ReFrame: '
                  f'{seconds:.2f} s, {megabytes:.0f} MB, exit {status} {last[0]}')
        figures, lines, made, delivered = metrics(scratch, args.victoria_metrics)
        print(f'metrics of {figures} figures: {lines} lines made in {made:.2f} s; delivered '
              f'(seconds, what happened): {delivered}')


if __name__ == '__main__':
    main()
