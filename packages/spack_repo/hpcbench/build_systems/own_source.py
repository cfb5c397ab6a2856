# Recipes of our own small programs (and our own files in other recipes): the source sits
# beside the recipe (no download), and the recipe records its sha256. Spack's hash covers the recipe, not the file beside it:
# the checksum ties them, so that a changed source is a changed recipe (a new hash) and
# never a silent rebuild under the same hash.
import hashlib
import inspect
import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


def verified_own_source(package, name, sha256):
    """The path of `name`, a file of ours beside `package`'s recipe, after checking that it
    has the recorded sha256."""
    source = join_path(os.path.dirname(inspect.getfile(type(package))), name)
    with open(source, "rb") as fp:
        digest = hashlib.sha256(fp.read()).hexdigest()
    if digest != sha256:
        raise InstallError(
            f"{source} has sha256 {digest}, the recipe expects {sha256}: "
            "update the recipe's sha256 (and the version) with the source"
        )
    return source


class OwnSourcePackage(Package):
    """A program of this project; subclasses set `source_file` and `source_sha256`."""

    has_code = False
    source_file = None
    source_sha256 = None

    def verified_source(self):
        """The source's path, after checking it has the recorded sha256."""
        return verified_own_source(self, self.source_file, self.source_sha256)
