"""Oakforest-PACS (JCAHPC, 2016-2018): 8208 Xeon Phi 7250 (Knights Landing) nodes on
Omni-Path, Fujitsu's job scheduler, Intel MPI and MVAPICH2. Seed: 004_efc2f6077c6f922a.txt
(Hanawa, "Towards Efficient Communication and I/O on Oakforest-PACS", slides).

From the slides:
- 8208 nodes: Xeon Phi 7250, 68 cores, 1.4 GHz; 16 GB MCDRAM (490 GB/s effective) and
  96 GB DDR4 (115.2 GB/s peak); Omni-Path 100 Gbps, full-bisection fat tree. "3+ TFLOPS" per
  node: 68 cores x 1.4 GHz x 32 flop/cycle (two AVX-512 FMA units).
- Job scheduler: Fujitsu Technical Computing Suite. MPI: Intel MPI, MVAPICH2.
- Remedies for collective variability: tile 0 (cores 0 and 1) excluded from applications
  (tickless cores 2-67), PSM2_YIELD_SPIN_COUNT=10000, I_MPI_COLL_SHM_PROGRESS_SPIN_COUNT=
  100000; MVAPICH2 needs MV2_ENABLE_AFFINITY=0 for good IOR performance.
- MVAPICH2 start-up is faster with mpirun_rsh than with Hydra: both are environments.
- IOR on IME was measured through its FUSE mount, /cache/<path> for /work/<path>.

Assumed where the slides are silent (change them for a real machine):
- Quadrant/cache mode (MCDRAM as a cache: one NUMA node of 96 GB), resource group
  `regular-cache`; 4 hardware threads per core numbered as Linux does; caches from Intel's
  data sheet (32 KiB L1d per core, 1 MiB L2 per two-core tile).
"""
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 'oakforest-pacs'
KNL = processor(arch='mic_knl', model='Intel Xeon Phi 7250 (68 cores, 1.4 GHz)', sockets=1,
                cores_per_socket=68, threads_per_core=4,
                caches=[cache(1, 32 * KIB, associativity=8),
                        cache(2, MIB, shared_by_cores=2)])
SPIN = ('PSM2_YIELD_SPIN_COUNT', '10000')

site_configuration = site_config.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'Oakforest-PACS, JCAHPC (2016)',
        'hostnames': [r'^ofp'],
        'modules_system': 'nomod',
        'partitions': [
            partition('knl', 'Fujitsu PRIMERGY CX1640 M1: Xeon Phi 7250, 16 GB MCDRAM + '
                      '96 GB DDR4, Omni-Path',
                      system=SYSTEM, scheduler='pjm', launcher='mpiexec.hydra',
                      access=['-L rscgrp=regular-cache'],
                      environs=['intelmpi', 'mvapich2', 'mvapich2-hydra'], processor=KNL,
                      num_nodes=8208, memory_bytes=96 * GIB, clock_hz=1.4e9,
                      flops_per_cycle=32,
                      memory_bandwidth_bytes={'mcdram': 490e9, 'ddr4': 115.2e9},
                      node_counts=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 640, 1024, 2048,
                                   4096, 8192, 8208],
                      binding={'excluded_cores': [0, 1]},
                      # Its MPI_Init and hello-world tables: 64 processes per node.
                      mpi_startup={'settings': {'ranks_per_node': 64}, 'source': 'ofp2018',
                                   'where': 'slides "MPI startup issue", "Latest Hello World '
                                            'results"'},
                      # Its 4K-node variability table, and IOR-easy as IO500 ran it: 128
                      # nodes at 16, 32 and 64 processes per node, 2 MB transfers (the
                      # stripe size below), several GB per process: the `size` policy
                      # writes 1.5 x the node memory, 9 / 4.5 / 2.25 GiB per process.
                      imb_variability={'settings': {'num_nodes': 4096}, 'source': 'ofp2018',
                                       'where': 'slide "After improvement": 4K node '
                                                'collective (table)'},
                      ior={'settings': {'num_nodes': 128, 'tasks_per_node': [16, 32, 64],
                                        'read_cache_policy': 'size'},
                           'source': 'ofp2018',
                           'where': 'slide "IOR benchmark result using MV2 on IME": 128 '
                                    'nodes, 2K (16 ppn), 4K (32 ppn), 8K (64 ppn); several '
                                    'GB file size per process'},
                      io_directory='/cache/work/hpcbench', io_stripe_size=2 << 20),
        ],
    }],
    environments=[
        mpi_environment('intelmpi', SYSTEM, 'intel-oneapi-mpi', env_vars=[
            SPIN, ('I_MPI_COLL_SHM_PROGRESS_SPIN_COUNT', '100000')]),
        mpi_environment('mvapich2', SYSTEM, 'mvapich2', launcher='mpirun_rsh',
                        env_vars=[SPIN, ('MV2_ENABLE_AFFINITY', '0')]),
        mpi_environment('mvapich2-hydra', SYSTEM, 'mvapich2',
                        env_vars=[SPIN, ('MV2_ENABLE_AFFINITY', '0')]),
    ],
)
