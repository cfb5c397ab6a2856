"""TSUBAME (Tokyo Tech, 2006): Sun Fire X4600 nodes on Voltaire InfiniBand, Sun N1 Grid
Engine 6, Voltaire MPI. Seed: 000_5129c8a40116e7ec.txt (Sun BluePrints, Hashizume 2007).

From the paper:
- X4600: 8 dual-core Opterons (16 cores), 2.4 GHz with 32 GB or 2.6 GHz with 64 GB (Table
  3-6); Rpeak 76.8 / 83.2 GFLOP/s per node, i.e. 2 flop/cycle/core. 655 servers; the
  38.18 TFLOPS run used 648: 16 at 2.6 GHz and 632 at 2.4 GHz (Table 3-6).
- Jobs: Sun N1 Grid Engine 6.0 (Chapter 2). MPI: Voltaire IBHOST 3.5.5, MVAPICH-based,
  launched as `mpirun_ssh -np 16 -hostfile hostfile ./xrun` (Chapter 3, NUMA awareness);
  Open MPI, MPICH and HP-MPI were installed too.
- HPL.dat (HPL_TUNING below): NB 240 (Figure 3-1), Table 3-5's settings, BCAST 2rM up to
  512 nodes and 1rg on 648 (Figures 3-6, 3-7), and per node count the P x Q and Nmax of
  Table 3-6 (for the 8-ranks-per-node layout it measured; others derive theirs).
- ClearSpeed (Chapter 2, "ClearSpeed CSX600"; Table 2-1): 360 of the servers have a
  ClearSpeed Advance board (two CSX600 on a PCI-X card), "96 GFlops theoretical peak
  performance and 50 GFlops sustained double-precision matrix multiply (DGEMM of BLAS)
  performance while averaging 25 Watts"; Table 2-1 gives 62.2 TFLOPS for those 360 servers
  and 22.7 for the other 295. Partition `clearspeed`: the accelerator DGEMM check
  (GpuDgemmCheck) runs `dgemm-rate` through ClearSpeed's BLAS, CSXL.
- Tuning (Chapter 3): one rank per socket with 2 GotoBLAS threads ("8 processes per node
  with 2 threads"), ranks bound with taskset along the HyperTransport ring (socket 2, 4, 6,
  7, 5, 3, 1, 0: the script's cpulists 4,5 / 8,9 / 12,13 / 14,15 / 10,11 / 6,7 / 2,3 /
  0,1); Voltaire MPI variables VIADEV_USE_SHM_RNDV=1, SMPI_LENGTH_QUEUE=2, SMP_EAGERSIZE=650,
  VIADEV_HCA_DISTRIBUTE=2, VIADEV_MAX_TOTAL_REG_MEM_SIZE=2000, VIADEV_NDREG_ENTRIES=16000.

Assumed where the paper is silent (change them for a real machine):
- 639 nodes at 2.4 GHz (655 servers minus the 16 at 2.6 GHz); the `grid` partition is all
  655, described as the 2.4 GHz/32 GB node because HPL runs at the pace and in the memory
  of the smallest node (the mixed 648-node run of Table 3-6), its Rpeak counting the 16
  nodes at 2.6 GHz each run includes (extras node_clocks). It runs at 648 nodes only:
  655 nodes x 8 ranks factor as 40 x 131, the grid the paper found congested.
- The parallel environment is called `mpi`; Lustre is mounted at /work.
- The ClearSpeed servers are described as the 2.4 GHz/32 GB node (the paper does not say
  which servers carry a board); CSXL, the board's BLAS, is the site's install at
  /opt/clearspeed/csxl (an external, `clearspeed-csxl@tsubame2006`: the paper names no
  release), its library found as libcsxl*; no tool reads the board's power, so its 25 W
  (and 2 GFLOPS/W) are comparisons the check does not measure.
- Caches from AMD's data sheet (Opteron 880/885: 64 KiB L1d, 1 MiB L2 per core).
- The paper writes the registered-memory variable both as VIADEV_MAX_TOTAL_REG_MEM_SIZE
  and VIADEV_MAX_TOTAL_REG_MEMSIZE; the first is the name it defines, the one set here.
- Voltaire MPI reads these VIADEV_*/SMP_* names; the Spack environment's closest MPI is
  MVAPICH2, whose own names are MV2_*: they are set as the paper gave them, and take effect
  with a Voltaire- or MVAPICH1-derived MPI.
"""
from hpcbench.core.accelerators import Accelerator
from hpcbench.rfm import paper_sites, site_config
from hpcbench.rfm.paper_sites import GIB, cache, mpi_environment, partition, processor

SYSTEM = 'tsubame'
# Table 3-6: nodes -> (P, Q, Nmax), 8 ranks of 2 threads per node.
TABLE_3_6 = {1: (2, 4, 58320), 2: (4, 4, 80400), 4: (4, 8, 114000), 8: (8, 8, 160080),
             16: (8, 16, 220800), 32: (16, 16, 321120), 64: (16, 32, 454080),
             96: (16, 48, 556080), 128: (32, 32, 620400), 256: (32, 64, 741600),
             512: (32, 128, 1149120), 578: (34, 136, 995520), 648: (36, 144, 1334160)}
SOURCE = 'tsubame2007'
HPL_TUNING = [
    {'settings': {'nb': 240}, 'source': SOURCE,
     'where': 'Figure 3-1: NB 240 fastest on one, two and four servers'},
    {'settings': {'pmap': 0, 'swap': 2, 'swap_threshold': 240, 'pfact': 2, 'nbmin': 4,
                  'ndiv': 2, 'rfact': 2, 'depth': 1, 'l1_transposed': True,
                  'u_transposed': True, 'equilibration': True, 'alignment': 8},
     'source': SOURCE, 'where': 'Table 3-5'},
    {'settings': {'bcast': 3}, 'source': SOURCE,
     'where': 'Figure 3-6: Increasing-2-ring-modified used to measure up to 512 nodes'},
    {'match': {'num_nodes': 648}, 'settings': {'bcast': 0}, 'source': SOURCE,
     'where': 'Figure 3-7: Increasing-ring fastest on all 648 nodes'},
    *({'match': {'num_nodes': nodes}, 'settings': {'grid': [p, q], 'n': n}, 'source': SOURCE,
       'where': f'Table 3-6 ({nodes} node(s): P x Q = {p} x {q}, Nmax {n})'}
      for nodes, (p, q, n) in TABLE_3_6.items()),
]
X4600 = dict(sockets=8, cores_per_socket=2, arch='x86_64',
             caches=[cache(1, 64 * paper_sites.KIB, associativity=2),
                     cache(2, paper_sites.MIB)])
NODE_24 = processor(model='AMD Opteron 880 (dual-core, 2.4 GHz)', **X4600)
NODE_26 = processor(model='AMD Opteron 885 (dual-core, 2.6 GHz)', **X4600)
ENVIRONS = ['mvapich2', 'openmpi']
COMMON = dict(
    system=SYSTEM, scheduler='sge-pe', launcher='mpirun_ssh', access=['-pe mpi'],
    environs=ENVIRONS, flops_per_cycle=2,
    binding={'tool': 'taskset', 'domain_order': [2, 4, 6, 7, 5, 3, 1, 0]},
    io_directory='/work/hpcbench', io_stripe_size=1 << 20, hpl_tuning=HPL_TUNING,
)

# One ClearSpeed Advance board in each of 360 servers; its figures are the paper's
# (hpcbench.core.accelerators.DATASHEETS). Its memory is not in the paper: the DGEMM is
# sized from the host's (CSXL multiplies matrices in the host's memory).
CLEARSPEED_SETTINGS, CLEARSPEED_EXTRAS = site_config.accelerator_settings(
    [Accelerator('clearspeed', 'accelerator', 'ClearSpeed Advance', 'csx600', 0)])

site_configuration = site_config.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'TSUBAME grid, Tokyo Institute of Technology (2006)',
        'hostnames': [r'^tsubame'],
        'modules_system': 'nomod',
        'partitions': [
            partition('x4600-24', 'Sun Fire X4600, 8 x Opteron 880 2.4 GHz, 32 GB',
                      processor=NODE_24, num_nodes=639, memory_bytes=32 * GIB,
                      clock_hz=2.4e9,
                      node_counts=[1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 512, 578, 639],
                      **COMMON),
            partition('x4600-26', 'Sun Fire X4600, 8 x Opteron 885 2.6 GHz, 64 GB',
                      processor=NODE_26, num_nodes=16, memory_bytes=64 * GIB,
                      clock_hz=2.6e9, **COMMON),
            # Its Rpeak counts the 16 nodes at 2.6 GHz each run of it includes (Table 3-6:
            # 648 nodes, 49,868.8 GFLOPS = 16 x 83.2 + 632 x 76.8).
            partition('grid', 'All 655 X4600 (mixed 2.4/2.6 GHz), as the 2.4 GHz/32 GB node',
                      processor=NODE_24, num_nodes=655, memory_bytes=32 * GIB,
                      clock_hz=2.4e9, node_counts=[648], node_clocks=[[16, 2.6e9]],
                      **COMMON),
            {**partition('clearspeed', 'Sun Fire X4600 (2.4 GHz, 32 GB) with a ClearSpeed '
                         'Advance board', processor=NODE_24, num_nodes=360,
                         memory_bytes=32 * GIB, clock_hz=2.4e9, **COMMON,
                         **CLEARSPEED_EXTRAS),
             **CLEARSPEED_SETTINGS},
        ],
    }],
    environments=[
        # OpenBLAS for every build but the ClearSpeed DGEMM's (CSXL).
        mpi_environment('mvapich2', SYSTEM, 'mvapich2', spack_blas='openblas', env_vars=[
            # Intra-node rendezvous through shared memory, not the HCA.
            ('VIADEV_USE_SHM_RNDV', '1'),
            ('SMPI_LENGTH_QUEUE', '2'),
            ('SMP_EAGERSIZE', '650'),
            # First half of a node's ranks on HCA 1, second half on HCA 2.
            ('VIADEV_HCA_DISTRIBUTE', '2'),
            # Registered memory: the defaults (350 MB, 1000) are too small for 648 nodes.
            ('VIADEV_MAX_TOTAL_REG_MEM_SIZE', '2000'),
            ('VIADEV_NDREG_ENTRIES', '16000'),
        ]),
        mpi_environment('openmpi', SYSTEM, 'openmpi', launcher='mpirun-ppn',
                        spack_blas='openblas'),
    ],
)
