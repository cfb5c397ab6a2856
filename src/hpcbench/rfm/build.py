"""The build fixture every check's program comes from: `BenchmarkBuild` locates the install
of its spec in the system's Spack environment (never builds during a run) or, on the
registry-only path, a program a registry installed (Debian's hpcc, Intel MPI's IMB), and
says which, so that the run fixture (hpcbench.rfm.run.BenchmarkRun) launches it.

`QuietNodeSettings`: the quiet-node variables a run-wide `-S` sets, which builds carry too.
"""
import os
import shlex

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from hpcbench.rfm.required_attributes import SubclassContract
from hpcbench.machine.from_reframe import partition_description, stack_description
from hpcbench.stack import provenance, spack

# Where a build's stage records the install prefix it located (its run fixtures read it).
PREFIX_FILE = 'spack-prefix.txt'


class QuietNodeSettings(rfm.RegressionTestPlugin):
    """The quiet-node check's settings for a run (`-S quiet_node_action=warn`, ...). The
    builds have them too, without effect: a run-wide -S reaches every test, and ReFrame
    would warn on each build that lacks the variable."""
    #: fail, warn or off; None: the partition's (hpcbench.core.quiet_node.DEFAULTS).
    quiet_node_action = variable(str, type(None), value=None)
    #: Seconds a busy node is waited for; None: the partition's.
    quiet_node_wait = variable(int, float, type(None), value=None)
    #: Seconds the node's launch lock (another hpcbench job on the node) is waited for;
    #: None: the partition's.
    quiet_node_lock_wait = variable(int, float, type(None), value=None)


class BenchmarkBuild(rfm.CompileOnlyRegressionTest, QuietNodeSettings, SubclassContract):
    """Locates a benchmark's build and records its prefix: with a Spack, one of the roots of
    the partition's Spack environment; without one, the program a registry ships built
    against the ReFrame environment's MPI (the registry-only path).

    `hpcbench setup` (make run) installs the environment before ReFrame starts, so a build
    job only asks Spack where its spec is (a second or two), once per lock: the prefix is
    remembered (`var/spack-locations`, hpcbench.stack.spack.remembered_prefix) and later runs
    take it from there while it is installed; only when it is not installed (a bare
    `reframe -r` on a fresh install tree) does the job install the environment first. Builds do not load the node while a benchmark runs (issue 22: 19 `spack install`
    with nothing to do took 505-621 CPU-seconds beside the first benchmarks).

    The environment itself (spack-envs/<system>) names every build; this fixture never adds
    specs to it. `spec` selects the build; for MPI programs the ReFrame environment's MPI
    (its stack's spack_mpi) is added as a dependency constraint. `registry_name`: the name under
    which an environment lists the registry's program (its stack's `registry_programs`, from
    hpcbench.stack.mpi_stacks); the checks run only where a Spack is or that program is
    (hpcbench.rfm.site_environments.BUILDS_FROM_SPACK).
    """
    spec = variable(str)
    needs_mpi = variable(bool, value=False)
    needs_blas = variable(bool, value=False)
    registry_name = variable(str, type(None), value=None)
    build_system = 'CustomBuild'
    #: Whether Spack built it (else a registry's program).
    from_spack = variable(bool, value=True)
    #: When its job ran: [submitted, completed], seconds since the epoch (ReFrame's report
    #: times a run job only), so that a session shows that no benchmark job overlapped a
    #: build (hpcbench.results.session_time.time_per_check).
    build_job_interval = variable(typ.List[float], value=[])

    @run_after('init')
    def build_as_a_job_where_jobs_share_this_host(self):
        # ReFrame runs a local build beside the partition's jobs (its own job limit); where
        # the partitions' jobs run on this host, a build (Spack at 85 % of a core) would run
        # beside a benchmark. As a job of the partition, the partition's one job at a time
        # keeps them apart.
        schedulers = {p.scheduler.registered_name for p in rt.runtime().system.partitions}
        if schedulers == {'local'}:
            self.build_locally = False

    @run_after('setup')
    def use_partition_environment(self):
        spack_root = partition_description(self.current_partition).spack_root
        registry_program = self.registry_program()
        if not spack_root and registry_program and not self.is_dry_run():
            # `prefix/bin/program`: the checks find it where Spack would put it.
            self.from_spack = False
            self.build_system.commands = [
                f'test -x {shlex.quote(registry_program)}',
                f'dirname "$(dirname {shlex.quote(registry_program)})" > {PREFIX_FILE}']
            return

        # A dry run still writes the scripts, so that they can be inspected without Spack.
        self.skip_if(not spack_root and not self.is_dry_run(),
                     'no Spack found (set SPACK_ROOT or run `make bootstrap`)')

    def registry_program(self):
        if self.registry_name is None:
            return None

        programs = stack_description(self.current_environ).registry_programs or {}
        return programs.get(self.registry_name)

    @run_before('compile')
    def record_prefix(self):
        # After the subclasses' setup hooks, which choose `spec`. Located before under this
        # lock and still there: that prefix, without starting Spack (spack.remembered_prefix);
        # installed: located; else the environment installed, then located.
        if not self.from_spack:
            return

        env = partition_description(self.current_partition).spack_env
        known = None if self.is_dry_run() else spack.remembered_prefix(env, self.full_spec)
        if known:
            self.build_system.commands = [f'echo {shlex.quote(known)} > {PREFIX_FILE}']
            return

        locate = f'{self._location_command()} > {PREFIX_FILE}'
        self.build_system.commands = [
            f'{locate} 2>/dev/null || {{ spack -e {shlex.quote(env)} install --fail-fast && '
            f'{locate}; }}']

    @run_after('sanity')
    def remember_prefix(self):
        if self.from_spack and self.located():
            spack.remember_prefix(partition_description(self.current_partition).spack_env,
                                  self.full_spec,
                                  self.install_prefix())

    def _location_command(self):
        env = partition_description(self.current_partition).spack_env
        return f'spack -e {shlex.quote(env)} location -i {shlex.quote(self.full_spec)}'

    @property
    def full_spec(self):
        stack = stack_description(self.current_environ)
        return ' '.join([self.spec,
                         *([f'^{stack.spack_mpi}'] if self.needs_mpi else []),
                         *([f'^{stack.spack_blas}']
                           if self.needs_blas and stack.spack_blas else [])])

    @run_before('sanity')
    def record_build_job_interval(self):
        # The build job has ended (a compile-only test's sanity follows its wait).
        job = self.build_job
        if job and job.submit_time and job.completion_time:
            self.build_job_interval = [job.submit_time, job.completion_time]

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

    def located(self):
        """Whether the build job recorded its prefix (a dry run has not)."""
        return os.path.exists(os.path.join(self.stagedir, PREFIX_FILE))

    def install_prefix(self):
        """The build's prefix; in a dry run, the shell expression that finds it."""
        if self.located():
            with open(os.path.join(self.stagedir, PREFIX_FILE)) as fp:
                return fp.read().strip()

        return f'$({self._location_command()})'

    def program(self, name, directory='bin'):
        """The shell word of the build's `<directory>/<name>` (bin/, or where its recipe
        installs it: OSU's libexec/...): its path, quoted; in a dry run, the command
        substitution that finds it, in double quotes."""
        if self.located():
            return shlex.quote(os.path.join(self.install_prefix(), directory, name))

        return f'"$({self._location_command()})/{directory}/{name}"'

    def lacks_program(self, name):
        """Whether the located build has no `bin/<name>` (not known in a dry run: False)."""
        return self.located() and not os.path.exists(
            os.path.join(self.install_prefix(), 'bin', name))

    def description(self):
        """What was built: Spack's spec of the install, or the registry package."""
        if self.from_spack:
            return provenance.build_spec(self.install_prefix())

        return provenance.registry_package(self.registry_program())
