#!/usr/bin/env python3
"""Benchmark (not a test): the watch after the acceptance on the testbed, end to end, with
its faults injected for real (issue 72's scenario).

The Slurm testbed with --nodes CPU nodes and its metrics store (Prometheus, Pushgateway,
VictoriaMetrics: `ci/testbed/testbed start`); the committed contract's per-node HPCC entries
(contracts/testbed.yaml; its watched ones, HPL and DGEMM, given a --period short enough
that every node is due each cycle) accepted; then `hpcbench watch testbed --act` cycles, as
a site's schedule runs them, each timed, into the Pushgateway and VictoriaMetrics. After
cycle 2: --slow20 given --share20 of one CPU and --slow60 given --share60 (a CPU quota on
their slurmd), --site-drained drained by "the site" with its own reason. VictoriaMetrics
is stopped for cycle --outage and started again after it. Once the --slow60 node is drained
it is "repaired" (its CPU given back, its reason `hpcbench: repaired`); once the --slow20
node is drained it is marked repaired without being repaired. Then:

- per cycle: seconds, nodes judged, outcomes, drifts and actions;
- the slow nodes: the cycle each drifted, failed and was drained; what each re-test gave;
- healthy node-cycles judged and healthy nodes ever drained (the goal: none);
- the site's drained node never touched; every cycle in VictoriaMetrics (none lost to the
  outage).

    .venv/bin/python perf/testbed_watch.py [--nodes 32] [--cycles 11] [--runs 6] [--output DIR]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HPCBENCH = ROOT / '.venv' / 'bin' / 'hpcbench'
TESTBED = ROOT / 'ci' / 'testbed' / 'testbed'
sys.path.insert(0, str(ROOT / 'src'))


def scenario_contract(path, period, runs):
    """The committed contract's per-node entries, its watched ones watched every `period`,
    `runs` runs a cycle."""
    data = yaml.safe_load((ROOT / 'contracts' / 'testbed.yaml').read_text())
    data['entries'] = [e for e in data['entries'] if e['scope'] == 'node']
    for entry in data['entries']:
        if 'watch' in entry:
            entry['watch']['period'] = period
            entry['watch']['runs'] = runs
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def node(env, name):
    out = subprocess.run(['scontrol', 'show', 'node', '-o', name], capture_output=True,
                         text=True, env=env, timeout=60).stdout
    reason = re.search(r'Reason=(.*?)(?= \w+=|$)', out)
    return re.search(r'State=(\S+)', out).group(1), reason.group(1) if reason else ''


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--nodes', type=int, default=32)
    parser.add_argument('--cycles', type=int, default=11)
    parser.add_argument('--period', default='2m')
    # HPL of one testbed node spreads 15 % run to run (its 20 ms at N = 1152 on a shared
    # 2-core VM): three runs a cycle caught a node 20 % slow within three cycles in 45 % of
    # trials on run 3's real runs, six in 93 % (resampled; hpcbench.acceptance.contract).
    parser.add_argument('--runs', type=int, default=6)
    parser.add_argument('--slow20', default='n9')
    # Calibrated on the 2-core testbed host (2026-12-05, HPCC's HPL of one node given a share
    # of its two CPUs, 5 runs beside 5 of a full node): 1.9 -> 17 %, 1.8 -> 23 %, 1.6 -> 35 %,
    # 1.4 -> 55 %, 1.2 -> 69 % slower (two ranks spinning in MPI share one quota); from cycle
    # to cycle it varies (1.85: 29, 18 and 5 % in three in a row; 1.8 in run 3: single runs
    # 3 to 50 % slower, 21 % on average); 1.7 slowed every run of the calibration (12 to
    # 31 %, 24 % median).
    parser.add_argument('--share20', type=float, default=1.7)
    parser.add_argument('--slow60', default='n17')
    parser.add_argument('--share60', type=float, default=1.3)
    parser.add_argument('--site-drained', default='n25')
    parser.add_argument('--outage', type=int, default=4)
    parser.add_argument('--max-drain', default='0.1')
    parser.add_argument('--output', default=str(ROOT / 'var' / 'perf-watch'))
    args = parser.parse_args()

    from hpcbench.devtools import testbed_metrics, testbed_slowdown
    from hpcbench.devtools.testbed_processes import alive, recorded, wait_for
    from hpcbench.stack import testbed_system
    subprocess.run([str(TESTBED), 'start', '--nodes', str(args.nodes)], check=True,
                   stdout=subprocess.DEVNULL)
    layout = testbed_system.Layout(testbed_system.state_dir())
    env = testbed_system.layout_environment(layout)
    # Slurm keeps a node's drain across a restart (its saved state): a node an earlier run
    # of this scenario drained starts this one drained, never accepted. The scenario starts
    # from the whole cluster.
    names = ','.join(f'n{n}' for n in range(1, args.nodes + 1))
    out_of_service = subprocess.run(['sinfo', '-h', '-R', '-n', names, '-o', '%N'], env=env,
                                     capture_output=True, text=True, timeout=60,
                                     check=True).stdout.split()
    for nodes in out_of_service:
        subprocess.run(['scontrol', 'update', f'NodeName={nodes}', 'State=RESUME'], env=env,
                       check=True, timeout=60)
        print(f'resumed {nodes}, out of service since an earlier run', flush=True)
    urls = testbed_metrics.start(layout)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    contract, acceptance, watch_dir = out / 'contract.yaml', out / 'acceptance', out / 'watch'
    scenario_contract(contract, args.period, args.runs)
    started = time.monotonic()
    done = subprocess.run([str(HPCBENCH), 'accept', '--system', 'testbed', '--contract',
                           str(contract), '--output', str(acceptance)], capture_output=True,
                          text=True, cwd=ROOT)
    accepted_s = time.monotonic() - started
    print(f'accepted in {accepted_s:.0f} s (exit {done.returncode})', flush=True)
    options = [str(HPCBENCH), 'watch', 'testbed', '--contract', str(contract), '--acceptance',
               str(acceptance), '--output', str(watch_dir), '--act', '--budget',
               str(args.nodes), '--max-drain', args.max_drain, '--pushgateway',
               urls['pushgateway'].split('//')[1], '--victoria-metrics',
               urls['victoria-metrics']]
    cycles, events = [], []
    repaired = set()
    try:
        for turn in range(1, args.cycles + 1):
            if turn == 3:
                testbed_slowdown.slow(layout, args.slow20, args.share20)
                testbed_slowdown.slow(layout, args.slow60, args.share60)
                subprocess.run(['scontrol', 'update', f'NodeName={args.site_drained}',
                                'State=DRAIN', 'Reason=site: bad DIMM in slot 3'], env=env,
                               check=True, timeout=60)
                events.append(f'before cycle 3: {args.slow20} at {args.share20} CPU, '
                              f'{args.slow60} at {args.share60} CPU, {args.site_drained} '
                              'drained by the site')
            if turn == args.outage:
                pid = recorded(layout)['victoria-metrics']
                os.kill(pid, signal.SIGTERM)
                wait_for('VictoriaMetrics to end', lambda: not alive(pid))
                events.append(f'cycle {turn}: VictoriaMetrics stopped')
            if turn == args.outage + 1:
                testbed_metrics.start(layout)
                events.append(f'cycle {turn}: VictoriaMetrics started again')
            for slow, fix in ((args.slow60, True), (args.slow20, False)):
                state, reason = node(env, slow)
                if slow not in repaired and 'DRAIN' in state and \
                        reason.startswith('hpcbench watch:'):
                    if fix:
                        testbed_slowdown.restore(layout, slow)
                    subprocess.run(['scontrol', 'update', f'NodeName={slow}',
                                    'Reason=hpcbench: repaired'], env=env, check=True,
                                   timeout=60)
                    repaired.add(slow)
                    events.append(f'before cycle {turn}: {slow} marked repaired'
                                  + ('' if fix else ' (not repaired)'))
            began = time.monotonic()
            done = subprocess.run(options, capture_output=True, text=True, cwd=ROOT)
            seconds = time.monotonic() - began
            name = re.search(r'^testbed: cycle (\S+): ', done.stdout, re.M)
            if not name:
                print(done.stdout[-3000:], done.stderr[-2000:])
                break
            record = json.loads((watch_dir / 'cycles' / name.group(1) /
                                 'cycle.json').read_text())
            cycles.append((turn, seconds, record))
            print(f'cycle {turn}: {seconds:.0f} s, exit {done.returncode}, '
                  f'{len(record["due"])} judged, outcomes '
                  f'{ {o: sum(n["outcome"] == o for n in record["nodes"].values()) for o in ("PASS", "FAIL", "NOT_RUN")} }, '
                  f'drifts {[(d["node"], round(d["effect"], 3)) for d in record["drifts"] if d["verdict"] == "DRIFT"]}, '
                  f'actions {[(a["node"], a["kind"], bool(a["held"])) for a in record["actions"]]}, '
                  f'returned {record["returned"]}', flush=True)
            time.sleep(1)
    finally:
        for slow in (args.slow20, args.slow60):
            testbed_slowdown.restore(layout, slow)
    summary(args, cycles, events, env, urls)


def summary(args, cycles, events, env, urls):
    from hpcbench.devtools import testbed_metrics
    faulty = {args.slow20, args.slow60, args.site_drained}
    healthy_cycles = sum(1 for _, _, r in cycles for n in r['due'] if n not in faulty)
    drained = [(turn, a['node']) for turn, _, r in cycles for a in r['actions']
               if a['kind'] == 'drain' and a['run']]
    wrong = [(t, n) for t, n in drained if n not in (args.slow20, args.slow60)]
    stored = testbed_metrics.exported(urls['victoria-metrics'],
                                      'hpcbench_watch_cycle_timestamp_seconds')
    # The store keeps earlier runs' cycles too: this run's are the ones at its cycles' times.
    ours = {round(r['time']) for _, _, r in cycles}
    kept = sorted(t for _, values in stored for t, _ in values if round(t) in ours)
    print('\n'.join(events))
    for slow in (args.slow20, args.slow60):
        seen = [(turn, r['nodes'].get(slow, {}).get('outcome'),
                 [round(d['effect'], 3) for d in r['drifts'] if d['node'] == slow],
                 [d['verdict'] for d in r['drifts'] if d['node'] == slow])
                for turn, _, r in cycles]
        print(f'{slow}: {seen}')
        print(f'  drained in cycles {[t for t, n in drained if n == slow]}; returned: '
              f'{[(t, r["returned"][slow]) for t, _, r in cycles if slow in r["returned"]]}')
    for path in sorted(Path(args.output, 'watch', 'cycles').glob('*-return/cycle.json')):
        retest = json.loads(path.read_text())
        if retest['time'] < min(r['time'] for _, _, r in cycles):
            continue        # an earlier run's
        print(f're-test {retest["cycle"]}: {retest["due"]} beside {retest.get("peers", [])}: '
              + '; '.join(f'{d["node"]} {d["entry"]} {100 * (d["effect"] or 0):+.1f} % '
                          f'p = {d["p_value"] or 1:.3g} x {d["scale"]:.3f} {d["verdict"]}'
                          for d in retest['drifts']))
    print(f'{args.site_drained}: {node(env, args.site_drained)}; actions on it: '
          f'{[(t, a["kind"]) for t, _, r in cycles for a in r["actions"] if a["node"] == args.site_drained]}')
    print(f'cycles: {len(cycles)}, seconds each: {[round(s) for _, s, _ in cycles]}')
    print(f'healthy node-cycles judged: {healthy_cycles}; healthy nodes drained: {wrong}')
    print(f'cycles in VictoriaMetrics: {len(kept)} of {len(cycles)}')


if __name__ == '__main__':
    main()
