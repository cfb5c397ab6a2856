# Why this recipe: the builtin recipe passes its variants to make as TARGET=MPI1 TARGET=EXT
# ..., which IMB 2021's top Makefile does not read (its `all` makes every one of its seven
# programs), and then installs the programs its variants name. So ~ext and the like saved
# no build time. This recipe makes the programs its variants name and no other: the suite
# runs IMB-MPI1 alone (IMB-MPI1-GPU comes with Intel MPI's wheel), which this machine's
# environments (local, testbed) require; 14 s of one core to compile, not 46 (IMB 2021.7,
# Open MPI, Zen 3, 2026-12-06), on each MPI stack. Otherwise it is the builtin recipe; the
# paper systems' environments keep it, as their committed locks were concretized with it.
from spack_repo.builtin.packages.intel_mpi_benchmarks.package import (
    IntelMpiBenchmarks as BuiltinIntelMpiBenchmarks)

# Each variant's program, a target of the top Makefile.
PROGRAM_OF_VARIANT = {"mpi1": "IMB-MPI1", "ext": "IMB-EXT", "io": "IMB-IO", "nbc": "IMB-NBC",
                      "p2p": "IMB-P2P", "rma": "IMB-RMA", "mt": "IMB-MT"}


class IntelMpiBenchmarks(BuiltinIntelMpiBenchmarks):
    """Intel MPI Benchmarks, only the programs its variants name made."""

    @property
    def build_targets(self):
        if self.spec.satisfies("@:2019"):
            return super().build_targets
        targets = [program for variant, program in PROGRAM_OF_VARIANT.items()
                   if self.spec.satisfies(f"+{variant}")]
        if self.spec.satisfies("+check"):
            targets.append("CPPFLAGS=-DCHECK")
        return targets
