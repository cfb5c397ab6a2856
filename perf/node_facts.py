#!/usr/bin/env python3
"""Benchmark (not a test): the cost of reading a node's health facts around a job (issue
73's goals: a node's facts in under 2 s for every GPU and NIC of an 8-GPU, 8-NIC node;
the reads under 1 % of a benchmark job).

A tree standing in for an 8-GPU, 8-NIC node, from stored real outputs: the lent H200's
`nvidia-smi -q -x` (tests/fixtures/gpu/h200) with its one GPU written eight times on eight
PCI buses, eight copies of the ConnectX-4 port of prometheus/procfs's sysfs
(tests/fixtures/health), the netdata EDAC tree and the XE9680's dmesg with its five XID
119. Then, --repeats times each: read() and the figures of two reads in this process; and
the job's own step, `python3 -m hpcbench.core.node_facts` in a process of its own as a job
runs it (its start included), on that tree and on this machine's own / . Each as its
median and most, beside a 2-second testbed HPCC job and a 10-minute HPL job.

    .venv/bin/python perf/node_facts.py [--repeats 20]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'src'))
HEALTH = ROOT / 'tests' / 'fixtures' / 'health'


def eight_by_eight(root):
    """A node's tree with eight GPUs and eight RDMA ports from the real outputs."""
    from hpcbench.core import node_facts
    shutil.copytree(HEALTH / 'netdata-1508' / 'sys' / 'devices', root / 'sys' / 'devices')
    port = HEALTH / 'procfs-sys' / 'class' / 'infiniband' / 'mlx5_0'
    for i in range(8):
        shutil.copytree(port, root / 'sys' / 'class' / 'infiniband' / f'mlx5_{i}')
    xml = (ROOT / 'tests' / 'fixtures' / 'gpu' / 'h200' / 'nvidia-smi-q.xml').read_text()
    start, end = xml.index('<gpu id='), xml.rindex('</gpu>') + len('</gpu>')
    gpu = xml[start:end]
    bus = re.search(r'<gpu id="([^"]+)"', gpu).group(1)
    gpus = ''.join(gpu.replace(bus, f'00000000:{0x18 + 0x10 * i:02X}:00.0')
                   .replace('<minor_number>0<', f'<minor_number>{i}<') for i in range(8))
    sources = root / node_facts.SOURCES
    sources.mkdir(parents=True)
    (sources / node_facts.SMI_FILE).write_text(xml[:start] + gpus + xml[end:])
    shutil.copy(HEALTH / 'dmesg-xid-119-xe9680.log', sources / node_facts.DMESG_FILE)


def timed(function, repeats):
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), max(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=20)
    args = parser.parse_args()
    from hpcbench.core import fact_figures, node_facts
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / 'g1'
        eight_by_eight(tree)
        facts = node_facts.read(tree, 'g1')
        found = fact_figures.figures(facts, node_facts.read(tree, 'g1'))
        print(f'the tree: {len(facts.gpus)} GPUs, {len(facts.ports)} ports, '
              f'{len(facts.xids)} XIDs; {len(found.devices)} devices\' figures, '
              f'unread {facts.unread}')
        read = timed(lambda: node_facts.read(tree, 'g1'), args.repeats)
        both = timed(lambda: fact_figures.figures(node_facts.read(tree, 'g1'),
                                                  node_facts.read(tree, 'g1')), args.repeats)
        env = {**os.environ, 'PYTHONPATH': str(ROOT / 'src')}
        out = Path(scratch) / 'facts.json'

        def step(root):
            subprocess.run([sys.executable, '-m', 'hpcbench.core.node_facts', '--root',
                            str(root), '--node', 'g1', '--output', str(out)], env=env,
                           check=True)
        job_tree = timed(lambda: step(tree), args.repeats)
        job_here = timed(lambda: step('/'), args.repeats)
    print(f'read (8 GPUs, 8 ports), in process: median {read[0] * 1000:.1f} ms, most '
          f'{read[1] * 1000:.1f} ms')
    print(f'two reads and their figures: median {both[0] * 1000:.1f} ms, most '
          f'{both[1] * 1000:.1f} ms')
    for what, (median, most) in (('the job\'s step on the 8x8 tree', job_tree),
                                 ('the job\'s step on this machine\'s /', job_here)):
        print(f'{what} (a process, its start included): median {median * 1000:.0f} ms, most '
              f'{most * 1000:.0f} ms; two of them are {200 * median / 2:.1f} % of a 2 s '
              f'testbed job, {200 * median / 600:.3f} % of a 10-minute HPL')


if __name__ == '__main__':
    main()
