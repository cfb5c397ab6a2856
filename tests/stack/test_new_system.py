"""A site's own Slurm cluster described for the suite (hpcbench.stack.new_system) and
read back as a site config (hpcbench.rfm.described_site): here from the testbed's real
controller outputs (tests/fixtures/slurm/testbed) and this host's facts as a compute node
prints them; tests/devtools/test_testbed.py describes a running testbed through Slurm."""
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import time

import pytest
import yaml

from conftest import BIN, FIXTURES, ROOT, run_reframe, slurm_conf_nodes
from hpcbench.stack import described_stacks
from hpcbench.machine import described_system
from hpcbench.machine import node_facts
from hpcbench.core import slurm_cluster
from hpcbench.results import references_text
from hpcbench.rfm import described_site
from hpcbench.stack import mpi_stacks, new_system

TESTBED = FIXTURES / 'slurm' / 'testbed'


def _cluster(own_hosts=False):
    """The testbed as its controller printed it; `own_hosts`: each node a machine of its own
    (NodeHostName its name), as on a cluster."""
    config, partitions, nodes, mpi = ((TESTBED / name).read_text() for name in (
        'scontrol-show-config.txt', 'scontrol-show-partition.txt', 'scontrol-show-node.txt',
        'srun-mpi-list.txt'))
    if own_hosts:
        nodes = re.sub(r'NodeName=(\w+) (.*?)NodeHostName=vm ', r'NodeName=\1 \2NodeHostName=\1 ',
                       nodes)
    return slurm_cluster.cluster_from(config, partitions, nodes, mpi)


def _this_node_s_facts():
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        node_facts.print_node_facts()
    line, = printed.getvalue().splitlines()
    return json.loads(line[len(node_facts.NODE_FACTS_MARK):])


@pytest.fixture
def root(tmp_path):
    """A project root of the test's own, with the testbed's environment the new one's
    specs come from."""
    (tmp_path / 'spack-envs' / 'testbed').mkdir(parents=True)
    shutil.copy(ROOT / 'spack-envs' / 'testbed' / 'spack.yaml',
                tmp_path / 'spack-envs' / 'testbed')
    return tmp_path


def _describe(root, name='mycluster', gpus_seen=None, force=False, own_hosts=False,
              **options):
    cluster = _cluster(own_hosts)
    facts = _this_node_s_facts()
    if gpus_seen is not None:
        facts['gpus_seen'] = gpus_seen
    description, asks = new_system.describe(
        name, cluster, {p.name: facts for p in cluster.partitions}, 'login1',
        ['openmpi', 'mpich'], **options)
    return new_system.write(name, description, asks, root, force), asks, facts


def test_the_description_is_what_slurm_says_and_asks_what_it_cannot_know(root):
    written, asks, facts = _describe(root, access=['--account=hpc'])
    assert [p.relative_to(root).as_posix() for p in written] == [
        'site-configs/mycluster.yaml', 'site-configs/mycluster.py',
        'spack-envs/mycluster/spack.yaml', 'references/mycluster.yaml']
    text = written[0].read_text()
    assert text.startswith(described_system.HEADER + ' mycluster` on ')
    described = yaml.safe_load(text)
    declared = slurm_conf_nodes((TESTBED / 'slurm.conf').read_text())
    assert (described['scheduler'], described['launcher'], described['access']) == (
        'slurm', 'srun', ['--account=hpc'])
    for entry, nodes in zip(described['partitions'], (['n1', 'n2', 'n3'], ['g1', 'g2'])):
        cpus, sockets, cores, threads, memory_mb, gres = declared[nodes[0]]
        assert (entry['num_nodes'], entry['memory_bytes'], entry['gres']) == (
            len(nodes), memory_mb << 20, gres)
        assert entry['processor'] == facts['processor'] and entry['io_directory'] is None
        # The emulated nodes share one host: one job at a time.
        assert entry['max_jobs'] == 1
    # Asked, and at the head of the file: the IO directory, the clock where it is not the
    # cores' nominal one.
    assert [a.split(':')[0] for a in asks if 'io_directory' in a] == [
        'partitions[batch].io_directory', 'partitions[gpu].io_directory']
    nominal = facts['clock_source'].startswith(new_system.NOMINAL_CLOCK_SOURCES)
    assert any('clock_hz' in a for a in asks) is not nominal
    assert '#   - partitions[batch].io_directory: a directory on the parallel' in text
    references = yaml.safe_load(written[3].read_text())
    assert (references['system'], references['figures']) == ('mycluster', [])
    # In the one form of every references file (issue 39): `make baseline` rewrites it
    # without a diff of its own.
    assert references_text.to_text(references) == written[3].read_text()
    testbed_env = (root / 'spack-envs' / 'testbed' / 'spack.yaml').read_text()
    assert written[2].read_text().split('spack:', 1)[1] == testbed_env.split('spack:', 1)[1]


@pytest.mark.machine_dependent
def test_the_site_config_reads_the_description_back(root):
    written, _, _ = _describe(root, io_directory='/scratch/hpcbench')
    config = described_site.site_configuration(written[1])
    system, = config['systems']
    batch, gpu = system['partitions']
    assert batch['access'] == ['--partition=batch'] and gpu['access'] == ['--partition=gpu']
    assert batch['extras']['io_directory'] == '/scratch/hpcbench'
    assert 'devices' not in batch
    assert gpu['devices'] == [{'type': 'gpu', 'arch': 'sm_90', 'model': 'NVIDIA H200',
                               'num_devices': 2}]
    assert gpu['resources'] == [{'name': 'gpu', 'options': ['--gres=gpu:{num_gpus_per_node}']}]
    assert {'gpu', 'cuda'} <= set(gpu['features'])
    # This node's nvidia-smi shows no GPU: the GRES's GPUs are stand-ins, which a run skips.
    assert gpu['extras']['accelerators']['stand_in'] == (
        'its GRES declares 2 GPU(s) but nvidia-smi on ' + _this_node_s_facts()['hostname'] +
        ' shows none')
    # srun on nodes that share one host: each stack's run-time variables for it.
    openmpi, mpich = config['environments'][:2]
    assert (openmpi['name'], mpich['name']) == ('openmpi', 'mpich')
    assert ['OMPI_MCA_btl', 'self,tcp'] in openmpi['env_vars']
    assert ['SLURM_MPI_TYPE', 'pmi2'] in mpich['env_vars']


@pytest.mark.machine_dependent
def test_gpus_that_answer_on_the_node_are_no_stand_ins(root):
    written, asks, _ = _describe(root, gpus_seen=2)
    assert not [a for a in asks if 'gpus_stand_in' in a]
    gpu = described_site.site_configuration(written[1])['systems'][0]['partitions'][1]
    assert 'stand_in' not in gpu['extras']['accelerators']


@pytest.mark.machine_dependent
def test_the_gpu_topology_a_node_printed_is_kept_only_for_the_gpus_it_links(root):
    """A GPU node's facts with its `nvidia-smi topo -m` (the H200 node's, one GPU) against
    the recorded controller's GRES of two GPUs: the topology is left out and said (it was
    written as said, and every later command refused the file); the description corrected
    to the node it is (eight H100s linked as the published 8-GPU node's) gives the partition
    its topology, and one whose topology is not of its GPUs is refused in one message."""
    from hpcbench.core import gpu_topology
    from hpcbench.stack import testbed_system
    one = gpu_topology.parse((FIXTURES / 'gpu' / 'topology' / 'h200-one-gpu.txt').read_text())
    cluster = _cluster(False)
    cpu_node = _this_node_s_facts()
    gpu_node = {**cpu_node, 'gpus_seen': 1, 'gpu_topology': one.to_description()}
    description, asks = new_system.describe(
        'mycluster', cluster, {p.name: gpu_node if p.name == 'gpu' else cpu_node
                               for p in cluster.partitions}, 'login1', ['openmpi', 'mpich'])
    written = new_system.write('mycluster', description, asks, root)
    gpu = described_system.load(written[0])['partitions'][1]
    assert 'gpu_topology' not in gpu and gpu['gpus'][0]['count'] == 2
    assert any(a.startswith('partitions[gpu].gpu_topology: nvidia-smi topo -m on ') and
               'links 1 GPU(s), the partition is described with 2: left out' in a for a in asks)
    corrected = yaml.safe_load(written[0].read_text())
    corrected['partitions'][1]['gpus'][0].update(model='NVIDIA H100 80GB HBM3', count=8)
    corrected['partitions'][1]['gpu_topology'] = one.to_description()
    written[0].write_text(yaml.safe_dump(corrected))
    with pytest.raises(described_system.DescriptionError,
                       match=r'partitions\[gpu\]\.gpu_topology: 1 GPUs, its GPUs '
                             r'\(gpu:h200:2\) are 8'):
        described_system.load(written[0])
    corrected['partitions'][1]['gpu_topology'] = testbed_system.gpu_topology().to_description()
    written[0].write_text(yaml.safe_dump(corrected))
    partition = described_site.site_configuration(written[1])['systems'][0]['partitions'][1]
    assert partition['extras']['accelerators']['topology']['gpus'][4] == {
        'index': 4, 'cpus': '52-103', 'numa': 1}
    assert partition['devices'][0]['model'] == 'NVIDIA H100 80GB HBM3'


@pytest.mark.machine_dependent
def test_a_dry_run_of_the_described_system_writes_its_jobs(root, tmp_path):
    written, _, _ = _describe(root, io_directory=str(tmp_path))
    done = run_reframe('--system', 'mycluster', '-n', 'StreamCheck|GpuDgemmCheck',
                       '--dry-run', config=str(written[1]),
                       env={'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    jobs = {p.parent.parent.parent.name + '/' + p.parent.name: p.read_text()
            for p in (tmp_path / 'var' / 'stage').glob('*/*/*/*/rfm_job.sh')}
    stream = [job for where, job in jobs.items() if where.startswith('batch/Stream')]
    assert stream and all('#SBATCH --partition=batch\n' in job for job in stream)
    dgemm, = [job for where, job in jobs.items() if where == 'gpu/GpuDgemmCheck']
    assert '#SBATCH --partition=gpu\n#SBATCH --gres=gpu:2\n' in dgemm
    assert '\nsrun ./gpu-rank.sh ' in dgemm


def test_a_name_that_exists_is_refused_and_only_ours_is_described_again(root):
    _describe(root)
    with pytest.raises(new_system.NewSystemError,
                       match=r"a system 'mycluster' exists \(site-configs/mycluster.yaml, .*"
                             r"or --force to describe it again"):
        new_system.check_name('mycluster', root)
    new_system.check_name('mycluster', root, force=True)
    (root / 'site-configs' / 'chic.py').write_text('"""A paper\'s system."""\n')
    with pytest.raises(new_system.NewSystemError,
                       match='not written by `hpcbench new-system`, so --force does not'):
        new_system.check_name('chic', root, force=True)
    with pytest.raises(new_system.NewSystemError, match="'My Cluster' is not a system"):
        new_system.check_name('My Cluster', root)


def test_a_failed_write_leaves_nothing(root):
    (root / 'references').write_text('a file where the directory goes')
    with pytest.raises(new_system.NewSystemError, match='cannot write .*references'):
        _describe(root)
    assert list((root / 'site-configs').iterdir()) == []
    assert list((root / 'spack-envs' / 'mycluster').iterdir()) == []


@pytest.mark.parametrize('change, said', [
    (lambda d: d['partitions'][0].pop('memory_bytes'),
     r": partitions\[batch\]: 'memory_bytes' is a required property"),
    (lambda d: d['partitions'][1].update(num_nodes='two'),
     r": partitions\[gpu\].num_nodes: 'two' is not of type 'integer'"),
    (lambda d: d['partitions'][1].update(memory_gb=4),
     r": partitions\[gpu\]: no such field memory_gb \(the fields: name, "),
    (lambda d: d['partitions'][1].update(gres='gpu:mi300:80'),
     r"partitions\[gpu\].gres: GRES 'gpu:mi300:80': 80 GPUs are not what a node has"),
    (lambda d: d['partitions'][1]['gpus'][0].update(count=0),
     r"partitions\[gpu\].gpus\[0\].count: 0 is less than the minimum of 1"),
    (lambda d: d.pop('launcher'), ": 'launcher' is a required property"),
    (lambda d: d.update(mpi_stacks=['openmpi', 'cray-mpich']),
     'mpi_stacks: cray-mpich not found on this node'),
])
def test_a_wrong_description_is_one_message_naming_its_file_and_field(root, change, said):
    written, _, _ = _describe(root)
    described = yaml.safe_load(written[0].read_text())
    change(described)
    written[0].write_text(yaml.safe_dump(described))
    # One line, as ReFrame shows it (the site config exits with it).
    with pytest.raises(SystemExit, match=f'^error: .*mycluster.yaml.*{said}'):
        described_site.site_configuration(written[1])


def test_the_machine_builds_the_described_system_s_stack_for_its_nodes(root, monkeypatch):
    """hpcbench setup --system NAME: a described cluster is a system of this machine, built
    with the MPI stacks its description names, STREAM for each partition's node, and the
    GPU programs of its partitions whose GPUs answer."""
    from hpcbench.core import paths
    from hpcbench.stack import machine_systems
    _describe(root, gpus_seen=2)
    monkeypatch.setattr(paths, 'SITE_CONFIGS_DIR', root / 'site-configs')
    assert machine_systems.machine_systems() == ('local', 'testbed', 'mycluster')
    assert [s.name for s in machine_systems.machine_stacks('mycluster')] == ['openmpi', 'mpich']
    batch, gpu = machine_systems.machine_nodes('mycluster')
    assert batch.memory_bytes == gpu.memory_bytes == 8035 << 20
    assert [(g.model, g.arch) for g in machine_systems.described_gpus('mycluster')] == [
        ('NVIDIA H200', 'sm_90')] * 2
    _describe(root, gpus_seen=0, force=True)
    assert machine_systems.described_gpus('mycluster') == []


@pytest.mark.machine_dependent
def test_nodes_of_their_own_hosts_run_jobs_side_by_side_with_the_quiet_node_check(
        root, monkeypatch):
    """On a cluster (each node its own machine) ReFrame submits many jobs at once and each
    checks its node is quiet; the testbed's nodes, one host, run one at a time unchecked."""
    from hpcbench.core import paths
    from hpcbench.rfm import run_modes
    monkeypatch.setattr(paths, 'SITE_CONFIGS_DIR', root / 'site-configs')
    written, _, _ = _describe(root, own_hosts=True)
    described = yaml.safe_load(written[0].read_text())
    assert described['nodes_share_hosts'] is False
    for entry in described['partitions']:
        assert entry['max_jobs'] == 100 and 'quiet_node' not in entry
    assert run_modes.execution_options('mycluster') == []
    shared, _, _ = _describe(root, force=True)
    described = yaml.safe_load(shared[0].read_text())
    for entry in described['partitions']:
        assert entry['max_jobs'] == 1 and entry['quiet_node'] == {'action': 'off'}
    # Nor do two partitions' jobs run at once: a run starts one job at a time.
    assert described['nodes_share_hosts'] is True
    assert run_modes.execution_options('mycluster') == ['--exec-policy=serial']
    config = described_site.site_configuration(shared[1])
    assert config['systems'][0]['partitions'][0]['extras']['quiet_node'] == {'action': 'off'}


def _installed(prefix, tool, printed):
    """An MPI installed in a prefix of its own, as a cluster's module has it: bin/mpicc, and
    bin/`tool` printing what this machine's own printed (tests/fixtures/mpi/`printed`)."""
    (prefix / 'bin').mkdir(parents=True)
    for name, text in (('mpicc', ''), (tool, (FIXTURES / 'mpi' / printed).read_text())):
        program = prefix / 'bin' / name
        program.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
        program.chmod(0o755)
    return prefix


def test_an_mpi_named_with_its_prefix_replaces_the_login_node_s_own(root, tmp_path):
    """--mpi PREFIX: the cluster's own install of an MPI (a module's prefix) instead of the
    login node's of that MPI, in its place; described in mpi_prefixes and read back, its
    wrappers first on PATH in its environment."""
    openmpi = _installed(tmp_path / 'openmpi-4.1.4', 'ompi_info', 'ompi_info-version.txt')
    mpich = _installed(tmp_path / 'mpich-4.0.2', 'mpichversion', 'mpichversion.txt')
    stacks, named, asks = described_stacks.login_node_stacks([str(openmpi)])
    own = [s.name for s in mpi_stacks.local_stacks() if s.available()]
    assert [s.name for s in stacks] == own and named == {'openmpi': openmpi} and not asks
    assert type(stacks[0]) is mpi_stacks.InstalledMpi and stacks[0].prefix == openmpi
    # Spack describes MPICH itself; spack-packages' detection of Open MPI fails on any
    # install, so it is given by its version, as Debian's is.
    assert stacks[0].spack_external() == {'spec': 'openmpi@4.1.4', 'prefix': str(openmpi)}
    assert not stacks[0].spack_detects
    named_mpich = mpi_stacks.installed_mpi(mpich)
    assert (named_mpich.name, named_mpich.version(), named_mpich.spack_detects) == (
        'mpich', '4.0.2', True)

    written, _, _ = _describe(root, mpi_prefixes=named)
    described = yaml.safe_load(written[0].read_text())
    assert described['mpi_prefixes'] == {'openmpi': str(openmpi)}
    assert described_stacks.stacks_of(described, written[0])[0].prefix == openmpi
    environment = described_site.site_configuration(written[1])['environments'][0]
    assert environment['name'] == 'openmpi'
    assert ['PATH', f'{openmpi}/bin:$PATH'] in environment['env_vars']


def test_a_login_node_without_the_suite_s_mpis_asks_for_the_cluster_s(tmp_path, monkeypatch):
    """Not Debian, or not root: Debian's MPIs are neither there nor installable; the
    description keeps those it has (Intel MPI from PyPI) and the named ones, and asks."""
    monkeypatch.setattr(mpi_stacks.DebianMpi, 'available', lambda self: False)
    mpich = _installed(tmp_path / 'mpich', 'mpichversion', 'mpichversion.txt')
    stacks, _, asks = described_stacks.login_node_stacks([str(mpich)])
    assert [s.name for s in stacks][:2] == ['mpich', 'intelmpi']
    assert asks == ['mpi_stacks: no openmpi on this login node; name the cluster\'s own '
                    'installs with --mpi PREFIX (repeatable: the prefix whose bin/ holds its '
                    'mpicc; Open MPI, MPICH, MVAPICH2)']


def test_a_prefix_that_is_no_mpi_or_two_of_one_are_one_message_each(root, tmp_path):
    (tmp_path / 'empty').mkdir()
    openmpi = _installed(tmp_path / 'openmpi', 'ompi_info', 'ompi_info-version.txt')
    other = _installed(tmp_path / 'openmpi-5', 'ompi_info', 'ompi_info-version.txt')
    unknown = _installed(tmp_path / 'unknown', 'impi_info', 'ompi_info-version.txt')
    for prefixes, said in (
            ([tmp_path / 'empty'], r'--mpi .*/empty: no MPI installed there \(no bin/mpicc\)'),
            ([unknown], r'--mpi .*/unknown: its bin/mpicc is no MPI this suite knows: neither '
                        r'bin/ompi_info \(Open MPI\) nor bin/mpichversion'),
            ([openmpi, other], r'--mpi .*/openmpi and --mpi .*/openmpi-5 are both openmpi: '
                               'a system builds each benchmark once per MPI package')):
        with pytest.raises(new_system.NewSystemError, match=said):
            new_system.from_slurm('mycluster', root, mpi_prefixes=prefixes)
    assert not (root / 'site-configs').exists()

    # In the description: a prefix gone, or one that holds another MPI than its name.
    written, _, _ = _describe(root, mpi_prefixes={'openmpi': openmpi})
    described = yaml.safe_load(written[0].read_text())
    for prefixes, said in (({'openmpi': str(tmp_path / 'gone')}, 'mpi_prefixes.openmpi: .*/gone:'
                            ' no MPI installed there'),
                           ({'mpich': str(openmpi)}, 'mpi_prefixes.mpich: .*/openmpi holds '
                                                     'openmpi, not mpich')):
        written[0].write_text(yaml.safe_dump({**described, 'mpi_prefixes': prefixes}))
        with pytest.raises(SystemExit, match=f'^error: .*mycluster.yaml: {said}'):
            described_site.site_configuration(written[1])


def test_a_prefix_of_shell_syntax_is_refused_and_never_run(root, tmp_path):
    """Issue 51, item 3: an --mpi prefix with `$(...)` was written into the description,
    and a dry run ran the command (ReFrame expands an environment's variables by running
    what they hold); so was a cache's path."""
    hostile = tmp_path / 'mpi$(touch ran)`touch ran2`'
    openmpi = _installed(hostile, 'ompi_info', 'ompi_info-version.txt')
    with pytest.raises(new_system.NewSystemError,
                       match=r"^--mpi an MPI install prefix '.*/mpi\$\(touch ran\)`touch "
                             r"ran2`': a path that reaches job scripts, Spack and make has "
                             r'letters, digits and _ \. / - \+ @ : ~ = only'):
        new_system.from_slurm('mycluster', root, mpi_prefixes=[openmpi])
    assert not (root / 'site-configs').exists()
    # Written by hand into a description: the site config refuses it in one line.
    written, _, _ = _describe(root)
    described = yaml.safe_load(written[0].read_text())
    written[0].write_text(yaml.safe_dump({**described, 'mpi_prefixes': {'openmpi': str(
        openmpi)}}))
    done = run_reframe('--system', 'mycluster', '--dry-run', config=str(written[1]),
                       env={'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode != 0
    assert re.search(r"^error: .*mycluster\.yaml: mpi_prefixes\.openmpi: an MPI install "
                     r"prefix '.*': a path that reaches job scripts", done.stdout + done.stderr,
                     re.M), done.stderr
    assert 'Traceback' not in done.stdout + done.stderr
    assert not list(tmp_path.rglob('ran*')) and not list(ROOT.glob('ran*'))
    assert not (tmp_path / 'var' / 'stage').exists()


@pytest.mark.parametrize('variable', ['HPCBENCH_CACHE', 'HPCBENCH_MIRROR',
                                      'HPCBENCH_BUILDCACHE'])
def test_a_cache_of_shell_syntax_is_refused_before_anything_runs(tmp_path, variable):
    hostile = tmp_path / 'cache$(touch ran)`touch ran2`;touch ran3'
    hostile.mkdir()
    done = run_reframe('--dry-run', '-n', 'HpccCheck', env={
        variable: str(hostile), 'HPCBENCH_VAR': str(tmp_path / 'var')})
    said = (done.stdout + done.stderr).strip()
    assert done.returncode == 1 and 'Traceback' not in said
    assert said.startswith(f"error: {variable} '{hostile}': a path that reaches job scripts"), said
    assert not list(tmp_path.rglob('ran*')) and not list(ROOT.glob('ran*'))
    assert not (tmp_path / 'var' / 'stage').exists()
    if variable == 'HPCBENCH_CACHE':
        setup = subprocess.run([str(BIN / 'hpcbench'), 'setup', '--registry-only'],
                               capture_output=True, text=True,
                               env={**os.environ, variable: str(hostile)})
        assert setup.returncode == 2 and setup.stderr.startswith(f"error: {variable} '")
        assert 'Traceback' not in setup.stderr


def test_a_node_without_slurm_is_one_message_and_nothing_is_written(root, tmp_path):
    with pytest.raises(new_system.NewSystemError,
                       match=r'^`scontrol` is not on PATH: run this on a login node of the '
                             r'Slurm cluster to describe \(Slurm is the scheduler it reads'):
        new_system.from_slurm('mycluster', root, env={'PATH': str(tmp_path / 'bin')})
    assert not (root / 'site-configs').exists()


# --- What a cluster's own tools can print (issue 51, items 6, 14, 15) -----------------------

def _controller(tmp_path, nodes=None, partitions=None, facts=None):
    """Stand-ins for scontrol and srun on PATH that print what the testbed's controller
    printed (tests/fixtures/slurm/testbed), with `nodes`, `partitions` or the node facts
    line (`facts`) in their place; srun's job prints this node's facts."""
    fakes = tmp_path / 'fake-slurm'
    fakes.mkdir()
    texts = {name: (TESTBED / f'{name}.txt').read_text() for name in (
        'scontrol-show-config', 'scontrol-show-partition', 'scontrol-show-node',
        'srun-mpi-list')}
    texts['scontrol-show-node'] = nodes or texts['scontrol-show-node']
    texts['scontrol-show-partition'] = partitions or texts['scontrol-show-partition']
    if facts is None:
        facts = node_facts.NODE_FACTS_MARK + json.dumps(_this_node_s_facts())
    texts['facts'] = facts + '\n'
    for name, text in texts.items():
        (fakes / name).write_bytes(text.encode(errors='surrogateescape'))
    (fakes / 'scontrol').write_text(
        f'#!/bin/sh\ncase "$2" in config) cat {fakes}/scontrol-show-config;; '
        f'partition) cat {fakes}/scontrol-show-partition;; node) cat {fakes}/scontrol-show-node;;'
        ' esac\n')
    (fakes / 'srun').write_text(
        f'#!/bin/sh\ncase "$1" in --mpi=list) cat {fakes}/srun-mpi-list;; *) cat {fakes}/facts;;'
        ' esac\n')
    for tool in ('scontrol', 'srun'):
        (fakes / tool).chmod(0o755)
    return {**os.environ, 'PATH': f'{fakes}:{os.environ["PATH"]}'}


def _new_system(root, env, *options):
    return subprocess.run([str(BIN / 'hpcbench'), 'new-system', *options, 'mycluster'],
                          capture_output=True, text=True, timeout=120,
                          env={**env, 'HPCBENCH_PROJECT': str(root),
                               'HPCBENCH_VAR': str(root / 'var')})


NODES = (TESTBED / 'scontrol-show-node.txt').read_text()
PARTITIONS = (TESTBED / 'scontrol-show-partition.txt').read_text()


@pytest.mark.parametrize('nodes, partitions, said', [
    # A GRES of 10^7 GPUs took 44 s and 2.4 GB, one of 10^11 grew past 12 GB.
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:10000000'), None,
     "GRES 'gpu:h200:10000000': 10000000 GPUs are not what a node has (from 1 to 64)"),
    (NODES.replace('Gres=gpu:h200:2', 'Gres=gpu:h200:99999999999'), None,
     "GRES 'gpu:h200:99999999999': 99999999999 GPUs are not what a node has"),
    (NODES.replace('CPUTot=2', 'CPUTot=0'), None,
     'node g1: CPUTot=0 is no count a node has (from 1 to 65536)'),
    (NODES.replace('RealMemory=8035', 'RealMemory=-1'), None,
     'node g1: RealMemory=-1 is no count a node has'),
    (NODES.replace('RealMemory=8035', 'RealMemory=99999999999999'), None,
     'node g1: RealMemory=99999999999999 is no count a node has'),
    (NODES.replace('Partitions=gpu', 'Partitions=g;touch${IFS}ran'),
     PARTITIONS.replace('PartitionName=gpu', 'PartitionName=g;touch${IFS}ran'),
     "partition 'g;touch${IFS}ran': a name ReFrame takes has letters, digits, _ and - only"),
    (NODES.replace('Partitions=gpu', 'Partitions=../gpu'),
     PARTITIONS.replace('PartitionName=gpu', 'PartitionName=../gpu'),
     "partition '../gpu': a name ReFrame takes"),
    (NODES.replace('Partitions=gpu', 'Partitions=grafik\u00e4'),
     PARTITIONS.replace('PartitionName=gpu', 'PartitionName=grafik\u00e4'),
     "partition 'grafik\u00e4': a name ReFrame takes"),
    (NODES.replace('Partitions=gpu', 'Partitions=' + 'g' * 5000),
     PARTITIONS.replace('PartitionName=gpu', 'PartitionName=' + 'g' * 5000),
     "partition '" + 'g' * 80 + "'...: a name ReFrame takes"),
])
def test_what_a_controller_prints_beyond_any_node_is_one_message_and_nothing_written(
        root, tmp_path, nodes, partitions, said):
    started = time.monotonic()
    done = _new_system(root, _controller(tmp_path, nodes, partitions))
    assert time.monotonic() - started < 60
    assert done.returncode == 2, done.stdout + done.stderr
    line, = done.stderr.splitlines()
    assert line.startswith('error: ') and said in line, line
    assert not (root / 'site-configs').exists() and not list(tmp_path.rglob('ran'))


@pytest.mark.parametrize('facts, said', [
    ('{"processor": ', 'the node facts of partition batch are not JSON'),
    ('[1, 2]', 'the node facts of partition batch: [1, 2] is no mapping of fields'),
    ('{"hostname": "n1", "processor": "a CPU", "clock_hz": 2.4e9, "clock_source": "x", '
     '"flops_per_cycle": 16, "gpus_seen": 0}',
     "partition batch: processor: 'a CPU' is not of type 'object'"),
    ('{"hostname": "n1", "processor": {"num_cpus": "many"}, "clock_hz": 2.4e9, '
     '"clock_source": "x", "flops_per_cycle": 16, "gpus_seen": 0}',
     "the node facts of partition batch: no processor ReFrame describes (TypeError"),
    ('{"hostname": "n1", "processor": {"num_cpus": 2, "topology": {"caches": [{"type": '
     '"L3", "size": 1}]}}, "clock_hz": -2.4e9, "clock_source": "x", "flops_per_cycle": 16, '
     '"gpus_seen": 0}', 'clock_hz: -2400000000.0 is less than or equal to the minimum of 0'),
])
def test_node_facts_that_describe_no_node_are_one_message_and_nothing_written(
        root, tmp_path, facts, said):
    done = _new_system(root, _controller(
        tmp_path, facts=node_facts.NODE_FACTS_MARK + facts))
    assert done.returncode == 2, done.stdout + done.stderr
    line, = done.stderr.splitlines()
    assert line.startswith('error: ') and said in line, line
    assert not (root / 'site-configs').exists()


def test_a_node_says_what_its_gpus_are_and_how_much_memory_it_has(tmp_path, monkeypatch):
    """The facts job prints each GPU as the node's nvidia-smi names it (the H200 node's
    recorded query: model, memory, UUID, PCI bus, power limit) and the node's memory; a tool
    that fails is said, the rest printed."""
    tool = tmp_path / 'nvidia-smi'
    recorded = FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-query.csv'
    tool.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat "{recorded}";; '
                    f'topo) cat "{FIXTURES / "gpu" / "topology" / "h200-one-gpu.txt"}";; '
                    '*) exit 9;; esac\n')
    tool.chmod(0o755)
    monkeypatch.setenv('HPCBENCH_NVIDIA_SMI', str(tool))
    facts = _this_node_s_facts()
    assert facts['gpus_seen'] == 1 and facts['memory_bytes'] > 1 << 30
    gpu, = facts['gpus']
    assert (gpu['model'], gpu['arch'], gpu['memory_bytes'], gpu['power_limit_w'],
            gpu['uuid'], gpu['pci_bus_id']) == (
        'NVIDIA H200', 'sm_90', 143771 << 20, 700.0,
        'GPU-e79e4d5e-3bf5-a845-d4f8-7db5988bb9fa', '00000000:00:06.0')
    node_facts.checked_facts('gpu', json.dumps(facts))
    tool.write_text('#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate '
                    'with the NVIDIA driver"; exit 9\n')
    facts = _this_node_s_facts()
    assert facts['gpus'] == [] and 'exited with 9: NVIDIA-SMI has failed' in \
        facts['gpu_tool_error']


def test_an_amd_node_says_its_gpus_through_rocm_smi(root, tmp_path, monkeypatch):
    """No nvidia-smi, a rocm-smi (the MI250 node's recorded `-a --json`): the facts job
    names the GPU as rocm-smi does, and the description completes what it does not print
    (architecture, memory) from the model's datasheet."""
    from hpcbench.core import accelerators
    tool = tmp_path / 'rocm-smi'
    recorded = FIXTURES / 'gpu' / 'rocm-smi' / 'mi250-all-wandb.json'
    tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "-a --json" ] && exec cat "{recorded}"; exit 9\n')
    tool.chmod(0o755)
    monkeypatch.delenv('HPCBENCH_NVIDIA_SMI', raising=False)
    monkeypatch.setenv('HPCBENCH_ROCM_SMI', str(tool))
    monkeypatch.setattr(accelerators.shutil, 'which', lambda name, *a, **k: None)
    facts = _this_node_s_facts()
    assert [g['model'] for g in facts['gpus']] == ['AMD INSTINCT MI250 (MCM) OAM AC MBA']
    cluster = _cluster(False)
    plain = {**facts, 'gpus': [], 'gpus_seen': 0}
    description, asks = new_system.describe(
        'amdcluster', cluster, {p.name: facts if p.name == 'gpu' else plain
                                for p in cluster.partitions}, 'login1', ['openmpi', 'mpich'])
    gpu = description['partitions'][1]
    assert [(g['model'], g['arch'], g['memory_bytes'], g['source']) for g in gpu['gpus']] == [
        ('AMD INSTINCT MI250 (MCM) OAM AC MBA', 'gfx90a', 64 * 10 ** 9,
         f'rocm-smi on {facts["hostname"]}')]
    assert any("Slurm's GRES gpu:h200:2 gives a job 2 GPU(s), rocm-smi on" in a for a in asks)


def test_a_description_of_no_node_is_one_message_and_stops_no_other_system(root, tmp_path):
    """`memory_bytes: -1048576` was taken (HPL then failed: "isqrt() argument must be
    nonnegative"); a nonsense processor in one description stopped `hpcbench setup` of every
    system."""
    written, _, _ = _describe(root)
    described = yaml.safe_load(written[0].read_text())
    for change, said in (
            (lambda p: p.update(memory_bytes=-1048576),
             r'partitions\[batch\].memory_bytes: -1048576 is less than the minimum of 1'),
            (lambda p: p.update(processor={'num_cpus': 2, 'topology': 'nonsense'}),
             r"partitions\[batch\]: no processor ReFrame describes \(AttributeError"),
            (lambda p: p.update(name='batch;x'), r'partitions\[batch;x\]\.name: a partition '
                                                  'name has letters')):
        broken = json.loads(json.dumps(described))
        change(broken['partitions'][0])
        written[0].write_text(HEADER_LINE + yaml.safe_dump(broken))
        with pytest.raises(SystemExit, match=f'^error: .*mycluster.yaml: {said}'):
            described_site.site_configuration(written[1])
        with pytest.raises(described_system.DescriptionError):
            described_system.load(written[0])


HEADER_LINE = described_system.HEADER + ' mycluster` (a test)\n'


def test_an_mpi_whose_tool_prints_binary_is_one_message(root, tmp_path):
    """An --mpi prefix whose ompi_info printed no text gave a UnicodeDecodeError traceback."""
    prefix = _installed(tmp_path / 'openmpi', 'ompi_info', 'ompi_info-version.txt')
    (prefix / 'bin' / 'ompi_info').write_text("#!/bin/sh\nprintf 'Open MPI v\\377\\376\\n'\n")
    done = _new_system(root, _controller(tmp_path), '--mpi', str(prefix))
    assert done.returncode == 2 and 'Traceback' not in done.stderr, done.stderr
    assert done.stderr == (f'error: --mpi {prefix}: its bin/mpicc is no MPI this suite knows: '
                           'neither bin/ompi_info (Open MPI) nor bin/mpichversion (MPICH, '
                           'MVAPICH2) tells a version. Intel MPI needs no prefix: every system '
                           'gets it from PyPI (intelmpi)\n'), done.stderr


@pytest.mark.spack
def test_one_broken_description_stops_no_other_system_s_setup(root, monkeypatch, capsys):
    """Issue 51, item 14: a nonsense processor written into one described cluster stopped
    `hpcbench setup` of every system; it is skipped, saying why, unless it is the one set
    up."""
    from hpcbench.core import paths
    from hpcbench.stack import bootstrap, machine_systems, spack
    written, _, _ = _describe(root)
    described = yaml.safe_load(written[0].read_text())
    described['partitions'][0]['processor'] = {'num_cpus': 2, 'topology': 'nonsense'}
    written[0].write_text(HEADER_LINE + yaml.safe_dump(described))
    for system in ('local', 'testbed'):
        (root / 'spack-envs' / system).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(paths, 'SITE_CONFIGS_DIR', root / 'site-configs')
    monkeypatch.setattr(paths, 'SPACK_ENVS_DIR', root / 'spack-envs')
    found = spack.find()
    bootstrap.bootstrap(found=found, system='local')
    said = capsys.readouterr().out
    assert re.search(r'skipped mycluster: .*mycluster\.yaml: partitions\[batch\]: no processor '
                     r'ReFrame describes \(AttributeError', said), said
    assert (root / 'spack-envs' / 'local' / 'host.yaml').is_file()
    assert not (root / 'spack-envs' / 'mycluster' / 'host.yaml').exists()
    with pytest.raises(machine_systems.BootstrapError,
                       match=r'mycluster\.yaml: partitions\[batch\]: no processor '
                             'ReFrame describes'):
        bootstrap.bootstrap(found=found, system='mycluster')


@pytest.mark.machine_dependent
@pytest.mark.parametrize('field, value', [
    ('cpus', '$(touch${IFS}PWNED)'), ('cpus', '0-3;touch PWNED'), ('cpus', '0-999999999'),
    ('index', '$(touch PWNED)'), ('numa', '`touch PWNED`')])
def test_a_node_s_facts_that_are_shell_code_never_reach_a_job(root, tmp_path, field, value):
    """A description new-system wrote from a compute node's facts, or one edited by hand,
    whose GPU topology holds shell code where a CPU list, a GPU index or a NUMA node goes:
    refused when it loads, naming the field, and a dry run of the GPU checks runs nothing
    (ReFrame ran a `$(...)` in the ranks' placement on loading the job's environment)."""
    from hpcbench.stack import testbed_system
    written, _, _ = _describe(root, io_directory=str(tmp_path))
    described = yaml.safe_load(written[0].read_text())
    topology = testbed_system.gpu_topology().to_description()
    topology['gpus'][0][field] = value
    described['partitions'][1].update(gres='gpu:h100:8', gpu_topology=topology)
    written[0].write_text(yaml.safe_dump(described))
    with pytest.raises(described_system.DescriptionError,
                       match=rf'partitions\[gpu\]\.gpu_topology\.gpus\[0\]\.{field}: '):
        described_system.load(written[0])
    done = run_reframe('--system', 'mycluster', '-n', 'BabelStreamCheck|GpuDgemmCheck',
                       '--dry-run', config=str(written[1]),
                       env={'HPCBENCH_VAR': str(tmp_path / 'var'), 'IFS': ' '})
    assert done.returncode != 0 and f'gpus[0].{field}: ' in done.stderr, done.stderr[-2000:]
    assert 'Traceback' not in done.stderr
    assert not list(ROOT.glob('**/PWNED')) and not list(tmp_path.glob('**/PWNED'))


@pytest.mark.machine_dependent
@pytest.mark.parametrize('variable', ['SPACK_ROOT', 'run_env'])
def test_no_variable_that_reaches_reframe_s_environment_may_hold_shell_code(
        root, tmp_path, variable):
    """Every variable a partition or an environment exports is checked where they all enter
    ReFrame, whatever its name: a Spack at a path of shell syntax (a link to a checkout), an
    MPI stack's run-time variable in a description. One message, and no stage directory
    ran the command (a dry run of StreamCheck ran it in all 5)."""
    written, _, _ = _describe(root, io_directory=str(tmp_path))
    env = {'HPCBENCH_VAR': str(tmp_path / 'var')}
    if variable == 'run_env':
        described = yaml.safe_load(written[0].read_text())
        described['run_env'] = {'openmpi': {'OMPI_MCA_btl': 'self,tcp$(touch PWNED)'}}
        written[0].write_text(yaml.safe_dump(described))
        named = "environment openmpi: OMPI_MCA_btl='self,tcp$(touch PWNED)'"
    else:
        # A checkout as hpcbench.stack.spack.find() knows one, reached through a link whose
        # name is shell code.
        checkout, packages = tmp_path / 'spack-checkout', tmp_path / 'spack-packages'
        (checkout / 'bin').mkdir(parents=True)
        (checkout / 'bin' / 'spack').write_text('#!/bin/sh\n')
        (packages / 'repos' / 'spack_repo' / 'builtin').mkdir(parents=True)
        (packages / 'repos' / 'spack_repo' / 'builtin' / 'repo.yaml').write_text('')
        hostile = tmp_path / 'sp$(touch PWNED)'
        hostile.symlink_to(checkout)
        env.update(SPACK_ROOT=str(hostile), HPCBENCH_SPACK_PACKAGES=str(packages),
                   HPCBENCH_NO_SPACK='')
        named = f"partition batch: SPACK_ROOT='{hostile}'"
    done = run_reframe('--system', 'mycluster', '-n', 'StreamCheck', '--dry-run',
                       config=str(written[1]), env=env)
    assert done.returncode != 0 and named in done.stderr and \
        'a variable exported into job scripts holds letters' in done.stderr, \
        done.stdout[-2000:] + done.stderr[-2000:]
    assert 'Traceback' not in done.stderr
    assert not list(tmp_path.glob('**/PWNED')) and not list(ROOT.glob('**/PWNED'))


def test_slurm_counts_that_disagree_with_each_other_are_said(root):
    """Issue 60, item 15: a cloud node's record (every vCPU a socket: Sockets=32
    CoresPerSocket=1 ThreadsPerCore=1) with CPUTot=2 was written without a word."""
    config, partitions, nodes, mpi = ((TESTBED / name).read_text() for name in (
        'scontrol-show-config.txt', 'scontrol-show-partition.txt', 'scontrol-show-node.txt',
        'srun-mpi-list.txt'))
    nodes = re.sub(r'CoresPerSocket=2 (.*?)Sockets=1 ', r'CoresPerSocket=1 \1Sockets=32 ', nodes)
    cluster = slurm_cluster.cluster_from(config, partitions, nodes, mpi)
    facts = _this_node_s_facts()
    _, asks = new_system.describe('mycluster', cluster,
                                         {p.name: facts for p in cluster.partitions}, 'login1',
                                         ['openmpi', 'mpich'])
    said = [a for a in asks if 'Slurm says' in a]
    assert len(said) == 2 and said[0].startswith(
        'partitions[batch]: Slurm says n1 has CPUTot=2 but Sockets=32 x CoresPerSocket=1 x '
        'ThreadsPerCore=1 = 32; ')


@pytest.mark.machine_dependent
@pytest.mark.parametrize('field, value', [
    ('access', ['--account=hpc\ntouch PWNED']),
    ('slurm_partition', 'batch\ntouch PWNED'),
])
def test_a_scheduler_option_that_would_start_a_command_never_reaches_a_job(root, tmp_path,
                                                                          field, value):
    """Beside the variables (issue 60, items 1 and 5): a description's scheduler options are
    each a line of the job script (`#SBATCH --account=...`): a newline in one, or in the
    Slurm partition's name (`--partition=...`), would start a command the job runs."""
    written, _, _ = _describe(root, io_directory=str(tmp_path))
    described = yaml.safe_load(written[0].read_text())
    if field == 'access':
        described['access'] = value
    else:
        described['partitions'][0][field] = value
    written[0].write_text(yaml.safe_dump(described))
    done = run_reframe('--system', 'mycluster', '-n', 'StreamCheck', '--dry-run',
                       config=str(written[1]), env={'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode != 0 and 'holds a control character (a newline would start a ' \
        'command in the job script)' in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'partition batch: the scheduler option' in done.stderr
    assert not (tmp_path / 'var' / 'stage').exists()


def test_screen_nodes_names_the_nodes_out_of_service_and_those_without_a_figure(root, tmp_path):
    """Issue 61, item 4: the testbed described with n3 drained (its record as Slurm prints a
    drained node), and the real screen of that testbed without n3's and g2's cases (a
    `make screen` of the nodes that can run leaves n3 out; g2's job failed): `screen-nodes`
    names n3 as out of service and why, and g2 as in service without a figure, rather than
    leaving them silently missing."""
    from hpcbench.core import paths
    from hpcbench.devtools import history
    cluster = slurm_cluster.cluster_from(*(
        re.sub(r'(NodeName=n3 .*?)State=IDLE ', r'\1State=IDLE+DRAIN ', text) +
        ('   Reason=bad DIMM [root@2026-11-28T10:00:00]\n' if 'NodeName=n3' in text else '')
        if name == 'scontrol-show-node.txt' else text
        for name, text in ((n, (TESTBED / n).read_text()) for n in (
            'scontrol-show-config.txt', 'scontrol-show-partition.txt', 'scontrol-show-node.txt',
            'srun-mpi-list.txt'))))
    facts = _this_node_s_facts()
    description, _ = new_system.describe(
        'mycluster', cluster, {p.name: facts for p in cluster.partitions}, 'login1',
        ['openmpi', 'mpich'])
    assert description['partitions'][0]['nodes_out_of_service'] == {
        'n3': 'IDLE+DRAIN: drained (bad DIMM [root@2026-11-28T10:00:00])'}
    new_system.write('mycluster', description, [], root)
    session = json.loads((FIXTURES / 'report' / 'screen-session.json').read_text())
    for run in session['runs']:
        run['testcases'] = [tc for tc in run['testcases']
                            if not re.search(r'\.nid=(n3|g2)\b', tc.get('display_name', ''))]
    var = tmp_path / 'var'
    var.mkdir()
    (var / paths.VAR_MARKER).write_text('test\n')
    history.fill(var / 'results.db', [session], 1)
    done = subprocess.run([str(BIN / 'hpcbench'), 'screen-nodes', '--system', 'mycluster'],
                          env={**os.environ, 'HPCBENCH_PROJECT': str(root),
                               'HPCBENCH_VAR': str(var)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    batch = done.stdout.split('mycluster:batch ', 1)[1].split('\n\n')[0]
    assert '2 node(s)' in batch and re.search(r'^  n1 +\d', batch, re.M)
    assert re.search(r"^  n3 +out of service when described: IDLE\+DRAIN: drained \(bad DIMM ",
                     batch, re.M)
    gpu = done.stdout.split('mycluster:gpu ', 1)[1]
    assert '  no figure of 1 node(s) in service when described: g2 (busy or failed' in gpu


@pytest.mark.machine_dependent
def test_a_node_too_small_for_stream_s_rule_skips_stream_saying_why(root, tmp_path):
    """Issue 70, item 11: on a machine whose last-level cache is large (a 480 MiB L3), an
    emulated node of 7.8 GiB cannot hold STREAM's arrays at four times the cache, and the
    dry run of the described system failed STREAM's set-up (1 failure, 93 skipped) where
    its set-up said "STREAM is not built". The check agrees: skipped in those words; the
    dry run passes. Here the node's memory is cut to 256 MiB, below what this machine's
    cache asks."""
    written, _, _ = _describe(root, io_directory=str(tmp_path))
    described = yaml.safe_load(written[0].read_text())
    described['partitions'][0]['memory_bytes'] = 256 << 20
    written[0].write_text(yaml.safe_dump(described))
    done = run_reframe('--system', 'mycluster:batch', '-n', 'StreamCheck', '--dry-run',
                       config=str(written[1]), env={'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert 'mycluster:batch: STREAM is not built: STREAM needs 3 arrays of ' in done.stdout, \
        done.stdout[-3000:]
    assert 'FAIL' not in done.stdout.split('Running')[-1]
