"""The testbed's daemons started and stopped (`ci/testbed/testbed start|stop|status|env`, run
as `python -m hpcbench.devtools.testbed_daemons`): munged, MariaDB with slurmdbd, slurmctld and
one slurmd per emulated node, each recorded by PID and start time and ended by them. What
the cluster is (its nodes, its configuration files, where it lives) is
hpcbench.devtools.testbed."""
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
from pathlib import Path

from hpcbench.devtools import testbed_facts, testbed_metrics, testbed_slowdown
from hpcbench.machine import host
from hpcbench.stack import debian
from hpcbench.devtools.testbed import (APT_PACKAGES, gres_conf, slurm_conf, slurmdbd_conf,
                                       stand_in_devices)
from hpcbench.stack.testbed_system import (ACCOUNT, CLUSTER, CTLD_PORT, DB_PORT, DBD_PORT,
                                           DEFAULT_NODES, GPU_NODES, GPUS_PER_NODE,
                                           NVIDIA_MAJOR, SITE_GPU_NODES, Layout,
                                           configured_node_count, configured_nodes,
                                           gpu_node_names,
                                           node_memory_bytes, node_names, state_dir)
from hpcbench.devtools.testbed_processes import (TestbedError, alive, found_running, parent_pid,
                                              recorded, run_command, spawn, wait_for)

# Order of start; stop goes backwards.
DAEMONS = ('munged', 'mariadb', 'slurmdbd', 'slurmctld')


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
    layout.mpi_conf.write_text(f'# Written by hpcbench.devtools.testbed.\n{MPI_CONF}')
    testbed_facts.write_trees(layout, node_hardware(nodes))
    (layout.etc / 'gres.conf').write_text(gres_conf(layout))
    dbd = layout.etc / 'slurmdbd.conf'
    dbd.write_text(slurmdbd_conf(layout, password_file.read_text()))
    dbd.chmod(0o600)


def node_hardware(nodes):
    """{node: (memory bytes, GPUs)} of every emulated node of a testbed of `nodes` CPU
    nodes, as its slurm.conf declares them."""
    gpu_memory = node_memory_bytes(GPU_NODES)
    return {**{name: (node_memory_bytes(nodes), 0) for name in node_names(nodes)[:nodes]},
            **{name: (gpu_memory, GPUS_PER_NODE) for name in gpu_node_names()},
            **{node.name: (gpu_memory, 1) for node in SITE_GPU_NODES}}


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
    # Drained nodes stay drained across a restart, as on any Slurm (its saved state): they
    # count as up once their slurmd answers; `status` names them and Slurm's reason.
    wait_for(f'{every} nodes', lambda: up_nodes(layout) == every,
             log=layout.log / 'slurmctld.log')


def node_states(layout):
    """{node: its state as sinfo abbreviates it} (idle, drain, alloc, idle*, down*...)."""
    out = run_command(layout, 'sinfo', '-h', '-N', '-o', '%N %t', check=False).stdout
    return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)


def up_nodes(layout):
    """Nodes whose slurmd answers (no `*`: not responding) and that are not down."""
    return sum(1 for state in node_states(layout).values()
               if not state.endswith('*') and not state.startswith(('down', 'fail')))


@contextlib.contextmanager
def _exclusive(layout):
    """One start or stop at a time per state directory (jobs of a pipeline may start the
    testbed side by side: the first starts it, the others find it running)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.root / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start(nodes=DEFAULT_NODES, root=None, metrics=False):
    """Start the testbed (or nothing, when it already runs), and with `metrics` its metrics
    store (hpcbench.devtools.testbed_metrics), under the one lock: starts side by side
    install its packages one at a time (two apt-gets at once: one fails on apt's lock).
    Returns its Layout."""
    if nodes < 1:
        raise TestbedError(f'a testbed needs at least one node, not {nodes}')

    layout = Layout(Path(root or state_dir()))
    with _exclusive(layout):
        _start(layout, nodes)
        if metrics:
            testbed_metrics.start(layout)
        return layout


def _start(layout, nodes):
    # The metrics store's daemons (hpcbench.devtools.testbed_metrics) are not the cluster's.
    running = {name: pid for name, pid in recorded(layout).items()
               if name not in testbed_metrics.DAEMONS}
    if running:
        configured = configured_node_count(layout)
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
    # A degraded port's rising errors (testbed fault) end with the cluster.
    testbed_facts.end_all_errors(layout)
    # A node made slow (testbed slow): the CPU group made for it goes with it.
    for marker in sorted(layout.run.glob('slowed-*')) if layout.run.exists() else []:
        testbed_slowdown.restore(layout, marker.name[len('slowed-'):])

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
    return set(recorded(layout)) - set(testbed_metrics.DAEMONS) == \
        expected_daemons(configured_nodes(layout.root))


def status(root=None):
    layout = Layout(Path(root or state_dir()))
    running = recorded(layout)
    lines = [f'testbed {layout.root}: ' + (', '.join(f'{d}={p}' for d, p in sorted(
        running.items())) if running else 'not running')]
    if 'slurmctld' in running:
        lines.append(run_command(layout, 'sinfo', check=False).stdout.rstrip())
        reasons = run_command(layout, 'sinfo', '-R', '-h', '-o', '%N: %E', check=False)
        lines += [f'out of service: {line} (scontrol update NodeName=... State=RESUME)'
                  for line in reasons.stdout.splitlines() if line.strip()]
    return '\n'.join(lines)


def _parser():
    parser = argparse.ArgumentParser(
        prog='testbed', description="the suite's Slurm testbed on this machine: start, stop, "
                                    'status, env, slow, restore, fault, mend')
    sub = parser.add_subparsers(dest='command', required=True)
    begin = sub.add_parser('start', help='start the cluster (nothing when it runs)')
    begin.add_argument('--nodes', type=int, default=DEFAULT_NODES)
    begin.add_argument('--no-metrics', action='store_true',
                       help='without the metrics store (Prometheus, Pushgateway, '
                       'VictoriaMetrics)')
    sub.add_parser('stop', help='stop the processes start recorded')
    sub.add_parser('status', help='the recorded processes and sinfo')
    sub.add_parser('env', help='print the SLURM_CONF to export')
    slow = sub.add_parser('slow', help="make a node slow for real: its jobs get a share of "
                          "one CPU's time (a CPU cgroup quota on its slurmd)")
    slow.add_argument('node')
    slow.add_argument('--cpu-share', type=float, default=0.25,
                      help="the share of one CPU's time its jobs get (0.25)")
    restore = sub.add_parser('restore', help='give a node made slow its CPUs back')
    restore.add_argument('node')
    fault = sub.add_parser('fault', help="inject a fault into a node's hardware, as a job "
                           'on it reads it (hpcbench.devtools.testbed_facts)')
    fault.add_argument('node')
    fault.add_argument('fault', choices=testbed_facts.FAULTS)
    fault.add_argument('--gpu', type=int, default=0, help='the GPU of pcie-x8 (its place: 0)')
    fault.add_argument('--port', type=int, default=1, help='the port of port-half-rate (1)')
    mend = sub.add_parser('mend', help="a node's hardware healthy again")
    mend.add_argument('node')
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        if args.command == 'start':
            layout = start(args.nodes, metrics=not args.no_metrics)
            if not args.no_metrics:
                for name, url in testbed_metrics.urls().items():
                    print(f'{name}: {url}')
            print(status(layout.root))
        elif args.command == 'stop':
            stopped = stop()
            print(f'stopped: {", ".join(stopped) or "nothing was running"}')
        elif args.command == 'env':
            print(f'export SLURM_CONF={Layout(state_dir()).slurm_conf}')
        elif args.command == 'slow':
            group = testbed_slowdown.slow(Layout(state_dir()), args.node, args.cpu_share)
            print(f'{args.node}: its jobs get {args.cpu_share:g} of one CPU ({group})')
        elif args.command == 'fault':
            print(testbed_facts.inject(Layout(state_dir()), args.node, args.fault,
                                       gpu=args.gpu, port=args.port))
        elif args.command == 'mend':
            layout = Layout(state_dir())
            hardware = node_hardware(configured_nodes(layout.root)).get(args.node)
            if hardware is None:
                raise TestbedError(f'{args.node}: no such node in the testbed in {layout.root}')
            testbed_facts.mend(layout, args.node, *hardware)
            print(f'{args.node}: its hardware healthy again')
        elif args.command == 'restore':
            done = testbed_slowdown.restore(Layout(state_dir()), args.node)
            print(f'{args.node}: ' + ('its CPUs given back' if done else 'was not made slow'))
        else:
            print(status())
    except (TestbedError, testbed_slowdown.SlowdownError, subprocess.CalledProcessError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    return 0


if __name__ == '__main__':
    sys.exit(main())
