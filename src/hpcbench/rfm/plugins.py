"""The plugins every benchmark run mixes in (hpcbench.rfm.run.BenchmarkRun), one concern each:

- `SiteTuning`: the environment's launcher and run-time variables at launch;
- `CheckedInputs`: inputs a user sets (`-S name=value`) checked before anything runs;
- `QuietNode`: the node's launch lock and quiet-node check before the launch
  (hpcbench.core.quiet_node runs in the job);
- `PinnedNodes`: a test given its nodes by name (`-P Check.pinned_nodes=...`);
- `JobNodes`: where the job ran, in its own word (`ran_on`);
- `StackCoverage`: which MPI stacks and BLAS libraries a check covers;
- `Provenance`: the build's spec, inputs and topology as loggable variables;
- `Samples`: each figure's values within the job and how they were aggregated, ratios
  above a ceiling withheld with their reason.
"""
import shlex
import statistics

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import ReframeError, SanityError
from reframe.core.logging import getlogger

from hpcbench.core import job_script, launch_lock, node, quiet_node
from hpcbench.core.slurm_cluster import NODE_NAME, SlurmDescriptionError, expand_hostlist
from hpcbench.stack import provenance, slurm_run_env
from hpcbench.rfm.build import BenchmarkBuild, QuietNodeSettings
from hpcbench.machine.from_reframe import partition_description, stack_description
from hpcbench.rfm.partition import (given_nodes, job_nodes, job_output, job_python,
                                    nominal_peak, partition_node, say_once,
                                    skip_node_out_of_service)



# Variables a launcher must not pass on its command line: search paths are the job's
# business (and their values often refer to the job's own $PATH).
_NOT_FORWARDED_SUFFIX = 'PATH'
# Launchers that give the ranks the job's whole environment by themselves: srun (whose
# --export=<list> would drop the rest and split values at commas, as in
# OMPI_MCA_btl=self,tcp).
_ENVIRONMENT_PROPAGATING = ('srun', 'srunalloc')


class SiteTuning(rfm.RegressionTestPlugin):
    """What a site's MPI stack needs at launch, for every check that launches MPI ranks.

    - The ReFrame environment's stack may name its own launcher (hpcbench.machine.from_reframe),
      since one
      partition runs several MPI stacks (Open MPI's mpirun, MVAPICH's mpirun_rsh, ...).
    - The run-time variables of the environment (the papers' tuning: VIADEV_*, PSM2_*,
      ...) and of the test (threads, binding) are given to the launcher too; launchers that
      do not pass the job's environment to remote ranks put them on the launch line
      (hpcbench.rfm.backends), the others ignore them: the job script exports them anyway.
      srun is not given them: it passes the job's environment on by itself.
    """

    @run_after('setup')
    def use_stack_launcher(self):
        name = stack_description(self.current_environ).launcher
        if name:
            self.job.launcher = getlauncher(name)()

    @run_before('run')
    def keep_mpi_files_in_the_job(self):
        # On one node: Open MPI's session directory and shared-memory segments, which an
        # interrupted job would leave in /tmp and /dev/shm, go where the job removes them.
        # (On several nodes that directory would exist on the first node only.)
        if self.num_tasks <= (self.num_tasks_per_node or self.num_tasks):
            self.prerun_cmds = [*job_script.mpi_scratch(), *self.prerun_cmds]
        # Ranks said to be one node's talk over shared memory, as a node's do, where the
        # environment holds them to TCP because its nodes share a host
        # (hpcbench.stack.slurm_run_env.one_node_run_env).
        if job_nodes(self) == 1:
            self.env_vars = {**self.env_vars,
                             **slurm_run_env.one_node_run_env(self.current_environ.env_vars)}

    @run_before('run')
    def pass_run_time_variables(self):
        if isinstance(self.job.launcher,
                      tuple(getlauncher(name) for name in _ENVIRONMENT_PROPAGATING)):
            return

        variables = {**self.current_environ.env_vars, **self.env_vars}
        self.job.launcher.env_vars = {k: str(v) for k, v in variables.items()
                                      if not k.endswith(_NOT_FORWARDED_SUFFIX)}


# What an input a user sets (`-S name=value`) may be.
INPUT_KINDS = {
    'positive': (lambda v: v > 0, 'a positive number'),
    'non-negative': (lambda v: v >= 0, 'zero or more'),
    'fraction': (lambda v: 0 < v <= 1, 'a fraction in (0, 1]'),
}


class CheckedInputs(rfm.RegressionTestPlugin):
    """A check's numeric inputs are checked in setup, before any job is written, against the
    kinds a check declares in `input_kinds` ({variable: a kind of INPUT_KINDS}); unset
    (None) is the check's default. One error names every bad value. The variables the test
    exports (its own and those a partition's description gave it: the ranks' placement) are
    checked before ReFrame loads them into the job (hpcbench.core.job_script.
    exported_variables)."""
    input_kinds = {}

    @run_before('run')
    def refuse_unsafe_variables(self):
        try:
            job_script.exported_variables(self.env_vars, type(self).__name__)
        except job_script.UnsafeVariableError as err:
            raise ReframeError(f'{err}: nothing was run') from None

    @run_after('setup')
    def refuse_bad_inputs(self):
        bad = []
        for name, kind in self.input_kinds.items():
            value = getattr(self, name)
            accepts, wanted = INPUT_KINDS[kind]
            # NaN compares false with everything: refused too.
            if value is not None and (isinstance(value, bool) or not accepts(value)):
                bad.append(f'{name}={value!r} ({wanted})')
        if bad:
            raise ReframeError(f'{type(self).__name__}: bad input {"; ".join(bad)}: nothing '
                               'was run')


class QuietNode(QuietNodeSettings):
    """A benchmark measures a quiet node, and a failed job never passes.

    - Just before its launch, the job checks the node it runs on (hpcbench.core.quiet_node): the
      CPU other processes use, the memory in use, the load. Settings per partition:
      its description's `quiet_node` (action fail/warn/off, max_busy_cores, max_memory_in_use,
      sample, wait); for a run: `-S quiet_node_action=warn`, `-S quiet_node_wait=0`. A
      busy node is surveyed again for up to `wait` seconds (60): a passing load delays the
      launch; one that stays fails the test (or, with `warn`, which does not wait, warns)
      naming the culprits. The check's line is kept as `node_state` (perflog, results
      database), with the seconds waited.
    - Before that check, the job takes the node's launch lock and keeps it to its end
      (hpcbench.core.launch_lock.LAUNCH_LOCK: one per node, for every checkout and user), so that
      two runs never measure at the same time; a job that waited for another says so in
      `node_state`, naming it. Waited for `lock_wait` seconds (an hour; `-S
      quiet_node_lock_wait=`), then the node is busy.
    - The job's exit status must be 0 (IOR, for one, returns the count of data errors).
    - A test given one node (--distribute) that its Slurm controller says cannot run now
      (down, drained...) skips at set-up, saying why: its job would wait for it forever.
    """
    #: The node check's verdict and figures, from the job's output.
    node_state = variable(str, value='')

    @run_after('setup')
    def skip_a_node_that_cannot_run(self):
        # A test given one node by --distribute (`make screen`), whatever the check.
        skip_node_out_of_service(self)

    @run_after('setup')
    def choose_node_check(self):
        part = self.current_partition
        try:
            self.quiet_node_settings = quiet_node.settings(partition_description(part).quiet_node,
                                                           self.quiet_node_action,
                                                           self.quiet_node_wait,
                                                           self.quiet_node_lock_wait)
        except quiet_node.QuietNodeSettingsError as err:
            raise ReframeError(f'{part.fullname}: {err}') from None

    @run_before('run')
    def check_node_before_launch(self):
        # Before every other line of the job (its own set-up, the launch); the node's launch
        # lock is taken with the check off too: it is what keeps two runs apart.
        lines = quiet_node.job_lines(job_python(self.current_partition),
                                     shlex.quote(quiet_node.__file__), self.quiet_node_settings)
        self.prerun_cmds = [*lines, *self.prerun_cmds]

    @run_before('sanity')
    def measured_on_a_quiet_node(self):
        if self.is_dry_run():
            return

        text = job_output(self, missing='')
        line = next((ln for ln in text.splitlines() if ln.startswith(quiet_node.MARKER)), '')
        self.node_state = line[len(quiet_node.MARKER):].strip()
        if self.node_state.startswith((launch_lock.LOCK_REFUSED, launch_lock.LOCK_NOT_HAD)):
            raise SanityError(f'the job did not take the node\'s launch lock and ran '
                              f'nothing: {self.node_state}')
        if self.node_state.startswith('BUSY'):
            if self.quiet_node_settings['action'] == 'fail':
                raise SanityError(f'the node was not quiet before the launch: {self.node_state}')
            getlogger().warning(f'{self.display_name}: measured on a busy node: '
                                f'{self.node_state}')
        if self.job.exitcode:
            raise SanityError(f'the job exited with status {self.job.exitcode} '
                              f'(see {self.job.stdout} and {self.job.stderr})')


class PinnedNodes(rfm.RegressionTestPlugin):
    """A test given its nodes by name, as --distribute gives each test one node: ReFrame's
    `-P Check.pinned_nodes='n1,n2;n3,n4' --param-values-delim=';'` makes one test of each
    list, whose job asks the scheduler for exactly those nodes (the acceptance's node pairs,
    a round of them in one ReFrame run, so that disjoint pairs run at once where the
    partition takes several jobs: hpcbench.acceptance.plan). The names are checked as
    Slurm's (hpcbench.rfm.partition.given_nodes), a node out of service skips the test
    (QuietNode), and a list of another length than the nodes the job spans is refused: Slurm
    would add nodes to a shorter one and refuse a longer one."""
    #: The nodes the job runs on ([]: the scheduler's choice).
    pinned_nodes = variable(typ.List[str], value=[])

    @run_before('run')
    def pin_the_job_to_its_nodes(self):
        pinned = given_nodes(self) if self.pinned_nodes else []
        if not pinned:
            return
        spans = job_nodes(self)
        if spans is not None and spans != len(pinned):
            raise ReframeError(f'{type(self).__name__}: pinned_nodes={",".join(pinned)} is '
                               f'{len(pinned)} node(s); its job spans {spans} '
                               f'({self.num_tasks} tasks, {self.num_tasks_per_node} a node): '
                               'nothing was run')
        self.job.pin_nodes = pinned


class JobNodes(rfm.RegressionTestPlugin):
    """Where the job ran, in its own word: its first line prints the allocation its
    scheduler gave it (Slurm's, fixed before the job starts) or, on one node, its host
    (hpcbench.core.job_script.job_nodes_line); kept as `ran_on`, which the results layer
    keys the figures by (hpcbench.results.measured). ReFrame's `job_nodelist` is its last
    poll of the scheduler, which Slurm may still be filling: pinned pair jobs that ran on two
    nodes were recorded on one and their pairs judged NOT_RUN. A job pinned to its nodes
    (PinnedNodes) that ran elsewhere fails its sanity, saying where it ran: its figures are
    not its pair's."""
    #: The nodes the job ran on, as it said ([]: it said nothing, a dry run).
    ran_on = variable(typ.List[str], value=[])

    # Last of the hooks before the run, so that its line is the job's first: a job that
    # stops at the quiet-node check has said where it was.
    @run_before('run', always_last=True)
    def say_where_the_job_runs(self):
        self.prerun_cmds = [job_script.job_nodes_line(), *self.prerun_cmds]

    @run_before('sanity')
    def read_where_the_job_ran(self):
        if self.is_dry_run():
            return
        text = job_output(self, missing='')
        try:
            said = job_script.job_nodes_said(text)
        except ValueError as err:
            raise SanityError(str(err)) from None
        if said is None:
            return
        how, listed = said
        try:
            nodes = expand_hostlist(listed) if how == 'slurm' else [listed]
        except SlurmDescriptionError as err:
            raise SanityError(f'the job said it ran on {listed[:200]!r}: {err}') from None
        if not nodes or not all(NODE_NAME.fullmatch(n) for n in nodes):
            raise SanityError(f'the job said it ran on {listed[:200]!r}: no node names')
        if how == 'host' and job_nodes(self) not in (None, 1):
            return      # a host name is one node's word; several nodes' need a scheduler's
        self.ran_on = nodes
        pinned = given_nodes(self) if getattr(self, 'pinned_nodes', None) else []
        if pinned and sorted(nodes) != sorted(pinned):
            raise SanityError(f'pinned to {",".join(pinned)}, the job ran on '
                              f'{",".join(nodes)} (its scheduler\'s allocation, as the job '
                              'was given it): its figures are not those nodes\'')


class StackCoverage(rfm.RegressionTestPlugin):
    """Which MPI stacks a check's cases run on.

    Every stack the check is valid for, unless `every_stack` is False (quick mode,
    hpcbench.rfm.run_modes.MODES; `make screen`, which screens each node once): then a
    case whose figures do not depend on the MPI stack
    (`depends_on_stack()` is False: one rank, or I/O through POSIX) runs on the partition's
    first stack only (the MPI of the first of its environments the check is valid for, with
    each BLAS), and on the others is skipped, saying so. A check overrides
    `depends_on_stack` (the default: it does)."""
    #: False: run the cases that do not depend on the MPI stack on the first stack only.
    every_stack = variable(typ.Bool, value=True)

    def depends_on_stack(self):
        return True

    @run_after('setup')
    def run_stack_independent_cases_once(self):
        if self.every_stack or self.depends_on_stack():
            return

        skip_unless_first_stack(self, 'its figures do not depend on the MPI stack',
                                'every_stack')


def skip_unless_first_stack(test, why, setting):
    """Skip `test` unless its environment has the partition's first MPI stack (the MPI of
    the first of its environments the check is valid for), saying `why`, where it is
    measured and which of its variables (`setting`, false) asked for one stack."""
    valid = rt.valid_sysenv_comb(test.valid_systems, test.valid_prog_environs)
    first = next(envs[0] for part, envs in valid.items()
                 if part.fullname == test.current_partition.fullname)
    mpi = stack_description(test.current_environ).spack_mpi
    test.skip_if(mpi != stack_description(first).spack_mpi,
                 f'{why}: measured on {first.name} ({type(test).__name__}.{setting}=false; '
                 'true runs it on every stack)')


class Provenance(rfm.RegressionTestPlugin):
    """What exactly produced a test's figures (hpcbench.stack.provenance), as loggable
    variables: ReFrame keeps them in the perflog line and in the results database with every
    other variable the check set."""
    #: The project's git commit (`-dirty`: with uncommitted changes).
    project_commit = variable(str, value='')
    #: Spack's and spack-packages' commits.
    spack_commit = variable(str, value='')
    #: sha256 of the system's spack.lock.
    spack_lock = variable(str, value='')
    #: The build that ran: its full spec, compiler, MPI and BLAS with versions.
    build_spec = variable(str, value='')
    #: The node the figures were measured on.
    topology = variable(str, value='')
    #: Input files the check wrote (HPL.dat, hpccinf.txt), by name.
    input_files = variable(typ.Dict[str, str], value={})

    @run_after('setup')
    def record_build(self):
        # In setup, before the checks' own hooks (a base class's run first): the build is
        # known once its fixture ran, and a baseline figure matches on it (it judges the
        # build it measured, not another one's figures).
        self.build_spec = self._build_description()

    @run_before('run')
    def record_provenance(self):
        # Before the run, after every setup hook: the executable is known.
        part = self.current_partition
        facts = provenance.session_facts(partition_description(part).spack_env)
        self.project_commit = facts['project_commit']
        self.spack_commit = facts['spack_commit']
        self.spack_lock = facts['spack_lock']
        try:
            self.topology = provenance.topology(part.processor.info, partition_node(part))
        except node.NodeDescriptionError:
            self.topology = ''

    def _build_description(self):
        if self.is_dry_run():
            return ''

        # Every check's program comes from its build fixture (Spack's or a registry's).
        build = getattr(self, 'build', None)
        return build.description() if isinstance(build, BenchmarkBuild) else ''


@sn.deferrable
def sampled_figure(test, name, aggregate=statistics.median):
    """A figure added where it applies (test.perf_variables[name] =
    sn.make_performance_function(sampled_figure(test, name), unit)): its recorded samples
    (Samples.record_samples), aggregated when the test's performance is read."""
    return aggregate(test.samples[name])


class Samples(rfm.RegressionTestPlugin):
    """A figure is a sample: what a job measured several times (HPL's solves, IMB's,
    IOR's and the start-up's launches, DGEMM's repeats) is kept value by value beside the
    figure aggregated from it, with how it was aggregated, in the perflog and the results
    database. A ratio of two measurements above 100 % of its ceiling is withheld (flagged,
    not reported as a result)."""
    #: Per performance variable: the values the job measured it from, in order.
    samples = variable(typ.Dict[str, typ.List[float]], value={})
    #: Per performance variable: how its figure came from them (`best of 3 solves`).
    aggregation = variable(typ.Dict[str, str], value={})
    #: Figures withheld, and why (a ratio above 100 % of its ceiling).
    flagged = variable(typ.Dict[str, str], value={})
    #: Per GPU or GPU pair the job measured: its own figures ({key: {variable: value}}, the
    #: key as hpcbench.core.device_keys writes it: `n1:gpu3`, `n1:gpu0-gpu1`), which the
    #: reported figure aggregates (a median over the GPUs, the slowest pair).
    device_figures = variable(typ.Dict[str, typ.Dict[str, float]], value={})

    def record_samples(self, how, **values):
        """Record each reported variable's values (a sequence) and how its figure was
        aggregated from them."""
        values = {name: [float(v) for v in sample] for name, sample in values.items()
                  if name in self.perf_variables}
        self.samples = {**self.samples, **values}
        self.record_aggregation(how, *values)

    def record_device_samples(self, how, keys, **values):
        """record_samples of figures measured once per GPU or GPU pair, `keys` (device_keys'
        text) naming whose each value is, in the values' order: each device's own figures
        kept under its key too."""
        self.record_samples(how, **values)
        figures = {key: dict(self.device_figures.get(key, {})) for key in keys}
        for name, sample in values.items():
            if name not in self.perf_variables:
                continue
            if len(sample) != len(keys):
                raise ValueError(f'{name}: {len(sample)} value(s) for {len(keys)} device(s)')
            for key, value in zip(keys, sample):
                figures[key][name] = float(value)
        self.device_figures = {**self.device_figures, **figures}

    def record_aggregation(self, how, *names):
        """Say how the reported variables `names` were aggregated (or derived)."""
        self.aggregation = {**self.aggregation, **{name: how for name in names
                                                   if name in self.perf_variables}}

    def withhold_ratio_above_ceiling(self, name, percent, why):
        """Withhold the ratio `name` (percent of a ceiling) when it is above 100 %: then the
        ceiling was not one, and the figure would be a wrong result (issue 19)."""
        if percent <= 100 or name not in self.perf_variables:
            return False

        self._withhold(name, f'{percent:.1f} % of the ceiling: {why}')
        getlogger().warning(f'{self.unique_name}: {name} withheld: {self.flagged[name]}')
        return True

    def withhold_ratio_to_nominal_peak(self, name, percent, nominal_gflops, measured):
        """Withhold the ratio `name` (percent of the nominal peak, `nominal_gflops` for the
        nodes the test used) when the nodes did more than that peak: any of `measured`
        ({what: GFLOP/s on those nodes}: what the ratio divides, and the ceilings measured
        beside it) above it. Then the nominal clock is not the one the cores run at (a VM's
        base clock), and every ratio to it is no result: the figure carries the reason, and
        the partition's log says it once (say_once)."""
        above = {what: gflops for what, gflops in measured.items() if gflops > nominal_gflops}
        if not above or name not in self.perf_variables:
            return False

        what, gflops = max(above.items(), key=lambda item: item[1])
        share = f'{100 * gflops / nominal_gflops:.1f} % of it'
        peak = nominal_peak(self.current_partition)
        self._withhold(name, f'{percent:.1f} % of the nominal peak, which is wrong: the {what} '
                             f'measured {gflops:.1f} GFLOP/s, {share}; {peak}')
        say_once(self.current_partition.fullname,
                 f'{self.current_partition.fullname}: the nominal peak is below what its '
                 f'nodes do ({what}: {share}): {peak}. Ratios to it are withheld, each '
                 'with this reason; HPL is judged against the ceilings measured on the node '
                 '(ceiling_efficiency, sustained_peak_efficiency). Give the partition its '
                 'real clock (its description\'s clock_hz; on this machine HPCBENCH_CLOCK_HZ)')
        return True

    def withhold_figure(self, name, why):
        """Withhold the figure `name`, which the job did not measure as it should (a power
        trace that does not cover the calls), saying why."""
        if name in self.perf_variables:
            self._withhold(name, why)
            getlogger().warning(f'{self.unique_name}: {name} withheld: {why}')

    def _withhold(self, name, why):
        """Take the figure `name` out of the reported ones, kept in `flagged` with why."""
        self.flagged = {**self.flagged, name: why}
        del self.perf_variables[name]
        self.device_figures = {key: {n: v for n, v in figures.items() if n != name}
                               for key, figures in self.device_figures.items()}
