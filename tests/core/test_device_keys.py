"""The keys of a GPU's, a GPU pair's and a network port's figures (hpcbench.core.device_keys):
one grammar, written and read back, including GPUs a launcher names by UUID and RDMA devices
as kernels name them."""
import pytest

from hpcbench.core import device_keys


@pytest.mark.parametrize('key', [
    device_keys.Gpu('n1', '3'),
    # CUDA_VISIBLE_DEVICES naming a GPU or a MIG slice by its UUID, as sites set it.
    device_keys.Gpu('nid001', 'GPU-8ca2c1a5-1c3e-4f0b-9d3a-000000000001'),
    device_keys.Gpu('a100-node.cluster', 'MIG-GPU-8ca2c1a5/1/0'),
    device_keys.GpuPair('n1', 0, 1),
    device_keys.GpuPair('n1', 0, 0),
    device_keys.GpuPair('n1', 0, 0, 'n2'),
    device_keys.Nic('n1', 'mlx5_0', 1),
    device_keys.Nic('nid001', 'irdma-eth0', 2),
    device_keys.Nic('n1', 'bnxt_re1', 255),
])
def test_a_key_reads_back_as_what_was_written(key):
    assert device_keys.parse(str(key)) == key


@pytest.mark.parametrize('text', ['n1', 'n1:gpu', ':gpu0', 'n1:cpu0', 'n 1:gpu0', '-n1:gpu0',
                                  'n1:gpu0+n2', 7, 'n1:nic:mlx5_0', 'n1:nic:mlx5_0/0',
                                  'n1:nic:/1', 'n1:nic:mlx5 0/1', 'n1:nic:mlx5_0/1000',
                                  'n1:mlx5_0/1'])
def test_a_text_that_names_no_gpu_is_refused(text):
    with pytest.raises(device_keys.DeviceKeyError, match='is no GPU, GPU-pair or NIC key'):
        device_keys.parse(text)


def test_a_port_s_key_is_written_as_the_kernel_names_it_and_said_in_words():
    assert device_keys.nic_key('n7', 'mlx5_0', 1) == 'n7:nic:mlx5_0/1'
    assert device_keys.parse('n7:nic:mlx5_0/1').words() == 'port 1 of mlx5_0 of n7'
    with pytest.raises(device_keys.DeviceKeyError):
        device_keys.nic_key('n7', 'mlx5_0;reboot', 1)
