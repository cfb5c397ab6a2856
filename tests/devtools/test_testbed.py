"""The Slurm testbed (hpcbench.devtools.testbed): its configuration, and a real cluster started,
used, started again and stopped on this machine (the daemons start in seconds)."""
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import BIN, FIXTURES, ROOT, run_reframe, slurm_conf_nodes
from hpcbench.core import gpu_ranks, paths
from hpcbench.machine import slurm_query
from hpcbench.devtools import testbed, testbed_daemons, testbed_metrics, testbed_processes
from hpcbench.stack import testbed_system
from hpcbench.stack import bootstrap, spack


def test_the_configuration_emulates_n_nodes_on_one_host(tmp_path):
    # Two sockets of four cores with two threads each.
    processor = {'num_cpus': 16, 'num_sockets': 2, 'num_cpus_per_socket': 8,
                 'num_cpus_per_core': 2}
    conf = testbed.slurm_conf(testbed_system.Layout(tmp_path), 4, processor, 6000, 'vm', 9000)
    assert 'NodeName=n[1-4] NodeHostname=vm NodeAddr=127.0.0.1 Port=17001-17004 CPUs=16 ' \
           'Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=6000' in conf
    assert 'AccountingStorageType=accounting_storage/slurmdbd' in conf
    assert 'ProctrackType=proctrack/linuxproc' in conf and 'TmpFS=/tmp/slurm-%n' in conf
    # The GPU nodes: the same processor, their own memory, eight typed GPUs each, a feature
    # and a partition of their own.
    assert 'GresTypes=gpu' in conf
    assert 'NodeName=g[1-2] NodeHostname=vm NodeAddr=127.0.0.1 Port=17005-17006 CPUs=16 ' \
           'Sockets=2 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=9000 Gres=gpu:h100:8 ' \
           'Features=hbm State=UNKNOWN' in conf
    assert 'PartitionName=batch Nodes=n[1-4] Default=YES' in conf
    assert 'PartitionName=gpu Nodes=g[1-2] ' in conf
    assert testbed.gres_conf(testbed_system.Layout(tmp_path)).splitlines()[1:] == [
        f'NodeName=g[1-2] Name=gpu Type=h100 File={tmp_path}/dev/nvidia[0-7]',
        f'NodeName=u1 Name=gpu File={tmp_path}/dev/nvidia0',
        f'NodeName=s1 Name=gpu Type=hopper File={tmp_path}/dev/nvidia0']
    # GPU nodes as sites declare theirs: an untyped GRES and a label of the site's own, each
    # in a partition of its own, on the ports after the others'.
    assert 'NodeName=u1 NodeHostname=vm NodeAddr=127.0.0.1 Port=17007 CPUs=16 Sockets=2 ' \
           'CoresPerSocket=4 ThreadsPerCore=2 RealMemory=9000 Gres=gpu:1 State=UNKNOWN' in conf
    assert 'NodeName=s1 NodeHostname=vm NodeAddr=127.0.0.1 Port=17008 ' in conf
    assert ' Gres=gpu:hopper:1 State=UNKNOWN\n' in conf
    assert 'PartitionName=gpu-untyped Nodes=u1 ' in conf
    assert 'PartitionName=gpu-sitelabel Nodes=s1 ' in conf


def test_a_testbed_of_no_nodes_is_refused(tmp_path):
    with pytest.raises(testbed_processes.TestbedError, match='at least one node'):
        testbed_daemons.start(0, tmp_path)


def test_a_second_testbed_beside_a_running_one_is_refused(cluster, tmp_path):
    with pytest.raises(testbed_processes.TestbedError, match='already in use: another testbed'):
        testbed_daemons.start(1, tmp_path / 'other')


def test_stop_never_kills_a_process_that_only_reuses_a_recorded_pid(tmp_path):
    # The stand-in: an unrelated process holds the PID a (dead) daemon's file names, as after
    # a reboot or PID wrap-around; its start time is not the recorded one.
    layout = testbed_system.Layout(tmp_path)
    layout.run.mkdir(parents=True)
    unrelated = subprocess.Popen(['sleep', '300'])
    try:
        started = testbed_processes.start_time(unrelated.pid)
        layout.pid_file('slurmctld').write_text(f'{unrelated.pid} {started - 100}\n')
        assert testbed_processes.recorded(layout) == {}
        assert testbed_daemons.stop(tmp_path, timeout=2) == []
        assert unrelated.poll() is None
        # With the start time it was recorded with, it is the daemon.
        layout.pid_file('slurmctld').write_text(f'{unrelated.pid} {started}\n')
        assert testbed_processes.recorded(layout) == {'slurmctld': unrelated.pid}
    finally:
        unrelated.kill()
        unrelated.wait()


def _stand_in(tmp_path, daemon, program='/bin/sleep'):
    """A program named as a daemon is (a copy of `program`): what stop knows a daemon by."""
    named = tmp_path / 'bin' / daemon
    named.parent.mkdir(exist_ok=True)
    shutil.copy(program, named)
    return str(named)


def test_stop_finds_the_daemons_of_a_removed_state_directory_by_what_they_are(tmp_path):
    # Stand-ins for a slurmd and munged whose state directory (var/testbed) was removed
    # while they ran: found by their environment's slurm.conf and their command line.
    root = tmp_path / 'testbed'
    layout = testbed_system.Layout(root)
    slurmd = subprocess.Popen([_stand_in(tmp_path, 'slurmd'), '300'],
                              env={**os.environ, 'SLURM_CONF': str(layout.slurm_conf)})
    munged = subprocess.Popen([_stand_in(tmp_path, 'munged', '/bin/sh'), '-c', 'sleep 300; :',
                               f'--key-file={layout.munge}/munge.key'])
    bystander = subprocess.Popen(['sleep', '300'])
    try:
        assert not root.exists()
        stopped = testbed_daemons.stop(root, timeout=5)
        assert len(stopped) == 2, stopped
        slurmd.wait(timeout=10)
        munged.wait(timeout=10)
        assert bystander.poll() is None
    finally:
        for proc in (slurmd, munged, bystander):
            proc.kill()
            proc.wait()


def test_make_testbed_stop_from_the_documented_shell_stops_the_daemons_and_not_its_caller(
        tmp_path):
    """Issue 51, item 19: after `eval "$(ci/testbed/testbed env)"` (docs/testbed-and-ci.md)
    the shell, make and srun carry the testbed's SLURM_CONF: `make testbed-stop` signalled its
    own ancestors (make: Terminated, rc 143) and left every daemon running."""
    root = tmp_path / 'testbed'
    layout = testbed_system.Layout(root)
    env = {**os.environ, 'SLURM_CONF': str(layout.slurm_conf),
           'HPCBENCH_TESTBED_DIR': str(root)}
    daemon = subprocess.Popen([_stand_in(tmp_path, 'slurmctld'), '300'], env=env)
    # A user's own program in that shell (a job's step, a tail of a log): not a daemon.
    theirs = subprocess.Popen(['sleep', '300'], env=env)
    try:
        shell = subprocess.run(['bash', '-c', 'make --no-print-directory testbed-stop; '
                                'echo "the shell lives on after make: $?"'],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert 'the shell lives on after make: 0' in shell.stdout, shell.stdout + shell.stderr
        assert 'Terminated' not in shell.stdout + shell.stderr
        daemon.wait(timeout=10)
        assert theirs.poll() is None
    finally:
        for proc in (daemon, theirs):
            proc.kill()
            proc.wait()


def _daemons_alive(pids):
    return [p for p in pids if testbed_processes.alive(p)]


def _new_root():
    """A state directory for a testbed of the test's own (as root only)."""
    if os.geteuid() != 0:
        pytest.skip('the testbed runs its daemons as root')
    # Not under pytest's 0700 tmp: munge and mysql must reach their directories.
    root = Path(tempfile.mkdtemp(prefix='hpcbench-testbed-'))
    root.chmod(0o755)
    return root


def running_testbed(nodes):
    """A testbed of `nodes` CPU nodes of the test's own, stopped and removed after it."""
    root = _new_root()
    layout = testbed_daemons.start(nodes, root)
    yield layout
    testbed_daemons.stop(root)
    shutil.rmtree(root)


@pytest.fixture
def cluster():
    yield from running_testbed(3)


def test_the_running_cluster_is_described_as_its_slurm_conf_declares_it(cluster):
    """hpcbench.machine.slurm_query asks the testbed's controller; an unreachable one is one
    message saying what scontrol said."""
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))
    described = slurm_query.running_cluster(env)
    declared = slurm_conf_nodes(cluster.slurm_conf.read_text())
    assert (described.name, described.accounting) == (testbed_system.CLUSTER, True)
    assert {p.name: [n.name for n in p.nodes] for p in described.partitions} == {
        testbed_system.SLURM_PARTITION: ['n1', 'n2', 'n3'], testbed_system.SLURM_GPU_PARTITION: ['g1', 'g2'],
        'gpu-untyped': ['u1'], 'gpu-sitelabel': ['s1']}
    assert {n.name: n.shape for p in described.partitions for n in p.nodes} == declared
    assert 'pmix' in described.mpi_plugins and 'pmi2' in described.mpi_plugins
    unreachable = cluster.root / 'unreachable.conf'
    unreachable.write_text(re.sub(r'(?m)^SlurmctldPort=.*$', 'SlurmctldPort=6999',
                                  cluster.slurm_conf.read_text()))
    with pytest.raises(slurm_query.SlurmDescriptionError,
                       match=r'^`scontrol show config` failed \(exit 1\): .*Unable to contact '
                             'slurm controller'):
        slurm_query.running_cluster(dict(env, SLURM_CONF=str(unreachable)))
    # A node with no slurm.conf (here the testbed's is not at Slurm's default place) and no
    # configless controller: which variable to set.
    assert not Path('/etc/slurm/slurm.conf').exists(), 'this host has a Slurm of its own'
    with pytest.raises(slurm_query.SlurmDescriptionError,
                       match=r'Could not establish a configuration source; this node has no '
                             r'slurm.conf of its own and no configless controller: set '
                             r'SLURM_CONF to the cluster\'s$'):
        slurm_query.running_cluster({k: v for k, v in env.items() if k != 'SLURM_CONF'})


# The checks that run on GPUs alone.
GPU_CHECKS = {'BabelStreamCheck', 'GpuDgemmCheck', 'HostDeviceBandwidthCheck', 'GpuNodeScreen',
              'DeviceBufferPairCheck', 'DeviceBufferCollectiveCheck', 'OsuPairCheck',
              'OsuAllreduceCheck', 'NcclTestsCheck'}


def test_new_system_describes_the_running_testbed_through_its_controller_and_a_job(
        cluster, tmp_path):
    """`hpcbench new-system` on the testbed: a job on a node of each partition, the
    description as the testbed's slurm.conf declares it; the GPUs of the nodes whose GRES is
    untyped (u1) or a label no datasheet names (s1) as the node's own nvidia-smi names them
    (a stand-in printing what real ones printed on an H200 and an H100 node; the g nodes'
    devices answer to no driver); an unreachable controller is one message, and nothing is
    written."""
    root = tmp_path / 'project'
    (root / 'spack-envs' / 'testbed').mkdir(parents=True)
    shutil.copy(Path(__file__).parents[2] / 'spack-envs' / 'testbed' / 'spack.yaml',
                root / 'spack-envs' / 'testbed')
    recorded = FIXTURES / 'gpu'
    nvidia_smi = tmp_path / 'nvidia-smi'
    nvidia_smi.write_text(
        '#!/bin/sh\ncase "$SLURMD_NODENAME $1" in\n'
        f'"u1 --query-gpu="*) cat "{recorded}/h200/nvidia-smi-query.csv";;\n'
        f'"u1 topo") cat "{recorded}/topology/h200-one-gpu.txt";;\n'
        f'"s1 --query-gpu="*) cat "{recorded}/h100/nvidia-smi-query.csv";;\n'
        '*) echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA '
        'driver"; exit 9;;\nesac\n')
    nvidia_smi.chmod(0o755)
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf), HPCBENCH_PROJECT=str(root),
               HPCBENCH_NVIDIA_SMI=str(nvidia_smi))
    command = [str(BIN / 'hpcbench'), 'new-system', 'mycluster',
               f'--io-directory={tmp_path}', '--job-timeout=120']
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'then: make dry-run SYSTEM=mycluster' in done.stdout
    described = yaml.safe_load((root / 'site-configs' / 'mycluster.yaml').read_text())
    declared = slurm_conf_nodes(cluster.slurm_conf.read_text())
    first_node = {testbed_system.SLURM_PARTITION: 'n1', testbed_system.SLURM_GPU_PARTITION: 'g1',
                  'gpu-untyped': 'u1', 'gpu-sitelabel': 's1'}
    assert [p['slurm_partition'] for p in described['partitions']] == list(first_node)
    for entry in described['partitions']:
        cpus, _, _, _, memory_mb, gres = declared[first_node[entry['slurm_partition']]]
        assert (entry['processor']['num_cpus'], entry['memory_bytes'], entry['gres']) == (
            cpus, memory_mb << 20, gres)
        assert entry['io_directory'] == str(tmp_path)
    assert described['scheduler'] == 'slurm' and described['launcher'] == 'srun'
    gpus = {p['slurm_partition']: [(g['model'], g['count'], g['source'].split()[0])
                                   for g in p.get('gpus', [])]
            for p in described['partitions']}
    assert gpus['gpu-untyped'] == [('NVIDIA H200', 1, 'nvidia-smi')]
    assert gpus['gpu-sitelabel'] == [('NVIDIA H100 80GB HBM3', 1, 'nvidia-smi')]
    # The g nodes' GPUs from their GRES label (the H100 SXM's), their tool's failure said.
    assert gpus['gpu'] == [('NVIDIA H100 80GB HBM3', 8, 'GRES')], gpus['gpu']
    assert 'partitions[gpu]: the GPU tool on ' in done.stdout
    # Both site-declared GPUs are of datasheet models: the GPU checks are listed there (those
    # Spack builds where a Spack is), as on no CPU partition.
    def listed(partition):
        shown = run_reframe('--system', f'mycluster:{partition}', '-l',
                            config=str(root / 'site-configs' / 'mycluster.py'),
                            env={'HPCBENCH_VAR': str(tmp_path / 'var'),
                                 'HPCBENCH_PROJECT': str(root)})
        assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
        return set(re.findall(r'^- (\w+)', shown.stdout, re.M)) & GPU_CHECKS

    wanted = {'DeviceBufferPairCheck', 'DeviceBufferCollectiveCheck'} | (
        {'BabelStreamCheck', 'GpuDgemmCheck', 'HostDeviceBandwidthCheck'} if spack.find() else
        set())
    for partition in ('gpu-untyped', 'gpu-sitelabel'):
        assert listed(partition) >= wanted, partition
    assert listed(testbed_system.SLURM_PARTITION) == set()

    unreachable = cluster.root / 'unreachable.conf'
    unreachable.write_text(re.sub(r'(?m)^SlurmctldPort=.*$', 'SlurmctldPort=6999',
                                  cluster.slurm_conf.read_text()))
    other = subprocess.run([*command[:2], 'other'], capture_output=True, text=True,
                           env=dict(env, SLURM_CONF=str(unreachable)), timeout=600)
    assert other.returncode == 2 and other.stderr.startswith(
        'error: `scontrol show config` failed (exit 1): ')
    assert not (root / 'site-configs' / 'other.yaml').exists()


def test_a_node_drained_before_a_restart_stays_drained_and_is_named(cluster):
    """Slurm keeps a drained node drained across a restart (its saved state): the testbed
    starts again, counting it up, and its status names it with Slurm's reason (a 32-node
    start waited for 36 idle nodes and failed: a node drained by an earlier run)."""
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))
    subprocess.run(['scontrol', 'update', 'NodeName=n3', 'State=DRAIN',
                    'Reason=kept from before'], env=env, check=True, timeout=60)
    testbed_daemons.stop(cluster.root)
    assert testbed_daemons.start(3, cluster.root) == cluster
    assert testbed_daemons.node_states(cluster)['n3'] == 'drain'
    states = testbed_daemons.node_states(cluster)
    assert testbed_daemons.up_nodes(cluster) == 7 and list(states.values()).count('idle') == 6
    assert 'out of service: n3: kept from before' in testbed_daemons.status(cluster.root)


def test_a_real_cluster_runs_a_two_node_job_with_accounting_and_stops_clean(cluster):
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))
    first = testbed_processes.recorded(cluster)
    assert set(first) == testbed_daemons.expected_daemons(3)
    # Each recorded PID is the daemon itself (munged runs as munge, not under runuser).
    assert open(f'/proc/{first["munged"]}/comm').read().strip() == 'munged'
    assert os.stat(f'/proc/{first["munged"]}').st_uid == pwd.getpwnam('munge').pw_uid
    assert list(testbed_daemons.node_states(cluster).values()) == ['idle'] * len(
        testbed_system.node_names(3)) == ['idle'] * 7

    # A second start while it runs changes nothing.
    assert testbed_daemons.start(3, cluster.root) == cluster
    assert testbed_processes.recorded(cluster) == first
    with pytest.raises(testbed_processes.TestbedError, match='runs with 3 nodes'):
        testbed_daemons.start(2, cluster.root)

    job = subprocess.run(['sbatch', '-W', '-N', '2', '-n', '2', '-o', '/dev/null', '--wrap',
                          'srun printenv SLURMD_NODENAME'], env=env, capture_output=True,
                         text=True, timeout=120)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.split()[-1]
    # slurmctld hands the finished job to slurmdbd on its own time: ask until it is there.
    for _ in range(150):
        acct = subprocess.run(['sacct', '-n', '-X', '-j', job_id, '-o', 'State,NodeList%20'],
                              env=env, capture_output=True, text=True).stdout.split()
        if acct == ['COMPLETED', 'n[1-2]']:
            break
        time.sleep(0.2)
    assert acct == ['COMPLETED', 'n[1-2]']

    stopped = testbed_daemons.stop(cluster.root)
    assert set(stopped) == set(first)
    slurmds = {f'slurmd-{n}' for n in testbed_system.node_names(3)}
    assert stopped[-1] == 'munged' and set(stopped[:len(slurmds)]) == slurmds
    assert _daemons_alive(first.values()) == []
    assert testbed_processes.recorded(cluster) == {}
    # Nothing the testbed started is left running (zombies of munged are not processes).
    leftovers = subprocess.run(['pgrep', '-f', str(cluster.root)], capture_output=True,
                               text=True).stdout.split()
    assert _daemons_alive(int(p) for p in leftovers) == []


def test_gpu_nodes_give_each_job_its_gres_and_each_rank_one_gpu(cluster, tmp_path):
    """The GPU partition through Slurm: its nodes declare gpu:h100:8 (stand-in devices); a
    two-node job of one rank per GPU (the GPU checks' wrapper, hpcbench.core.gpu_ranks) gets
    CUDA_VISIBLE_DEVICES from Slurm and each rank its own GPU, as does a job given one GPU
    per task (--gpus-per-task); a request beyond the node's GPUs is refused at submission,
    and more ranks than GPUs stop in the wrapper. The nodes' eight ranks overcommit this
    host's cores (Slurm 22.05 here refuses more tasks than cores with a GRES on one node, as
    `Requested node configuration is not available`, and gives them on two: the jobs span
    both GPU nodes)."""
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))
    node = subprocess.run(['scontrol', 'show', 'node', 'g1'], env=env, capture_output=True,
                          text=True).stdout
    assert 'Gres=gpu:h100:8' in node
    assert all(d.is_char_device() for d in testbed.stand_in_devices(cluster))
    (tmp_path / gpu_ranks.SCRIPT).write_text(gpu_ranks.wrapper_script())
    (tmp_path / gpu_ranks.SCRIPT).chmod(0o755)
    rank_line = 'echo "slurm gave $SLURM_JOB_GPUS$SLURM_STEP_GPUS sees $CUDA_VISIBLE_DEVICES"'

    def job(*options, run_env=None):
        for old in tmp_path.glob(gpu_ranks.OUTPUT_GLOB):
            old.unlink()
        return subprocess.run(
            ['srun', '--partition=gpu', '--mpi=none', *options, f'./{gpu_ranks.SCRIPT}',
             'sh', '-c', rank_line],
            cwd=tmp_path, env={**env, **(run_env or {})}, capture_output=True, text=True,
            timeout=120)

    def ranks(count):
        output = ''.join((tmp_path / f'rank-{r}.out').read_text() for r in range(count))
        return output, gpu_ranks.split(output, count)

    every = [str(g) for g in range(8)]
    done = job('-N', '2', '-n', '16', '--overcommit', '--gres=gpu:8')
    assert done.returncode == 0, done.stderr
    _, sections = ranks(16)
    assert [gpu for gpu, _, _ in sections.values()] == every * 2
    assert [text.split()[-1] for _, _, text in sections.values()] == every * 2
    given_one = job('-N', '2', '-n', '16', '--overcommit', '--gpus-per-task=1')
    assert given_one.returncode == 0, given_one.stderr
    _, sections = ranks(16)
    assert sorted(gpu for gpu, _, _ in sections.values()) == sorted(every * 2)
    refused = job('-N', '1', '-n', '2', '--gres=gpu:9')
    assert refused.returncode != 0
    assert 'Requested node configuration is not available' in refused.stderr
    too_many = job('-N', '2', '-n', '18', '--overcommit', '--gres=gpu:8')
    assert too_many.returncode == 3
    assert 'local rank 8 has no GPU of CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7' in too_many.stderr


def test_a_gpu_job_s_ranks_are_placed_by_the_nodes_topology_and_a_far_one_is_named(cluster,
                                                                                   tmp_path):
    """The GPU nodes' recorded topology (GPUs 0-3 next to CPUs 0-51, 4-7 next to 52-103)
    through Slurm: the ranks on GPUs 0-3 are bound to their GPU's CPUs among this host's; on
    GPUs 4-7 none of this host's CPUs is their GPU's, so they run unbound and the check's
    placement names each (what a job given the far socket meets)."""
    from hpcbench.core import gpu_topology
    from hpcbench.rfm.gpu import misplaced_ranks
    if max(gpu_topology.cpu_set(open('/proc/self/status').read().split(
            'Cpus_allowed_list:')[1].split()[0])) >= 52:
        pytest.skip('this host has CPUs next to GPUs 4-7 of the recorded node: no rank is '
                    'placed away from its GPU')
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf),
               **gpu_ranks.environment(testbed_system.gpu_topology()))
    (tmp_path / gpu_ranks.SCRIPT).write_text(gpu_ranks.wrapper_script())
    (tmp_path / gpu_ranks.SCRIPT).chmod(0o755)
    done = subprocess.run(['srun', '--partition=gpu', '--mpi=none', '-N', '2', '-n', '16',
                           '--overcommit', '--gres=gpu:8', f'./{gpu_ranks.SCRIPT}', 'true'],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    output = ''.join((tmp_path / f'rank-{r}.out').read_text() for r in range(8))
    placed = gpu_ranks.placement(output)
    tool = 'numactl' if shutil.which('numactl') else 'taskset'
    assert all(placed[r][2].startswith(f'{tool}: GPU {r}\'s CPUs') for r in range(4))
    assert all(placed[r][2].startswith(f'not bound: none is next to GPU {r}, whose CPUs are '
                                       '52-103') for r in range(4, 8))
    named = misplaced_ranks(testbed_system.gpu_topology(), output)
    assert [m.split(' (')[0] for m in named] == [f'rank {r}' for r in range(4, 8)]
    assert named[0].endswith('are not all next to GPU 4, whose CPUs are 52-103 (NUMA node 1)')


# A PMIx client (Slurm's libpmix through ctypes: no compiler, no MPI): rank 1 joins a fence
# without data 2 s late; each rank prints how long the fence held it.
_LATE_FENCE = """
import ctypes, time
pmix = ctypes.CDLL('libpmix.so.2')
class Proc(ctypes.Structure):
    _fields_ = [('nspace', ctypes.c_char * 256), ('rank', ctypes.c_uint32)]
me = Proc()
assert pmix.PMIx_Init(ctypes.byref(me), None, ctypes.c_size_t(0)) == 0
if me.rank == 1:
    time.sleep(2)
start = time.monotonic()
rc = pmix.PMIx_Fence(None, ctypes.c_size_t(0), None, ctypes.c_size_t(0))
print(f'rank={me.rank} rc={rc} fence_s={time.monotonic() - start:.3f}', flush=True)
pmix.PMIx_Finalize(None, ctypes.c_size_t(0))
"""


def test_a_fence_across_emulated_nodes_waits_for_the_last_node(cluster):
    """A PMIx fence spans the emulated nodes: rank 0 (n1) waits for rank 1 (n2), 2 s late.
    Slurm's default fences without data by a tree, which on nodes sharing one host completed
    on each node at once (SLURM_PMIX_FENCE=mixed brings that back: the fault, injected): so
    did MPI_Init's closing barrier, and now and then a peer's first message reached rank 0
    of an Open MPI job before its handlers did (SIGSEGV in MPI_Init, seen in CI's HPL)."""
    def fence_seconds(**extra):
        job = subprocess.run(['srun', '-N', '2', '-n', '2', '-t', '1', sys.executable, '-c',
                              _LATE_FENCE], capture_output=True, text=True, timeout=120,
                             env={**os.environ, 'SLURM_CONF': str(cluster.slurm_conf),
                                  **extra})
        assert job.returncode == 0, job.stdout + job.stderr
        held = dict(re.findall(r'rank=(\d) rc=0 fence_s=([\d.]+)', job.stdout))
        assert set(held) == {'0', '1'}, job.stdout + job.stderr
        return float(held['0'])

    assert 'PMIxCollFence=ring' in cluster.mpi_conf.read_text()
    assert fence_seconds() > 1.5
    assert fence_seconds(SLURM_PMIX_FENCE='mixed') < 1.0, (
        "Slurm's tree fence now holds across emulated nodes: mpi.conf's ring may go")


def test_starts_side_by_side_start_one_cluster_and_stop_leaves_nothing():
    """Jobs of a pipeline may each start the testbed at the same moment: one starts it (its
    metrics store too, its packages installed once: two apt-gets at once failed on apt's
    lock in a clean root), the others find it running; then one stop ends every daemon."""
    root = _new_root()
    env = dict(os.environ, HPCBENCH_TESTBED_DIR=str(root))
    starts = [subprocess.Popen([str(BIN / 'python'), '-m', 'hpcbench.devtools.testbed_daemons',
                                'start', '--nodes', '2'], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        results = [(p.wait(timeout=120), p.stderr.read()) for p in starts]
        assert [code for code, _ in results] == [0] * 4, results
        running = testbed_processes.recorded(testbed_system.Layout(root))
        assert set(running) == testbed_daemons.expected_daemons(2) | set(
            testbed_metrics.DAEMONS)
        # One munged, one MariaDB and one of each metrics daemon (the daemons naming the
        # directory), the recorded ones.
        mine = subprocess.run(['pgrep', '-f', str(root)], capture_output=True, text=True)
        assert sorted(_daemons_alive(int(p) for p in mine.stdout.split())) == \
            sorted([running[name] for name in ('munged', 'mariadb', *testbed_metrics.DAEMONS)])
    finally:
        testbed_daemons.stop(root)
    left = subprocess.run(['pgrep', '-f', str(root)], capture_output=True, text=True)
    assert _daemons_alive(int(p) for p in left.stdout.split()) == []
    shutil.rmtree(root)


# --- The suite through Slurm (what `make test` runs of it: quick sizes, one MPI stack) -----
ANSI = re.compile(r'\x1b\[[0-9;]*m')


@pytest.fixture
def slurm_suite(cluster, tmp_path, monkeypatch):
    """A 3-node testbed for the `testbed` site config, and results under tmp_path."""
    monkeypatch.setenv('HPCBENCH_TESTBED_DIR', str(cluster.root))
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    return tmp_path / 'var'


def _reframe_on_testbed(*args):
    proc = run_reframe('--system', 'testbed:srun', '-p', 'openmpi', '-r', *args,
                       config='site-configs/testbed.py')
    out = ANSI.sub('', proc.stdout)
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    return out


def _ok(out, check):
    return re.findall(rf'^\[\s+OK \] \(\s*\d+/\d+\) {check}.*@testbed:srun\+openmpi$', out, re.M)


@pytest.mark.skipif(spack.find() is not None, reason='with a Spack the Spack-built checks run')
def test_without_spack_hpcc_runs_through_slurm(slurm_suite):
    out = _reframe_on_testbed('-n', 'HpccCheck', '-S', 'memory_fraction=0.002')
    assert len(_ok(out, 'HpccCheck')) == 1


@pytest.mark.spack
def test_multi_node_checks_pass_through_slurm(slurm_suite):
    found = bootstrap.bootstrap()
    bootstrap.install_environment(found, 'testbed')
    out = _reframe_on_testbed(
        '-n', 'HplCheck%layout_name=per-core%num_nodes=2', '-n', 'ImbPairCheck%benchmark=PingPong',
        '-n', 'IorCheck%pattern=file-per-process%api=posix',
        '-S', 'HplCheck.memory_fraction=0.002', '-S', 'HplCheck.repeats=1',
        '-S', 'IorCheck.num_nodes=2', '-S', 'IorCheck.block_size=16777216',
        '-S', 'IorCheck.repetitions=1')
    for check in ('HplCheck', 'ImbPairCheck', 'IorCheck'):
        assert len(_ok(out, check)) == 1, out[-3000:]
    # Each ran on two nodes: HPL's grid over 2 x 2 ranks, one IMB rank on each node.
    perflogs = slurm_suite / 'perflogs' / 'testbed' / 'srun'
    assert re.search(r'\|inputs=N=\d+ NB=\d+ P=2 Q=2 per-core.* nodes=2 ',
                     (perflogs / 'HplCheck.log').read_text())
    assert 'placement=2 node(s) x 1 rank(s)' in (perflogs / 'ImbPairCheck.log').read_text()
    assert '(2 node(s) x 2)' in (perflogs / 'IorCheck.log').read_text()

    # Node screening once on every node (ReFrame's --distribute, as `make screen`): three
    # jobs, one per node. (Not STREAM: where a VM reports its host's whole LLC, STREAM's
    # arrays do not fit an emulated node's share of the memory, and it is refused.)
    out = _reframe_on_testbed('-n', 'HplNodeScreen', '--distribute=all',
                              '-S', 'HplNodeScreen.memory_fraction=0.002')
    assert len(_ok(out, 'HplNodeScreen')) == 3, out[-3000:]
    nodes = re.findall(r'^\[\s+OK \] .*HplNodeScreen .*%\.nid=(n\d) ', out, re.M)
    assert sorted(nodes) == ['n1', 'n2', 'n3']


def test_one_node_s_ranks_talk_over_shared_memory_two_nodes_over_tcp(tmp_path):
    """The testbed holds Open MPI to TCP because its nodes share one host (two nodes of two
    ranks each crashed in MPI_Init over shared memory); a job on one node has no other node
    to collide with, and its ranks use shared memory as a real node's do (HPCC 5.3 s
    instead of 1.3 here): the last OMPI_MCA_btl each job exports. Dry runs: no cluster."""
    var = tmp_path / 'var'
    done = run_reframe('--system', 'testbed:srun', '-p', '^openmpi$', '-n', '^HpccCheck$',
                       '-n', '^ImbPairCheck%benchmark=PingPong', '--dry-run',
                       config='site-configs/testbed.py',
                       env={'HPCBENCH_TESTBED_DIR': str(tmp_path / 'no-testbed'),
                            'HPCBENCH_VAR': str(var)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    transports = {}
    for job in var.glob('stage/**/rfm_job.sh'):
        text = job.read_text()
        if 'srun' in text:
            tasks = re.search(r'^#SBATCH --ntasks-per-node=(\d+)$', text, re.M).group(1)
            transports[job.parent.name.split('_')[0], tasks] = re.findall(
                r'^export OMPI_MCA_btl=(\S+)$', text, re.M)[-1]
    assert transports == {('HpccCheck', '2'): 'self,vader,tcp',
                          ('ImbPairCheck', '1'): 'self,tcp'}, transports


def test_node_pairs_in_one_reframe_run_each_job_on_its_pair_a_drained_one_skipped(cluster,
                                                                                   tmp_path):
    """Issue 63: the acceptance's round of node pairs is one ReFrame run, each pair a test of
    its own (ReFrame's -P on pinned_nodes: hpcbench.rfm.plugins.PinnedNodes), its job asking
    Slurm for exactly its two nodes; with n3 drained, its pair skips saying why, the other
    is written. Names that are not a node's, a node named twice, a list longer than the job
    spans, and a pair split by a -P without its delimiter are refused, one message each,
    before any job is written. Dry runs."""
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))

    def pairs(var, listed, delimiter=('--param-values-delim=;',)):
        done = run_reframe('--system', 'testbed:srun', '-p', '^openmpi$', '-n',
                           '^ImbPairCheck%benchmark=PingPong', '-P',
                           f'ImbPairCheck.pinned_nodes={listed}', *delimiter,
                           '--dry-run', config='site-configs/testbed.py',
                           env={'HPCBENCH_TESTBED_DIR': str(cluster.root),
                                'HPCBENCH_VAR': str(tmp_path / var)})
        jobs = sorted(re.search(r'^#SBATCH --nodelist=(\S+)$', job.read_text(), re.M).group(1)
                      for job in (tmp_path / var / 'stage').glob('**/ImbPairCheck*/rfm_job.sh'))
        return done.returncode, jobs, ANSI.sub('', done.stdout)

    code, jobs, out = pairs('both', 'n1,n2;n2,n3')
    assert (code, jobs) == (0, ['n[1-2]', 'n[2-3]']), out[-3000:]
    subprocess.run(['scontrol', 'update', 'NodeName=n3', 'State=DRAIN',
                    'Reason=link flapping'], env=env, check=True, capture_output=True,
                   timeout=60)
    try:
        code, jobs, out = pairs('drained', 'n1,n2;n2,n3')
        assert (code, jobs) == (0, ['n[1-2]']), out[-3000:]
        assert re.search(r'^\[\s+SKIP \] .*ImbPairCheck .*%\.pinned_nodes=n2,n3 .*\[node n3 '
                         r'cannot run now: IDLE\+DRAIN: drained \(link flapping', out, re.M), \
            out[-3000:]
    finally:
        subprocess.run(['scontrol', 'update', 'NodeName=n3', 'State=RESUME'], env=env,
                       check=True, capture_output=True, timeout=60)
    for listed, says in (('n1,n2$(touch PWNED)', "pinned_nodes 'n2$(touch PWNED)': not a node "
                                                 'name'),
                         ('n1,n1', 'pinned_nodes=n1,n1 names a node twice'),
                         ('n1,n2,n3', 'pinned_nodes=n1,n2,n3 is 3 node(s); its job spans 2')):
        code, jobs, out = pairs(f'bad-{len(listed)}', listed)
        assert code != 0 and jobs == [] and f'{says}' in out, out[-3000:]
    # A pair given without ReFrame's delimiter option: split at its comma, two tests of one
    # node each, both refused (Slurm would have added a node to each).
    code, jobs, out = pairs('no-delimiter', 'n1,n2', delimiter=())
    assert code != 0 and jobs == [], out[-3000:]
    assert out.count('is 1 node(s); its job spans 2') == 2, out[-3000:]
    assert not (ROOT / 'PWNED').exists()


def test_a_screen_asks_no_job_of_a_drained_node_and_says_why(cluster, tmp_path):
    """Issue 61, item 4: n3 drained through Slurm (`scontrol update ... State=DRAIN`), the
    screen as `make screen` runs it (--distribute=all) writes the jobs of n1 and n2; n3's
    test skips, saying the node is drained and why (its job would wait for the node
    forever); so does any other check given one node so (MPI start-up). Back in service, n3's job is written again. Dry runs: the jobs, not HPL,
    are what is shown."""
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))

    def screen(var, check='HplNodeScreen'):
        done = run_reframe('--system', 'testbed:srun', '-p', 'openmpi', '-n', check,
                           '--distribute=all', '--dry-run', config='site-configs/testbed.py',
                           env={'HPCBENCH_TESTBED_DIR': str(cluster.root),
                                'HPCBENCH_VAR': str(tmp_path / var)})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        jobs = sorted(re.search(r'^#SBATCH --nodelist=(\S+)$', job.read_text(), re.M).group(1)
                      for job in (tmp_path / var / 'stage').glob('**/rfm_job.sh'))
        return jobs, ANSI.sub('', done.stdout)

    subprocess.run(['scontrol', 'update', 'NodeName=n3', 'State=DRAIN',
                    'Reason=bad DIMM in slot 3'], env=env, check=True, capture_output=True,
                   timeout=60)
    try:
        jobs, out = screen('drained')
        assert jobs == ['n1', 'n2'], out[-3000:]
        assert re.search(r'^\[\s+SKIP \] .*HplNodeScreen .*%\.nid=n3 .*\[node n3 cannot run '
                         r'now: IDLE\+DRAIN: drained \(bad DIMM in slot 3 \[root@', out, re.M), \
            out[-3000:]
        # Any check given one node so, not the screens alone (every benchmark's QuietNode).
        jobs, out = screen('drained-mpi-startup', 'MpiStartupCheck')
        assert jobs and 'n3' not in jobs, out[-3000:]
        assert re.search(r'^\[\s+SKIP \] .*MpiStartupCheck .*%\.nid=n3 .*\[node n3 cannot run '
                         r'now: IDLE\+DRAIN: drained', out, re.M), out[-3000:]
    finally:
        subprocess.run(['scontrol', 'update', 'NodeName=n3', 'State=RESUME'], env=env,
                       check=True, capture_output=True, timeout=60)
    # Back in service as the controller says it, not as the command was given: a loaded
    # host's slurmd may answer late, and the screen rightly skips a node not responding.
    testbed_processes.wait_for('n3 in service', lambda: not slurm_query.nodes_out_of_service(
        ['n3'], env), timeout=120)
    jobs, out = screen('resumed')
    assert jobs == ['n1', 'n2', 'n3'], out[-3000:]


@pytest.mark.spack
def test_a_described_cluster_runs_a_multi_node_check_through_slurm(cluster, tmp_path):
    """`hpcbench new-system` on the testbed, its Open MPI named as a cluster's install
    (--mpi: this machine's Open MPI prefix, so nothing is built again), then its stack set up
    (hpcbench setup --system NAME, as `make run` starts) and a 2-node HPL of the described
    system through Slurm with that MPI. The system's files go where a site's would
    (site-configs/, spack-envs/, references/) and are removed after; its results under
    tmp_path."""
    name = 'testbed-described'
    made = [ROOT / 'site-configs' / f'{name}.yaml', ROOT / 'site-configs' / f'{name}.py',
            ROOT / 'spack-envs' / name, ROOT / 'references' / f'{name}.yaml']
    assert not any(p.exists() for p in made), f'{name} exists: not this test\'s to replace'
    env = {'SLURM_CONF': str(cluster.slurm_conf), 'HPCBENCH_VAR': str(tmp_path / 'var')}
    openmpi = paths.cache_dir() / 'mpi' / 'openmpi'
    try:
        described = subprocess.run(
            [str(BIN / 'hpcbench'), 'new-system', name, f'--io-directory={tmp_path}',
             f'--mpi={openmpi}'], env={**os.environ, **env}, capture_output=True, text=True,
            timeout=600)
        assert described.returncode == 0, described.stdout + described.stderr
        assert yaml.safe_load(made[0].read_text())['mpi_prefixes'] == {'openmpi': str(openmpi)}
        setup = subprocess.run([str(BIN / 'hpcbench'), 'setup', '--system', name],
                               env={**os.environ, **env}, capture_output=True, text=True,
                               timeout=3000)
        assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-2000:]
        proc = run_reframe('--system', f'{name}:batch', '-p', '^openmpi$', '-r',
                           '-n', 'HplCheck%layout_name=per-core%num_nodes=2',
                           '-S', 'HplCheck.memory_fraction=0.002', '-S', 'HplCheck.repeats=1',
                           config=f'site-configs/{name}.py', env=env)
        out = ANSI.sub('', proc.stdout)
        assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
        assert re.search(rf'^\[\s+OK \] \(\s*\d+/\d+\) HplCheck .*@{name}:batch\+openmpi$',
                         out, re.M), out[-3000:]
        perflog = tmp_path / 'var' / 'perflogs' / name / 'batch' / 'HplCheck.log'
        assert re.search(r'\|inputs=N=\d+ NB=\d+ P=2 Q=2 per-core.* nodes=2 ',
                         perflog.read_text())
        job, = (tmp_path / 'var' / 'output').glob('**/HplCheck_*/rfm_job.sh')
        assert f'export PATH={openmpi}/bin:$PATH' in job.read_text()
    finally:
        for path in made:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def test_a_site_s_munged_started_from_the_testbed_s_shell_is_not_the_testbed_s(tmp_path):
    """Issue 60, item 21: a user's shell that ran `eval "$(ci/testbed/testbed env)"` and then
    started its own munged (or MariaDB): that daemon carries the testbed's SLURM_CONF, and
    `testbed stop` took it for the testbed's. Only the Slurm daemons are told by it; the
    others by their state directory on their command line."""
    layout = testbed_system.Layout(tmp_path / 'testbed')
    started = []
    try:
        for name in ('munged', 'mariadbd', 'slurmd'):
            program = tmp_path / 'bin' / name
            program.parent.mkdir(exist_ok=True)
            shutil.copy(shutil.which('sleep'), program)
            started.append(subprocess.Popen(
                [str(program), '300'], env={**os.environ, 'SLURM_CONF': str(layout.slurm_conf)}))
        time.sleep(0.3)
        found = testbed_processes.found_running(layout)
        assert sorted(found.values()) == [started[2].pid], found
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
