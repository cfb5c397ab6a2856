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
# shared-memory transport between "nodes" of one host fails, TCP instead; shared memory alone
# cannot span two nodes, libfabric's TCP provider can.
SHARED_HOST_RUN_ENV = {
    'openmpi': {'OMPI_MCA_btl': 'self,tcp'},
    'intelmpi': {'I_MPI_FABRICS': 'shm:ofi', 'FI_PROVIDER': 'tcp'},
}


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
