# Recipes of our own small programs: the source sits beside the recipe (no download), and
# the recipe records its sha256. Spack's hash covers the recipe, not the file beside it:
# the checksum ties them, so that a changed source is a changed recipe (a new hash) and
# never a silent rebuild under the same hash.
import hashlib
import inspect
import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class OwnSourcePackage(Package):
    """A program of this project; subclasses set `source_file` and `source_sha256`."""

    has_code = False
    source_file = None
    source_sha256 = None

    def verified_source(self):
        """The source's path, after checking it has the recorded sha256."""
        source = join_path(os.path.dirname(inspect.getfile(type(self))), self.source_file)
        with open(source, "rb") as fp:
            digest = hashlib.sha256(fp.read()).hexdigest()
        if digest != self.source_sha256:
            raise InstallError(
                f"{source} has sha256 {digest}, the recipe expects {self.source_sha256}: "
                "update source_sha256 (and the version) with the source"
            )
        return source
