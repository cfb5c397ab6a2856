import contextlib
import os
import re
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from hpcbench.rfm.plugins import Samples

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / 'fixtures'
BIN = Path(sys.executable).parent


@pytest.fixture
def fixture_text():
    def read(name):
        return (FIXTURES / name).read_text()

    return read


def pytest_collection_modifyitems(items):
    """A test marked `spack` is skipped, saying why, where no Spack is found or where the
    one found could fetch no source (no source mirror, and no network)."""
    from hpcbench.stack import spack
    if not any(item.get_closest_marker('spack') for item in items):
        return
    if spack.find() is None:
        why = 'no Spack found (SPACK_ROOT or the per-user cache)'
    else:
        why = spack.sources_unavailable()
    if why is None:
        return
    skip = pytest.mark.skip(reason=f'{why}: real runs of Spack builds skipped')
    for item in items:
        if item.get_closest_marker('spack'):
            item.add_marker(skip)


@pytest.fixture(scope='module')
def installed():
    """The local environment installed (bootstrap, then spack install: nothing to do when
    it is)."""
    from hpcbench.stack import bootstrap
    found = bootstrap.bootstrap()
    bootstrap.install_environment(found)


def check_classes_of(*files):
    """The classes of the checks in `files` (of reframe-checks/, loaded by ReFrame's loader
    under the local site config): the tests, and their fixtures and bases, which are not
    listed as tests, taken from the checks' modules."""
    from reframe.core import config, runtime
    from reframe.frontend.loader import RegressionCheckLoader
    site = config.load_config(str(ROOT / 'site-configs' / 'local.py'))
    site.select_subconfig('local')
    runtime.init_runtime(site)
    loader = RegressionCheckLoader([str(ROOT / 'reframe-checks')])
    classes = {}
    for name in files:
        for test in loader.load_from_file(str(ROOT / 'reframe-checks' / name)):
            module = __import__(type(test).__module__, fromlist=['*'])
            classes.update({k: v for k, v in vars(module).items() if isinstance(v, type)})
    return classes


def described_partition(name='default', fullname=None, processor=None, **fields):
    """A stand-in for a ReFrame partition whose description is `fields` (over a node of
    24 GiB at 2 GHz, 16 flop/cycle), as a site config would make it
    (hpcbench.machine.description): its extras, its GPUs in `devices`, its processor."""
    import types
    from hpcbench.machine import description
    made = description.partition({'memory_bytes': 24 << 30, 'clock_hz': 2e9,
                                  'flops_per_cycle': 16, 'spack_env': 'spack-envs/local',
                                  **fields}, 'a test')
    kind, count = (made.accelerators or {}).get('kind'), made.gpus_per_node
    return types.SimpleNamespace(
        name=name, fullname=fullname or f'local:{name}', extras=made.to_extras(),
        processor=types.SimpleNamespace(info=processor),
        select_devices=lambda wanted: [types.SimpleNamespace(num_devices=count)]
        if wanted == kind and count else [])


def run_reframe(*args, env=None, config='site-configs/local.py', timeout=900,
                checks='reframe-checks'):
    cmd = [str(BIN / 'reframe'), '-C', config, '-c', checks, *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


# A loop that takes a core's time and the memory's bandwidth: it copies a 256 MiB array over
# another, over and over.
_LOAD = 'a = bytearray(256 << 20)\nb = bytearray(256 << 20)\nwhile True:\n    b[:] = a\n'


@contextlib.contextmanager
def load_on_every_core():
    """One load per core, each in a session of its own, for as long as the block runs. The
    kernel shares the CPU between sessions first (autogroup scheduling, on here), and
    ReFrame starts each job in a new session: loads started in the test's session all
    shared one half of the CPU against the job's half, however many (HPL -51 % with one per
    core, -56 % with three; STREAM -24 to -47 %, 'no change' at 30 % in two CI runs; IMB
    PingPong's bandwidth -19 %, inconclusive, with compute-only loops)."""
    from hpcbench.machine import host
    loads = [subprocess.Popen([sys.executable, '-c', _LOAD], start_new_session=True)
             for _ in range(len(host.processor_info()['topology']['cores']))]
    try:
        yield
    finally:
        for load in loads:
            load.kill()
            load.wait()


def signals_as_from_a_terminal():
    """preexec_fn for a child that is to be interrupted or hung up as from a terminal: a test
    runner started in the background ignores SIGINT (a shell's `&`) or SIGHUP (`nohup`), its
    children inherit that, and then Python installs no handler for it (hpcbench keeps a
    signal it was started ignoring ignored, as nohup asks) and bash cannot trap it."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason='mounts need root')


@pytest.fixture
def mounted(tmp_path):
    """Mount points made for a test, unmounted after it."""
    made = []

    def mount(*args):
        point = tmp_path / f'mount{len(made)}'
        point.mkdir()
        subprocess.run(['mount', *args, str(point)], check=True)
        made.append(point)
        return point

    yield mount
    for point in reversed(made):
        subprocess.run(['umount', str(point)], check=False)


def slurm_conf_nodes(slurm_conf):
    """{node name: (CPUs, Sockets, CoresPerSocket, ThreadsPerCore, RealMemory, Gres)} as the
    testbed's slurm.conf (its text) declares them."""
    declared = {}
    for line in slurm_conf.splitlines():
        # A range of nodes (n[1-3]) or one (u1).
        match = re.match(r'NodeName=(?:(\w)\[1-(\d+)\]|(\w+)) ', line)
        if match:
            fields = dict(f.split('=', 1) for f in line.split()[1:])
            names = ([f'{match.group(1)}{i}' for i in range(1, int(match.group(2)) + 1)]
                     if match.group(1) else [match.group(3)])
            for name in names:
                declared[name] = (
                    int(fields['CPUs']), int(fields['Sockets']), int(fields['CoresPerSocket']),
                    int(fields['ThreadsPerCore']), int(fields['RealMemory']),
                    fields.get('Gres', ''))
    return declared


# The pair check between GPUs, its sanity and recording run on a given output (tests/benchmarks/
# test_gpu_mpi.py), and the record it makes of a real 8 x A100 node (tests/acceptance too).
class PairCheckUnderTest(types.SimpleNamespace):
    """The pair check's sanity and recording, given a job's output and a node."""
    from hpcbench.rfm.plugins import Samples
    record_samples = Samples.record_samples
    record_device_samples = Samples.record_device_samples
    record_aggregation = Samples.record_aggregation


def pair_check_under_test(checks, tmp_path, output, pairs, topology=None, path='intra-node',
                          host_link_bandwidth=16e9):
    """The pair check over `output`, the GPUs an H100's but for their host link: PCIe 3.0's
    16 GB/s by default, below this machine's host-buffer figures (35 GB/s), which then stand
    in for a device path."""
    from hpcbench.benchmarks import gpu_mpi
    from hpcbench.core import gpu_topology
    from hpcbench.stack import testbed_system
    check = checks['DeviceBufferPairCheck']
    if topology is None:
        topology = gpu_topology.parse(testbed_system.GPU_TOPOLOGY_FILE.read_text())
    (tmp_path / 'rfm_job.out').write_text(output)
    sheet = {'nvlink': 'NVLink 4', 'nvlink_links': 18, 'nvlink_bandwidth': 450e9,
             'host_link': 'PCIe', 'host_link_bandwidth': host_link_bandwidth}
    test = PairCheckUnderTest(
        samples={}, aggregation={}, flagged={}, device_figures={}, pair_links={},
        unique_name='under test',
        stagedir=str(tmp_path), stdout='rfm_job.out', path=path, pairs=pairs,
        sheet=sheet, topology_of_node=topology, max_msglog=22, num_tasks=2,
        perf_variables=dict.fromkeys(gpu_mpi.PAIR_VARIABLES),
        current_partition=described_partition())
    for name in ('pair_outputs', 'check_ranks', 'imb_tables', 'link_rates',
                 'link_efficiencies', 'record_pair_figures', 'pair_key'):
        setattr(test, name, types.MethodType(getattr(check, name), test))
    return check, test


PAIRS = FIXTURES / 'gpu' / 'pairs'


def _p2p_matrix(text, title):
    """{(i, j): value} of the matrix `title` heads in p2pBandwidthLatencyTest's output (row
    i to column j), the diagonal left out."""
    lines = text[text.index(title):].splitlines()[2:]
    matrix = {}
    for line in lines:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        i = int(cells[0])
        matrix.update({(i, j): float(v) for j, v in enumerate(cells[1:]) if j != i})
    return matrix


def a100_node_pair_record(tmp_path, cut=None):
    """The pair check's record of a real 8 x A100 node (tests/fixtures/gpu/pairs): each
    pair's one-way bandwidth and latency as p2pBandwidthLatencyTest measured them, recorded
    as DeviceBufferPairCheck records its pairs, stored as ReFrame stores a test case (through
    JSON). `cut`: {pair: factor} a pair's bandwidth is multiplied by (a fault)."""
    import json
    import statistics
    from hpcbench.benchmarks import gpu_mpi
    from hpcbench.core import gpu_topology
    from hpcbench.machine import datasheets
    text = (PAIRS / 'a100-sxm4-80gb-8gpu.txt').read_text()
    bandwidth = _p2p_matrix(text, 'Unidirectional P2P=Enabled Bandwidth')
    latency = _p2p_matrix(text, 'P2P=Enabled Latency')
    pairs = gpu_mpi.gpu_pairs(8)
    topology = gpu_topology.parse((PAIRS / 'a100-sxm4-80gb-8gpu-topology.txt').read_text())
    _, test = pair_check_under_test(check_classes_of('gpu_mpi.py'), tmp_path, '', pairs,
                                    topology=topology)
    test.sheet = datasheets.find('NVIDIA A100-SXM4-80GB').__dict__
    test.pair_hosts = {pair: ('a100-node', 'a100-node') for pair in pairs}
    one_way = {pair: bandwidth[pair] * (cut or {}).get(pair, 1) for pair in pairs}
    test.record_pair_figures('median over 28 pair(s), p2pBandwidthLatencyTest',
                             {pair: {'latency': latency[pair], 'bandwidth': one_way[pair]}
                              for pair in pairs},
                             one_way={pair: value * 1e9 for pair, value in one_way.items()})
    units = {'latency': 'us', 'bandwidth': 'GB/s', 'link_efficiency': '%',
             'slowest_pair_link_efficiency': '%'}
    aggregate = {'slowest_pair_link_efficiency': min}
    name = 'DeviceBufferPairCheck %path=intra-node'
    stored = {
        'name': name, 'display_name': name, 'path': 'intra-node', 'system': 'cluster',
        'partition': 'gpu', 'environ': 'openmpi', 'result': 'pass', 'fixture': False,
        'job_nodelist': ['a100-node'], 'samples': test.samples,
        'aggregation': test.aggregation, 'device_figures': test.device_figures,
        'pair_links': test.pair_links,
        'perfvalues': {f'cluster:gpu:{variable}': [
            aggregate.get(variable, statistics.median)(values), 0, None, None,
            units[variable], 'pass'] for variable, values in test.samples.items()}}
    return json.loads(json.dumps({'runs': [{'testcases': [stored]}]}))


class CheckUnderTest(types.SimpleNamespace):
    """A GPU check (reframe-checks/babelstream.py, gpu_dgemm.py, ...) over a job's output
    `output` in `stagedir`, its sanity and samples its own methods, ReFrame's test left out."""
    record_samples = Samples.record_samples
    record_device_samples = Samples.record_device_samples
    record_aggregation = Samples.record_aggregation
    withhold_figure = Samples.withhold_figure
    _withhold = Samples._withhold

    def __init__(self, check, stagedir, output, **attrs):
        (stagedir / 'rfm_job.out').write_text(output)
        # A partition without a GPU topology unless the test gives one.
        attrs.setdefault('current_partition', described_partition())
        super().__init__(samples={}, aggregation={}, flagged={}, device_figures={},
                         unique_name='under test',
                         stagedir=str(stagedir), stdout='rfm_job.out', **attrs)
        self.perf_variables = dict.fromkeys(n for n, v in vars(check).items()
                                            if getattr(v, '_rfm_perf_fn', False)) or _Every()
        for name in ('rank_outputs', 'each_rank', 'power_of', 'median', 'percent', 'gpus',
                     'gpu_topology', 'record_gpu_samples'):
            if hasattr(check, name):
                setattr(self, name, types.MethodType(getattr(check, name), self))


class _Every:
    """Every variable, but those withheld."""
    def __init__(self):
        self.withheld = set()

    def __contains__(self, name):
        return name not in self.withheld

    def __delitem__(self, name):
        self.withheld.add(name)


# The GPU checks' jobs as they ran on the H200 node lent to this project, three of each
# (tests/fixtures/gpu/h200-jobs/README.md).
H200_JOBS = FIXTURES / 'gpu' / 'h200-jobs'
H200_JOB_SETTINGS = {
    'BabelStreamCheck': dict(num_tasks=1, elements=536870912, num_times=100,
                             datasheet_bandwidth=4800e9),
    'GpuDgemmCheck': dict(num_tasks=1, repeats=122, peak=67e12, sampled=True),
    'HostDeviceBandwidthCheck': dict(num_tasks=1, copy_bytes=1 << 30, repeats=10,
                                     link_bandwidth=64e9),
}


def h200_job(name):
    """The job's output as it ran on the H200 node (its quiet-node line, then rank 0)."""
    return (H200_JOBS / f'{name}.out').read_text()


def h200_gpu_session(tmp_path, check_name, scale=None):
    """A stored session of the check's three real jobs on the H200 node (one GPU, `vm:gpu0`),
    each through the check's own sanity function, stored as ReFrame stores a test case
    (through JSON). `scale`: {figure: factor} each job's figures are multiplied by (a
    fault)."""
    import json
    import statistics
    import reframe.utility.sanity as sn
    from hpcbench.benchmarks import reports
    check = check_classes_of({'BabelStreamCheck': 'babelstream.py',
                              'GpuDgemmCheck': 'gpu_dgemm.py',
                              'HostDeviceBandwidthCheck': 'host_device_bandwidth.py'}[
                                  check_name])[check_name]
    sanity = {'BabelStreamCheck': 'every_gpu_validates', 'GpuDgemmCheck': 'every_product_verified',
              'HostDeviceBandwidthCheck': 'every_copy_verified'}[check_name]
    units = reports.declared()[check_name].units
    cases = []
    for job in (1, 2, 3):
        stage = tmp_path / f'{check_name}-{job}'
        stage.mkdir(parents=True)
        if check_name == 'GpuDgemmCheck':
            (stage / 'power-rank-0.csv').write_text(
                (H200_JOBS / f'GpuDgemmCheck-{job}.power-rank-0.csv').read_text())
        test = CheckUnderTest(check, stage, h200_job(f'{check_name}-{job}'),
                              **H200_JOB_SETTINGS[check_name])
        assert sn.evaluate(getattr(check, sanity)(test))
        for figure, factor in (scale or {}).items():
            test.samples[figure] = [v * factor for v in test.samples[figure]]
            for figures in test.device_figures.values():
                figures[figure] *= factor
        cases.append({
            'name': check_name, 'display_name': check_name, 'system': 'h200',
            'partition': 'gpu', 'environ': 'openmpi', 'result': 'pass', 'fixture': False,
            'job_nodelist': ['vm'], 'samples': test.samples, 'aggregation': test.aggregation,
            'device_figures': test.device_figures,
            'perfvalues': {f'h200:gpu:{name}': [statistics.median(values), 0, None, None,
                                                 units[name], 'pass']
                           for name, values in test.samples.items() if values}})
    return json.loads(json.dumps({'runs': [{'testcases': [case]} for case in cases]}))

