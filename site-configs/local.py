"""ReFrame configuration of the `local` system: whatever machine this is.

One partition, the host itself: its processor topology is ReFrame's detection (cached under
var/topology), its memory, clock and flop/cycle come from /proc (hpcbench.machine.host), and its
GPUs, where it has some, from its nvidia-smi (ReFrame's `devices`, the features `gpu` and
`cuda`, the datasheet figures in `extras`). One environment per MPI stack this machine has
(hpcbench.stack.mpi_stacks: an installed MVAPICH2 is found), and one per other launcher of a
stack (mvapich2-rsh: MVAPICH2's mpirun_rsh, for the start-up check). HPL, HPCC and the DGEMM
ceiling also run on the first stack with each other BLAS library of the machine
(hpcbench.stack.blas: openmpi-blis, ...). Jobs run one at a time: benchmarks must not share
the node.
"""

from hpcbench.rfm import site_config  # first: its checks run before ReFrame writes anything
from hpcbench.rfm import site_environments, site_partitions
from hpcbench.machine import host
from hpcbench.stack import blas, mpi_stacks

STACKS = mpi_stacks.local_stacks()
# This host's GPUs, where it has some (its nvidia-smi), and how they are linked (topo -m):
# the partition's devices, features and description.
GPUS = host.accelerators()
GPU_SETTINGS, GPU_FIELDS = site_partitions.accelerator_settings(GPUS, host.gpu_topology(GPUS),
                                                            system='local')
spack_fields, _ = site_partitions.spack_partition_settings()
ENVIRONMENTS = site_environments.stack_environments(STACKS, ['local'], spack_fields,
                                              blas.local_libraries())

site_configuration = site_config.site(
    systems=[{
        'name': 'local',
        'descr': 'The machine the suite runs on',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'partitions': [site_partitions.reframe_partition(
            __file__, 'local', 'default',
            {**site_partitions.this_host(__file__, host.partition_facts), **GPU_FIELDS,
             **host.io_facts()},
            descr='This host', scheduler='local', launcher='mpirun', max_jobs=1,
            processor=host.processor_info('local', 'default'),
            environs=[env['name'] for env in ENVIRONMENTS], **GPU_SETTINGS)],
    }],
    environments=ENVIRONMENTS,
)
