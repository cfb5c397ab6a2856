"""Partitions with GPUs: `local` described from its nvidia-smi (here a real H200 node's
recorded output stands in for the tool), ReFrame's `devices` and features from it; without a
GPU the partition is described exactly as before."""
import json
import re
import stat

import pytest

from conftest import FIXTURES, run_reframe
from hpcbench.core import accelerators

# Which checks are listed, and the jobs written, depend on the Spack found.
pytestmark = pytest.mark.machine_dependent


def _recorded_nvidia_smi(tmp_path, node, topology='h200-one-gpu.txt'):
    """A stand-in for a node's nvidia-smi that prints what the real one printed there: its
    query and its `topo -m` (`topology`, of tests/fixtures/gpu/topology; None: it fails)."""
    tool = tmp_path / 'nvidia-smi'
    recorded = FIXTURES / 'gpu' / node / 'nvidia-smi-query.csv'
    matrix = f'cat "{FIXTURES / "gpu" / "topology" / topology}"' if topology else 'exit 9'
    tool.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat "{recorded}";; '
                    f'topo) {matrix};; *) exit 9;; esac\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def _partition(env=None):
    shown = run_reframe('--show-config=systems/0/partitions/0', env=env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return json.loads(shown.stdout[shown.stdout.index('{'):])


def test_local_describes_an_amd_node_from_its_rocm_smi(tmp_path):
    """No nvidia-smi: the MI250 node's recorded `rocm-smi -a --json` describes `local`'s
    GPU (its model as rocm-smi names it, its datasheet's figures, the feature `rocm`); the
    CUDA checks are not listed there."""
    import shutil
    if shutil.which('nvidia-smi'):
        pytest.skip('this host has an nvidia-smi, asked first')
    tool = tmp_path / 'rocm-smi'
    recorded = FIXTURES / 'gpu' / 'rocm-smi' / 'mi250-all-wandb.json'
    tool.write_text(f'#!/bin/sh\n[ "$1 $2" = "-a --json" ] && exec cat "{recorded}"; exit 9\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    partition = _partition({'HPCBENCH_ROCM_SMI': str(tool)})
    assert partition['devices'] == [{'type': 'gpu', 'arch': '', 'num_devices': 1,
                                     'model': 'AMD INSTINCT MI250 (MCM) OAM AC MBA'}]
    assert 'rocm' in partition['features'] and 'cuda' not in partition['features']
    described = partition['extras']['accelerators']
    assert described['datasheet']['model'] == 'MI250 (one of its two dies)'
    assert described['power_limit_w'] == 560.0


def test_local_describes_its_gpus_from_its_nvidia_smi(tmp_path):
    tool = _recorded_nvidia_smi(tmp_path, 'h200')
    partition = _partition({'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert partition['devices'] == [{'type': 'gpu', 'arch': 'sm_90', 'model': 'NVIDIA H200',
                                     'num_devices': 1}]
    assert set(partition['features']) >= {'gpu', 'cuda'}
    described = partition['extras']['accelerators']
    assert (described['model'], described['power_limit_w']) == ('NVIDIA H200', 700.0)
    assert described['datasheet']['memory_bandwidth'] == 4800e9
    assert described['topology'] == {'gpus': [{'index': 0, 'cpus': '0-15', 'numa': 0}],
                                     'links': [['X']]}


def test_a_gpu_topology_that_cannot_be_read_is_said_once_and_the_gpus_described(tmp_path):
    tool = _recorded_nvidia_smi(tmp_path, 'h200', topology=None)
    shown = run_reframe('--show-config=systems/0/partitions/0',
                        env={'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert shown.stderr.count("warning: this host's GPUs are described without their "
                              'topology: ') == 1, shown.stderr
    partition = json.loads(shown.stdout[shown.stdout.index('{'):])
    assert partition['devices'][0]['num_devices'] == 1
    assert 'topology' not in partition['extras']['accelerators']


def test_without_a_gpu_local_is_described_as_before(tmp_path):
    partition = _partition()
    assert partition.get('devices', []) == [] and 'gpu' not in partition.get('features', [])
    assert 'accelerators' not in partition['extras']


def test_a_failing_nvidia_smi_is_said_and_the_host_described_without_gpus(tmp_path):
    tool = tmp_path / 'nvidia-smi'
    tool.write_text('#!/bin/sh\necho "No devices were found"; exit 6\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    shown = run_reframe('--show-config=systems/0/partitions/0',
                        env={'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert shown.stderr.count('warning: this host is described without its GPUs: ') == 1
    assert 'exited with 6: No devices were found' in shown.stderr


def _fake_nvidia_smi(tmp_path, script):
    tool = tmp_path / 'nvidia-smi'
    tool.write_text('#!/bin/sh\n' + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def _described_without_gpus(tool, said, env=None):
    """ReFrame's commands, with `tool` as the node's nvidia-smi (and `env`): the host is
    described without its GPUs, said once, and lists the checks a host without a GPU lists."""
    env = {'HPCBENCH_NVIDIA_SMI': str(tool), **(env or {})}
    shown = run_reframe('--show-config=systems/0/partitions/0', env=env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert 'Traceback' not in shown.stderr
    assert shown.stderr.count('warning: this host is described without its GPUs: ') == 1
    assert said in shown.stderr, shown.stderr
    partition = json.loads(shown.stdout[shown.stdout.index('{'):])
    assert partition.get('devices', []) == [] and 'accelerators' not in partition['extras']
    assert _listed('site-configs/local.py', 'local', env) == _listed('site-configs/local.py',
                                                                     'local')


def test_a_node_of_two_gpu_models_is_said_once_and_its_cpu_checks_run(tmp_path):
    """Issue 51, item 7: every ReFrame command failed with a traceback."""
    h200 = (FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-query.csv').read_text().splitlines()
    h100 = (FIXTURES / 'gpu' / 'h100' / 'nvidia-smi-query.csv').read_text().splitlines()
    both = tmp_path / 'both.csv'
    both.write_text('\n'.join([*h200, h100[1].replace('0, NVIDIA H100', '1, NVIDIA H100', 1)])
                    + '\n')
    tool = _fake_nvidia_smi(tmp_path, f'cat "{both}"\n')
    _described_without_gpus(tool, 'a node of several accelerator models (NVIDIA H200 (sm_90): '
                                  'device 0; NVIDIA H100 80GB HBM3 (sm_90): device 1)')


def test_a_hanging_nvidia_smi_is_said_once_and_the_host_described_without_gpus(tmp_path):
    # The site's bound (20 s unless it says otherwise): each of the three ReFrame commands
    # waits for it.
    tool = _fake_nvidia_smi(tmp_path, 'exec sleep 600\n')
    _described_without_gpus(tool, 'did not answer within 1.5 s (a hung driver?)',
                            {'HPCBENCH_GPU_TOOL_TIMEOUT': '1.5'})


@pytest.mark.parametrize('given', ['20s', '0', '-3', 'nan', '3601'])
def test_a_gpu_tool_timeout_that_is_no_bound_is_refused_in_one_line(given):
    """Refused before anything is described, on a host with GPUs or without: taken as it
    is, '0' or 'nan' would describe every host without its GPUs."""
    shown = run_reframe('--show-config=systems/0/partitions/0',
                        env={'HPCBENCH_GPU_TOOL_TIMEOUT': given})
    assert shown.returncode != 0
    assert shown.stderr.strip() == (f'error: HPCBENCH_GPU_TOOL_TIMEOUT={given!r} is not a '
                                    'number of seconds above 0 and at most 3600'), shown.stderr


def test_the_gpu_tool_timeout_is_20_s_unless_the_site_says(monkeypatch):
    monkeypatch.delenv('HPCBENCH_GPU_TOOL_TIMEOUT', raising=False)
    assert accelerators.tool_timeout() == 20
    monkeypatch.setenv('HPCBENCH_GPU_TOOL_TIMEOUT', ' 90 ')
    assert accelerators.tool_timeout() == 90
    monkeypatch.setenv('HPCBENCH_GPU_TOOL_TIMEOUT', '0.5')
    assert accelerators.tool_timeout() == 0.5
    monkeypatch.setenv('HPCBENCH_GPU_TOOL_TIMEOUT', 'inf')
    with pytest.raises(accelerators.ToolTimeoutError, match="'inf' is not a number"):
        accelerators.tool_timeout()


def test_an_nvidia_smi_that_prints_no_text_is_said_once(tmp_path):
    tool = _fake_nvidia_smi(tmp_path, "printf 'index, name\\n0, \\377\\376 GPU\\n'\n")
    _described_without_gpus(tool, 'printed what is not UTF-8 text')


GPU_CHECKS = {'BabelStreamCheck', 'GpuDgemmCheck', 'HostDeviceBandwidthCheck', 'GpuNodeScreen'}


def _listed(config, partition, env=None):
    shown = run_reframe('--system', partition, '-l', config=config, env=env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return set(re.findall(r'^- (\w+)', shown.stdout, re.M))


def test_the_gpu_checks_are_listed_on_gpu_partitions_only(tmp_path):
    """Where a Spack builds their programs; without one (a clone alone) no check Spack builds
    is listed anywhere, the GPU checks neither. The CPU checks run on the GPU nodes' CPUs."""
    from hpcbench.stack import spack
    wanted = GPU_CHECKS if spack.find() else set()
    testbed = 'site-configs/testbed.py'
    listed = _listed(testbed, 'testbed:gpu')
    assert listed & GPU_CHECKS == wanted and 'HpccCheck' in listed
    for partition in ('testbed:srun', 'testbed:mpirun'):
        assert not _listed(testbed, partition) & GPU_CHECKS, partition
    assert not _listed('site-configs/local.py', 'local') & GPU_CHECKS
    tool = _recorded_nvidia_smi(tmp_path, 'h200')
    assert _listed('site-configs/local.py', 'local',
                   {'HPCBENCH_NVIDIA_SMI': str(tool)}) & GPU_CHECKS == wanted


def _dry_run(config, partition, tmp_path, *options, env=None):
    done = run_reframe('--system', partition, '-n', '|'.join(sorted(GPU_CHECKS)), '--dry-run',
                       *options, config=config,
                       env={'HPCBENCH_VAR': str(tmp_path / 'var'), **(env or {})})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return {p.parent.name: p.read_text()
            for p in (tmp_path / 'var' / 'stage').glob('*/*/*/*/rfm_job.sh')}


def test_the_testbed_s_gpu_jobs_ask_slurm_for_the_gpus_and_run_a_rank_per_gpu(tmp_path):
    jobs = _dry_run('site-configs/testbed.py', 'testbed:gpu', tmp_path,
                    '-S', 'num_gpu_nodes=2')
    assert set(jobs) == GPU_CHECKS
    for check, job in jobs.items():
        assert '#SBATCH --partition=gpu\n#SBATCH --gres=gpu:8\n' in job, check
        assert '#SBATCH --ntasks=16\n#SBATCH --ntasks-per-node=8\n' in job, check
        assert re.search(r'^srun \./gpu-rank\.sh ', job, re.M), check
        # Each rank next to its GPU, as the nodes' recorded topology has them.
        assert 'export HPCBENCH_GPU_NUMA=0:0:0:0:1:1:1:1\n' in job, check
    # The DGEMM's order and calls from the H100's datasheet and its GRES-described memory,
    # each rank's GPU sampled.
    assert re.search(r"--sample timestamp,power\.draw,.* 'dgemm-rate \+cuda cuda_arch=90'\)"
                     r"/bin/dgemm-rate-cuda\" 12800 320$", jobs['GpuDgemmCheck'], re.M)
    assert "'babelstream +cuda cuda_arch=90')/bin/cuda-stream\" --arraysize 268435456 " \
        '--numtimes 100 --csv' in jobs['BabelStreamCheck']


def test_local_s_gpu_jobs_come_from_its_nvidia_smi(tmp_path):
    tool = _recorded_nvidia_smi(tmp_path, 'h200')
    jobs = _dry_run('site-configs/local.py', 'local', tmp_path,
                    env={'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert set(jobs) == GPU_CHECKS
    assert re.search(r'^mpirun -np 1 \./gpu-rank\.sh ', jobs['HostDeviceBandwidthCheck'], re.M)
    assert 'host-device-bandwidth" 1073741824 10\n' in jobs['HostDeviceBandwidthCheck']
    assert "echo '== gpus'\nnvidia-smi --query-gpu=index,name," in jobs['GpuNodeScreen']


def _eight_gpu_nvidia_smi(tmp_path):
    """A stand-in for an 8-GPU H100 node's nvidia-smi: the H100 node's real query row given
    the indices 0 to 7, and the published 8 x H100 node's topology (GPUs 0-3 next to CPUs
    0-51 and NUMA node 0, 4-7 next to 52-103 and NUMA node 1; ci/testbed, its README)."""
    header, row = (FIXTURES / 'gpu' / 'h100' / 'nvidia-smi-query.csv').read_text().splitlines()
    query = tmp_path / 'query.csv'
    query.write_text('\n'.join([header, *(row.replace('0, ', f'{i}, ', 1) for i in range(8))])
                     + '\n')
    from hpcbench.stack import testbed_system
    topology = testbed_system.GPU_TOPOLOGY_FILE
    return _fake_nvidia_smi(tmp_path, f'case "$1" in --query-gpu=*) cat "{query}";; '
                                      f'topo) cat "{topology}";; *) exit 9;; esac\n')


GPU_TO_GPU = ('DeviceBufferPairCheck', 'DeviceBufferCollectiveCheck', 'NcclTestsCheck')


def _figures_of(output):
    """{test (its name and parameters): the figures it reports} of a dry run on intelmpi,
    from the `P: name: None unit` lines ReFrame prints after each test."""
    figures, test = {}, None
    for line in re.sub(r'\x1b\[[0-9;]*m', '', output).splitlines():
        passed = re.match(r'^\[\s+OK \] \(\s*\d+/\d+\) (\w+(?: %[\w.]+=\S+)*) .*\+intelmpi$',
                          line)
        if passed:
            test = passed.group(1)
            figures[test] = set()
        elif test and line.startswith('P: '):
            figures[test].add(line.split(':')[1].strip())
        elif not line.startswith('P: '):
            test = None
    return figures


def test_local_described_from_an_8_gpu_node_writes_gpu_to_gpu_jobs_placed_by_its_topology(
        tmp_path):
    """Acceptance of issue 54: the device-buffer pairs (28 launches of two ranks), the
    collectives over the 8 GPUs, nccl-tests with one rank per GPU, each rank given its GPU's
    CPUs and NUMA node; an MPI that cannot send from device memory skipped, saying so."""
    from hpcbench.stack import spack
    tool = _eight_gpu_nvidia_smi(tmp_path)
    done = run_reframe('--system', 'local', '-n', '|'.join(GPU_TO_GPU), '--dry-run',
                       env={'HPCBENCH_VAR': str(tmp_path / 'var'),
                            'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    scripts = {p.parent.parent.name + '/' + p.parent.name: p.read_text()
               for p in (tmp_path / 'var' / 'stage').glob('*/*/*/*/rfm_job.sh')}
    assert scripts
    placed = ('export HPCBENCH_GPU_CPUS=0-51:0-51:0-51:0-51:52-103:52-103:52-103:52-103\n'
              'export HPCBENCH_GPU_NUMA=0:0:0:0:1:1:1:1\n')
    pair = next(t for n, t in scripts.items() if n.startswith('intelmpi/DeviceBufferPairCheck'))
    assert placed in pair and 'export I_MPI_OFFLOAD=1\n' in pair
    assert "for pair in 0,1 0,2 0,3 0,4 0,5 0,6 0,7 1,2 " in pair and ' 6,7; do\n' in pair
    assert re.search(r'^mpirun -np 2 \./gpu-rank\.sh \S+/IMB-MPI1-GPU PingPong,Biband -msglog '
                     r'0:26 -mem_alloc_type device$', pair, re.M)
    collectives = [t for n, t in scripts.items()
                   if n.startswith('intelmpi/DeviceBufferCollectiveCheck')]
    assert len(collectives) == 2 and all(placed in t for t in collectives)
    assert all(re.search(r'^mpirun -np 8 \./gpu-rank\.sh ', t, re.M) for t in collectives)
    # The MPIs that cannot send from device memory are skipped, saying what they said.
    assert ('openmpi cannot send from GPU memory: ompi_info: built_with_cuda_support false'
            in done.stdout)
    # Each pair figure where it applies: the link's where the pairs have NVLinks of known
    # rate (within a node), none of them declared and then deleted.
    assert _figures_of(done.stdout)['DeviceBufferPairCheck %path=intra-node'] == {
        'latency', 'bandwidth', 'bidirectional_bandwidth', 'link_efficiency',
        'slowest_pair_link_efficiency'}
    between_nodes = run_reframe('--system', 'testbed:gpu', '-n', 'DeviceBufferPairCheck',
                                '-p', 'intelmpi', '--dry-run', config='site-configs/testbed.py',
                                env={'HPCBENCH_VAR': str(tmp_path / 'testbed')})
    assert between_nodes.returncode == 0, between_nodes.stdout[-3000:]
    assert _figures_of(between_nodes.stdout)['DeviceBufferPairCheck %path=inter-node'] == {
        'latency', 'bandwidth', 'bidirectional_bandwidth'}
    nccl = [t for n, t in scripts.items() if '/NcclTestsCheck' in n]
    if spack.find():
        assert len(nccl) == 5 and all(placed in t for t in nccl)
        assert all(re.search(r'^mpirun -np 8 \./gpu-rank\.sh .*nccl-tests@2\.16\.3 \+mpi '
                             r"cuda_arch=90 \^openmpi'\)/bin/\w+_perf\" -b 8 -e 8589934592 ",
                             t, re.M) for t in nccl)


@pytest.mark.parametrize('printed, said', [
    # Issue 70, item 6: every ReFrame command stopped (RecursionError).
    ('[' * 100000, "rocm-smi: not JSON a tool prints (nested past Python's stack)"),
    # Item 18: 1,000 GPUs, one index four times.
    ('{' + ', '.join(f'"card{i}": {{"Card series": "MI250"}}' for i in range(1000)) + '}',
     'rocm-smi: 1000 GPUs, more than a node has (1 to 64)'),
])
def test_a_gpu_tool_s_nonsense_leaves_the_host_described_without_gpus(tmp_path, printed,
                                                                       said):
    import shutil
    if shutil.which('nvidia-smi'):
        pytest.skip('this host has an nvidia-smi, asked first')
    (tmp_path / 'printed.json').write_text(printed)
    tool = tmp_path / 'rocm-smi'
    tool.write_text(f'#!/bin/sh\nexec cat "{tmp_path / "printed.json"}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    shown = run_reframe('--show-config=systems/0/partitions/0',
                        env={'HPCBENCH_ROCM_SMI': str(tool)})
    assert shown.returncode == 0 and 'Traceback' not in shown.stderr, shown.stderr[-3000:]
    assert shown.stderr.count('warning: this host is described without its GPUs: ') == 1
    assert said in shown.stderr, shown.stderr[-2000:]
    partition = json.loads(shown.stdout[shown.stdout.index('{'):])
    assert partition.get('devices', []) == []


def test_a_gpu_index_listed_twice_is_no_node_s_list(tmp_path):
    """The H200 node's real query, its one GPU's line four times: refused, one message."""
    header, row = (FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-query.csv').read_text().splitlines()
    (tmp_path / 'query.csv').write_text('\n'.join([header] + [row] * 4) + '\n')
    tool = _fake_nvidia_smi(tmp_path, f'cat "{tmp_path / "query.csv"}"\n')
    with pytest.raises(accelerators.AcceleratorError, match='nvidia-smi: GPU index 0 listed '
                                                            'twice'):
        accelerators.detect_any({'nvidia-smi': str(tool)})
