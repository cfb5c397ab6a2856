"""The emulator of the testbed system (hpcbench.stack.testbed_system: what it is): the
configuration files of a real Slurm cluster on this machine, for the suite's CI
(`ci/testbed/testbed`); its daemons are started and stopped by hpcbench.devtools.
testbed_daemons.

munged, MariaDB with slurmdbd (accounting: ReFrame's `slurm` backend polls sacct),
slurmctld and N slurmd emulating nodes n1..nN (Slurm's MULTIPLE_SLURMD: one address, one
port each). Everything lives in one state directory (configs, database, spool, logs, PID
files); `start` is idempotent, `stop` ends exactly the processes `start` recorded, by PID.

Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server) are installed when missing
(as root). PID 1 here is not systemd and cgroups are not usable: proctrack/linuxproc and
task/none. MpiDefault is pmix (plain srun of an MPI program fails in MPI_Init with none).
"""
from hpcbench.stack.testbed_system import (CLUSTER, CTLD_PORT, DB_PORT, DBD_PORT,
                                           FIRST_SLURMD_PORT, GPU_FEATURE, GPU_GRES,
                                           GPU_NODES, GPU_TYPE, GPUS_PER_NODE,
                                           SITE_GPU_NODES, SLURM_GPU_PARTITION,
                                           SLURM_PARTITION)

# libpmix-dev: Slurm's mpi/pmix plugin (srun --mpi=pmix) dlopens the unversioned libpmix.so,
# which only the -dev package provides.
APT_PACKAGES = ('slurm-wlm', 'slurmdbd', 'munge', 'mariadb-server', 'mariadb-client',
                'libpmix-dev')


def stand_in_devices(layout):
    """The GPU nodes' stand-in device files, one per GPU (they share them: one host)."""
    return [layout.root / 'dev' / f'nvidia{i}' for i in range(GPUS_PER_NODE)]


def gres_conf(layout):
    site_nodes = ''.join(
        f'NodeName={node.name} Name=gpu{f" Type={node.gres_type}" if node.gres_type else ""} '
        f'File={layout.root}/dev/nvidia0\n' for node in SITE_GPU_NODES)
    return (f'# Written by hpcbench.devtools.testbed: stand-in device files, no GPU.\n'
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
    return f'''# Written by hpcbench.devtools.testbed: {nodes} emulated nodes on {hostname}.
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
SchedulerParameters=batch_sched_delay=0
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
    return f'''# Written by hpcbench.devtools.testbed.
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
