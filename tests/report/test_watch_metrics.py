"""A watch cycle's metrics (hpcbench.report.watch_metrics) from real cycles (the watch on
the 32-node acceptance's real runs, tests/watch_fakes.py): what they say, the textfile
written by prometheus-client, and the spool that keeps what a store that is down did not
take. The daemons themselves: tests/devtools/test_testbed_metrics.py."""
from dataclasses import asdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hpcbench.acceptance import watch, watch_record
from hpcbench.report import watch_metrics
from watch_fakes import Clock, FakeReFrame, FakeSlurm, accept


@pytest.fixture
def cycle(tmp_path):
    contract, acceptance = accept(tmp_path)
    port, slurm = FakeReFrame(), FakeSlurm()
    port.slow['n5'] = 0.7
    slurm.states['n8'] = ('IDLE+DRAIN', 'bad DIMM [admin@2026-12-04T10:00:00]')
    done = watch.Watch('testbed', contract, acceptance, tmp_path / 'watch', reframe=port,
                       slurm=slurm, clock=Clock(), say=lambda text: None, act=True,
                       max_drain=0.25).cycle()
    memory = watch_record.Memory.load(tmp_path / 'watch')
    return done.record, {n: asdict(kept) for n, kept in memory.nodes.items()}


def _samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s
            for family in text_string_to_metric_families(text) for s in family.samples}


def _labels(samples, name, **wanted):
    return [s for (n, _), s in samples.items()
            if n == name and all(s.labels.get(k) == v for k, v in wanted.items())]


def test_the_metrics_say_each_node_s_figure_drift_verdict_and_state(cycle):
    record, memory = cycle
    samples = _samples(watch_metrics.exposition(record, memory).decode())
    n5 = next(f for f in record['figures'] if f['node'] == 'n5' and f['entry'] == 'hpl')
    figure, = _labels(samples, 'hpcbench_watch_figure', node='n5', entry='hpl')
    assert figure.value == pytest.approx(n5['median']) and figure.timestamp is None
    # Its first cycle: three runs beside three accepted ones are no drift over nine nodes
    # (hpcbench.acceptance.drift), however much worse; the contract's clause failed it.
    assert _labels(samples, 'hpcbench_watch_drifted', node='n5')[0].value == 0
    assert _labels(samples, 'hpcbench_watch_drifted', node='n3')[0].value == 0
    assert _labels(samples, 'hpcbench_watch_drift_ratio', node='n5')[0].value == \
        pytest.approx(0.7, abs=0.01)
    fail, = _labels(samples, 'hpcbench_watch_verdict', node='n5', entry='hpl', verdict='FAIL')
    assert fail.value == 1
    states = {s.labels['state']: s.value for s in _labels(samples, 'hpcbench_watch_node_state',
                                                          node='n8')}
    assert states['out_of_service'] == 1 and sum(states.values()) == 1
    assert _labels(samples, 'hpcbench_watch_node_state', node='n7',
                   state='never_accepted')[0].value == 1
    assert _labels(samples, 'hpcbench_watch_node_state', node='n5', state='fail')[0].value == 1
    # With timestamps (VictoriaMetrics' history): the cycle's time, in milliseconds.
    stamped = _samples(watch_metrics.exposition(record, memory, timestamps=True).decode())
    assert _labels(stamped, 'hpcbench_watch_figure', node='n5')[0].timestamp == record['time']


def test_the_textfile_is_written_and_a_store_that_is_down_keeps_the_cycle(cycle, tmp_path):
    record, memory = cycle
    said = []
    store = watch_metrics.MetricsStore(tmp_path / 'spool', textfile_dir=tmp_path,
                                       pushgateway='127.0.0.1:9',
                                       victoria_metrics='http://127.0.0.1:9', say=said.append)
    done = store.deliver(record, memory)
    text = (tmp_path / watch_metrics.TEXTFILE).read_text()
    assert _labels(_samples(text), 'hpcbench_watch_figure', node='n5')
    assert done['pushgateway'].startswith('not pushed')
    assert done['victoria_metrics'].startswith('0 cycle(s) imported; 1 kept in')
    assert [p.name for p in (tmp_path / 'spool').iterdir()] == [f'{record["cycle"]}.prom']
    assert any(line.startswith('metrics: victoria_metrics: 0 cycle(s)') for line in said)
