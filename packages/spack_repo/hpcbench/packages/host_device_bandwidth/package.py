# Why this recipe: the host-device bandwidth check needs pinned and pageable copies in both
# directions, and Spack's nvbandwidth needs Boost built first for what is one small program.
# The program is ours and lives beside this file.
import os

from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.hpcbench.build_systems.own_source import OwnSourcePackage

from spack.package import *


class HostDeviceBandwidth(OwnSourcePackage, CudaPackage):
    """host-device-bandwidth: one GPU's copies to and from its host, pinned and pageable,
    and within the device (GB/s)."""

    source_file = "host_device_bandwidth.cu"
    source_sha256 = "36b47f569391268c8d6c7fa9054ef73fdb89a35733adde10648f20eb60fbaf24"

    license("MIT")

    version("1.0")

    depends_on("cxx", type="build")
    # A CUDA program only: the variant is CudaPackage's.
    requires("+cuda", msg="host-device-bandwidth measures a CUDA GPU")
    conflicts("cuda_arch=none", msg="name the GPU's architecture: cuda_arch=90")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        arch_flags = [f for flags in self.cuda_flags(spec.variants["cuda_arch"].value)
                      for f in flags.split()]
        Executable(join_path(spec["cuda"].prefix.bin, "nvcc"))(
            "-O2", "-ccbin", os.environ.get("CUDAHOSTCXX", spack_cxx), *arch_flags,
            self.verified_source(), "-o", join_path(prefix.bin, "host-device-bandwidth"),
        )
