# Why this recipe: the builtin hpcc 1.5.0 does not compile against MPI-3 headers (Open MPI
# 4 and later reject them): its HPL_packL.c calls MPI_Address and MPI_Type_struct, removed
# in MPI-3. HPL 2.3 made the same change to the same file; this recipe applies it to
# HPCC's copy and is otherwise the builtin recipe.
from spack_repo.builtin.packages.hpcc.package import Hpcc as BuiltinHpcc

from spack.package import *


class Hpcc(BuiltinHpcc):
    """HPC Challenge, buildable against MPI-3 libraries."""

    def patch(self):
        super().patch()
        packl = join_path("hpl", "src", "comm", "HPL_packL.c")
        filter_file(r"\bMPI_Address\b", "MPI_Get_address", packl)
        filter_file(r"\bMPI_Type_struct\b", "MPI_Type_create_struct", packl)
