"""The watch's port to Slurm: the nodes as the controller shows them now, and what the watch
does to them, through `scontrol` and nothing else (drain, comment, resume, a reservation
made and deleted). Every action is an argument list, never a shell line: a node's name
is checked against Slurm's grammar where it enters (hpcbench.core.slurm_cluster.NODE_NAME)
and a reason is the suite's own words, one line; `line()` quotes one for the shell where it
is printed (without --act the watch prints them, as the acceptance's drain list does).
Tests give an object of the same methods."""
import re
import shlex
import subprocess
import time

from hpcbench.acceptance.state import AcceptanceError
from hpcbench.acceptance.use_case import NodeStates
from hpcbench.acceptance.watch_rules import SeenNode
from hpcbench.core import slurm_cluster
from hpcbench.machine import slurm_query
from hpcbench.stack import testbed_system

# A reservation's name: the suite's prefix and a node's name.
RESERVATION_PREFIX = 'hpcbench-watch-'
_RESERVATION = re.compile(r'^hpcbench-watch-[A-Za-z0-9][A-Za-z0-9_.-]*$')


def _node(name):
    if not slurm_cluster.NODE_NAME.fullmatch(str(name)):
        raise AcceptanceError(f'{str(name)[:80]!r} is no Slurm node name: nothing is done to it')
    return name


def _reason(text):
    return ' '.join(str(text).split())


def drain(node, reason):
    return ['scontrol', 'update', f'NodeName={_node(node)}', 'State=DRAIN',
            f'Reason={_reason(reason)}']


def comment(node, text):
    return ['scontrol', 'update', f'NodeName={_node(node)}', f'Comment={_reason(text)}']


def resume(node):
    return ['scontrol', 'update', f'NodeName={_node(node)}', 'State=RESUME']


def reservation_name(cycle):
    """The reservation of a watch cycle's re-tests: the suite's prefix and the cycle's name."""
    name = RESERVATION_PREFIX + str(cycle)
    if not _RESERVATION.fullmatch(name):
        raise AcceptanceError(f'{name[:80]!r} is no reservation name of the watch\'s')
    return name


def reserve(name, nodes, user, minutes):
    """A maintenance reservation `name` of `nodes` for `user` (the watch's jobs run in it;
    no job of anyone else lands on them first), from now, `minutes` long."""
    if not re.fullmatch(r'[a-z_][a-z0-9_.-]*', str(user)):
        raise AcceptanceError(f'{str(user)[:40]!r} is no user name: no reservation is made')
    return ['scontrol', 'create', 'reservation', f'ReservationName={reservation_name_checked(name)}',
            'StartTime=now', f'Duration={int(minutes)}',
            f'Nodes={",".join(_node(n) for n in nodes)}', f'Users={user}',
            'Flags=MAINT,IGNORE_JOBS']


def reservation_name_checked(name):
    if not _RESERVATION.fullmatch(str(name)):
        raise AcceptanceError(f'{str(name)[:80]!r} is no reservation of the watch\'s')
    return name


def release(name):
    return ['scontrol', 'delete', f'ReservationName={reservation_name_checked(name)}']


def line(argv):
    """The shell line of an action (each argument quoted)."""
    return shlex.join(argv)


class SlurmNodes(NodeStates):
    """The controller of `system` (its environment: the testbed's own slurm.conf): nodes as
    it shows them now, and actions run through scontrol."""

    def seen(self, nodes_by_partition):
        """{node: SeenNode} of {partition: [nodes]} as the controller shows them now; a
        node it no longer shows is left out (the caller names it)."""
        if not any(nodes_by_partition.values()):
            return {}
        try:
            # Every node: one the controller no longer knows would fail a query naming it.
            shown = slurm_query.shown_nodes(None, testbed_system.slurm_environment(
                self.system))
        except slurm_cluster.SlurmDescriptionError as err:
            raise AcceptanceError(f'the controller does not show the nodes: {err}') from None
        partition_of = {n: p for p, nodes in nodes_by_partition.items() for n in nodes}
        return {node.name: SeenNode(node.name, partition_of[node.name], node.state,
                                    node.reason)
                for node in shown if node.name in partition_of}

    def wait_in_service(self, nodes, timeout=120):
        """Until the controller shows every one of `nodes` in service but for the
        reservation they are in (a node just resumed is not responding until its slurmd
        answers the controller's ping); AcceptanceError
        naming those that are not after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.out_of_service(nodes, in_reservation=True)
            if not out:
                return
            if time.monotonic() > deadline:
                raise AcceptanceError('not in service after being resumed: ' + '; '.join(
                    f'{n}: {why}' for n, why in sorted(out.items())))
            time.sleep(1)

    def act(self, argv):
        """Run one action (an argument list of this module's); AcceptanceError naming it
        and what scontrol said where it fails."""
        done = subprocess.run(argv, capture_output=True, text=True, errors='replace',
                              timeout=120,
                              env=testbed_system.slurm_environment(self.system))
        if done.returncode != 0:
            raise AcceptanceError(f'`{line(argv)}` failed (exit {done.returncode}): '
                                  f'{(done.stderr or done.stdout).strip()[:300]}')
