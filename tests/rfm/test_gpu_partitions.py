"""Partitions with GPUs: `local` described from its nvidia-smi (here a real H200 node's
recorded output stands in for the tool), ReFrame's `devices` and features from it; without a
GPU the partition is described exactly as before."""
import json
import stat

from conftest import FIXTURES, run_reframe


def _recorded_nvidia_smi(tmp_path, node):
    """A stand-in for a node's nvidia-smi that prints what the real one printed there."""
    tool = tmp_path / 'nvidia-smi'
    recorded = FIXTURES / 'gpu' / node / 'nvidia-smi-query.csv'
    tool.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat "{recorded}";; '
                    '*) exit 9;; esac\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def _partition(env=None):
    shown = run_reframe('--show-config=systems/0/partitions/0', env=env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return json.loads(shown.stdout[shown.stdout.index('{'):])


def test_local_describes_its_gpus_from_its_nvidia_smi(tmp_path):
    tool = _recorded_nvidia_smi(tmp_path, 'h200')
    partition = _partition({'HPCBENCH_NVIDIA_SMI': str(tool)})
    assert partition['devices'] == [{'type': 'gpu', 'arch': 'sm_90', 'model': 'NVIDIA H200',
                                     'num_devices': 1}]
    assert set(partition['features']) >= {'gpu', 'cuda'}
    described = partition['extras']['accelerators']
    assert (described['model'], described['power_limit_w']) == ('NVIDIA H200', 700.0)
    assert described['datasheet']['memory_bandwidth'] == 4800e9


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
