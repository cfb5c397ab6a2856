"""A watch cycle's figures and verdicts as Prometheus metrics, delivered to the site's
metrics store: as a node_exporter textfile-collector file (the usual way batch results reach
Prometheus), pushed to a Pushgateway (the newest cycle's, under the system's grouping key),
and, with their cycle's timestamp, imported into VictoriaMetrics (its
/api/v1/import/prometheus) for history. Written with prometheus-client, never by hand.

A store that does not answer loses nothing: what VictoriaMetrics did not take is kept in the
watch's spool (one file per cycle) and sent first at the next delivery, oldest first, each
removed only once taken. The textfile and the Pushgateway hold the newest cycle only (that
is what they are), so the next cycle's replaces what they missed.

The metrics (each labelled with the system; a figure's with its entry, figure, unit of
measure, partition, node and target, the unit judged: a node, a GPU, a GPU pair):
hpcbench_watch_figure (the median of the cycle's runs), hpcbench_watch_accepted_median,
hpcbench_watch_drift_ratio (how much worse than accepted, a fraction: positive is worse),
hpcbench_watch_drifted (1 or 0), hpcbench_watch_verdict (1 for the contract's verdict of
the target, one series per verdict), hpcbench_watch_node_state (1 for a node's state this
cycle: pass, fail, drained_by_watch, out_of_service, stale, never_accepted, busy, not_run),
hpcbench_watch_last_judged_timestamp_seconds, hpcbench_watch_cycle_timestamp_seconds."""
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest, push_to_gateway

PREFIX = 'hpcbench_watch_'
VERDICTS = ('PASS', 'WARN', 'FAIL', 'INVALID', 'NOT_RUN')
NODE_STATES = ('pass', 'fail', 'drained_by_watch', 'out_of_service', 'stale',
               'never_accepted', 'busy', 'not_run')
TEXTFILE = 'hpcbench_watch.prom'
TIMEOUT = 10
_HELP = {
    'figure': 'the median of the cycle\'s runs of the figure',
    'accepted_median': 'the median of the target\'s accepted runs of the figure',
    'drift_ratio': 'how much worse than accepted the cycle\'s median is (positive: worse)',
    'drifted': '1 where the target drifted from its accepted runs',
    'verdict': '1 for the contract\'s verdict of the target this cycle',
    'node_state': '1 for the node\'s state this cycle',
    'last_judged_timestamp_seconds': 'when the node was last judged',
    'cycle_timestamp_seconds': 'when the cycle ran',
}
_FIGURE_LABELS = ('system', 'entry', 'figure', 'unit', 'partition', 'node', 'target')


class StoreError(RuntimeError):
    """A store that did not take the metrics: which, and why, in one sentence."""


def _node_state(node, record):
    if node in record['nodes']:
        return record['nodes'][node]['outcome'].lower()
    why = record['not_run'].get(node, '')
    return ('drained_by_watch' if why.startswith('drained by the watch') else
            'out_of_service' if why.startswith('out of service') else
            'never_accepted' if why.startswith('never accepted') else
            'busy' if why.startswith('running a job') else 'not_run')


def families(record, memory_nodes):
    """The GaugeMetricFamilies of a cycle's record (cycle.json) and the watch's memory of
    each node ({node: its NodeMemory as data}), each sample at the cycle's time."""
    system, stamp = record['system'], record['time']
    made = {name: GaugeMetricFamily(PREFIX + name, text, labels=(
        _FIGURE_LABELS + ('verdict',) if name == 'verdict' else
        ('system', 'node', 'state') if name == 'node_state' else
        ('system', 'node') if name == 'last_judged_timestamp_seconds' else ('system',)
        if name == 'cycle_timestamp_seconds' else _FIGURE_LABELS))
        for name, text in _HELP.items()}
    drifts = {(d['entry'], d['unit']): d for d in record['drifts']}
    for f in record['figures']:
        labels = [system, f['entry'], f['figure'], f['unit_of_figure'], f['partition'],
                  f['node'] or '', f['unit']]
        if f['median'] is not None:
            made['figure'].add_metric(labels, f['median'], stamp)
        for verdict in VERDICTS:
            made['verdict'].add_metric(labels + [verdict], float(f['verdict'] == verdict),
                                       stamp)
        found = drifts.get((f['entry'], f['unit']))
        if found and found['accepted_median'] is not None:
            made['accepted_median'].add_metric(labels, found['accepted_median'], stamp)
        if found and found['effect'] is not None:
            made['drift_ratio'].add_metric(labels, found['effect'], stamp)
            made['drifted'].add_metric(labels, float(found['verdict'] == 'DRIFT'), stamp)
    nodes = sorted({*record['nodes'], *record['not_run'], *record['stale']})
    for node in nodes:
        state = 'stale' if node in record['stale'] else _node_state(node, record)
        for name in NODE_STATES:
            made['node_state'].add_metric([system, node, name], float(name == state), stamp)
    for node, kept in sorted(memory_nodes.items()):
        if kept.get('last_judged') is not None:
            made['last_judged_timestamp_seconds'].add_metric([system, node],
                                                             kept['last_judged'], stamp)
    made['cycle_timestamp_seconds'].add_metric([system], stamp, stamp)
    return list(made.values())


class _Collected:
    def __init__(self, found, timestamps):
        self.found, self.timestamps = found, timestamps

    def collect(self):
        for family in self.found:
            if not self.timestamps:
                copy = GaugeMetricFamily(family.name, family.documentation)
                copy.samples = [s._replace(timestamp=None) for s in family.samples]
                family = copy
            yield family


def registry(found, timestamps=False):
    """A CollectorRegistry of a cycle's metrics (its families); with `timestamps`, each
    sample carries the cycle's time (VictoriaMetrics' history; a Pushgateway and a textfile
    take none)."""
    held = CollectorRegistry(auto_describe=False)
    held.register(_Collected(found, timestamps))
    return held


def exposition(record, memory_nodes, timestamps=False):
    """The Prometheus text of the cycle's metrics (bytes)."""
    return generate_latest(registry(families(record, memory_nodes), timestamps))


class MetricsStore:
    """Where a watch's metrics go: a textfile collector's directory, a Pushgateway's
    address (host:port or URL), a VictoriaMetrics URL; any may be None. `spool`: the
    directory where what VictoriaMetrics did not take waits. deliver() says what was
    delivered and raises nothing: a store down is said, and its metrics kept."""

    def __init__(self, spool, textfile_dir=None, pushgateway=None, victoria_metrics=None,
                 say=print):
        self.spool, self.textfile_dir = Path(spool), textfile_dir
        self.pushgateway, self.victoria_metrics, self.say = (pushgateway, victoria_metrics,
                                                             say)

    def deliver(self, record, memory_nodes):
        """The cycle's metrics to each store given; {store: what happened}."""
        done = {}
        found = families(record, memory_nodes)
        if self.textfile_dir:
            path = Path(self.textfile_dir) / TEXTFILE
            write_to_textfile(str(path), registry(found))
            done['textfile'] = str(path)
        if self.pushgateway:
            try:
                push_to_gateway(self.pushgateway, job='hpcbench_watch',
                                registry=registry(found),
                                grouping_key={'system': record['system']}, timeout=TIMEOUT)
                done['pushgateway'] = 'pushed'
            except OSError as err:
                done['pushgateway'] = f'not pushed ({err}); the next cycle pushes its own'
        if self.victoria_metrics:
            self.spool.mkdir(parents=True, exist_ok=True)
            spooled = self.spool / f'{record["cycle"]}.prom'
            spooled.write_bytes(generate_latest(registry(found, timestamps=True)))
            done['victoria_metrics'] = self.flush()
        for store, what in done.items():
            self.say(f'metrics: {store}: {what}')
        return done

    def flush(self):
        """Every spooled cycle imported into VictoriaMetrics, oldest first, each removed
        once taken; what is left stays for the next cycle. What happened, in words."""
        waiting = sorted(self.spool.glob('*.prom'))
        url = self.victoria_metrics.rstrip('/') + '/api/v1/import/prometheus'
        for taken, path in enumerate(waiting):
            try:
                request = urllib.request.Request(url, data=path.read_bytes(), method='POST')
                with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                    if answer.status // 100 != 2:
                        raise OSError(f'HTTP {answer.status}')
            except (OSError, urllib.error.URLError) as err:
                return (f'{taken} cycle(s) imported; {len(waiting) - taken} kept in '
                        f'{self.spool} for the next cycle ({err})')
            path.unlink()
        return f'{len(waiting)} cycle(s) imported'
