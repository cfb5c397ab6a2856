"""Louhi (CSC, Finland, 2007-2008): Cray XT4, SeaStar2 3D torus, Cray's MPICH2.
Seed: 003_ef6925289260f727.txt (Lehto, "Proprietary or Commodity? Interconnect Performance
in Large-scale Supercomputers", slides).

From the slides:
- Phase 1 (2007): 2024 AMD Opteron cores, dual-core, 2.6 GHz, 10.5 TFLOP/s; phase 2 (2008):
  6736 quad-core cores at 2.6 GHz, 4 flop/cycle, 70.1 TFLOP/s. Catamount on the compute
  nodes, Linux on login and service nodes. MPI: a Cray-modified MPICH2.

Assumed where the slides are silent (change them for a real machine):
- One processor per XT4 node: 1012 dual-core and 1684 quad-core nodes; 2 flop/cycle for the
  dual-core phase (10.5 TFLOP/s / (2024 cores x 2.6 GHz)).
- 2 GiB of memory per core; caches from AMD's data sheets.
- PBS with ALPS (jobs ask for mppwidth/mppnppn/mppdepth, ranks start with aprun); Lustre
  at /lustre. Cray MPT version 3.0 for the 2008 system.
"""
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 'louhi'
DUAL = processor(arch='x86_64', model='AMD Opteron dual-core 2.6 GHz', sockets=1,
                 cores_per_socket=2, caches=[cache(1, 64 * KIB, associativity=2),
                                             cache(2, MIB)])
QUAD = processor(arch='k10', model='AMD Opteron quad-core 2.6 GHz', sockets=1,
                 cores_per_socket=4,
                 caches=[cache(1, 64 * KIB, associativity=2), cache(2, 512 * KIB),
                         cache(3, 2 * MIB, shared_by_cores=4, associativity=32)])
COMMON = dict(system=SYSTEM, scheduler='pbs-xt', launcher='alps', environs=['cray-mpich'],
              clock_hz=2.6e9, io_directory='/lustre/hpcbench')

site_configuration = site_config.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'Louhi, Cray XT4 at CSC (2007-2008)',
        'hostnames': [r'^louhi'],
        'modules_system': 'nomod',
        'partitions': [
            partition('xt4-dualcore', 'Phase 1: XT4 nodes, 1 x dual-core Opteron 2.6 GHz',
                      processor=DUAL, num_nodes=1012, memory_bytes=4 * GIB,
                      flops_per_cycle=2, **COMMON),
            partition('xt4-quadcore', 'Phase 2: XT4 nodes, 1 x quad-core Opteron 2.6 GHz',
                      processor=QUAD, num_nodes=1684, memory_bytes=8 * GIB,
                      flops_per_cycle=4, **COMMON),
        ],
    }],
    environments=[mpi_environment('cray-mpich', SYSTEM, 'cray-mpich')],
)
