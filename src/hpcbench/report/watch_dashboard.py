"""The watch's Grafana dashboard, built with grafana-foundation-sdk (Grafana's own typed
builders, not JSON by hand) over the metrics hpcbench.report.watch_metrics delivers, from a
Prometheus-compatible data source (Prometheus scraping the Pushgateway, or VictoriaMetrics
for history): per-node drift from the accepted figures (a status history: one row per node,
coloured by how much worse), the nodes the watch drained, those stale and those never
accepted, and each entry's figure of every node over time beside its accepted median.
Variables: the data source, the system, the entry. `hpcbench watch SYSTEM --dashboard FILE`
writes it; a site imports it into its Grafana. Every panel's query is listed by queries()
so that a test runs each against a real store."""
import json

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, statushistory, table
from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as models

from hpcbench.report.watch_metrics import PREFIX

UID = 'hpcbench-watch'
_DS = models.DataSourceRef(type_val='prometheus', uid='${datasource}')
_SYSTEM = 'system="$system"'
_ENTRY = f'{_SYSTEM},entry="$entry"'

PANELS = (
    # (kind, title, query, legend, unit)
    ('status', 'Drift from the accepted figures, per node (a fraction: positive is worse)',
     f'{PREFIX}drift_ratio{{{_ENTRY}}}', '{{node}} {{target}}', 'percentunit'),
    ('stat', 'Nodes drained by the watch',
     f'count({PREFIX}node_state{{{_SYSTEM},state="drained_by_watch"}} == 1) or vector(0)',
     '', 'none'),
    ('stat', 'Nodes stale (not judged within their period)',
     f'count({PREFIX}node_state{{{_SYSTEM},state="stale"}} == 1) or vector(0)', '', 'none'),
    ('stat', 'Nodes never accepted',
     f'count({PREFIX}node_state{{{_SYSTEM},state="never_accepted"}} == 1) or vector(0)', '',
     'none'),
    ('table', 'Nodes not in service or not judged, and why',
     f'{PREFIX}node_state{{{_SYSTEM},state=~"drained_by_watch|stale|never_accepted|'
     f'out_of_service|fail"}} == 1', '{{node}}: {{state}}', 'none'),
    ('series', 'The entry\'s figure of every node over time',
     f'{PREFIX}figure{{{_ENTRY}}}', '{{node}} {{target}}', 'none'),
    ('series', 'Its accepted median, per node',
     f'{PREFIX}accepted_median{{{_ENTRY}}}', '{{node}} {{target}} accepted', 'none'),
)


def queries():
    """Every panel's PromQL, as the dashboard holds it (with its variables)."""
    return [query for _, _, query, _, _ in PANELS]


def _target(query, legend):
    return prometheus.Dataquery().expr(query).legend_format(legend or '__auto').ref_id('A')


def _panel(kind, title, query, legend, unit, place):
    builder = {'status': statushistory.Panel, 'stat': stat.Panel, 'table': table.Panel,
               'series': timeseries.Panel}[kind]()
    panel = builder.title(title).datasource(_DS).with_target(_target(query, legend))
    if kind != 'table':
        panel = panel.unit(unit)
    return panel.grid_pos(models.GridPos(**place))


def _places():
    """Each panel's place on the grid (24 wide): the drift first, the counts side by
    side under it, then the list and the figures."""
    places, y, x = [], 0, 0
    for kind, *_ in PANELS:
        if kind == 'stat':
            places.append({'h': 4, 'w': 8, 'x': x, 'y': y})
            x = (x + 8) % 24
            y += 4 if x == 0 else 0
        else:
            y += 4 if x else 0
            x = 0
            places.append({'h': 10, 'w': 24, 'x': 0, 'y': y})
            y += 10
    return places


def build():
    """The dashboard, as Grafana's JSON model (a dict)."""
    board = (dashboard.Dashboard('hpcbench watch: nodes against their accepted figures')
             .uid(UID).tags(['hpcbench', 'acceptance', 'watch']).refresh('5m')
             .time('now-7d', 'now').timezone('utc')
             .with_variable(dashboard.DatasourceVariable('datasource').label('Data source')
                            .type('prometheus'))
             .with_variable(dashboard.QueryVariable('system').label('System')
                            .datasource(_DS).query(
                                f'label_values({PREFIX}cycle_timestamp_seconds, system)'))
             .with_variable(dashboard.QueryVariable('entry').label('Entry').datasource(_DS)
                            .query(f'label_values({PREFIX}figure{{{_SYSTEM}}}, entry)')))
    for panel, place in zip(PANELS, _places()):
        board = board.with_panel(_panel(*panel, place))
    return json.loads(JSONEncoder(sort_keys=True, indent=1).encode(board.build()))


def text():
    """The dashboard's JSON, as a site imports it."""
    return json.dumps(build(), indent=1, sort_keys=True) + '\n'
