# Why this recipe: Spack's builtin `stream` is git-only with no commit (not reproducible),
# hard-codes -O2 over the environment's flags and always builds the Fortran version too.
# This one pins STREAM to a commit, compiles stream.c alone with the spec's own flags, and
# keeps the builtin's variant names (stream_array_size, ntimes, openmp).
from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class Stream(Package):
    """STREAM: sustainable memory bandwidth (Copy, Scale, Add, Triad) in MB/s."""

    homepage = "https://www.cs.virginia.edu/stream/ref.html"
    git = "https://github.com/jeffhammond/STREAM.git"

    license("custom")

    # stream.c revision 5.10; the commit is the newest of jeffhammond/STREAM (2025-02-17).
    version("5.10", commit="6703f7504a38a8da96b353cadafa64d3c2d7a2d3")

    variant("openmp", default=True, description="Build with OpenMP threads")
    variant(
        "stream_array_size",
        default="10000000",
        values=lambda v: v.isdigit() and int(v) > 0,
        description="Elements per array: at least 4x the node's total last-level cache",
    )
    variant(
        "ntimes",
        default="10",
        values=lambda v: v.isdigit() and int(v) >= 2,
        description="Repetitions of each kernel; the best is reported",
    )

    depends_on("c", type="build")

    def install(self, spec, prefix):
        elements = int(spec.variants["stream_array_size"].value)
        cflags = [f"-DSTREAM_ARRAY_SIZE={elements}", f"-DNTIMES={spec.variants['ntimes'].value}"]
        # The spec's cflags (from the environment) reach the compiler through Spack's
        # wrapper; only supply an optimisation level when they set none.
        if not any(flag.startswith("-O") for flag in spec.compiler_flags["cflags"]):
            cflags.append("-O3")
        if spec.satisfies("+openmp"):
            cflags.append(self.compiler.openmp_flag)
        # Static arrays beyond 2 GiB in all need the medium code model.
        if 3 * 8 * elements >= 2**31:
            cflags.append("-mcmodel=medium")

        mkdirp(prefix.bin)
        Executable(spack_cc)(*cflags, "stream.c", "-o", join_path(prefix.bin, "stream_c.exe"))
