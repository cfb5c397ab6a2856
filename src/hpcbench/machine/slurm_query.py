"""Asks the Slurm controller of the cluster this runs on (a login node) what it knows: its
configuration, partitions, nodes and srun's MPI plugins, read by hpcbench.core.slurm_cluster.
A command that is missing or fails is one error saying which and what it printed; nothing
is guessed."""
import shutil
import subprocess

from hpcbench.core.slurm_cluster import (SlurmDescriptionError, cluster_from,
                                         node_from_record, records, why_out)

QUERIES = {
    'config': ('scontrol', 'show', 'config'),
    'partitions': ('scontrol', 'show', 'partition', '-o'),
    'nodes': ('scontrol', 'show', 'node', '-o'),
    'mpi': ('srun', '--mpi=list'),
}


def ask(command, env=None, timeout=120):
    """What `command` printed; SlurmDescriptionError where it is not there or fails."""
    path = env.get('PATH') if env else None
    if not shutil.which(command[0], path=path):
        raise SlurmDescriptionError(f'`{command[0]}` is not on PATH: run this on a login node '
                                    'of the Slurm cluster to describe (Slurm is the scheduler '
                                    'it reads; for another, docs/your-cluster.md, "Other '
                                    'schedulers, by hand")')
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors='replace',
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise SlurmDescriptionError(f'`{" ".join(command)}` did not answer in {timeout} s') \
            from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        hint = ('; this node has no slurm.conf of its own and no configless controller: set '
                'SLURM_CONF to the cluster\'s') if said and 'configuration source' in said[-1] else ''
        raise SlurmDescriptionError(f'`{" ".join(command)}` failed (exit {done.returncode}): '
                                    f'{said[-1] if said else "it printed nothing"}{hint}')
    # srun --mpi=list prints its list on stderr in some releases.
    return done.stdout + (done.stderr if command[0] == 'srun' else '')


def running_cluster(env=None):
    """The cluster whose controller this node's Slurm commands reach (SLURM_CONF in `env`)."""
    answers = {name: ask(command, env) for name, command in QUERIES.items()}
    return cluster_from(answers['config'], answers['partitions'], answers['nodes'],
                        answers['mpi'])


def nodes_out_of_service(names, env=None, timeout=60, in_reservation=False):
    """{node: why it cannot run now} of the nodes `names` that cannot (down, drained, not
    responding, ...: hpcbench.core.slurm_cluster.why_out), as the controller says now; for
    a job in a reservation (`in_reservation`), a node reserved can."""
    found = {node.name: why_out(node.state, node.reason, in_reservation)
             for node in shown_nodes(names, env, timeout)}
    return {name: why for name, why in found.items() if why}


def shown_nodes(names=None, env=None, timeout=60):
    """The SlurmNodes (hpcbench.core.slurm_cluster) of the nodes `names` (None: every node)
    as the controller shows them now. (One name it does not know fails the whole command:
    ask for every node where some may be gone.)"""
    said = ask(('scontrol', 'show', 'node', '-o', *([','.join(names)] if names else [])),
               env, timeout)
    return [node_from_record(record) for record in records(said, 'Node')]
