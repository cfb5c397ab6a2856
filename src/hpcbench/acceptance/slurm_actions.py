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


def reservation_name(node):
    return RESERVATION_PREFIX + _node(node)


def reserve(node, user, minutes):
    """A maintenance reservation of `node` for `user` (the watch's jobs run in it; no user
    job lands on the node first), starting now, `minutes` long."""
    return ['scontrol', 'create', 'reservation', f'ReservationName={reservation_name(node)}',
            'StartTime=now', f'Duration={int(minutes)}', f'Nodes={_node(node)}',
            f'Users={user}', 'Flags=MAINT,IGNORE_JOBS']


def release(name):
    if not _RESERVATION.fullmatch(name):
        raise AcceptanceError(f'{name[:80]!r} is no reservation of the watch\'s: not deleted')
    return ['scontrol', 'delete', f'ReservationName={name}']


def line(argv):
    """The shell line of an action (each argument quoted)."""
    return shlex.join(argv)


class SlurmNodes(NodeStates):
    """The controller of `system` (its environment: the testbed's own slurm.conf): nodes as
    it shows them now, and actions run through scontrol."""

    def seen(self, nodes_by_partition):
        """{node: SeenNode} of {partition: [nodes]} as the controller shows them now; a
        node it no longer shows is left out (the caller names it)."""
        names = sorted({n for nodes in nodes_by_partition.values() for n in nodes})
        if not names:
            return {}
        try:
            shown = slurm_query.shown_nodes(names, testbed_system.slurm_environment(
                self.system))
        except slurm_cluster.SlurmDescriptionError as err:
            raise AcceptanceError(f'the controller does not show the nodes: {err}') from None
        partition_of = {n: p for p, nodes in nodes_by_partition.items() for n in nodes}
        return {node.name: SeenNode(node.name, partition_of[node.name], node.state,
                                    node.reason)
                for node in shown if node.name in partition_of}

    def act(self, argv):
        """Run one action (an argument list of this module's); AcceptanceError naming it
        and what scontrol said where it fails."""
        done = subprocess.run(argv, capture_output=True, text=True, errors='replace',
                              timeout=120,
                              env=testbed_system.slurm_environment(self.system))
        if done.returncode != 0:
            raise AcceptanceError(f'`{line(argv)}` failed (exit {done.returncode}): '
                                  f'{(done.stderr or done.stdout).strip()[:300]}')
