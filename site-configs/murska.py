"""Murska (CSC, Finland, 2007): HP CP4000 BL ProLiant XC cluster on InfiniBand, HP-MPI.
Seed: 003_ef6925289260f727.txt (Lehto, "Proprietary or Commodity?", slides).

From the slides:
- 2048 AMD Opteron cores, dual-core, 2.6 GHz, 10.6 TFLOP/s; dual-socket HP BL465c blades;
  HP XC cluster OS (RHEL based); blocking fat tree of DDR InfiniBand.
- HP-MPI with two modes: RDMA (256 kB of memory per MPI task, lower short-message latency)
  and SRQ (shared receive queue, constant memory, higher latency): one environment each
  (HP-MPI's mpirun options -rdma and -srq, through its MPIRUN_OPTIONS variable).

Assumed where the slides are silent (change them for a real machine):
- 512 nodes of 2 x dual-core (2048 cores / 4), 2 flop/cycle (10.6 TFLOP/s / (2048 x 2.6
  GHz)), 2 GiB per core; caches from AMD's data sheets.
- LSF-HPC with SLURM, as HP XC ships it; HP-MPI starts ranks with `mpirun -srun`; the
  parallel file system at /scratch.
"""
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 'murska'
BL465C = processor(arch='x86_64', model='2 x AMD Opteron dual-core 2.6 GHz', sockets=2,
                   cores_per_socket=2, caches=[cache(1, 64 * KIB, associativity=2),
                                               cache(2, MIB)])

site_configuration = site_config.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'Murska, HP CP4000 BL XC cluster at CSC (2007)',
        'hostnames': [r'^murska'],
        'modules_system': 'nomod',
        'partitions': [
            partition('compute', 'HP BL465c: 2 x dual-core Opteron 2.6 GHz',
                      system=SYSTEM, scheduler='lsf-xc', launcher='hpmpi',
                      environs=['hpmpi-rdma', 'hpmpi-srq'], processor=BL465C, num_nodes=512,
                      memory_bytes=8 * GIB, clock_hz=2.6e9, flops_per_cycle=2,
                      io_directory='/scratch/hpcbench'),
        ],
    }],
    environments=[
        mpi_environment('hpmpi-rdma', SYSTEM, 'hp-mpi', env_vars=[('MPIRUN_OPTIONS', '-rdma')]),
        mpi_environment('hpmpi-srq', SYSTEM, 'hp-mpi', env_vars=[('MPIRUN_OPTIONS', '-srq')]),
    ],
)
