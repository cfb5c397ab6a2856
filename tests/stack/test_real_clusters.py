"""Real clusters of other sites described (issue 61): the node records their Slurm
controllers printed (tests/fixtures/slurm/sites, each cited in its README), read as
`hpcbench new-system` reads them, described with a node's facts, written (what is written is
validated first) and read back as the site config every later command reads. None of them
stops the description: untyped and unknown GPU labels, nodes down, drained or never booted
(RealMemory=1), cloud vCPUs counted as sockets, records published without their
indentation."""
import contextlib
import io
import json
import re
import subprocess

import pytest

from conftest import BIN, FIXTURES, ROOT, run_reframe
from hpcbench.machine import described_system
from hpcbench.machine import gpus as gpus_module
from hpcbench.machine import node_facts
from hpcbench.core import accelerators, slurm_cluster
from hpcbench.rfm import described_site
from hpcbench.stack import new_system

SITES = FIXTURES / 'slurm' / 'sites'
TESTBED = FIXTURES / 'slurm' / 'testbed'
CONFIG = (TESTBED / 'scontrol-show-config.txt').read_text()
MPI_LIST = (TESTBED / 'srun-mpi-list.txt').read_text()


def _partitions_of(nodes):
    """`scontrol show partition -o` as the controller would print it for these node records
    (their Partitions=, in order): the sources printed their nodes only."""
    counts = {}
    for record in slurm_cluster.records(nodes, 'Node'):
        for name in slurm_cluster._names(record.get('Partitions')):
            counts[name] = counts.get(name, 0) + 1
    return ''.join(f'PartitionName={name} Default=NO State=UP TotalNodes={count}\n'
                   for name, count in counts.items())


def _node_facts(**over):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        node_facts.print_node_facts()
    line, = printed.getvalue().splitlines()
    return {**json.loads(line[len(node_facts.NODE_FACTS_MARK):]), **over}


def _described(site, root, facts=None):
    """(description as written and read back, asks, the site config) of fixture `site`."""
    nodes = (SITES / site / 'scontrol-show-node.txt').read_text()
    cluster = slurm_cluster.cluster_from(CONFIG, _partitions_of(nodes), nodes, MPI_LIST)
    facts = facts or {}
    description, asks = new_system.describe(
        site.replace('_', '-'), cluster,
        {p.name: facts.get(p.name) or _node_facts(gpus=[], gpus_seen=0)
         for p in cluster.partitions}, 'login1', ['openmpi', 'mpich'])
    written = new_system.write(site, description, asks, root)
    loaded = described_system.load(written[0])
    return loaded, asks, described_site.site_configuration(written[1])


@pytest.fixture
def root(tmp_path):
    (tmp_path / 'spack-envs' / 'testbed').mkdir(parents=True)
    (tmp_path / 'spack-envs' / 'testbed' / 'spack.yaml').write_text(
        (ROOT / 'spack-envs' / 'testbed' / 'spack.yaml').read_text())
    return tmp_path


def _entry(description, name):
    return next(p for p in description['partitions'] if p['name'] == name)


def _asked(asks, *parts):
    return [a for a in asks if all(part in a for part in parts)]


@pytest.mark.parametrize('site', sorted(p.name for p in SITES.iterdir() if p.is_dir()))
def test_every_real_record_describes_its_partitions(site, root):
    nodes = (SITES / site / 'scontrol-show-node.txt').read_text()
    described, _asks, config = _described(site, root)
    records = slurm_cluster.records(nodes, 'Node')
    names = list(dict.fromkeys(p for r in records for p in slurm_cluster._names(r['Partitions'])))
    assert [p['name'] for p in described['partitions']] == names
    assert [p['name'] for p in config['systems'][0]['partitions']] == names
    for entry in described['partitions']:
        members = [r for r in records if entry['name'] in slurm_cluster._names(r['Partitions'])]
        assert set(entry['node_states']) == {r['NodeName'] for r in members}
        assert entry['memory_bytes'] >= 1 << 30     # never Slurm's 1 MB placeholder


def test_nodes_down_drained_or_not_responding_are_named_and_not_expected(root):
    """Slurm 16.05, one line per node: a data mover down and drained and never booted
    (RealMemory=1), a high-memory partition whose nodes all stopped responding."""
    described, asks, _ = _described('slurm16-datamovers-highmem', root)
    copy = _entry(described, 'copy')
    assert copy['num_nodes'] == 1 and copy['memory_bytes'] == 96672 << 20
    assert copy['nodes_out_of_service'] == {
        'datamover2': 'DOWN*+DRAIN: down, not responding, drained (Not responding '
                      '[root@2017-06-29T08:00:07])'}
    highmem = _entry(described, 'highmem')
    assert highmem['num_nodes'] == 6 and len(highmem['nodes_out_of_service']) == 6
    assert highmem['nodes_out_of_service']['lm2'] == 'DOWN*: down, not responding (NHC:  ' \
        '[root@2017-08-07T11:01:52])'
    assert _asked(asks, 'partitions[highmem]: 6 of its 6 nodes cannot run now', 'none can')
    assert _asked(asks, 'partitions[copy]: 1 of its 2 nodes cannot run now',
                  'a run expects the other 1')
    assert _entry(described, 'batch')['num_nodes'] == 2
    assert 'nodes_out_of_service' not in _entry(described, 'batch')
    # Every vCPU a socket (Sockets=24 CoresPerSocket=1): asked, the node's processor used.
    assert _asked(asks, 'partitions[copy]: Slurm counts datamover1 as Sockets=24 x '
                        'CoresPerSocket=1 x ThreadsPerCore=1; the node')


def test_a_node_never_booted_is_sized_by_its_own_memory(root):
    """RealMemory=1 on nodes that run (a teaching cluster's, Slurm 20.11): the node's own
    memory, said; a node of sensible RealMemory keeps Slurm's."""
    facts = _node_facts(gpus=[], gpus_seen=0)
    described, asks, _ = _described('slurm20-tutorial-realmemory-1', root,
                                    {'batch': facts})
    batch = _entry(described, 'batch')
    assert batch['memory_bytes'] == facts['memory_bytes'] and batch['num_nodes'] == 2
    assert _asked(asks, 'partitions[batch].memory_bytes: Slurm says slurmmaster has '
                        'RealMemory=1 (MB)', 'described with the node\'s')


def test_a_cloud_node_powered_down_runs_and_its_vcpus_are_not_sockets(root):
    """AWS ParallelCluster (c5n.4xlarge, IDLE+CLOUD+POWERED_DOWN, Sockets=8 CoresPerSocket=1,
    RealMemory=1) and Azure CycleCloud (a dynamic node powered down, one not responding)."""
    described, asks, config = _described('aws-parallelcluster-c5n', root)
    queue = _entry(described, 'queue1')
    assert queue['num_nodes'] == 1 and 'nodes_out_of_service' not in queue
    assert _asked(asks, 'partitions[queue1]: 1 of its nodes are powered down',
                  'Slurm boots them for a job')
    assert _asked(asks, 'Slurm counts queue1-dy-compute-resource-1-10 as Sockets=8 x '
                        'CoresPerSocket=1 x ThreadsPerCore=1')
    # Laid out by the node's processor (ReFrame's detector on the node), not Slurm's sockets.
    processor = config['systems'][0]['partitions'][0]['processor']
    assert processor['num_sockets'] == _node_facts()['processor']['num_sockets']
    described, asks, _ = _described('slurm22-azure-cyclecloud', root)
    dynamic = _entry(described, 'dynamic')
    assert dynamic['num_nodes'] == 1 and list(dynamic['nodes_out_of_service']) == ['d1']
    assert dynamic['node_states']['s301-c7-dynamic-7'] == 'IDLE+DYNAMIC_NORM+POWERED_DOWN'


def test_an_untyped_gpu_gres_is_described_by_what_the_node_says(root, tmp_path):
    """`Gres=gpu:4` (Slurm 17.02) and `gpu:4(S:0-1)` (Slurm 20.02): no label, so no model
    from Slurm. Without the node's word the GPUs are described as of unknown model and not
    measured; with it (the H100 node's nvidia-smi, real) the model is the node's, and its
    count against Slurm's 4 is asked."""
    described, asks, config = _described('slurm17-gpu-untyped', root)
    gpu = _entry(described, 'gpu')
    assert gpu['gpus'] == [{'vendor': 'unknown', 'kind': 'gpu', 'model':
                            'GPU (GRES gpu, untyped)', 'arch': '', 'count': 4,
                            'memory_bytes': 0, 'power_limit_w': 0.0, 'max_sm_clock_hz': 0.0,
                            'driver_version': '', 'source': 'GRES gpu:4'}]
    assert _asked(asks, 'partitions[gpu].gpus: GPU (GRES gpu, untyped): no tool on')
    assert 'devices' not in config['systems'][0]['partitions'][0]
    said = accelerators.from_query_csv((FIXTURES / 'gpu' / 'h100' /
                                        'nvidia-smi-query.csv').read_text())
    facts = _node_facts(gpus_seen=len(said), gpus=[
        {f: getattr(g, f) for f in gpus_module.NODE_GPU_FIELDS} for g in said])
    described, asks, config = _described('slurm20-compute-gpu-untyped', root,
                                         {'compute': facts})
    compute = _entry(described, 'compute')
    assert [(g['model'], g['count'], g['source']) for g in compute['gpus']] == [
        ('NVIDIA H100 80GB HBM3', 1, f'nvidia-smi on {facts["hostname"]}')]
    assert _asked(asks, "partitions[compute]: Slurm's GRES gpu:4(S:0-1) gives a job 4 GPU(s), "
                        f'nvidia-smi on {facts["hostname"]} shows 1')
    partition = next(p for p in config['systems'][0]['partitions'] if p['name'] == 'compute')
    assert partition['devices'] == [{'type': 'gpu', 'arch': 'sm_90', 'num_devices': 1,
                                     'model': 'NVIDIA H100 80GB HBM3'}]
    assert partition['extras']['accelerators']['datasheet']['model'] == 'H100 SXM'



GPU_CHECKS = {'BabelStreamCheck', 'GpuDgemmCheck', 'HostDeviceBandwidthCheck', 'GpuNodeScreen'}


def test_a_node_of_two_gpu_models_and_nodes_of_two_shapes_are_described_and_listed(root):
    """The testbed as its controller printed it, its GPU nodes' GRES naming two models
    (`gpu:a100:1(S:0),gpu:h100:1(S:1)`) and one batch node smaller: written (the file every
    later command refused, or a traceback in every ReFrame command), then listed by ReFrame;
    the GPU checks are not listed on the partition of two models, the CPU checks are."""
    nodes = (TESTBED / 'scontrol-show-node.txt').read_text()
    nodes = nodes.replace('Gres=gpu:h200:2', 'Gres=gpu:a100:1(S:0),gpu:h100:1(S:1)')
    nodes = re.sub(r'(NodeName=n2 .*?)CPUTot=2 (.*?)RealMemory=8035 ',
                   r'\1CPUTot=1 \2RealMemory=4000 ', nodes)
    cluster = slurm_cluster.cluster_from(
        CONFIG, (TESTBED / 'scontrol-show-partition.txt').read_text(), nodes, MPI_LIST)
    facts = _node_facts(gpus=[], gpus_seen=0)
    description, asks = new_system.describe(
        'mixed', cluster, {p.name: facts for p in cluster.partitions}, 'login1',
        ['openmpi', 'mpich'])
    written = new_system.write('mixed', description, asks, root)
    described = described_system.load(written[0])
    batch, gpu = described['partitions']
    assert batch['nodes_of_another_shape'] == {'n1': 'CPUTot=2 (not 1), RealMemory=8035 (not '
                                               '4000)', 'n3': 'CPUTot=2 (not 1), RealMemory='
                                               '8035 (not 4000)'}
    assert [(g['model'], g['count']) for g in gpu['gpus']] == [
        ('NVIDIA A100-SXM4-80GB', 1), ('NVIDIA H100 80GB HBM3', 1)]
    assert gpu['gpus_mixed'].startswith('one node has 1 x NVIDIA A100-SXM4-80GB, 1 x NVIDIA '
                                        'H100 80GB HBM3')
    assert _asked(asks, 'partitions[gpu].gpus_mixed: ', 'describe each model as a partition')
    for partition in ('mixed:batch', 'mixed:gpu'):
        shown = run_reframe('--system', partition, '-l', config=str(written[1]),
                            env={'HPCBENCH_VAR': str(root / 'var')})
        assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
        listed = set(re.findall(r'^- (\w+)', shown.stdout, re.M))
        assert 'HpccCheck' in listed and not listed & GPU_CHECKS, partition


@pytest.mark.machine_dependent
@pytest.mark.parametrize('site', sorted(p.name for p in SITES.iterdir() if p.is_dir()))
def test_a_dry_run_of_every_real_cluster_writes_its_jobs(site, root):
    """`make dry-run SYSTEM=...` of each described cluster (this host's facts as its nodes'):
    STREAM's jobs written for every partition whose nodes can run, without a failure."""
    described, _, _ = _described(site, root)
    done = run_reframe('--system', site, '-n', 'StreamCheck', '--dry-run',
                       config=str(root / 'site-configs' / f'{site}.py'),
                       env={'HPCBENCH_VAR': str(root / 'var')})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert 'FAILED' not in done.stdout
    # (A dry run writes the jobs of Spack's builds whether or not a Spack is here.)
    written = {p.parent.parent.parent.name for p in (root / 'var' / 'stage').glob(
        '*/*/*/*/rfm_job.sh')}
    assert written == {p['name'] for p in described['partitions']}


@pytest.mark.machine_dependent
def test_a_dry_run_of_a_cloud_cluster_lays_out_one_rank_per_real_socket(root):
    """The ParallelCluster node Slurm counts as 8 one-core sockets, described with this
    host's facts as its node: a dry run writes its jobs without failure, and HPL's per-socket
    layout runs one rank per socket the node has, not Slurm's 8."""
    _described('aws-parallelcluster-c5n', root)
    facts = _node_facts()
    done = run_reframe('--system', 'aws-parallelcluster-c5n', '-n',
                       'StreamCheck|HplCheck%layout_name=per-socket', '--dry-run',
                       config=str(root / 'site-configs' / 'aws-parallelcluster-c5n.py'),
                       env={'HPCBENCH_VAR': str(root / 'var')})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert 'FAILED' not in done.stdout and 'ERROR' not in done.stdout
    jobs = {p.parent.name: p.read_text() for p in (root / 'var' / 'stage').glob(
        '*/*/*/*/rfm_job.sh')}
    assert jobs and all('#SBATCH --partition=queue1\n' in job for job in jobs.values())
    hpl = [job for name, job in jobs.items() if name.startswith('HplCheck')]
    # (HPL is built by Spack; a dry run writes its job whether or not a Spack is here.)
    assert hpl
    for job in hpl:
        assert f'#SBATCH --ntasks-per-node={facts["processor"]["num_sockets"]}\n' in job


def test_a_kubernetes_worker_s_gres_and_vcpus_are_described_and_asked_about(root):
    """A Slurm-on-Kubernetes worker: an RTX 2080 Ti under its GRES label
    `nvidia_geforce_rtx_2080_ti`, which no project datasheet names (a GPU of unknown model
    until the node's tool names it, or a site's datasheet gives the label), and its 10
    vCPUs as 10 sockets."""
    described, asks, config = _described('slurm24-k8s-rtx2080ti', root)
    main = _entry(described, 'main')
    assert [(g['model'], g['count']) for g in main['gpus']] == [
        ('GPU (GRES gpu:nvidia_geforce_rtx_2080_ti)', 1)]
    assert _asked(asks, 'Slurm counts worker-0 as Sockets=10 x CoresPerSocket=1')
    assert 'devices' not in config['systems'][0]['partitions'][0]
    described, _, _ = _described('slurm24-uci-hpc3-v100', root)
    # `V100` is any of four V100 boards: the label alone names none.
    assert _entry(described, 'gpu')['gpus'][0]['model'] == 'GPU (GRES gpu:V100)'


@pytest.mark.parametrize('site', ['slurm16-datamovers-highmem', 'aws-parallelcluster-c5n',
                                  'slurm24-k8s-rtx2080ti'])
def test_new_system_describes_a_real_cluster_through_its_controller(site, root, tmp_path):
    """`hpcbench new-system` as a site runs it, its scontrol a stand-in printing the site's
    real node records (and partitions from them), its srun job this host's facts: it writes
    the system and names what it asks."""
    from test_new_system import _controller
    nodes = (SITES / site / 'scontrol-show-node.txt').read_text()
    env = _controller(tmp_path, nodes, _partitions_of(nodes))
    done = subprocess.run([str(BIN / 'hpcbench'), 'new-system', 'realcluster'],
                          capture_output=True, text=True, timeout=120,
                          env={**env, 'HPCBENCH_PROJECT': str(root),
                               'HPCBENCH_VAR': str(root / 'var')})
    assert done.returncode == 0, done.stdout + done.stderr
    described = described_system.load(root / 'site-configs' / 'realcluster.yaml')
    records = slurm_cluster.records(nodes, 'Node')
    assert {p['name'] for p in described['partitions']} == {
        p for r in records for p in slurm_cluster._names(r['Partitions'])}
    assert 'io_directory: a directory on the parallel file system' in done.stdout


def test_a_site_s_datasheets_describe_its_gpus_and_a_wrong_one_stops_it_in_one_message(
        root, monkeypatch):
    """A site gives its GRES label a model in its own datasheets (beside its description):
    its partition's GPUs are that model, measured with its figures; a figure in a wrong unit
    there stops the site config with one message naming the file, the entry and the field."""
    import yaml
    from hpcbench.core import paths
    monkeypatch.setattr(paths, 'SITE_CONFIGS_DIR', root / 'site-configs')
    own = root / 'site-configs' / 'slurm24-k8s-rtx2080ti.datasheets.yaml'
    own.parent.mkdir(parents=True)
    entry = {'model': 'GeForce RTX 2080 Ti', 'vendor': 'nvidia',
             'names': ['NVIDIA GeForce RTX 2080 Ti'], 'examples': ['NVIDIA GeForce RTX 2080 Ti'],
             'gres_labels': ['geforcertx2080ti'], 'arch': 'sm_75', 'memory': '11 GB',
             'fp64': 'not published', 'fp64_matrix': 'not published',
             'memory_bandwidth': '616 GB/s', 'host_link': 'PCIe 3.0 x16',
             'host_link_bandwidth': '16 GB/s', 'power': '250 W', 'source': 'NVIDIA, 2018'}
    own.write_text(yaml.safe_dump({'datasheets': [entry]}))
    described, _, config = _described('slurm24-k8s-rtx2080ti', root)
    assert [(g['model'], g['arch']) for g in _entry(described, 'main')['gpus']] == [
        ('NVIDIA GeForce RTX 2080 Ti', 'sm_75')]
    partition = config['systems'][0]['partitions'][0]
    assert partition['devices'][0]['model'] == 'NVIDIA GeForce RTX 2080 Ti'
    assert partition['extras']['accelerators']['datasheet']['memory_bandwidth'] == 616e9
    own.write_text(yaml.safe_dump({'datasheets': [{**entry, 'memory_bandwidth': '616 GHz'}]}))
    with pytest.raises(SystemExit, match=r"^error: .*slurm24-k8s-rtx2080ti\.datasheets\.yaml: "
                                         r"datasheets\[GeForce RTX 2080 Ti\]\.memory_bandwidth: "
                                         r"'616 GHz' is not a figure in MB/s, GB/s, TB/s"):
        described_site.site_configuration(root / 'site-configs' / 'slurm24-k8s-rtx2080ti.py')


def test_an_h100_node_s_label_names_its_model_and_its_datasheet(root):
    """`Gres=gpu:H100:8(S:0-1)` of a centre's node (Slurm 23.11): the label `H100` names
    the H100 SXM of the datasheets; its GPUs, though no tool on the node spoke (its facts
    here are this host's), are that model, and the partition carries its datasheet."""
    described, asks, config = _described('slurm23-h100-corespec', root)
    dev = _entry(described, 'dev')
    assert [(g['model'], g['count'], g['source']) for g in dev['gpus']] == [
        ('NVIDIA H100 80GB HBM3', 8, 'GRES gpu:H100:8(S:0-1)')]
    assert _asked(asks, 'partitions[dev].gpus_stand_in: its GRES declares 8 GPU(s)')
    partition = config['systems'][0]['partitions'][0]
    assert partition['extras']['accelerators']['datasheet']['model'] == 'H100 SXM'
