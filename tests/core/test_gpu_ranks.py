"""One rank per GPU (hpcbench.core.gpu_ranks): a job's output read back rank by rank, and a
rank missing or printed twice refused in one message."""
import pytest

from conftest import FIXTURES

from hpcbench.core import gpu_ranks

JOB = ('== rank 1: GPU 6 on n2\ncalls from 2026/11/26 11:22:24.339\nsecond\n'
       'calls to 2026/11/26 11:22:31.000\n== rank 0: GPU 4 on n1\nfirst\n')


def test_each_rank_s_section_is_its_own_whatever_the_order_printed():
    sections = gpu_ranks.split(JOB, 2)
    assert sections[0] == ('4', 'n1', '\nfirst\n')
    assert sections[1][:2] == ('6', 'n2') and 'second' in sections[1][2]
    assert gpu_ranks.calls_window(sections[1][2]) == ('2026/11/26 11:22:24.339',
                                                      '2026/11/26 11:22:31.000')
    assert gpu_ranks.calls_window(sections[0][2]) is None


def test_a_rank_missing_or_printed_twice_is_one_message():
    with pytest.raises(gpu_ranks.RankOutputError, match=r'^no output of rank\(s\) 2, 3 of 4'):
        gpu_ranks.split(JOB, 4)
    with pytest.raises(gpu_ranks.RankOutputError, match=r'^rank 0 printed twice$'):
        gpu_ranks.split(JOB + '== rank 0: GPU 4 on n1\nagain\n', 2)


def test_the_job_prints_the_ranks_in_order_and_keeps_a_failed_launch_s_status():
    first, show, end = gpu_ranks.print_ranks_commands()
    assert first == 'status=$?' and 'sort -t- -k2 -n' in show
    assert end == '[ "$status" -eq 0 ] || exit "$status"'


def _run_wrapper(tmp_path, env, *program):
    """The rank wrapper run for real by sh, as a launcher starts it: local rank 0, the GPUs
    `CUDA_VISIBLE_DEVICES` gives; its rank output back."""
    import os
    import subprocess
    script = tmp_path / gpu_ranks.SCRIPT
    script.write_text(gpu_ranks.wrapper_script())
    done = subprocess.run(['sh', str(script), *program], cwd=tmp_path, capture_output=True,
                          text=True, env={'PATH': os.environ['PATH'], 'SLURM_LOCALID': '0',
                                          'SLURM_PROCID': '0', **env})
    assert done.returncode == 0, done.stderr
    return (tmp_path / 'rank-0.out').read_text()


def _allowed():
    import re
    status = open('/proc/self/status').read()
    return re.search(r'^Cpus_allowed_list:\s*(\S+)', status, re.M).group(1)


def test_a_rank_is_bound_to_its_gpu_s_cpus_and_says_where_it_ran(tmp_path):
    """Two GPUs, the second next to CPU 0 only (NUMA node 0): the rank on GPU 1 runs there
    and says so; its program sees the binding."""
    import shutil
    from hpcbench.core import gpu_topology
    topology = gpu_topology.Topology((gpu_topology.GpuPlace(0, _allowed(), 0),
                                      gpu_topology.GpuPlace(1, '0', 0)),
                                     (('X', 'SYS'), ('SYS', 'X')))
    env = {**gpu_ranks.environment(topology), 'CUDA_VISIBLE_DEVICES': '1'}
    out = _run_wrapper(tmp_path, env, 'grep', 'Cpus_allowed_list', '/proc/self/status')
    tool = 'numactl' if shutil.which('numactl') else 'taskset'
    header = out.splitlines()[0]
    assert header.startswith('== rank 0: GPU 1 on ') and header.endswith(
        f', CPUs 0 ({tool}: GPU 1\'s CPUs' + (', memory on NUMA node 0)' if tool == 'numactl'
                                              else ')'))
    assert out.splitlines()[1].split() == ['Cpus_allowed_list:', '0']
    (rank, (gpu, cpus, how)), = gpu_ranks.placement(out).items()
    assert (rank, gpu, cpus) == (0, '1', '0') and how.startswith(tool)
    assert gpu_topology.misplaced(topology, 1, cpus) is None


def test_a_rank_given_none_of_its_gpu_s_cpus_is_not_bound_and_is_named(tmp_path):
    """The job may run on CPUs that are none of its GPU's (here GPU 0's CPUs are beyond this
    machine's): the rank runs where it may, says so, and the topology names it."""
    from hpcbench.core import gpu_topology
    topology = gpu_topology.Topology((gpu_topology.GpuPlace(0, '4000-4001', 1),),
                                     (('X',),))
    out = _run_wrapper(tmp_path, {**gpu_ranks.environment(topology),
                                  'CUDA_VISIBLE_DEVICES': '0'}, 'true')
    allowed = _allowed()
    assert out.splitlines()[0].endswith(
        f', CPUs {allowed} (not bound: none is next to GPU 0, whose CPUs are 4000-4001)')
    (_, cpus, _), = gpu_ranks.placement(out).values()
    assert gpu_topology.misplaced(topology, 0, cpus) == (
        f'its CPUs {allowed} are not all next to GPU 0, whose CPUs are 4000-4001 '
        '(NUMA node 1)')


def test_without_a_topology_the_rank_says_it_was_not_bound(tmp_path):
    out = _run_wrapper(tmp_path, {'CUDA_VISIBLE_DEVICES': '0'}, 'echo', 'ran')
    assert out.splitlines() == [f'== rank 0: GPU 0 on {out.split()[6].rstrip(",")}, CPUs '
                                f'{_allowed()} (not bound: no GPU topology)', 'ran']
    assert gpu_ranks.split(out, 1)[0][2] == '\nran\n'


# A node's `nvidia-smi -L`, as published (two A100s, each with a MIG instance).
LISTING = FIXTURES / 'gpu' / 'nvidia-smi-list' / 'a100-mig-published.txt'
SHELLS = ['sh', 'bash']


def _wrapper_run(tmp_path, shell, env, *program):
    """The rank wrapper run by `shell` with `env` and a stand-in nvidia-smi that prints
    LISTING for -L: (its exit status, its stderr, the rank's output or None)."""
    import os
    import subprocess
    tools = tmp_path / 'bin'
    tools.mkdir(exist_ok=True)
    (tools / 'nvidia-smi').write_text(f'#!/bin/sh\n[ "$1" = -L ] && exec cat "{LISTING}"\n'
                                      'exit 9\n')
    (tools / 'nvidia-smi').chmod(0o755)
    script = tmp_path / gpu_ranks.SCRIPT
    script.write_text(gpu_ranks.wrapper_script())
    done = subprocess.run([shell, str(script), *(program or ['true'])], cwd=tmp_path,
                          capture_output=True, text=True,
                          env={'PATH': f'{tools}:{os.environ["PATH"]}', 'SLURM_LOCALID': '0',
                               'SLURM_PROCID': '0', **env})
    out = tmp_path / 'rank-0.out'
    return done.returncode, done.stderr, out.read_text() if out.exists() else None


@pytest.mark.parametrize('shell', SHELLS)
@pytest.mark.parametrize('given, index', [
    ('GPU-e109d8d9-923e-7235-0429-96b7fdbcbd30', '1'),
    ('MIG-6e95ef19-5145-571b-b040-7e731f1c1af3', '0'),
    ('MIG-b4bcd4f3-6f69-516d-9404-b5ada80d760b,GPU-2927d07e-3fe9-7904-9e08-b08b82d9a37d', '1'),
])
def test_a_gpu_given_by_uuid_is_placed_by_its_index(tmp_path, shell, given, index):
    """Slurm and container runtimes may give GPUs by UUID: the rank keeps the UUID for CUDA,
    places itself by the index nvidia-smi -L gives it, and says both."""
    from hpcbench.core import gpu_topology
    topology = gpu_topology.Topology((gpu_topology.GpuPlace(0, _allowed(), 0),
                                      gpu_topology.GpuPlace(1, _allowed(), 0)),
                                     (('X', 'NV12'), ('NV12', 'X')))
    status, err, out = _wrapper_run(tmp_path, shell, {**gpu_ranks.environment(topology),
                                                       'CUDA_VISIBLE_DEVICES': given},
                                    'sh', '-c', 'echo "sees $CUDA_VISIBLE_DEVICES"')
    assert status == 0, err
    first = given.split(',')[0]
    (rank, (gpu, cpus, how)), = gpu_ranks.placement(out).items()
    assert (gpu, cpus) == (index, _allowed()) and how.endswith(f'; given as {first}')
    assert f'sees {first}' in out
    from hpcbench.rfm.gpu import misplaced_ranks
    assert misplaced_ranks(topology, out) == []


@pytest.mark.parametrize('shell', SHELLS)
def test_a_uuid_no_gpu_of_the_node_has_is_said_and_its_placement_not_passed(tmp_path, shell):
    from hpcbench.core import gpu_topology
    from hpcbench.rfm.gpu import misplaced_ranks
    topology = gpu_topology.Topology((gpu_topology.GpuPlace(0, _allowed(), 0),),
                                     (('X',),))
    unknown = 'GPU-00000000-0000-0000-0000-000000000000'
    status, err, out = _wrapper_run(tmp_path, shell, {**gpu_ranks.environment(topology),
                                                       'CUDA_VISIBLE_DEVICES': unknown})
    assert status == 0, err
    assert f'not bound: nvidia-smi -L does not list {unknown}' in out.splitlines()[0]
    said, = misplaced_ranks(topology, out)
    assert said.startswith(f'rank 0 (GPU {unknown} on ') and 'is not one nvidia-smi -L' in said


@pytest.mark.parametrize('shell', SHELLS)
@pytest.mark.parametrize('env, message', [
    ({'CUDA_VISIBLE_DEVICES': 'a[$(touch PWNED)]'}, "'a[$(touch PWNED)]' of "
     'CUDA_VISIBLE_DEVICES=a[$(touch PWNED)] is no GPU'),
    ({'CUDA_VISIBLE_DEVICES': '0,a[$(touch PWNED)]', 'SLURM_LOCALID': '1'}, 'is no GPU'),
    ({'CUDA_VISIBLE_DEVICES': '0,1', 'SLURM_LOCALID': 'a[$(touch PWNED)]'},
     "local rank 'a[$(touch PWNED)]' or rank '0' is no number"),
    ({'CUDA_VISIBLE_DEVICES': 'GPU-$(touch PWNED)'}, 'is no GPU'),
    ({'CUDA_VISIBLE_DEVICES': '-1'}, "'-1' of CUDA_VISIBLE_DEVICES=-1 is no GPU (an index, "
                                     'GPU-<uuid> or MIG-<uuid>; -1 hides every GPU)'),
    ({'CUDA_VISIBLE_DEVICES': ''}, 'the job was given no GPU (CUDA_VISIBLE_DEVICES is set and '
                                   'empty'),
    ({'CUDA_VISIBLE_DEVICES': '0,1', 'SLURM_LOCALID': '2'}, 'local rank 2 has no GPU of '
                                                             'CUDA_VISIBLE_DEVICES=0,1'),
])
def test_what_gives_a_rank_no_gpu_stops_it_with_one_message_and_runs_nothing(
        tmp_path, shell, env, message):
    status, err, out = _wrapper_run(tmp_path, shell, env, 'touch', 'RAN')
    assert status == 3 and message in err and len(err.splitlines()) == 1, err
    assert out is None and not (tmp_path / 'RAN').exists()
    assert not (tmp_path / 'PWNED').exists()
