# Why this recipe: the HPL check compares HPL with the DGEMM rate of the same BLAS on the
# same node (the attainable ceiling), and no package measures just that; +cuda measures the
# same of a GPU through cuBLAS (the GPU DGEMM check). The programs are ours and live beside
# this file, sharing dgemm_rate.h; Spack builds the CPU's against the environment's BLAS.
import os

from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.hpcbench.build_systems.own_source import OwnSourcePackage, verified_own_source

from spack.package import *


class DgemmRate(OwnSourcePackage, CudaPackage):
    """dgemm-rate: the DGEMM rate (GFLOP/s) one process reaches through its BLAS, or with
    +cuda one GPU through cuBLAS (dgemm-rate-cuda)."""

    source_file = "dgemm_rate.c"
    source_sha256 = "ddee656be78eba2d73a90157324983242f7630c8d418557b6b322d8d750ded79"
    # The matrices and the check of the result, shared by both programs.
    common_header = (
        "dgemm_rate.h",
        "20eb317ef768fc66dad145fd3451da8ecb87b371e53d48c96a723939713434f5",
    )
    cuda_source = (
        "dgemm_rate_cuda.cu",
        "089ec2d4aca828c065218b267327373edf392584ed6f13067dac9d29ab4e5af2",
    )

    license("MIT")

    version("1.1")

    depends_on("c", type="build")
    depends_on("cxx", type="build", when="+cuda")
    depends_on("blas", when="~cuda")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU's architecture: cuda_arch=90")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        verified_own_source(self, *self.common_header)
        if spec.satisfies("~cuda"):
            Executable(spack_cc)(
                "-O2", self.verified_source(), "-o", join_path(prefix.bin, "dgemm-rate"),
                *spec["blas"].libs.ld_flags.split(), "-lm",
            )
            return
        cuda = spec["cuda"].prefix
        arch_flags = [f for flags in self.cuda_flags(spec.variants["cuda_arch"].value)
                      for f in flags.split()]
        Executable(join_path(cuda.bin, "nvcc"))(
            "-O2", "-ccbin", os.environ.get("CUDAHOSTCXX", spack_cxx), *arch_flags,
            verified_own_source(self, *self.cuda_source),
            "-o", join_path(prefix.bin, "dgemm-rate-cuda"),
            "-lcublas",
        )
