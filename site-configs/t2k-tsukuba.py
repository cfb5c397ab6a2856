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
- HPL's matrix on huge pages: 14,400 pages of 2 MB reserved per node (§4.5); N the largest
  multiple of P x NB whose matrix and Goto BLAS's 1 GB of buffers fit them: 1,508,000 at
  625 nodes (hpcbench.benchmarks.hpl.huge_page_problem_size).
- HPL.dat of the 625-node run (Table 5): HPL_TUNING below. Its memory alignment 0 needed a
  patched HPL (original HPL requires > 0): the suite keeps 8.

Assumed where the paper is silent (change them for a real machine):
- The batch system is PBS Professional; Lustre is mounted at /work.
"""
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 't2k-tsukuba'
# Table 5: NB 232, row-major, threshold 16.0, PFACT left, NBMIN 4, NDIV 2, RFACT right,
# BCAST 2ring-Modified, depth 0, SWAP mix, swapping threshold 64, L1 and U transposed,
# equilibration.
HPL_TUNING = {
    'settings': {'nb': 232, 'pmap': 0, 'threshold': 16.0, 'pfact': 0, 'nbmin': 4, 'ndiv': 2,
                 'rfact': 2, 'bcast': 3, 'depth': 0, 'swap': 2, 'swap_threshold': 64,
                 'l1_transposed': True, 'u_transposed': True, 'equilibration': True},
    'source': 't2k2008', 'where': 'Table 5 (625 nodes, 10,000 cores)',
}
NODE = processor(arch='k10', model='4 x AMD Opteron 8356 (Barcelona, quad-core, 2.3 GHz)',
                 sockets=4, cores_per_socket=4,
                 caches=[cache(1, 64 * KIB, associativity=2), cache(2, 512 * KIB),
                         cache(3, 2 * MIB, shared_by_cores=4, associativity=32)])

site_configuration = site_config.site(
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
                      hugepages={'pages': 14400, 'page_kib': 2048}, hpl_tuning=HPL_TUNING,
                      io_directory='/work/hpcbench'),
        ],
    }],
    environments=[
        mpi_environment('openmpi', SYSTEM, 'openmpi'),
        mpi_environment('mvapich2', SYSTEM, 'mvapich2', launcher='mpirun_rsh'),
    ],
)
