# Why this recipe: on a machine whose system libraries hold a BLAS and an MPI (Debian's
# libopenblas-dev and libopenmpi-dev, which this suite installs), the builtin hpl@2.3 links
# those rather than the ones Spack gives it:
# - its configure tries `-lopenblas` first and the BLAS Spack names last (the builtin recipe
#   fills in the last of configure's ten candidates), and the linker finds Debian's OpenBLAS:
#   every HPL ran Debian's OpenBLAS whatever its spec said;
# - when the BLAS's link flags name a system directory (intel-oneapi-mkl's
#   -L/lib/x86_64-linux-gnu, for libpthread, libm and libdl), configure's `-lmpi` finds
#   Debian's libmpi.so there, Open MPI's: HPL built with MPICH, Intel MPI or MVAPICH2 ran
#   Open MPI's library and crashed in MPI_Comm_rank.
# This recipe makes the BLAS Spack gives configure's first candidate and puts the MPI's
# library directories first in LDFLAGS; otherwise it is the builtin recipe. This machine's
# environments (local, testbed) use it; the paper systems' environments keep the builtin
# recipe their committed locks were concretized with.
from spack_repo.builtin.packages.hpl.package import Hpl as BuiltinHpl

from spack.package import *


class Hpl(BuiltinHpl):
    """HPL, linked with the BLAS and the MPI of its spec."""

    @run_before("configure", when="@2.3:")
    def use_the_blas_of_the_spec(self):
        filter_file(r"^libs1=.*", f"libs1={self.spec['blas'].libs.ld_flags}", "configure")

    def configure_args(self):
        mpi_dirs = " ".join(f"-L{d}" for d in self.spec["mpi"].libs.directories)
        return [f"LDFLAGS={mpi_dirs} {arg[len('LDFLAGS='):]}".strip()
                if arg.startswith("LDFLAGS=") else arg
                for arg in super().configure_args()]
