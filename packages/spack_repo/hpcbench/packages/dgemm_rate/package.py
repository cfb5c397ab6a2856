# Why this recipe: the HPL check compares HPL with the DGEMM rate of the same BLAS on the
# same node (the attainable ceiling), and no package measures just that. The program is ours
# and lives beside this file; Spack builds it against the environment's BLAS.
from spack_repo.hpcbench.build_systems.own_source import OwnSourcePackage

from spack.package import *


class DgemmRate(OwnSourcePackage):
    """dgemm-rate: the DGEMM rate (GFLOP/s) one process reaches through its BLAS."""

    source_file = "dgemm_rate.c"
    source_sha256 = "ce3f6780aabe27b3c5b2d14011d7290e5bcbbb490cbc6d5a9d456398bf8df9cf"

    license("MIT")

    version("1.0")

    depends_on("c", type="build")
    depends_on("blas")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        Executable(spack_cc)(
            "-O2", self.verified_source(), "-o", join_path(prefix.bin, "dgemm-rate"),
            *spec["blas"].libs.ld_flags.split(), "-lm",
        )
