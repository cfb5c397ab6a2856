"""Fakes of the watch's ports on real runs (tests/acceptance/test_watch.py,
tests/report/test_watch_metrics.py): a port to ReFrame that stores sessions of the real runs
of the testbed's 32-node acceptance (tests/fixtures/acceptance/testbed-32-nodes-hpcc-
session.json: HPCC on each node, three runs each), a node made slow by scaling its real
runs' figures; a controller that keeps each node's state and reason and applies the drains
it is given; a clock; and the ten nodes accepted on their real runs."""
import json
import re
import uuid
from pathlib import Path

import yaml

from conftest import FIXTURES
from hpcbench.acceptance import directory as directories
from hpcbench.acceptance.use_case import Acceptance
from hpcbench.acceptance.watch_rules import SeenNode
from hpcbench.core import slurm_cluster
from hpcbench.rfm import reframe_port

SESSION = json.loads((FIXTURES / 'acceptance' / 'testbed-32-nodes-hpcc-session.json')
                     .read_text())
REAL_RUNS = {}
for _case in (tc for run in SESSION['runs'] for tc in run['testcases'] if not tc['fixture']):
    if _case['job_nodelist']:
        REAL_RUNS.setdefault(_case['job_nodelist'][0], []).append(_case)
NODES = [f'n{i}' for i in range(1, 11)]
assert all(len(REAL_RUNS[n]) == 3 for n in NODES)
# n7 ran at a quarter of one CPU in that acceptance, which failed it: never accepted.
ACCEPTED = [n for n in NODES if n != 'n7']

ENTRY = {'check': 'HpccCheck', 'scope': 'node', 'partitions': ['srun'], 'environ': 'openmpi',
         'source': {'kind': 'procurement', 'cite': 'a test of the suite'},
         'fault': {'code': 'HPCC-NODE', 'action': 'see to the node'}}
CONTRACT = {'system': 'testbed', 'entries': [
    {**ENTRY, 'id': 'hpl', 'figure': 'hpl',
     'committed': {'value': 14.42, 'unit': 'GFLOP/s', 'direction': 'at_least',
                   'tolerance': 0.05},
     'watch': {'period': '1h', 'action': 'drain', 'streak': 2, 'min_effect': 0.05}},
    {**ENTRY, 'id': 'latency', 'figure': 'pingpong_latency',
     'committed': {'value': 21.44, 'unit': 'us', 'direction': 'at_most'}}]}


# A healthy node's memory over a job (the testbed's: hpcbench.devtools.testbed_facts).
HEALTHY_FACTS = {'dimm_ranks': 4.0, 'edac_uncorrected': 0.0, 'edac_uncorrected_increase': 0.0}


def _scaled(case, slower):
    """A real case with its rates `slower` (a fraction) lower and its times longer."""
    case = json.loads(json.dumps(case))
    for key, value in case['perfvalues'].items():
        if value[4] in ('GFLOP/s', 'GB/s'):
            value[0] *= 1 - slower
        elif value[4] == 'us':
            value[0] /= 1 - slower
    return case


class FakeReFrame:
    """ReFrame's port on the testbed's `srun`: each run stores a session of each node's next
    real run (its three in turn), slowed where `slow` says ({node: fraction})."""

    def __init__(self, nodes=NODES, slurm=None):
        self.nodes, self.slow, self.stored, self.ran, self.served = nodes, {}, {}, [], {}
        # The controller whose reservations ReFrame's --distribute sees (as ReFrame's Slurm
        # backend does: a reserved node is listed only with its reservation named).
        self.slurm = slurm
        self.unrun = set()              # nodes whose jobs never run (no case stored)
        # What each job's node reads of its hardware ({node: {fact figure: value}} over a
        # healthy node's: hpcbench.rfm.hardware_facts).
        self.facts = {}
        self.reservations = []          # each run's -J--reservation, None without

    def partitions(self):
        return [reframe_port.SeenPartition('srun', 'slurm')]

    def check_kinds(self, checks):
        return {}

    def distributed_nodes(self, partition, check, job_options=()):
        if self.slurm is None:
            return tuple(self.nodes)
        reservations = self.slurm.reservations
        named = next((o.split('=', 1)[1] for o in job_options
                      if o.startswith('--reservation=')), None)
        if named is not None:
            return tuple(n for n in self.nodes if n in reservations.get(named, ()))
        reserved = {n for nodes in reservations.values() for n in nodes}
        return tuple(n for n in self.nodes if n not in reserved)

    def run(self, partition, options):
        nodes = next(o for o in options if o.startswith('-J--nodelist=')).split('=', 1)[1]
        nodes = nodes.split(',')
        self.ran.append(nodes)
        self.reservations.append(next((o.split('=', 1)[1] for o in options
                                       if o.startswith('-J--reservation=')), None))
        cases = []
        for node in (n for n in nodes if n not in self.unrun):
            turn = self.served.get(node, 0)
            self.served[node] = turn + 1
            # A node the acceptance had not (a simulated cluster's): n1's runs, as its own.
            real = REAL_RUNS.get(node) or REAL_RUNS['n1']
            case = _scaled(real[turn % len(real)], self.slow.get(node, 0))
            case['job_nodelist'] = [node]
            case['node_facts'] = {node: {**HEALTHY_FACTS, **self.facts.get(node, {})}}
            case['display_name'] = re.sub(r'%\.nid=\S+', f'%.nid={node}', case['display_name'])
            cases.append(case)
        data = {'session_info': {'uuid': str(uuid.uuid4())}, 'runs': [{'testcases': cases}]}
        self.stored[data['session_info']['uuid']] = data
        report = Path(options[options.index('--report-file') + 1])
        report.write_text(json.dumps({'session_info': data['session_info']}))
        return reframe_port.Finished(0, '', '')

    def stored_run(self, report):
        return json.loads(Path(report).read_text())['session_info']['uuid']

    def stored_session(self, uuid_):
        return self.stored[uuid_]


class FakeSlurm:
    """The controller: each node's state and reason; drains and comments applied."""

    def __init__(self, nodes=NODES):
        self.states = {n: ('IDLE', '') for n in nodes}
        self.acted, self.reservations = [], {}

    def out_of_service(self, nodes, in_reservation=False):
        found = {n: slurm_cluster.why_out(*self.states[n], in_reservation) for n in nodes}
        return {n: why for n, why in found.items() if why}

    def seen(self, by_partition):
        return {n: SeenNode(n, p, *self.states[n]) for p, nodes in by_partition.items()
                for n in nodes if n in self.states}

    def act(self, argv):
        self.acted.append(argv)
        fields = dict(a.split('=', 1) for a in argv[2:] if '=' in a)
        if fields.get('State') == 'DRAIN':
            self.states[fields['NodeName']] = ('IDLE+DRAIN', fields['Reason'])
        elif fields.get('State') == 'RESUME':
            self.states[fields['NodeName']] = ('IDLE', '')
        elif argv[1:3] == ['create', 'reservation']:
            self.reservations[fields['ReservationName']] = fields['Nodes'].split(',')
        elif argv[1] == 'delete':
            del self.reservations[fields['ReservationName']]

    def wait_in_service(self, nodes, timeout=120):
        assert not self.out_of_service(nodes)


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self):
        return self.now


def accept(tmp_path, contract_data=CONTRACT):
    """(contract path, acceptance directory) of the ten nodes accepted on their real runs."""
    contract = tmp_path / 'testbed.yaml'
    contract.write_text(yaml.safe_dump(json.loads(json.dumps(contract_data)), sort_keys=False))
    directory = tmp_path / 'acceptance'
    with directories.claimed(directory):
        Acceptance('testbed', contract, directory, reframe=FakeReFrame(),
                   node_states=FakeSlurm(), say=lambda text: None).run().finish()
    return contract, directory
