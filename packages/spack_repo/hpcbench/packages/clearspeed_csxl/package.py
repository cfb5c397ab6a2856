# ClearSpeed's CSXL, the BLAS of the ClearSpeed Advance boards in 360 of TSUBAME's nodes
# (seed 000, Chapter 2): DGEMM calls it runs on the board (the paper's "50 GFlops sustained
# double-precision matrix multiply (DGEMM of BLAS)"). Spack's builtin repository has no
# recipe for it, and it is proprietary and no longer distributed: this recipe exists so that
# an environment can name the site's install as its BLAS (an external, never built), as
# hp-mpi does for Murska's MPI.
from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class ClearspeedCsxl(Package):
    """ClearSpeed CSXL: BLAS running DGEMM on ClearSpeed's CSX600 accelerator boards."""

    homepage = "https://en.wikipedia.org/wiki/ClearSpeed"

    # The paper names no release: the external's version names the machine it served.
    version("tsubame2006")

    provides("blas")

    # Proprietary and installed by the vendor: there is nothing to fetch or build.
    has_code = False

    def install(self, spec, prefix):
        raise InstallError(
            "ClearSpeed's CSXL is installed by the vendor: declare it as an external "
            "(packages.yaml)"
        )

    @property
    def blas_libs(self):
        # The library's name in a site's install is not in the paper: any libcsxl*.
        return find_libraries("libcsxl*", root=self.prefix, shared=True, recursive=True)
