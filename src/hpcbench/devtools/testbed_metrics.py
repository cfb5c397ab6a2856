"""The testbed's metrics store, as a site runs one: Debian 12's Prometheus (scraping the
Pushgateway every second, honouring the pushed labels), Pushgateway and VictoriaMetrics,
each a real daemon on a port of its own on 127.0.0.1, its data under the testbed's state
directory, started beside the testbed's Slurm (`ci/testbed/testbed start`, unless
--no-metrics) and ended with it (their PIDs recorded as every daemon's:
hpcbench.devtools.testbed_processes). What the watch delivers there is read back through
their own HTTP APIs (Prometheus' and VictoriaMetrics' /api/v1/query, the Pushgateway's
/api/v1/metrics)."""
import json
import socket
import urllib.parse
import urllib.request

from hpcbench.devtools.testbed_processes import TestbedError, recorded, spawn, wait_for
from hpcbench.stack import debian

PACKAGES = ('prometheus', 'prometheus-pushgateway', 'victoria-metrics')
PROMETHEUS_PORT = 19090
PUSHGATEWAY_PORT = 19091
VICTORIA_METRICS_PORT = 18428
DAEMONS = ('prometheus', 'pushgateway', 'victoria-metrics')


def urls():
    """{daemon: its base URL}."""
    return {'prometheus': f'http://127.0.0.1:{PROMETHEUS_PORT}',
            'pushgateway': f'http://127.0.0.1:{PUSHGATEWAY_PORT}',
            'victoria-metrics': f'http://127.0.0.1:{VICTORIA_METRICS_PORT}'}


def _port_open(port):
    with socket.socket() as s:
        return s.connect_ex(('127.0.0.1', port)) == 0


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def prometheus_config(scrape_seconds=1):
    """Prometheus' configuration: the Pushgateway scraped, its pushed labels kept."""
    return (f'# Written by hpcbench.devtools.testbed_metrics.\nglobal:\n  scrape_interval: '
            f'{scrape_seconds}s\nscrape_configs:\n  - job_name: pushgateway\n    '
            f'honor_labels: true\n    static_configs:\n      - targets: '
            f"['127.0.0.1:{PUSHGATEWAY_PORT}']\n")


def start(layout):
    """The three daemons started (those that run already are left running); {daemon: URL}."""
    try:
        debian.ensure(PACKAGES)
    except debian.MissingPackages as err:
        raise TestbedError(str(err)) from None
    running = recorded(layout)
    data = layout.root / 'metrics'
    data.mkdir(parents=True, exist_ok=True)
    layout.log.mkdir(parents=True, exist_ok=True)
    layout.run.mkdir(parents=True, exist_ok=True)
    config = layout.etc / 'prometheus.yml'
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(prometheus_config())
    argv = {
        'pushgateway': ['prometheus-pushgateway',
                        f'--web.listen-address=127.0.0.1:{PUSHGATEWAY_PORT}',
                        f'--persistence.file={data}/pushgateway.data'],
        'victoria-metrics': ['victoria-metrics',
                             f'--httpListenAddr=127.0.0.1:{VICTORIA_METRICS_PORT}',
                             f'--storageDataPath={data}/victoria-metrics',
                             '--retentionPeriod=1y', '--search.latencyOffset=0s'],
        'prometheus': ['prometheus', f'--config.file={config}',
                       f'--storage.tsdb.path={data}/prometheus',
                       f'--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}'],
    }
    ports = {'pushgateway': PUSHGATEWAY_PORT, 'victoria-metrics': VICTORIA_METRICS_PORT,
             'prometheus': PROMETHEUS_PORT}
    for name in ('pushgateway', 'victoria-metrics', 'prometheus'):
        if name in running:
            continue
        if _port_open(ports[name]):
            raise TestbedError(f'port {ports[name]} already in use: another {name} runs here')
        spawn(layout, name, argv[name])
    for name, url in urls().items():
        ready = f'{url}/-/ready' if name != 'victoria-metrics' else f'{url}/health'
        wait_for(name, lambda ready=ready: _answers(ready), timeout=60,
                 log=layout.log / f'{name}.out')
    return urls()


def query(base, promql, time=None):
    """The result of an instant PromQL query of Prometheus or VictoriaMetrics at `base`:
    [(labels, value)], through its /api/v1/query."""
    fields = {'query': promql}
    if time is not None:
        fields['time'] = str(time)
    with urllib.request.urlopen(f'{base}/api/v1/query?{urllib.parse.urlencode(fields)}',
                                timeout=10) as answer:
        data = json.loads(answer.read())
    if data.get('status') != 'success':
        raise TestbedError(f'{base}: {promql}: {data}')
    return [(r['metric'], float(r['value'][1])) for r in data['data']['result']]


def exported(base, selector):
    """[(labels, [(time in s, value)])] of the raw samples VictoriaMetrics stores of the
    series `selector` matches (its /api/v1/export: every sample as imported, none
    interpolated)."""
    fields = urllib.parse.urlencode({'match[]': selector})
    with urllib.request.urlopen(f'{base}/api/v1/export?{fields}', timeout=10) as answer:
        lines = answer.read().decode().splitlines()
    series = [json.loads(line) for line in lines if line.strip()]
    return [(s['metric'], sorted((t / 1000, float(v))
                                 for t, v in zip(s['timestamps'], s['values'])))
            for s in series]


def pushed_groups(base):
    """The Pushgateway's groups as its /api/v1/metrics lists them."""
    with urllib.request.urlopen(f'{base}/api/v1/metrics', timeout=10) as answer:
        return json.loads(answer.read())['data']
