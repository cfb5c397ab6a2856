"""What the MPI stacks of this machine need at run time on a Slurm cluster, beyond each
stack's own run-time variables (hpcbench.stack.mpi_stacks): under Slurm's srun, and where
several Slurm nodes are one host. A described cluster's description records them
(hpcbench.stack.new_system), the testbed's site config sets them."""


# What each stack of this machine needs at run time under Slurm's srun, beyond its own
# run_env: Debian's MPICH speaks PMI-2, not PMIx (with PMIx every rank is a world of its
# own); Intel MPI reads its PMIx from Slurm's client library.
SRUN_RUN_ENV = {
    'mpich': {'SLURM_MPI_TYPE': 'pmi2'},
    'intelmpi': {'I_MPI_PMI_LIBRARY': 'libpmix.so.2'},
}
# And where several Slurm nodes are one host (the testbed's emulated nodes): Open MPI's
# shared-memory transport between "nodes" of one host fails (the ranks of two such nodes
# share one host name, so one session directory and one set of segment names: two nodes of
# two ranks each crashed in MPI_Init), TCP instead; shared memory alone cannot span two
# nodes, libfabric's TCP provider can.
SHARED_HOST_RUN_ENV = {
    'openmpi': {'OMPI_MCA_btl': 'self,tcp'},
    'intelmpi': {'I_MPI_FABRICS': 'shm:ofi', 'FI_PROVIDER': 'tcp'},
}
# What a job on one node of such a host runs with instead: its ranks are one node's, with a
# scratch directory of the job's own (hpcbench.core.job_script.mpi_scratch), so nothing of
# another node's is there to collide with, and shared memory between them is what a real
# node's ranks use, as Intel MPI's shm:ofi already does. Held to TCP, HPCC's two ranks on one
# testbed node took 5.3 s instead of 1.3 (its RandomAccess 2.1 s instead of 0.14; PingPong
# 6.4 us instead of 0.19). Open MPI 4 calls its shared-memory transport vader (5: sm, which
# takes vader as an alias).
ONE_NODE_RUN_ENV = {'openmpi': {'OMPI_MCA_btl': 'self,vader,tcp'}}


def run_env(names, srun=True, shared_hosts=False):
    """{stack name: its run-time variables} for the stacks `names` on a Slurm cluster:
    launched by srun (SRUN_RUN_ENV), on nodes that share hosts (SHARED_HOST_RUN_ENV)."""
    env = {}
    for name in names:
        merged = {**(SHARED_HOST_RUN_ENV.get(name, {}) if shared_hosts else {}),
                  **(SRUN_RUN_ENV.get(name, {}) if srun else {})}
        if merged:
            env[name] = merged
    return env


def one_node_run_env(env_vars):
    """What a job on one node sets over its environment's `env_vars`: for each stack whose
    shared-host variables (SHARED_HOST_RUN_ENV) those hold, exactly as given there, its
    ONE_NODE_RUN_ENV; nothing over a site's own values."""
    held = {name: str(value) for name, value in env_vars.items()}
    return {name: value for stack, shared in SHARED_HOST_RUN_ENV.items()
            if all(held.get(k) == v for k, v in shared.items())
            for name, value in ONE_NODE_RUN_ENV.get(stack, {}).items()}
