"""The testbed system: a real Slurm cluster on this machine (hpcbench.devtools.testbed runs
it for the suite's CI, `ci/testbed/testbed`), as the stack builds for it and its site
config (site-configs/testbed.py) describes it: its shape (CPU nodes n1..nN in `batch`, GPU
nodes with stand-in devices, nodes declared as sites declare theirs, ports, names), where
it lives (Layout, state_dir), the MPI stacks it launches, the BLAS it builds with, and the
facts of its nodes.
"""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import gpu_topology as gpu_topology_facts
from hpcbench.core import paths
from hpcbench.core.node import DEFAULT_OS_RESERVE_BYTES
from hpcbench.machine import host
from hpcbench.stack import blas, mpi_stacks
DEFAULT_NODES = 3
# GPU nodes g1..gG beside n1..nN, Slurm's partition `gpu`: each declares its GPUs as a typed
# GRES (what a site's nodes declare, hpcbench.machine.gpus.from_gres) whose device files
# are stand-ins: character devices of NVIDIA's numbers (major 195) under <state>/dev, which
# no driver answers here. Slurm allocates them by --gres=gpu:N, refuses a request beyond
# them ("Requested node configuration is not available"), and sets CUDA_VISIBLE_DEVICES to
# the allocated ones (0,...,7 for all, 0 for one). Regular files will not do: slurmd refuses
# them ("not a valid character or block device") and then sets no CUDA_VISIBLE_DEVICES.
# The GPU programs themselves cannot run here.
# Eight GPUs a node, linked as a published 8 x H100 node's (GPU_TOPOLOGY_FILE, `nvidia-smi
# topo -m` as Stas Bekman's "Machine Learning Engineering" prints it, network/README.md,
# github.com/stas00/ml-engineering commit 0030e63f: every pair 18 NVLinks, GPUs 0-3 next to
# CPUs 0-51 and NUMA node 0, 4-7 next to 52-103 and NUMA node 1). Its jobs run one rank per
# GPU placed by it; this host's few cores are none of GPUs 4-7's, so a rank there is named
# as placed away from its GPU: the wrong placement a site's job can meet.
GPU_NODES = 2
GPU_TYPE, GPUS_PER_NODE = 'h100', 8
GPU_GRES = f'gpu:{GPU_TYPE}:{GPUS_PER_NODE}'
GPU_TOPOLOGY_FILE = paths.PROJECT_ROOT / 'ci' / 'testbed' / 'gpu-node-topology.txt'
SLURM_GPU_PARTITION = 'gpu'


@dataclass(frozen=True)
class SiteGpuNode:
    """A GPU node declared as many sites declare theirs, one GPU: with an untyped GRES
    (`gpu:1`, no type in gres.conf) or a label of the site's own that no datasheet names.
    Its model is what the node's own tool says (`hpcbench new-system`'s facts job); its
    partition is Slurm's only (the testbed system runs its GPU checks on `gpu`)."""
    name: str
    partition: str
    gres_type: str = ''

    @property
    def gres(self):
        return f'gpu:{self.gres_type}:1' if self.gres_type else 'gpu:1'


SITE_GPU_NODES = (SiteGpuNode('u1', 'gpu-untyped'),
                  SiteGpuNode('s1', 'gpu-sitelabel', 'hopper'))
# A feature of the GPU nodes alone (a job may ask for it with --constraint).
GPU_FEATURE = 'hbm'
# The character device major of NVIDIA's GPUs (/dev/nvidia0 is 195, 0).
NVIDIA_MAJOR = 195
FIRST_SLURMD_PORT = 17001
CTLD_PORT, DBD_PORT, DB_PORT = 16817, 16819, 16306
CLUSTER, ACCOUNT = 'testbed', 'hpcbench'
SLURM_PARTITION = 'batch'
# The MPI stacks the cluster launches, each with the run-time variables that span its nodes
# (site-configs/testbed.py). An MVAPICH2 a site built with Hydra alone has no Slurm PMI, and
# this Hydra has no ssh between nodes: it runs on `local` only.
MPI_STACKS = ('openmpi', 'mpich', 'intelmpi')


def mpi_stacks_launched():
    """The MPI stacks of this machine the cluster launches (MPI_STACKS)."""
    return [s for s in mpi_stacks.local_stacks() if s.name in MPI_STACKS]


def blas_libraries():
    """The BLAS the cluster builds with: the machine's default only (its stacks are compared
    on the cluster; BLAS libraries on the host, `local`)."""
    return blas.local_libraries()[:1]


def state_dir():
    """$HPCBENCH_TESTBED_DIR, else var/testbed of the checkout: the cluster is not a run's
    product, so HPCBENCH_VAR does not move it."""
    return paths.from_environment('HPCBENCH_TESTBED_DIR', paths.PROJECT_ROOT / 'var' / 'testbed')


@dataclass(frozen=True)
class Layout:
    """Where everything of a testbed lives."""
    root: Path

    @property
    def etc(self):
        return self.root / 'etc'

    @property
    def slurm_conf(self):
        return self.etc / 'slurm.conf'

    @property
    def mpi_conf(self):
        return self.etc / 'mpi.conf'    # Slurm reads it beside slurm.conf

    @property
    def run(self):
        return self.root / 'run'        # the PID of every process start started, only

    @property
    def log(self):
        return self.root / 'log'

    @property
    def munge(self):
        return self.root / 'munge'      # owned by munge: key, seed, log

    @property
    def mysql(self):
        return self.root / 'mysql-run'  # owned by mysql: socket, log

    @property
    def db_socket(self):
        return self.mysql / 'mariadb.sock'

    @property
    def munge_socket(self):
        # The default one: Slurm's clients and its slurmdbd connection look only there.
        return Path('/run/munge/munge.socket.2')

    def pid_file(self, daemon):
        return self.run / f'{daemon}.pid'

    @property
    def facts(self):
        # Each emulated node's hardware as a tree of files (hpcbench.devtools.testbed_facts).
        return self.root / 'facts'

    @property
    def facts_root(self):
        """Where a job reads its node's facts (hpcbench.core.node_facts.ROOT_ENV): `%n`
        is the node's name."""
        return f'{self.facts}/%n'


def node_memory_bytes(nodes):
    """Memory of one emulated node: every node claims all the host's cores (they share
    them) and an equal share of its memory (so that jobs sized from it fit side by side)."""
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // nodes


def node_facts(nodes):
    """The description of one of `nodes` emulated nodes (hpcbench.machine.description): the
    host's clock and flop/cycle, its share of the memory and of the memory its one OS keeps,
    and the node count. The emulated nodes share one host, whose other nodes' jobs and
    daemons are always busy: no quiet-node check (hpcbench.core.quiet_node)."""
    return {**host.partition_facts(), 'memory_bytes': node_memory_bytes(nodes),
            'os_reserve_bytes': DEFAULT_OS_RESERVE_BYTES // nodes,
            'num_nodes': nodes, 'quiet_node': {'action': 'off'}}


def configured_nodes(root=None):
    """Nodes of the testbed in `root` (its slurm.conf, written by the last start), else
    the default: what site-configs/testbed.py describes."""
    return configured_node_count(Layout(Path(root or state_dir()))) or DEFAULT_NODES


def gpu_topology():
    """The GPU nodes' topology (GPU_TOPOLOGY_FILE, hpcbench.core.gpu_topology)."""
    return gpu_topology_facts.parse(GPU_TOPOLOGY_FILE.read_text())


def gpu_node_names():
    return [f'g{n}' for n in range(1, GPU_NODES + 1)]


def node_names(nodes):
    """Every emulated node of a testbed of `nodes` CPU nodes: n1..nN, then the GPU nodes
    (g1..gG, then SITE_GPU_NODES)."""
    return [*(f'n{n}' for n in range(1, nodes + 1)), *gpu_node_names(),
            *(node.name for node in SITE_GPU_NODES)]


def configured_node_count(layout):
    found = re.search(r'^NodeName=n\[1-(\d+)\]', layout.slurm_conf.read_text(), re.M) \
        if layout.slurm_conf.exists() else None
    return int(found.group(1)) if found else 0


def layout_environment(layout):
    """This process's environment with Slurm's commands pointed at `layout`'s slurm.conf."""
    return dict(os.environ, SLURM_CONF=str(layout.slurm_conf))


def slurm_environment(system):
    """The environment in which Slurm's commands reach `system`'s controller: the testbed's
    slurm.conf once a start has written it (as its site config points ReFrame at it);
    another system's, this login node's own (the environment as it is)."""
    layout = Layout(state_dir())
    if system == 'testbed' and layout.slurm_conf.exists():
        return layout_environment(layout)
    return dict(os.environ)
