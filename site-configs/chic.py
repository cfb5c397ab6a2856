"""CHiC, the Chemnitz High-Performance Linux Cluster (TU Chemnitz, 2007): IBM x3455 nodes on
Voltaire InfiniBand, Lustre, TORQUE with Maui. Seed: 001_ffdfcd1799e692fa.txt (Mietke et
al., "Design and Evaluation of a 2048 Core Cluster System").

From the paper (§2.2, §2.3, §3.1):
- compute: 530 x (2 x Opteron 2218 dual-core 2.6 GHz, 4 GiB DDR2-667); visualization: 12 x
  (2 x Opteron 285 dual-core 2.6 GHz, 4 GiB DDR-400, Quadro FX 4500 X2); I/O: 8 nodes as
  the compute nodes with 16 GiB. Peak 2 flop/cycle per core (§3.1, STREAM).
- TORQUE 2.1.8 with Maui 3.2.6p20; Open MPI 1.2, MVAPICH-0.9.9 and MVAPICH2-0.9.8 (§2.3).
- Lustre with 20 OSTs, 1 MiB stripe size; IOR's transfer size was the stripe size (§3.1).
- The compute partition runs IOR as §3.1 did (PAPER_IOR: 96 nodes, one process of 2.5 GB
  per node, file per process on 1 OST) and the IMB collectives on 32 nodes (Figures 6-9).

Assumed where the paper is silent (change them for a real machine):
- Compute nodes hold 4 DIMMs (§3.1 compares 4 and 8 of the 12 slots in HPL; STREAM Table 1
  was measured with 2, 4 and 8): `memory_dimms` selects the Table 1 row used as reference.
- Maui's `naccesspolicy=singlejob` gives jobs whole nodes; Lustre is mounted at /lustre.
- Caches from AMD's data sheets (Opteron 2218 and 285: 64 KiB L1d, 1 MiB L2 per core).
- MVAPICH 0.9.x (MVAPICH1) has no Spack package; MVAPICH2 stands for both MVAPICH lines.
"""
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, KIB, MIB, cache, mpi_environment, partition, processor

SYSTEM = 'chic'
SOURCE = 'chic2007'
# §3.1, IOR: each node writes and reads 2.5 GB with 1 MB transfers (the stripe size); file
# per process on 1 OST (the 96-node figures) and on 20, shared files on all 20. "2.5GB" is
# taken as 2.5 GiB: 2,560 whole 1 MiB transfers (2.5 x 10^9 B is not a whole number).
PAPER_IOR = [
    {'settings': {'num_nodes': 96, 'tasks_per_node': [1], 'block_size': 2560 * MIB},
     'source': SOURCE, 'where': '§3.1, IOR: 2.5GB per node; §4 and Figures 11, 12: 96 nodes'},
    {'match': {'pattern': 'file-per-process'}, 'settings': {'stripe_count': 1},
     'source': SOURCE, 'where': '§3.1, IOR: file per process with no striping (1 OST) at '
                                '96 nodes, the best figures'},
]
# §3.1, IMB: SendRecv, Allreduce, Alltoall and Broadcast on 32 nodes, 1 core per node.
PAPER_IMB_GROUP = {'settings': {'num_nodes': 32}, 'source': SOURCE,
                   'where': '§3.1, IMB: Figures 6-9 use 32 nodes (1 core per node)'}
OPTERON_CACHES = [cache(1, 64 * KIB, associativity=2), cache(2, MIB)]
X3455 = processor(arch='x86_64', model='2 x AMD Opteron 2218 (dual-core, 2.6 GHz)',
                  sockets=2, cores_per_socket=2, caches=OPTERON_CACHES)
INTELLISTATION = processor(arch='x86_64', model='2 x AMD Opteron 285 (dual-core, 2.6 GHz)',
                           sockets=2, cores_per_socket=2, caches=OPTERON_CACHES)
COMMON = dict(
    system=SYSTEM, scheduler='torque-maui', launcher='mpirun-ppn',
    access=['-l naccesspolicy=singlejob'], environs=['openmpi', 'mvapich2'],
    clock_hz=2.6e9, flops_per_cycle=2,
    io_directory='/lustre/hpcbench', io_stripe_size=1 << 20, io_stripe_count=20,
)

site_configuration = site_config.site(
    systems=[{
        'name': SYSTEM,
        'descr': 'CHiC, Chemnitz High-Performance Linux Cluster (2007)',
        'hostnames': [r'^chic'],
        'modules_system': 'nomod',
        'partitions': [
            partition('compute', 'IBM x3455: 2 x Opteron 2218 2.6 GHz, 4 GiB DDR2-667',
                      processor=X3455, num_nodes=530, memory_bytes=4 * GIB, memory_dimms=4,
                      node_counts=[1, 2, 4, 8, 16, 32, 64, 96, 128, 256, 520, 530],
                      ior=PAPER_IOR, imb_group=PAPER_IMB_GROUP, **COMMON),
            partition('visualization', 'IBM IntelliStation A Pro: 2 x Opteron 285 2.6 GHz, '
                      '4 GiB DDR-400, nVidia Quadro FX 4500 X2',
                      processor=INTELLISTATION, num_nodes=12, memory_bytes=4 * GIB, **COMMON),
            partition('io', 'I/O nodes: as the compute nodes, 16 GiB DDR2-667',
                      processor=X3455, num_nodes=8, memory_bytes=16 * GIB, **COMMON),
        ],
    }],
    environments=[
        mpi_environment('openmpi', SYSTEM, 'openmpi'),
        mpi_environment('mvapich2', SYSTEM, 'mvapich2', launcher='mpirun_rsh'),
    ],
)
