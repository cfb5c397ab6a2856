# HP-MPI, the MPI of HP's XC clusters (CSC's Murska, 2007). Spack's builtin repository has no
# recipe for it, and it is proprietary: this recipe exists so that an environment can name
# it as the site's installed MPI (an external, never built), as the builtin recipes of Cray's
# MPICH do.
from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class HpMpi(Package):
    """HP-MPI (later Platform MPI, IBM Spectrum MPI): the MPI of HP XC clusters."""

    homepage = "https://www.ibm.com/products/spectrum-mpi"

    version("2.2.5.1")
    version("2.2.5")

    provides("mpi@:2.1")

    # Proprietary and installed by the vendor: there is nothing to fetch or build.
    has_code = False

    def install(self, spec, prefix):
        raise InstallError(
            "HP-MPI is installed by the vendor: declare it as an external (packages.yaml)"
        )

    def setup_dependent_package(self, module, dependent_spec):
        self.spec.mpicc = join_path(self.prefix.bin, "mpicc")
        self.spec.mpicxx = join_path(self.prefix.bin, "mpiCC")
        self.spec.mpif77 = join_path(self.prefix.bin, "mpif77")
        self.spec.mpifc = join_path(self.prefix.bin, "mpif90")

    def setup_dependent_build_environment(self, env, dependent_spec):
        env.set("MPICC", join_path(self.prefix.bin, "mpicc"))
        env.set("MPICXX", join_path(self.prefix.bin, "mpiCC"))
        env.set("MPIF77", join_path(self.prefix.bin, "mpif77"))
        env.set("MPIF90", join_path(self.prefix.bin, "mpif90"))
