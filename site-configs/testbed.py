"""ReFrame configuration of the `testbed` system: the Slurm cluster `ci/testbed/testbed start`
runs on this machine (hpcbench.devtools.testbed), with accounting, so ReFrame's `slurm` scheduler
submits with sbatch and polls sacct as on a production cluster.

- Nodes n1..nN (N from the running testbed's slurm.conf, else its default 3), each described
  as Slurm describes it: all the host's cores (ReFrame's detection of this host) and an equal
  share of its memory. They share one machine, so the figures measure the set-up, not a
  cluster: jobs run one at a time.
- Two partitions on Slurm's partition `batch`, differing in the launcher: `srun` (ranks
  started by Slurm: PMIx, PMI-2 for Debian's MPICH) and `mpirun` (each MPI's own launcher,
  which starts its daemons through srun inside the allocation).
- `gpu`, on Slurm's partition `gpu`: nodes g1..gG whose GPUs Slurm allocates by GRES
  (hpcbench.stack.testbed_system.GPU_GRES, stand-in device files), described from the GRES as a
  site's would be (hpcbench.machine.gpus.from_gres, its label named by
  hpcbench.machine.datasheets), linked as a recorded 8-GPU node
  (hpcbench.stack.testbed_system.GPU_TOPOLOGY_FILE): the GPU checks' jobs ask for them
  with --gres=gpu:N and run one rank per GPU (in a dry run: the GPUs are stand-ins, which a
  run skips, saying so); the CPU checks run on its nodes' CPUs too.
- Not described here: Slurm's partitions `gpu-untyped` and `gpu-sitelabel`
  (hpcbench.stack.testbed_system.SITE_GPU_NODES), GPU nodes as sites declare theirs, there for
  `hpcbench new-system` to describe.
- Each node's hardware: a tree of files of its own (hpcbench.devtools.testbed_facts:
  memory controllers, an InfiniBand HCA, the GPU nodes' nvidia-smi), where its jobs read
  their facts (HPCBENCH_FACTS_ROOT) and `ci/testbed/testbed fault` injects faults.
- One environment per MPI stack of this machine, built by spack-envs/testbed with the
  default BLAS (the BLAS comparison is `local`'s).
- Slurm's commands (sbatch, sacct, scancel) are pointed at the testbed's slurm.conf, once a
  start has written it.
"""
import os
import sys

from hpcbench.rfm import site_config  # first: its checks run before ReFrame writes anything
from hpcbench.rfm import site_environments, site_partitions
from hpcbench.core import node_facts
from hpcbench.machine import datasheets, host
from hpcbench.machine import gpus as machine_gpus
from hpcbench.devtools import testbed_daemons
from hpcbench.stack import slurm_run_env, testbed_system

NODES = testbed_system.configured_nodes()
STACKS = testbed_system.mpi_stacks_launched()
LAYOUT = testbed_system.Layout(testbed_system.state_dir())
SLURM_CONF = LAYOUT.slurm_conf
if SLURM_CONF.exists():
    os.environ['SLURM_CONF'] = str(SLURM_CONF)
# Else Slurm's commands are not pointed at a file that is not there: srun retries a missing
# SLURM_CONF for 60 s, and ReFrame asks `srun --version` in each job's setup (a dry run of
# four GPU checks took 240 s).
if not testbed_daemons.is_running():
    # Listing, describing and dry runs need no cluster; a run would fail at sbatch.
    print(f'warning: the testbed in {testbed_system.state_dir()} is not running; jobs cannot be '
          'submitted until `ci/testbed/testbed start`', file=sys.stderr)

# What the stacks need under srun on nodes that share one host name and one address.
RUN_ENV = slurm_run_env.run_env([s.name for s in STACKS], srun=True, shared_hosts=True)

spack_fields, _ = site_partitions.spack_partition_settings()
ENVIRONMENTS = site_environments.stack_environments(STACKS, ['testbed'], spack_fields,
                                              testbed_system.blas_libraries(), RUN_ENV)


# The GPU nodes' GPUs as their GRES declares them; stand-ins, which the GPU checks skip in a
# run (a dry run writes their jobs).
GPU_SETTINGS, GPU_FIELDS = site_partitions.accelerator_settings(
    machine_gpus.from_gres(testbed_system.GPU_GRES, datasheets.gres_model()), testbed_system.gpu_topology())
GPU_FIELDS['accelerators']['stand_in'] = (
    'its GPUs are stand-in devices (no GPU, no driver): the GPU checks write their jobs in a '
    'dry run; tests/devtools/test_testbed.py runs a GRES job of one rank per GPU through Slurm')


def partition(name, launcher, descr, slurm_partition=testbed_system.SLURM_PARTITION, gpus=False):
    return site_partitions.reframe_partition(
        __file__, 'testbed', name,
        {**site_partitions.this_host(
            __file__, lambda: testbed_system.node_facts(testbed_system.GPU_NODES if gpus else NODES)),
         **(GPU_FIELDS if gpus else {}),
         # The nodes share the host's file system and page cache.
         **host.io_facts()},
        descr=descr, scheduler='slurm', launcher=launcher,
        access=[f'--partition={slurm_partition}'],
        **(dict(GPU_SETTINGS, resources=site_partitions.SLURM_GPU_RESOURCES) if gpus else {}),
        # The emulated nodes share the host's cores: one benchmark at a time.
        max_jobs=1, processor=host.processor_info(),
        # Each node's hardware is a tree of files of its own, its faults injected there
        # (hpcbench.devtools.testbed_facts): its jobs read their facts in it.
        env_vars=[(node_facts.ROOT_ENV, LAYOUT.facts_root)],
        environs=[env['name'] for env in ENVIRONMENTS])


site_configuration = site_config.site(
    systems=[{
        'name': 'testbed',
        'descr': f'Slurm cluster of {NODES} emulated nodes on this machine (ci/testbed)',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'partitions': [
            partition('srun', 'srun', 'Ranks started by srun (PMIx; PMI-2 for MPICH)'),
            partition('mpirun', 'mpirun', "Ranks started by each MPI's mpirun in the job"),
            partition('gpu', 'srun', f'GPU nodes, {testbed_system.GPU_GRES} each (stand-in devices)',
                      testbed_system.SLURM_GPU_PARTITION, gpus=True),
        ],
    }],
    environments=ENVIRONMENTS,
    # Its Slurm controller runs on this machine: a look at the jobs costs little.
    scheduler_here=True,
)
