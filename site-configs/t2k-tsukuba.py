"""T2K-Tsukuba (University of Tsukuba, 2008): Appro Xtreme-X3, 648 nodes of 4 quad-core
Opterons on 4-rail DDR InfiniBand. Seed: 002_2b87e5a2c861c242.txt (Takahashi et al.,
"T2K 筑波システムにおける Linpack 性能評価").

From the paper (Table 1, §2.2, §3.2, §4):
- 648 nodes; 4 x Opteron 8356 (Barcelona, quad-core, 2.3 GHz), 16 cores, 32 GB DDR2-667,
  147.2 GFLOP/s (4 flop/cycle/core) and 42.7 GB/s peak memory bandwidth per node; L1 64 KB
  (I) + 64 KB (D), L2 512 KB per core, L3 2 MB per socket.
- MPI: the system's MVAPICH (modified by Appro); HPL ran on an early Open MPI 1.3, one rank
  per socket with 4 threads, each rank bound to its socket's cores and memory by numactl
  (Figure 6: `numactl --cpunodebind=$SOCKET --membind=$SOCKET`, SOCKET = rank % 4).
- HPL's matrix on huge pages: 14,400 pages of 2 MB reserved per node (§4.5).

Assumed where the paper is silent (change them for a real machine):
- The batch system is PBS Professional; Lustre is mounted at /work.
"""
from hpcbench import rfmconfig
from hpcbench.sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 't2k-tsukuba'
NODE = processor(arch='k10', model='4 x AMD Opteron 8356 (Barcelona, quad-core, 2.3 GHz)',
                 sockets=4, cores_per_socket=4,
                 caches=[cache(1, 64 * KIB, associativity=2), cache(2, 512 * KIB),
                         cache(3, 2 * MIB, shared_by_cores=4, associativity=32)])

site_configuration = rfmconfig.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'T2K-Tsukuba, University of Tsukuba (2008)',
        'hostnames': [r'^t2k'],
        'modules_system': 'nomod',
        'partitions': [
            partition('compute', 'Appro Xtreme-X3: 4 x Opteron 8356 2.3 GHz, 32 GB DDR2-667',
                      system=SYSTEM, scheduler='pbspro-hostfile', launcher='mpirun-ppn',
                      environs=['openmpi', 'mvapich2'], processor=NODE, num_nodes=648,
                      memory_bytes=32 * GIB, clock_hz=2.3e9, flops_per_cycle=4,
                      memory_bandwidth_bytes=42.7e9,
                      node_counts=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 625, 648],
                      hugepages={'pages': 14400, 'page_kib': 2048},
                      io_directory='/work/hpcbench'),
        ],
    }],
    environments=[
        mpi_environment('openmpi', SYSTEM, 'openmpi'),
        mpi_environment('mvapich2', SYSTEM, 'mvapich2', launcher='mpirun_rsh'),
    ],
)
