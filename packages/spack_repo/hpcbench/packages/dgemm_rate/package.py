# Why this recipe: the HPL check compares HPL with the DGEMM rate of the same BLAS on the
# same node (the attainable ceiling), and no package measures just that. The program is ours
# and lives beside this file; Spack builds it against the environment's BLAS.
import hashlib
import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

SOURCE = "dgemm_rate.c"
# Spack's hash covers this file, not the source beside it: the checksum ties them, so that
# a changed source is a changed recipe (a new hash) and never a silent rebuild of the same.
SOURCE_SHA256 = "ce3f6780aabe27b3c5b2d14011d7290e5bcbbb490cbc6d5a9d456398bf8df9cf"


class DgemmRate(Package):
    """dgemm-rate: the DGEMM rate (GFLOP/s) one process reaches through its BLAS."""

    has_code = False

    license("MIT")

    version("1.0")

    depends_on("c", type="build")
    depends_on("blas")

    def install(self, spec, prefix):
        source = join_path(os.path.dirname(__file__), SOURCE)
        with open(source, "rb") as fp:
            digest = hashlib.sha256(fp.read()).hexdigest()
        if digest != SOURCE_SHA256:
            raise InstallError(
                f"{source} has sha256 {digest}, the recipe expects {SOURCE_SHA256}: "
                "update SOURCE_SHA256 (and the version) with the source"
            )

        mkdirp(prefix.bin)
        Executable(spack_cc)(
            "-O2", source, "-o", join_path(prefix.bin, "dgemm-rate"),
            *spec["blas"].libs.ld_flags.split(), "-lm",
        )
