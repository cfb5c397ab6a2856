"""The Slurm testbed (hpcbench.testbed): its configuration, and a real cluster started,
used, started again and stopped on this machine (the daemons start in seconds)."""
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from hpcbench import testbed


def test_the_configuration_emulates_n_nodes_on_one_host(tmp_path):
    conf = testbed.slurm_conf(testbed.Layout(tmp_path), 4, 2, 6000, 'vm')
    assert 'NodeName=n[1-4] NodeHostname=vm NodeAddr=127.0.0.1 Port=17001-17004 CPUs=2 ' \
           'RealMemory=6000' in conf
    assert 'AccountingStorageType=accounting_storage/slurmdbd' in conf
    assert 'ProctrackType=proctrack/linuxproc' in conf and 'TmpFS=/tmp/slurm-%n' in conf


def test_a_testbed_of_no_nodes_is_refused(tmp_path):
    with pytest.raises(testbed.TestbedError, match='at least one node'):
        testbed.start(0, tmp_path)


def test_a_second_testbed_beside_a_running_one_is_refused(cluster, tmp_path):
    with pytest.raises(testbed.TestbedError, match='already in use: another testbed'):
        testbed.start(1, tmp_path / 'other')


def _daemons_alive(pids):
    return [p for p in pids if testbed._alive(p)]


@pytest.fixture
def cluster():
    if os.geteuid() != 0:
        pytest.skip('the testbed runs its daemons as root')
    # Not under pytest's 0700 tmp: munge and mysql must reach their directories.
    root = Path(tempfile.mkdtemp(prefix='hpcbench-testbed-'))
    root.chmod(0o755)
    layout = testbed.start(3, root)
    yield layout
    testbed.stop(root)
    shutil.rmtree(root)


def test_a_real_cluster_runs_a_two_node_job_with_accounting_and_stops_clean(cluster):
    env = dict(os.environ, SLURM_CONF=str(cluster.slurm_conf))
    first = testbed.recorded(cluster)
    assert set(first) == testbed.expected_daemons(3)
    # Each recorded PID is the daemon itself (munged runs as munge, not under runuser).
    assert open(f'/proc/{first["munged"]}/comm').read().strip() == 'munged'
    assert os.stat(f'/proc/{first["munged"]}').st_uid == pwd.getpwnam('munge').pw_uid
    assert testbed.idle_nodes(cluster) == 3

    # A second start while it runs changes nothing.
    assert testbed.start(3, cluster.root) == cluster
    assert testbed.recorded(cluster) == first
    with pytest.raises(testbed.TestbedError, match='runs with 3 nodes'):
        testbed.start(2, cluster.root)

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

    stopped = testbed.stop(cluster.root)
    assert set(stopped) == set(first)
    assert stopped[-1] == 'munged' and stopped[:3] == ['slurmd-n1', 'slurmd-n2', 'slurmd-n3']
    assert _daemons_alive(first.values()) == []
    assert testbed.recorded(cluster) == {}
    # Nothing the testbed started is left running (zombies of munged are not processes).
    leftovers = subprocess.run(['pgrep', '-f', str(cluster.root)], capture_output=True,
                               text=True).stdout.split()
    assert _daemons_alive(int(p) for p in leftovers) == []
