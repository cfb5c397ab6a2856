"""What a figure of one GPU, one GPU pair or one network port is keyed by, written by the
checks beside their figures (hpcbench.rfm.plugins.Samples.device_figures) and read back by
the results layer (hpcbench.results.measured): `n1:gpu3` (GPU 3 of node n1), `n1:gpu0-gpu1`
(GPUs 0 and 1 of n1, a pair of one node), `n1:gpu0+n2:gpu0` (GPU 0 of n1 with GPU 0 of n2),
`n1:nic:mlx5_0/1` (port 1 of n1's RDMA device mlx5_0, as /sys/class/infiniband names it).
One grammar both ways: a key that does not read is refused, never guessed at."""
import re
from dataclasses import dataclass

from hpcbench.core.slurm_cluster import NODE_NAME

_NODE = NODE_NAME.pattern
# A GPU as the launcher gave it to a rank: its index, or the UUID of a GPU or MIG slice
# where CUDA_VISIBLE_DEVICES names them so (`GPU-8ca2...`, `MIG-...`).
_GPU = re.compile(rf'(?P<node>{_NODE}):gpu(?P<gpu>[A-Za-z0-9][\w./-]*)')
_PAIR_ONE_NODE = re.compile(rf'(?P<node>{_NODE}):gpu(?P<first>\d+)-gpu(?P<second>\d+)')
_PAIR_TWO_NODES = re.compile(rf'(?P<node>{_NODE}):gpu(?P<first>\d+)\+'
                             rf'(?P<other>{_NODE}):gpu(?P<second>\d+)')
# An RDMA device as the kernel names it (mlx5_0, bnxt_re1, irdma-eth0, efa_0) and its port
# (1 to 255).
_NIC = re.compile(rf'(?P<node>{_NODE}):nic:(?P<device>[A-Za-z0-9][\w.-]{{0,63}})/'
                  rf'(?P<port>[1-9][0-9]{{0,2}})')


class DeviceKeyError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class Gpu:
    """One GPU of a node: its index, or the UUID it was given by."""
    node: str
    gpu: str

    def __str__(self):
        return f'{self.node}:gpu{self.gpu}'


@dataclass(frozen=True, order=True)
class GpuPair:
    """Two GPUs that exchanged data: of one node (`other_node` '') or of two."""
    node: str
    first: int
    second: int
    other_node: str = ''

    @property
    def gpus(self):
        return (self.first, self.second)

    def __str__(self):
        if self.other_node:
            return f'{self.node}:gpu{self.first}+{self.other_node}:gpu{self.second}'
        return f'{self.node}:gpu{self.first}-gpu{self.second}'

    def words(self):
        """`GPUs 0 and 1 of n1`, `GPU 0 of n1 and GPU 0 of n2`."""
        if self.other_node:
            return f'GPU {self.first} of {self.node} and GPU {self.second} of {self.other_node}'
        return f'GPUs {self.first} and {self.second} of {self.node}'


@dataclass(frozen=True, order=True)
class Nic:
    """One port of one RDMA device of a node."""
    node: str
    device: str
    port: int

    def __str__(self):
        return f'{self.node}:nic:{self.device}/{self.port}'

    def words(self):
        """`port 1 of mlx5_0 of n1`."""
        return f'port {self.port} of {self.device} of {self.node}'


def gpu_key(node, gpu):
    return str(_checked(Gpu(str(node), str(gpu))))


def pair_key(node, first, second, other_node=''):
    return str(_checked(GpuPair(str(node), int(first), int(second), str(other_node or ''))))


def nic_key(node, device, port):
    return str(_checked(Nic(str(node), str(device), int(port))))


def _checked(key):
    parse(str(key))
    return key


def parse(text):
    """The Gpu, GpuPair or Nic a key names; DeviceKeyError in one sentence where it names
    none."""
    if not isinstance(text, str):
        raise DeviceKeyError(f'{text!r} is no GPU, GPU-pair or NIC key (a text such as '
                             'n1:gpu0)')
    for pattern, make in ((_NIC, lambda m: Nic(m['node'], m['device'], int(m['port']))),
                          (_PAIR_ONE_NODE, lambda m: GpuPair(m['node'], int(m['first']),
                                                             int(m['second']))),
                          (_PAIR_TWO_NODES, lambda m: GpuPair(m['node'], int(m['first']),
                                                              int(m['second']), m['other'])),
                          (_GPU, lambda m: Gpu(m['node'], m['gpu']))):
        found = pattern.fullmatch(text)
        if found:
            return make(found)
    raise DeviceKeyError(f'{text!r} is no GPU, GPU-pair or NIC key: one of NODE:gpuN, '
                         'NODE:gpuI-gpuJ, NODE:gpuI+NODE:gpuJ, NODE:nic:DEVICE/PORT')
