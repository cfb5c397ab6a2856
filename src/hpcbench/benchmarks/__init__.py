"""One module per benchmark: its inputs derived from the node, its output parsed, its figures
computed (HPL with its sweep and quick sizes, HPCC, STREAM, IMB, IOR, MPI start-up, the
DGEMM ceiling, likwid-bench's node ceilings; on GPUs BabelStream, the GPU's power, the host
link's copies, the GPU screen; between GPUs device-buffer MPI (gpu_mpi), OSU and
nccl-tests). Each is what a ReFrame check in reframe-checks/ of the same name delegates to.

Pure: no ReFrame, no Spack, no results database. May import hpcbench.core and one another.
Some run in jobs as `python -m hpcbench.benchmarks.<name>` (standard library only there).
"""
