"""A real Slurm cluster on this machine, for the suite's CI (`ci/testbed/testbed`).

munged, MariaDB with slurmdbd (accounting: ReFrame's `slurm` backend polls sacct),
slurmctld and N slurmd emulating nodes n1..nN (Slurm's MULTIPLE_SLURMD: one address, one
port each). Everything lives in one state directory (configs, database, spool, logs, PID
files); `start` is idempotent, `stop` ends exactly the processes `start` recorded, by PID.

Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server) are installed when missing
(as root). PID 1 here is not systemd and cgroups are not usable: proctrack/linuxproc and
task/none. MpiDefault is pmix (plain srun of an MPI program fails in MPI_Init with none).
"""
import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import paths
from hpcbench.machine import host
from hpcbench.stack import blas, debian, mpi_stacks
from hpcbench.stack.testbed_processes import (TestbedError, alive, found_running, parent_pid,
                                              recorded, run_command, spawn, wait_for)

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
# the allocated ones (0,1 for both, 0 for one). Regular files will not do: slurmd refuses
# them ("not a valid character or block device") and then sets no CUDA_VISIBLE_DEVICES.
# The GPU programs themselves cannot run here.
GPU_NODES = 2
GPU_TYPE, GPUS_PER_NODE = 'h200', 2
GPU_GRES = f'gpu:{GPU_TYPE}:{GPUS_PER_NODE}'
SLURM_GPU_PARTITION = 'gpu'
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

# Order of start; stop goes backwards.
DAEMONS = ('munged', 'mariadb', 'slurmdbd', 'slurmctld')


def state_dir():
    """$HPCBENCH_TESTBED_DIR, else var/testbed of the checkout: the cluster is not a run's
    product, so HPCBENCH_VAR does not move it."""
    return Path(os.environ.get('HPCBENCH_TESTBED_DIR', paths.PROJECT_ROOT / 'var' / 'testbed'))


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


def node_extras(nodes):
    """The `extras` describing one of `nodes` emulated nodes (hpcbench.core.node): the host's
    clock and flop/cycle, its share of the memory, and the node count. The emulated nodes
    share one host, whose other nodes' jobs and daemons are always busy: no quiet-node
    check (hpcbench.rfm.quiet_node)."""
    return {**host.partition_extras(), 'memory_bytes': node_memory_bytes(nodes),
            'num_nodes': nodes, 'quiet_node': {'action': 'off'}}


def configured_nodes(root=None):
    """Nodes of the testbed in `root` (its slurm.conf, written by the last start), else
    the default: what site-configs/testbed.py describes."""
    return _configured_nodes(Layout(Path(root or state_dir()))) or DEFAULT_NODES


def gpu_node_names():
    return [f'g{n}' for n in range(1, GPU_NODES + 1)]


def node_names(nodes):
    """Every emulated node of a testbed of `nodes` CPU nodes: n1..nN, then the GPU nodes."""
    return [*(f'n{n}' for n in range(1, nodes + 1)), *gpu_node_names()]


def stand_in_devices(layout):
    """The GPU nodes' stand-in device files, one per GPU (they share them: one host)."""
    return [layout.root / 'dev' / f'nvidia{i}' for i in range(GPUS_PER_NODE)]


def gres_conf(layout):
    return (f'# Written by hpcbench.stack.testbed: stand-in device files, no GPU.\n'
            f'NodeName=g[1-{GPU_NODES}] Name=gpu Type={GPU_TYPE} '
            f'File={layout.root}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n')


def slurm_conf(layout, nodes, processor, memory_mb, hostname, gpu_memory_mb):
    """slurm.conf of a cluster of `nodes` emulated nodes on `hostname`, each with its
    `processor` (ReFrame's description: sockets, cores, threads) and `memory_mb`, and the
    GPU nodes (GPU_NODES, the same processor, `gpu_memory_mb`, GPU_GRES and the feature
    GPU_FEATURE): partitions that differ as a site's do, in node count, memory, GRES and
    features."""
    last_port = FIRST_SLURMD_PORT + nodes - 1
    threads = processor['num_cpus_per_core']
    cores = processor['num_cpus_per_socket'] // threads
    shape = (f"CPUs={processor['num_cpus']} Sockets={processor['num_sockets']} "
             f"CoresPerSocket={cores} ThreadsPerCore={threads} RealMemory=")
    gpu_ports = f'{last_port + 1}-{last_port + GPU_NODES}'
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
PartitionName={SLURM_PARTITION} Nodes=n[1-{nodes}] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName={SLURM_GPU_PARTITION} Nodes=g[1-{GPU_NODES}] MaxTime=INFINITE State=UP OverSubscribe=NO
'''


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


# --- processes ---------------------------------------------------------------------------------


# --- start / stop -------------------------------------------------------------------------------

def ensure_packages():
    try:
        debian.ensure(APT_PACKAGES)
    except debian.MissingPackages as err:
        raise TestbedError(str(err)) from None


# Slurm's MPI plugins' settings (mpi.conf). PMIx fences by a ring, every one: Slurm's default
# (a tree for fences without data) completes on each emulated node at once, without the
# others' contribution (its slurmd log says DONE on n1 before n2 took part), so MPI_Init's
# closing barrier held nothing back: a rank on n2 could send to rank 0 before rank 0 had
# registered its message handlers, and Open MPI's TCP transport called a null handler
# (SIGSEGV in MPI_Init: one HPL launch of about 180 looped here, and one CI run).
MPI_CONF = 'PMIxCollFence=ring\n'


def _prepare(layout, nodes):
    for d in (layout.etc, layout.run, layout.log, layout.root / 'ctld', layout.munge,
              layout.mysql):
        d.mkdir(parents=True, exist_ok=True)
    # munge and mysql work in their directories under it.
    layout.root.chmod(0o755)
    for name in node_names(nodes):
        (layout.root / 'spool' / name).mkdir(parents=True, exist_ok=True)
        # TmpFS: one per node (PMIx's step directories would collide), short paths for
        # PMIx's sockets.
        Path(f'/tmp/slurm-{name}').mkdir(exist_ok=True)
    for minor, device in enumerate(stand_in_devices(layout)):
        device.parent.mkdir(exist_ok=True)
        if device.is_char_device():
            continue
        if device.exists() or device.is_symlink():
            device.unlink()
        os.mknod(device, 0o644 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))

    shutil.chown(layout.munge, 'munge', 'munge')
    layout.munge_socket.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(layout.munge_socket.parent, 'munge', 'munge')
    layout.munge.chmod(0o755)    # the socket must be reachable; the key stays 0400
    shutil.chown(layout.mysql, 'mysql', 'mysql')
    key = layout.munge / 'munge.key'
    if not key.exists():
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        shutil.chown(key, 'munge', 'munge')

    password_file = layout.etc / 'db-password'
    if not password_file.exists():
        password_file.write_text(os.urandom(12).hex())
        password_file.chmod(0o600)

    layout.slurm_conf.write_text(slurm_conf(layout, nodes, host.processor_info(),
                                            node_memory_bytes(nodes) // 2**20,
                                            socket.gethostname(),
                                            node_memory_bytes(GPU_NODES) // 2**20))
    layout.mpi_conf.write_text(f'# Written by hpcbench.stack.testbed.\n{MPI_CONF}')
    (layout.etc / 'gres.conf').write_text(gres_conf(layout))
    dbd = layout.etc / 'slurmdbd.conf'
    dbd.write_text(slurmdbd_conf(layout, password_file.read_text()))
    dbd.chmod(0o600)


def _start_munge(layout):
    spawn(layout, 'munged', ['munged', '--foreground', '--force',
                             f'--key-file={layout.munge}/munge.key',
                             f'--socket={layout.munge_socket}',
                             f'--pid-file={layout.munge}/munged.daemon.pid',
                             f'--seed-file={layout.munge}/munged.seed',
                             f'--log-file={layout.munge}/munged.log'], user='munge')
    wait_for('munged', layout.munge_socket.exists, log=layout.munge / 'munged.log')


def _start_mariadb(layout):
    datadir = layout.root / 'mysql'
    if not (datadir / 'mysql').exists():
        datadir.mkdir(exist_ok=True)
        shutil.chown(datadir, 'mysql', 'mysql')
        run_command(layout, 'mariadb-install-db', '--user=mysql', f'--datadir={datadir}',
                    '--auth-root-authentication-method=socket', '--skip-test-db')

    spawn(layout, 'mariadb', ['mariadbd', '--user=mysql', f'--datadir={datadir}',
                              f'--socket={layout.db_socket}', '--bind-address=127.0.0.1',
                              f'--port={DB_PORT}', f'--pid-file={layout.mysql}/mariadb.pid',
                              f'--log-error={layout.mysql}/mariadb.log',
                              '--skip-name-resolve'])
    wait_for('MariaDB', layout.db_socket.exists, log=layout.mysql / 'mariadb.log')
    password = (layout.etc / 'db-password').read_text()
    sql = ("CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
           f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
           f"CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '{password}'; "
           "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; "
           "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
    run_command(layout, 'mariadb', f'--socket={layout.db_socket}', '-u', 'root', '-e', sql)


def _munge_answers():
    return subprocess.run(['sh', '-c', 'munge -n | unmunge'], capture_output=True).returncode == 0


def _port_open(port):
    with socket.socket() as s:
        return s.connect_ex(('127.0.0.1', port)) == 0


def _start_slurm(layout, nodes):
    spawn(layout, 'slurmdbd', ['slurmdbd', '-D'])
    wait_for('slurmdbd', lambda: _port_open(DBD_PORT), log=layout.log / 'slurmdbd.log')
    run_command(layout, 'sacctmgr', '-i', 'add', 'cluster', CLUSTER, check=False)
    spawn(layout, 'slurmctld', ['slurmctld', '-D', '-i'])
    wait_for('slurmctld', lambda: run_command(layout, 'scontrol', 'ping', check=False)
             .stdout.count('UP') > 0, log=layout.log / 'slurmctld.log')
    for name in node_names(nodes):
        spawn(layout, f'slurmd-{name}', ['slurmd', '-D', '-N', name])
    run_command(layout, 'sacctmgr', '-i', 'add', 'account', ACCOUNT, check=False)
    run_command(layout, 'sacctmgr', '-i', 'add', 'user', 'root', f'account={ACCOUNT}',
                check=False)
    every = len(node_names(nodes))
    wait_for(f'{every} idle nodes', lambda: idle_nodes(layout) == every,
             log=layout.log / 'slurmctld.log')


def idle_nodes(layout):
    out = run_command(layout, 'sinfo', '-h', '-N', '-o', '%N %t', check=False).stdout
    return sum(1 for line in out.splitlines() if line.split()[1:2] == ['idle'])


@contextlib.contextmanager
def _exclusive(layout):
    """One start or stop at a time per state directory (jobs of a pipeline may start the
    testbed side by side: the first starts it, the others find it running)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.root / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start(nodes=DEFAULT_NODES, root=None):
    """Start the testbed (or nothing, when it already runs); returns its Layout."""
    if nodes < 1:
        raise TestbedError(f'a testbed needs at least one node, not {nodes}')

    layout = Layout(Path(root or state_dir()))
    with _exclusive(layout):
        return _start(layout, nodes)


def _start(layout, nodes):
    running = recorded(layout)
    if running:
        configured = _configured_nodes(layout)
        if configured != nodes:
            raise TestbedError(f'the testbed in {layout.root} runs with {configured} nodes; '
                               f'stop it first to start {nodes}')
        if set(running) == expected_daemons(nodes):
            return layout
        raise TestbedError(f'the testbed in {layout.root} runs only partly '
                           f'({", ".join(sorted(running))}); stop it first')

    if os.geteuid() != 0:
        raise TestbedError('the testbed runs its daemons as root (munged as munge)')

    busy = [f'port {p}' for p in (CTLD_PORT, DBD_PORT, DB_PORT) if _port_open(p)]
    if layout.munge_socket.exists() and _munge_answers():
        busy.append(str(layout.munge_socket))
    if busy:
        raise TestbedError(f'{", ".join(busy)} already in use: another testbed or Slurm runs '
                           f'here (stop it with `testbed stop` and its HPCBENCH_TESTBED_DIR)')

    ensure_packages()
    _prepare(layout, nodes)
    try:
        _start_munge(layout)
        _start_mariadb(layout)
        _start_slurm(layout, nodes)
    except Exception:
        _stop(layout)
        raise

    return layout


def expected_daemons(nodes):
    return {*DAEMONS, *(f'slurmd-{name}' for name in node_names(nodes))}


def _configured_nodes(layout):
    found = re.search(r'^NodeName=n\[1-(\d+)\]', layout.slurm_conf.read_text(), re.M) \
        if layout.slurm_conf.exists() else None
    return int(found.group(1)) if found else 0


def stop(root=None, timeout=20.0):
    """End the testbed's daemons (slurmd, slurmctld, slurmdbd, MariaDB, munged): those
    `start` recorded (PID and start time), and any other found by what it is (its state
    directory in its command line or environment), as when the state directory was
    removed while they ran; never a process that only reuses a recorded PID. Returns their
    names."""
    layout = Layout(Path(root or state_dir()))
    if not layout.root.exists():
        return _stop(layout, timeout)
    with _exclusive(layout):
        return _stop(layout, timeout)


def _stop(layout, timeout=20.0):
    running = recorded(layout)
    known = set(running.values())
    running.update({name: pid for name, pid in found_running(layout).items()
                    if pid not in known and parent_pid(pid) not in known})
    order = sorted(running, key=_stop_rank)
    for daemon in order:
        try:
            os.kill(running[daemon], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while alive(running[daemon]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(running[daemon]):
            os.kill(running[daemon], signal.SIGKILL)
    for pid_file in layout.run.glob('*.pid') if layout.run.exists() else []:
        pid_file.unlink()

    return order


# The order daemons stop in: the nodes first, munged (which they all use) last.
_STOP_ORDER = ('slurmd', 'slurmctld', 'slurmdbd', 'mariadb', 'munged')


def _stop_rank(name):
    """Rank of a daemon's name (`slurmd-n2` as recorded, `mariadbd[812]` as found)."""
    kind = re.sub(r'(-n\d+|\[\d+\])$', '', name)
    kind = {'mariadbd': 'mariadb', 'mysqld': 'mariadb'}.get(kind, kind)
    return _STOP_ORDER.index(kind) if kind in _STOP_ORDER else -1


def is_running(root=None):
    """True when every daemon of the testbed in `root` runs."""
    layout = Layout(Path(root or state_dir()))
    return set(recorded(layout)) == expected_daemons(configured_nodes(layout.root))


def status(root=None):
    layout = Layout(Path(root or state_dir()))
    running = recorded(layout)
    lines = [f'testbed {layout.root}: ' + (', '.join(f'{d}={p}' for d, p in sorted(
        running.items())) if running else 'not running')]
    if 'slurmctld' in running:
        lines.append(run_command(layout, 'sinfo', check=False).stdout.rstrip())
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='testbed', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    begin = sub.add_parser('start', help='start the cluster (nothing when it runs)')
    begin.add_argument('--nodes', type=int, default=DEFAULT_NODES)
    sub.add_parser('stop', help='stop the processes start recorded')
    sub.add_parser('status', help='the recorded processes and sinfo')
    sub.add_parser('env', help='print the SLURM_CONF to export')
    args = parser.parse_args(argv)
    try:
        if args.command == 'start':
            layout = start(args.nodes)
            print(status(layout.root))
        elif args.command == 'stop':
            stopped = stop()
            print(f'stopped: {", ".join(stopped) or "nothing was running"}')
        elif args.command == 'env':
            print(f'export SLURM_CONF={Layout(state_dir()).slurm_conf}')
        else:
            print(status())
    except (TestbedError, subprocess.CalledProcessError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    return 0


if __name__ == '__main__':
    sys.exit(main())
