# Why this recipe: Spack's builtin `stream` is git-only with no commit (not reproducible),
# hard-codes -O2 over the environment's flags and always builds the Fortran version too.
# This one pins STREAM to a commit, compiles stream.c alone with the spec's own flags, and
# keeps the builtin's variant names (stream_array_size, ntimes, openmp). On x86-64 it also
# builds STREAM with streaming stores (stream_nontemporal_c.exe; see streaming_stores.c).
from spack_repo.builtin.build_systems.generic import Package
from spack_repo.hpcbench.build_systems.own_source import verified_own_source

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

    # Ours, beside this recipe: STREAM's kernels with non-temporal (streaming) stores, for
    # STREAM's -DTUNED hook; its checksum makes a changed kernel a changed recipe.
    streaming_stores = (
        "streaming_stores.c",
        "a1778640b397c36c681a2aa8e8a0fa0896eb1334bfbb2de4e6986725652a6205",
    )

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
        cc = Executable(spack_cc)
        cc(*cflags, "stream.c", "-o", join_path(prefix.bin, "stream_c.exe"))
        if spec.satisfies("target=x86_64:"):
            cc(*cflags, "-DTUNED", self.with_streaming_stores("stream.c"),
               "-o", join_path(prefix.bin, "stream_nontemporal_c.exe"))

    # stream.c's trivial "tuned" kernels, which -DTUNED calls, lie between these two lines.
    STUBS = ('/* stubs for "tuned" versions of the kernels */',
             '/* end of stubs for the "tuned" versions of the kernels */')

    def with_streaming_stores(self, source):
        """A copy of `source` whose tuned kernels are those of streaming_stores.c (it is
        included where the stubs were: STREAM's arrays are static to stream.c)."""
        text = open(source).read()
        first, last = (text.find(line) for line in self.STUBS)
        if first < 0 or last < first:
            raise InstallError(
                f"{source}: no tuned-kernel stubs between {self.STUBS[0]!r} and "
                f"{self.STUBS[1]!r}: this STREAM is not the one streaming_stores.c fits")
        copy = "stream_nontemporal.c"
        install(verified_own_source(self, *self.streaming_stores), ".")
        with open(copy, "w") as out:
            out.write(text[:first] + '#include "streaming_stores.c"\n'
                      + text[last + len(self.STUBS[1]):])
        return copy
