"""The machine's software, what is installed and how: the pinned Spack run isolated (spack),
Debian packages (debian), the MPI stacks and BLAS libraries side by side (mpi_stacks, blas),
the CUDA toolkit GPU programs are built with (cuda), NCCL (nccl) and the wheels both come
as (wheels), set-up of this machine (bootstrap) and
what each system on it builds (machine_systems), the description `new-system` writes of a
Slurm cluster (new_system: the hardware from hpcbench.machine, the login node's MPI
stacks from here), a system's stack in a shell (shell), offline bundles made (bundle) and
unpacked (bundle_unpack) and the provenance a session records (provenance). The emulated
Slurm cluster the testbed system runs on is a development tool (hpcbench.devtools.testbed).

May import core, benchmarks, machine and results (set-up suggests a BLAS from stored DGEMM
ceilings). `spack`, `bundle` and `bundle_unpack` run before any venv exists: standard
library at import.
"""
