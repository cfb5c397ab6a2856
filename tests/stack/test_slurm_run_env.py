"""What the MPI stacks need at run time on a Slurm cluster (hpcbench.stack.slurm_run_env):
under srun, on nodes that share hosts, and for a job on one node of such hosts, whose ranks
talk over shared memory as a real node's do."""
from hpcbench.stack import slurm_run_env


def test_nodes_sharing_hosts_hold_open_mpi_to_tcp_and_intel_mpi_to_libfabric_s():
    env = slurm_run_env.run_env(['openmpi', 'mpich', 'intelmpi'], srun=True, shared_hosts=True)
    assert env['openmpi'] == {'OMPI_MCA_btl': 'self,tcp'}
    assert env['intelmpi'] == {'I_MPI_FABRICS': 'shm:ofi', 'FI_PROVIDER': 'tcp',
                               'I_MPI_PMI_LIBRARY': 'libpmix.so.2'}
    assert slurm_run_env.run_env(['openmpi'], srun=True) == {}


def test_a_one_node_job_lifts_the_shared_host_restriction_and_nothing_a_site_set():
    # The testbed's Open MPI environment, as its site config exports it (ReFrame keeps
    # env_vars as given: values may be other than text).
    testbed_openmpi = {'OMPI_ALLOW_RUN_AS_ROOT': 1,
                       **slurm_run_env.run_env(['openmpi'], shared_hosts=True)['openmpi']}
    assert slurm_run_env.one_node_run_env(testbed_openmpi) == {
        'OMPI_MCA_btl': 'self,vader,tcp'}
    # A site's own transport choice, a cluster whose nodes are hosts, Intel MPI (shm:ofi is
    # already shared memory within a node): nothing.
    assert slurm_run_env.one_node_run_env({'OMPI_MCA_btl': '^openib'}) == {}
    assert slurm_run_env.one_node_run_env({'OMPI_MCA_btl': 'self,tcp,openib'}) == {}
    assert slurm_run_env.one_node_run_env({}) == {}
    assert slurm_run_env.one_node_run_env(
        slurm_run_env.run_env(['intelmpi'], shared_hosts=True)['intelmpi']) == {}
