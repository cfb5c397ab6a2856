# Why this recipe: the start-up check times MPI_Init and a whole "Hello World" per MPI stack
# (Oakforest-PACS), and no package is just that. The program is ours and lives beside this
# file; Spack builds it once per MPI of the environment.
from spack_repo.hpcbench.build_systems.own_source import OwnSourcePackage

from spack.package import *


class MpiStartup(OwnSourcePackage):
    """mpi-startup: MPI_Init time and a hello world of every rank, per launch."""

    source_file = "mpi_startup.c"
    source_sha256 = "430751fec584064f8aadc2c437f7beb00680f866d04bdf54c293f540ece42c65"

    license("MIT")

    version("1.0")

    depends_on("c", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        Executable(spec["mpi"].mpicc)(
            "-O2", self.verified_source(), "-o", join_path(prefix.bin, "mpi-startup")
        )
