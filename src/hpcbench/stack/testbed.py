"""A real Slurm cluster on this machine, for the suite's CI (`ci/testbed/testbed`): what it
is (its nodes, their facts, its configuration files, where it lives); its daemons are
started and stopped by hpcbench.stack.testbed_daemons.

munged, MariaDB with slurmdbd (accounting: ReFrame's `slurm` backend polls sacct),
slurmctld and N slurmd emulating nodes n1..nN (Slurm's MULTIPLE_SLURMD: one address, one
port each). Everything lives in one state directory (configs, database, spool, logs, PID
files); `start` is idempotent, `stop` ends exactly the processes `start` recorded, by PID.

Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server) are installed when missing
(as root). PID 1 here is not systemd and cgroups are not usable: proctrack/linuxproc and
task/none. MpiDefault is pmix (plain srun of an MPI program fails in MPI_Init with none).
"""
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import gpu_topology as gpu_topology_facts
from hpcbench.core import paths
from hpcbench.machine import host
from hpcbench.stack import blas, mpi_stacks

# libpmix-dev: Slurm's mpi/pmix plugin (srun --mpi=pmix) dlopens the unversioned libpmix.so,
# which only the -dev package provides.
APT_PACKAGES = ('slurm-wlm', 'slurmdbd', 'munge', 'mariadb-server', 'mariadb-client',
                'libpmix-dev')
DEFAULT_NODES = 3
# GPU nodes g1..gG beside n1..nN, Slurm's partition `gpu`: each declares its GPUs as a typed
# GRES (what a site's nodes declare, hpcbench.core.accelerators.from_gres) whose device files
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


def node_memory_bytes(nodes):
    """Memory of one emulated node: every node claims all the host's cores (they share
    them) and an equal share of its memory (so that jobs sized from it fit side by side)."""
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // nodes


def node_facts(nodes):
    """The description of one of `nodes` emulated nodes (hpcbench.machine.description): the
    host's clock and flop/cycle, its share of the memory, and the node count. The emulated nodes
    share one host, whose other nodes' jobs and daemons are always busy: no quiet-node
    check (hpcbench.rfm.quiet_node)."""
    return {**host.partition_facts(), 'memory_bytes': node_memory_bytes(nodes),
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


def stand_in_devices(layout):
    """The GPU nodes' stand-in device files, one per GPU (they share them: one host)."""
    return [layout.root / 'dev' / f'nvidia{i}' for i in range(GPUS_PER_NODE)]


def gres_conf(layout):
    site_nodes = ''.join(
        f'NodeName={node.name} Name=gpu{f" Type={node.gres_type}" if node.gres_type else ""} '
        f'File={layout.root}/dev/nvidia0\n' for node in SITE_GPU_NODES)
    return (f'# Written by hpcbench.stack.testbed: stand-in device files, no GPU.\n'
            f'NodeName=g[1-{GPU_NODES}] Name=gpu Type={GPU_TYPE} '
            f'File={layout.root}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n{site_nodes}')


def slurm_conf(layout, nodes, processor, memory_mb, hostname, gpu_memory_mb):
    """slurm.conf of a cluster of `nodes` emulated nodes on `hostname`, each with its
    `processor` (ReFrame's description: sockets, cores, threads) and `memory_mb`, and the
    GPU nodes (GPU_NODES, the same processor, `gpu_memory_mb`, GPU_GRES and the feature
    GPU_FEATURE), and SITE_GPU_NODES, each in a partition of its own: partitions that differ
    as a site's do, in node count, memory, GRES and features."""
    last_port = FIRST_SLURMD_PORT + nodes - 1
    threads = processor['num_cpus_per_core']
    cores = processor['num_cpus_per_socket'] // threads
    shape = (f"CPUs={processor['num_cpus']} Sockets={processor['num_sockets']} "
             f"CoresPerSocket={cores} ThreadsPerCore={threads} RealMemory=")
    gpu_ports = f'{last_port + 1}-{last_port + GPU_NODES}'
    site_nodes = ''.join(
        f'NodeName={node.name} NodeHostname={hostname} NodeAddr=127.0.0.1 '
        f'Port={last_port + GPU_NODES + n} {shape}{gpu_memory_mb} Gres={node.gres} '
        f'State=UNKNOWN\n' for n, node in enumerate(SITE_GPU_NODES, 1))
    site_partitions = ''.join(
        f'PartitionName={node.partition} Nodes={node.name} MaxTime=INFINITE State=UP '
        f'OverSubscribe=NO\n' for node in SITE_GPU_NODES)
    return f'''# Written by hpcbench.stack.testbed: {nodes} emulated nodes on {hostname}.
ClusterName={CLUSTER}
SlurmctldHost={hostname}(127.0.0.1)
SlurmctldPort={CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation={layout.root}/ctld
SlurmdSpoolDir={layout.root}/spool/%n
SlurmctldPidFile={layout.root}/ctld/slurmctld.pid
SlurmdPidFile={layout.root}/spool/%n/slurmd.pid
SlurmctldLogFile={layout.log}/slurmctld.log
SlurmdLogFile={layout.log}/slurmd-%n.log
TmpFS=/tmp/slurm-%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={DBD_PORT}
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
MinJobAge=30
GresTypes=gpu
NodeName=n[1-{nodes}] NodeHostname={hostname} NodeAddr=127.0.0.1 Port={FIRST_SLURMD_PORT}-{last_port} {shape}{memory_mb} State=UNKNOWN
NodeName=g[1-{GPU_NODES}] NodeHostname={hostname} NodeAddr=127.0.0.1 Port={gpu_ports} {shape}{gpu_memory_mb} Gres={GPU_GRES} Features={GPU_FEATURE} State=UNKNOWN
{site_nodes}PartitionName={SLURM_PARTITION} Nodes=n[1-{nodes}] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName={SLURM_GPU_PARTITION} Nodes=g[1-{GPU_NODES}] MaxTime=INFINITE State=UP OverSubscribe=NO
{site_partitions}'''


def slurmdbd_conf(layout, db_password):
    return f'''# Written by hpcbench.stack.testbed.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={DBD_PORT}
SlurmUser=root
LogFile={layout.log}/slurmdbd.log
PidFile={layout.root}/ctld/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={DB_PORT}
StorageUser=slurm
StoragePass={db_password}
StorageLoc=slurm_acct_db
'''






def configured_node_count(layout):
    found = re.search(r'^NodeName=n\[1-(\d+)\]', layout.slurm_conf.read_text(), re.M) \
        if layout.slurm_conf.exists() else None
    return int(found.group(1)) if found else 0

