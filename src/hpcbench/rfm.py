"""ReFrame building blocks shared by the checks: the Spack build fixture and the node
description of the partition a test runs on."""
import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from hpcbench import node

PREFIX_FILE = 'spack-prefix.txt'


def partition_node(partition):
    """hpcbench.node.Node of a ReFrame partition (processor description + extras)."""
    return node.from_partition(partition.processor.info, partition.extras, partition.fullname)


def configured_nodes():
    """Node descriptions of every partition of the current system that has one.

    Used at class-definition time for parameters that depend on the hardware (thread
    sweeps): ReFrame has loaded the config and detected topologies by then.
    """
    nodes = []
    for partition in rt.runtime().system.partitions:
        try:
            nodes.append(partition_node(partition))
        except node.NodeDescriptionError:
            continue

    return nodes


class SpackBuild(rfm.CompileOnlyRegressionTest):
    """Installs the partition's Spack environment and records the prefix of one of its roots.

    The environment itself (spack-envs/<system>) names every build; this fixture never adds
    specs to it. `spec` selects the build; for MPI programs the ReFrame environment's MPI
    (extras.spack_mpi) is added as a dependency constraint.
    """
    spec = variable(str)
    needs_mpi = variable(bool, value=False)
    build_system = 'Spack'

    @run_after('setup')
    def use_partition_environment(self):
        extras = self.current_partition.extras
        # A dry run still writes the scripts, so that they can be inspected without Spack.
        self.skip_if(not extras.get('spack_root') and not self.is_dry_run(),
                     'no Spack found (set SPACK_ROOT or run `make bootstrap`)')
        self.build_system.environment = extras['spack_env']
        self.build_system.install_opts = ['--fail-fast']

    @run_before('compile')
    def record_prefix(self):
        # After the subclasses' setup hooks, which choose `spec`.
        self.postbuild_cmds = [f'{self._location_command()} > {PREFIX_FILE}']

    def _location_command(self):
        env = self.current_partition.extras['spack_env']
        return f"spack -e {env} location -i '{self.full_spec}'"

    @property
    def full_spec(self):
        if self.needs_mpi:
            return f"{self.spec} ^{self.current_environ.extras['spack_mpi']}"

        return self.spec

    @sanity_function
    def prefix_found(self):
        # `spack location -i` prints nothing on stdout when the spec is not installed or is
        # ambiguous; only one existing absolute directory is a prefix.
        recorded = os.path.join(self.stagedir, PREFIX_FILE)
        text = open(recorded).read() if os.path.exists(recorded) else ''
        lines = text.split()
        return sn.assert_true(
            len(lines) == 1 and os.path.isabs(lines[0]) and os.path.isdir(lines[0]),
            msg=f'no install prefix recorded in {PREFIX_FILE}: {text.strip()!r}')

    def install_prefix(self):
        """The build's prefix; in a dry run, the shell expression that finds it."""
        recorded = os.path.join(self.stagedir, PREFIX_FILE)
        if os.path.exists(recorded):
            with open(recorded) as fp:
                return fp.read().strip()

        return f'$({self._location_command()})'

