# Why this recipe: OSU Micro-Benchmarks 7.3 does not compile against CUDA 13: its
# prefetch_data() (c/util/osu_util_mpi.c) calls cudaMemPrefetchAsync(ptr, length, device,
# stream), and CUDA 13 takes the device as a cudaMemLocation and a flags argument
# (`error: too few arguments to function 'cudaMemPrefetchAsync'`, built here with nvcc
# 13.0.88). This recipe calls it both ways by CUDART_VERSION and is otherwise the builtin
# recipe.
from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks)

from spack.package import *


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks):
    """OSU Micro-Benchmarks, buildable against CUDA 13."""

    def patch(self):
        if "+cuda" not in self.spec:
            return
        filter_file(
            r"CUDA_CHECK\(cudaMemPrefetchAsync\(buf, length, devid, um_stream\)\);",
            "\n".join([
                "#if CUDART_VERSION >= 13000",
                "    struct cudaMemLocation location = {cudaMemLocationTypeDevice, devid};",
                "    CUDA_CHECK(cudaMemPrefetchAsync(buf, length, location, 0, um_stream));",
                "#else",
                "    CUDA_CHECK(cudaMemPrefetchAsync(buf, length, devid, um_stream));",
                "#endif",
            ]),
            join_path("c", "util", "osu_util_mpi.c"))
