"""The testbed's metrics store for real (hpcbench.devtools.testbed_metrics: Debian 12's
Prometheus, Pushgateway and VictoriaMetrics, each a daemon of its own), fed by watch cycles
on the 32-node acceptance's real runs (tests/watch_fakes.py) through
hpcbench.report.watch_metrics.MetricsStore, and read back through their own HTTP APIs:
VictoriaMetrics stopped during the second cycle (a store outage) loses nothing."""
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from hpcbench.acceptance import watch
from hpcbench.devtools import testbed_daemons, testbed_metrics
from hpcbench.devtools.testbed_processes import alive, recorded, wait_for
from hpcbench.report import watch_dashboard, watch_metrics
from hpcbench.stack.testbed_system import Layout
from watch_fakes import Clock, FakeReFrame, FakeSlurm, accept


@pytest.fixture
def store():
    root = Path(tempfile.mkdtemp(prefix='hpcbench-testbed-'))
    layout = Layout(root)
    urls = testbed_metrics.start(layout)
    yield layout, urls
    testbed_daemons.stop(root)
    shutil.rmtree(root)


def test_cycles_reach_prometheus_the_pushgateway_and_victoria_metrics_across_an_outage(
        store, tmp_path):
    layout, urls = store
    contract, acceptance = accept(tmp_path)
    port, slurm = FakeReFrame(), FakeSlurm()
    port.slow['n5'] = 0.7
    # Cycles an hour apart, the last a minute ago (VictoriaMetrics takes no future sample).
    clock = Clock()
    clock.now = time.time() - 2 * 3600 - 60
    metrics = watch_metrics.MetricsStore(
        tmp_path / 'watch' / 'spool', pushgateway=urls['pushgateway'].split('//')[1],
        victoria_metrics=urls['victoria-metrics'], say=lambda text: None)
    cycles = []
    for turn in range(3):
        if turn == 1:
            pid = recorded(layout)['victoria-metrics']
            os.kill(pid, signal.SIGTERM)
            wait_for('victoria-metrics to end', lambda: not alive(pid))
        if turn == 2:
            testbed_metrics.start(layout)
        cycles.append(watch.Watch('testbed', contract, acceptance, tmp_path / 'watch',
                                  reframe=port, slurm=slurm, clock=clock, store=metrics,
                                  say=lambda text: None, act=True, max_drain=0.25).cycle())
        clock.now += 3600
        if turn == 1:
            assert len(list((tmp_path / 'watch' / 'spool').iterdir())) == 1
    assert list((tmp_path / 'watch' / 'spool').iterdir()) == []
    # VictoriaMetrics: n1's HPL figure of each of the three cycles, at its cycle's time.
    vm = urls['victoria-metrics']
    wait_for('VictoriaMetrics to show the imports', lambda: len(_points(vm, cycles)) == 3,
             timeout=30)
    medians = [next(f['median'] for f in c.record['figures']
                    if f['node'] == 'n1' and f['entry'] == 'hpl') for c in cycles]
    assert _points(vm, cycles) == [(pytest.approx(c.time, abs=1), pytest.approx(m))
                                   for c, m in zip(cycles, medians)]
    # The Pushgateway holds the newest cycle, under the system's grouping key.
    group, = testbed_metrics.pushed_groups(urls['pushgateway'])
    assert group['labels'] == {'job': 'hpcbench_watch', 'system': 'testbed'}
    assert 'hpcbench_watch_figure' in group
    # Prometheus scraped it: n5 failed the newest cycle (drained: not run in the others).
    wait_for('Prometheus to scrape the Pushgateway', lambda: testbed_metrics.query(
        urls['prometheus'], 'hpcbench_watch_cycle_timestamp_seconds'), timeout=30)
    assert testbed_metrics.query(urls['prometheus'],
                                 'hpcbench_watch_cycle_timestamp_seconds')[0][1] == \
        pytest.approx(cycles[-1].time)
    state = testbed_metrics.query(urls['prometheus'],
                                  'hpcbench_watch_node_state{node="n5"} == 1')
    assert [labels['state'] for labels, _ in state] == ['drained_by_watch']
    # The dashboard's every query runs on both stores (the variables as a site picks them);
    # those of figures and drift find n1's, those of counts a number.
    for base in (urls['prometheus'], vm):
        for query in watch_dashboard.queries():
            found = testbed_metrics.query(base, query.replace('$system', 'testbed')
                                          .replace('$entry', 'hpl'))
            assert found, (base, query)
            if 'count(' in query:
                assert len(found) == 1, (base, query, found)
            else:
                assert {labels.get('node') for labels, _ in found} >= {'n1'} or \
                    'node_state' in query, (base, query, found)


def _points(base, cycles):
    """The samples of n1's HPL figure VictoriaMetrics stores, as imported."""
    return [p for _, values in testbed_metrics.exported(
        base, 'hpcbench_watch_figure{node="n1",entry="hpl"}') for p in values]
