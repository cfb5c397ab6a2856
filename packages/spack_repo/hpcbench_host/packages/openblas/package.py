# Why this recipe: where Spack's target for the host is a generic x86-64 level (a VM whose
# CPU archspec does not know, here an "AMD EPYC" that Spack 1.1 calls x86_64_v4), the builtin
# recipe builds DYNAMIC_ARCH=1 TARGET=GENERIC even with ~dynamic_dispatch: every x86 kernel
# set, about 16 minutes on 2 cores, most of a cold `make run`. A level guarantees the
# instructions of one OpenBLAS kernel set, so ~dynamic_dispatch builds that one set instead
# (still portable to every CPU of the level). And `~lapack` builds the BLAS alone: HPL, HPCC
# and DGEMM call no LAPACK, and LAPACK with LAPACKE took 4.5 of the 6.6 min of its build
# here. `~complex` builds the real routines alone (BUILD_SINGLE=1 BUILD_DOUBLE=1; double
# alone does not link in 0.3.28: its library refers to spotrf and sgetrf), all that HPL,
# HPCC and DGEMM call: the library in 50 s here. It builds the library without OpenBLAS's
# self-tests, whose Makefile builds the complex ones whatever was built.
# Otherwise it is the builtin recipe; this machine's environments (local, testbed) use it.
from spack_repo.builtin.packages.openblas.package import CMakeBuilder  # noqa: F401
from spack_repo.builtin.packages.openblas.package import MakefileBuilder as BuiltinMakefileBuilder
from spack_repo.builtin.packages.openblas.package import Openblas as BuiltinOpenblas

from spack.package import *

# The OpenBLAS kernel set each generic x86-64 level has every instruction of: v4's AVX-512
# F/CD/BW/DQ/VL are SKYLAKEX's, v3's AVX2 and FMA Haswell's, v2's SSE4.2 Nehalem's.
KERNELS_OF_LEVEL = {"x86_64_v4": "SKYLAKEX", "x86_64_v3": "HASWELL", "x86_64_v2": "NEHALEM"}
# What the builtin recipe adds for a generic target.
_DYNAMIC = ("DYNAMIC_ARCH=1", "DYNAMIC_OLDER=1", "TARGET=GENERIC")


class Openblas(BuiltinOpenblas):
    """OpenBLAS, built for a generic x86-64 level's own kernels under ~dynamic_dispatch,
    and without LAPACK under ~lapack."""

    variant("lapack", default=True, description="Build LAPACK and LAPACKE too (~lapack: BLAS)")
    variant(
        "complex",
        default=True,
        description="Build the complex routines too (~complex: the real ones alone)",
    )
    conflicts("~complex +lapack", msg="LAPACK needs the complex routines")


def _lapack_only_with_the_variant(pkg):
    """The builtin provides lapack whatever the spec: here only +lapack does (a ~lapack
    build is never a LAPACK provider), and blas and lapack come together only then."""
    with_lapack = {}
    for when, provided in list(pkg.provided.items()):
        lapack = {p for p in provided if p.name == "lapack"}
        if lapack:
            pkg.provided[when] = provided - lapack
            with_lapack[when] = lapack
    for when, lapack in with_lapack.items():
        pkg.provided.setdefault(Spec(f"{when} +lapack"), set()).update(lapack)
    for when in list(pkg.provided_together):
        pkg.provided_together[Spec(f"{when} +lapack")] = pkg.provided_together.pop(when)


_lapack_only_with_the_variant(Openblas)


class MakefileBuilder(BuiltinMakefileBuilder):
    @property
    def make_defs(self):
        defs = super().make_defs
        if self.spec.satisfies("~lapack"):
            defs += ["NO_LAPACK=1", "NO_LAPACKE=1"]
        if self.spec.satisfies("~complex"):
            # OpenBLAS builds every precision unless some are named.
            defs += ["BUILD_SINGLE=1", "BUILD_DOUBLE=1"]
        return defs

    @property
    def build_targets(self):
        targets = super().build_targets
        if self.spec.satisfies("~complex"):
            # `shared` (the library) instead of `all`, which adds the self-tests.
            targets = [t if t != "all" else "shared" for t in targets]
        return targets

    def _microarch_target_args(self):
        args = super()._microarch_target_args()
        kernels = KERNELS_OF_LEVEL.get(self.spec.target.name)
        if kernels and self.spec.satisfies("~dynamic_dispatch"):
            args = [arg for arg in args if arg not in _DYNAMIC] + [f"TARGET={kernels}"]
        return args
