"""ReFrame building blocks shared by the checks: the build fixture (Spack's build or a
registry's binary), the node description of the partition a test runs on, and the plugins
every check mixes in (what its MPI stack needs at launch; the provenance of its results)."""
import os
import shlex
import sys

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import (performance_function, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError
from reframe.core.logging import getlogger

from hpcbench import (ceilings, debian, job_script, layout, node, provenance, quiet_node,
                      references, spack)

PREFIX_FILE = 'spack-prefix.txt'
BIND_SCRIPT = 'bind-rank.sh'


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


def partition_num_nodes(partition):
    """Nodes of a partition: `extras.num_nodes` (1 when the site config does not say)."""
    return int(partition.extras.get('num_nodes', 1))


def node_counts(max_nodes):
    """Node counts a multi-node check runs at: powers of two below the partition's size,
    and the whole partition."""
    counts, n = set(), 1
    while n < max_nodes:
        counts.add(n)
        n *= 2

    return sorted(counts | {max_nodes})


def partition_node_counts(partition):
    """Node counts the multi-node checks run at on a partition: `extras.node_counts` when the
    site lists them (the counts a paper measured), else node_counts(its size)."""
    listed = partition.extras.get('node_counts')
    return sorted(listed) if listed else node_counts(partition_num_nodes(partition))


def configured_node_counts():
    counts = {n for part in rt.runtime().system.partitions for n in partition_node_counts(part)}
    return sorted(counts) or [1]


def configured_layout_names():
    """Layouts distinct on at least one partition of the current system, in the order of
    hpcbench.layout.LAYOUT_NAMES."""
    names = set()
    for part in rt.runtime().system.partitions:
        try:
            names.update(partition_layouts(part)[0])
        except layout.LayoutError:
            continue

    return [n for n in layout.LAYOUT_NAMES if n in names] or ['per-core']


def partition_layouts(partition):
    """The distinct layouts of a partition's node under its site's binding settings, and
    the names that equal one of them (hpcbench.layout.distinct_layouts)."""
    return layout.distinct_layouts(partition.processor.info, partition.extras.get('binding'))


def partition_layout(partition, name):
    """The Layout called `name` on a partition; a name that equals another layout there
    (one socket that is the whole node) resolves to that one."""
    kept, same_as = partition_layouts(partition)
    return kept[same_as.get(name, name)]


def job_output(test):
    """The text of a test's job's standard output."""
    with open(os.path.join(test.stagedir, sn.evaluate(test.stdout))) as fp:
        return fp.read()


def measured_before(fixture_test, job):
    """How long before `job` a ceiling fixture's job ended, in words (a ratio's ceiling
    measured minutes earlier on a node whose speed drifts is worth knowing)."""
    before = (job.submit_time - fixture_test.job.completion_time
              if job.submit_time and fixture_test.job.completion_time else None)
    return (f'measured {before:.0f} s before this job' if before is not None else
            'measured in this session')


def skip_beyond_partition(test, num_nodes):
    """Skip `test` when it asks for more nodes than its partition has."""
    part = test.current_partition
    test.skip_if(num_nodes > partition_num_nodes(part),
                 f'{part.fullname} has {partition_num_nodes(part)} node(s)')


def skip_unless_node_count(test, num_nodes):
    """Skip `test` when its partition does not run at `num_nodes` (partition_node_counts)."""
    part = test.current_partition
    counts = partition_node_counts(part)
    test.skip_if(num_nodes not in counts,
                 f'{part.fullname} runs at {", ".join(map(str, counts))} node(s)')


def paper_settings(test, extra, known, **attrs):
    """The settings the paper of `test`'s system ran it with on its partition
    (`extras.<extra>`, cited: hpcbench.references.paper_settings), for the test's `attrs`
    (those entries may match on); {} where the paper is silent. A bad entry is the test's
    setup error."""
    part = test.current_partition
    try:
        return references.paper_settings(test.current_system.name, extra,
                                          part.extras.get(extra), known, attrs)
    except references.ReferenceError as err:
        raise ReframeError(f'{part.fullname}: {err}') from None


def skip_known_failure(test, what):
    """Skip `what` (e.g. 'IMB Uniband') where the environment's MPI is known to crash in it
    (extras.known_failures, hpcbench.mpi_stacks.KNOWN_FAILURES), saying why."""
    reason = test.current_environ.extras.get('known_failures', {}).get(what)
    test.skip_if(reason is not None, f'known failure of {test.current_environ.name}: {reason}')


def given_or_paper(test, name, paper, default=None):
    """A setting as a run uses it: given (-S), else the paper's, else `default`."""
    given = getattr(test, name)
    if given is not None:
        return given

    return paper.get(name, default)


def _write_bind_script(test, name, chosen, rank_env=None):
    script = os.path.join(test.stagedir, name)
    with open(script, 'w') as fp:
        fp.write(layout.bind_script(chosen, rank_env))

    os.chmod(script, 0o755)
    test.keep_files = list(dict.fromkeys([*test.keep_files, name]))


def bind_ranks(test, chosen, program, *args, rank_env=None):
    """Run `program args` (`program`: a shell word, BenchmarkBuild.program) as `test`'s
    executable with each rank bound by `chosen`'s layout
    (the wrapper is written into the stage directory), with its thread variables and the
    MPI libraries' own binding off; `rank_env`: variables for the program only."""
    _write_bind_script(test, BIND_SCRIPT, chosen, rank_env)
    test.executable = f'./{BIND_SCRIPT}'
    test.executable_opts = [program, *(shlex.quote(str(a)) for a in args)]
    test.env_vars.update(chosen.thread_environment())
    test.env_vars.update(layout.MPI_BINDING_OFF)


def bound_command(test, name, chosen, program, *args, output=None):
    """The job script line that runs `program args` once, outside the launcher, as the one
    rank of `chosen`'s layout (a one-rank layout: its cores, memory and thread variables),
    through the wrapper `name` written into the stage directory; the job exits with the
    program's status when it fails. `output`: a file of the stage that keeps its standard
    output too (for a later step of the job), which still goes to the job's."""
    if chosen.ranks_per_node != 1:
        raise ValueError(f'{chosen.name}: {chosen.ranks_per_node} ranks per node, one needed')

    _write_bind_script(test, name, chosen)
    threads = ' '.join(f'{k}={shlex.quote(v)}' for k, v in chosen.thread_environment().items())
    command = f'env {threads} ./{name} {program} {" ".join(shlex.quote(str(a)) for a in args)}'
    if not output:
        return f'{command} || exit $?'

    output = shlex.quote(output)
    return (f'{command} > {output}; status=$?; cat {output}; '
            '[ "$status" -eq 0 ] || exit "$status"')


class QuietNodeSettings(rfm.RegressionTestPlugin):
    """The quiet-node check's settings for a run (`-S quiet_node_action=warn`, ...). The
    builds have them too, without effect: a run-wide -S reaches every test, and ReFrame
    would warn on each build that lacks the variable."""
    #: fail, warn or off; None: the partition's (hpcbench.quiet_node.DEFAULTS).
    quiet_node_action = variable(str, type(None), value=None)
    #: Seconds a busy node is waited for; None: the partition's.
    quiet_node_wait = variable(int, float, type(None), value=None)
    #: Seconds the node's launch lock (another hpcbench job on the node) is waited for;
    #: None: the partition's.
    quiet_node_lock_wait = variable(int, float, type(None), value=None)


class BenchmarkBuild(rfm.CompileOnlyRegressionTest, QuietNodeSettings):
    """Locates a benchmark's build and records its prefix: with a Spack, one of the roots of
    the partition's Spack environment; without one, the program a registry ships built
    against the ReFrame environment's MPI (the registry-only path).

    `hpcbench setup` (make run) installs the environment before ReFrame starts, so a build
    job only asks Spack where its spec is (a second or two), once per lock: the prefix is
    remembered (`var/spack-locations`, hpcbench.spack.remembered_prefix) and later runs
    take it from there while it is installed; only when it is not installed (a bare
    `reframe -r` on a fresh install tree) does the job install the environment first. Builds do not load the node while a benchmark runs (issue 22: 19 `spack install`
    with nothing to do took 505-621 CPU-seconds beside the first benchmarks).

    The environment itself (spack-envs/<system>) names every build; this fixture never adds
    specs to it. `spec` selects the build; for MPI programs the ReFrame environment's MPI
    (extras.spack_mpi) is added as a dependency constraint. `registry_name`: the name under
    which an environment lists the registry's program (extras `registry_<name>`, from
    hpcbench.mpi_stacks); the checks run only where a Spack is or that program is
    (hpcbench.rfmconfig.BUILDS_FROM_SPACK).
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
    #: build (hpcbench.results.time_per_check).
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
        extras = self.current_partition.extras
        registry_program = self.registry_program()
        if not extras.get('spack_root') and registry_program and not self.is_dry_run():
            # `prefix/bin/program`: the checks find it where Spack would put it.
            self.from_spack = False
            self.build_system.commands = [
                f'test -x {shlex.quote(registry_program)}',
                f'dirname "$(dirname {shlex.quote(registry_program)})" > {PREFIX_FILE}']
            return

        # A dry run still writes the scripts, so that they can be inspected without Spack.
        self.skip_if(not extras.get('spack_root') and not self.is_dry_run(),
                     'no Spack found (set SPACK_ROOT or run `make bootstrap`)')

    def registry_program(self):
        if self.registry_name is None:
            return None

        return self.current_environ.extras.get(f'registry_{self.registry_name}')

    @run_before('compile')
    def record_prefix(self):
        # After the subclasses' setup hooks, which choose `spec`. Located before under this
        # lock and still there: that prefix, without starting Spack (spack.remembered_prefix);
        # installed: located; else the environment installed, then located.
        if not self.from_spack:
            return

        env = self.current_partition.extras['spack_env']
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
            spack.remember_prefix(self.current_partition.extras['spack_env'], self.full_spec,
                                  self.install_prefix())

    def _location_command(self):
        env = self.current_partition.extras['spack_env']
        return f'spack -e {shlex.quote(env)} location -i {shlex.quote(self.full_spec)}'

    @property
    def full_spec(self):
        extras = self.current_environ.extras
        return ' '.join([self.spec,
                         *([f"^{extras['spack_mpi']}"] if self.needs_mpi else []),
                         *([f"^{extras['spack_blas']}"]
                           if self.needs_blas and 'spack_blas' in extras else [])])

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

    def program(self, name):
        """The shell word of the build's `bin/<name>`: its path, quoted; in a dry run, the
        command substitution that finds it, in double quotes."""
        if self.located():
            return shlex.quote(os.path.join(self.install_prefix(), 'bin', name))

        return f'"$({self._location_command()})/bin/{name}"'

    def lacks_program(self, name):
        """Whether the located build has no `bin/<name>` (not known in a dry run: False)."""
        return self.located() and not os.path.exists(
            os.path.join(self.install_prefix(), 'bin', name))

    def description(self):
        """What was built: Spack's spec of the install, or the registry package."""
        if self.from_spack:
            return provenance.build_spec(self.install_prefix())

        return provenance.registry_package(self.registry_program())


def job_python(partition):
    """The Python a job of `partition` runs the suite's own steps with (the node check, HPL's
    sizing), shell-quoted: this machine's jobs the suite's, elsewhere the node's python3."""
    return shlex.quote(sys.executable if partition.scheduler.registered_name == 'local'
                       else 'python3')


def suite_module_command(partition, module, *args):
    """The job script line that runs `python -m <module> args` of the suite's own (stdlib
    only) modules on a node of `partition`, from the project's sources; the job ends with
    its status when it fails."""
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (f'PYTHONPATH={shlex.quote(source)} {job_python(partition)} -m {module} '
            f'{" ".join(shlex.quote(str(a)) for a in args)} || exit $?')


def run_script(test, name, text):
    """Have `test`'s job run the shell script `text`, written to its stage as `name` (kept
    with its output)."""
    with open(os.path.join(test.stagedir, name), 'w') as fp:
        fp.write(text)
    test.executable = f'sh {shlex.quote(name)}'
    test.keep_files = [*test.keep_files, name]


def repeat_launch(test, count):
    """Launch `test`'s program `count` times in one job: a loop in the job script around
    the launch line (so any launcher works). `$start` holds each launch's start (ns since
    the epoch); after each launch the script prints `launch I: wall_ns=T`. The job exits
    with the status of a launch that failed (the loop alone would end in 0)."""
    test.prerun_cmds = [*test.prerun_cmds, 'failed=0',
                        f'for launch in $(seq 1 {int(count)}); do', 'start=$(date +%s%N)']
    test.postrun_cmds = ['status=$?', 'end=$(date +%s%N)',
                         'echo "launch $launch: wall_ns=$((end - start))"',
                         '[ "$status" -eq 0 ] || failed=$status', 'done',
                         '[ "$failed" -eq 0 ] || exit "$failed"', *test.postrun_cmds]


# Variables a launcher must not pass on its command line: search paths are the job's
# business (and their values often refer to the job's own $PATH).
_NOT_FORWARDED_SUFFIX = 'PATH'
# Launchers that give the ranks the job's whole environment by themselves: srun (whose
# --export=<list> would drop the rest and split values at commas, as in
# OMPI_MCA_btl=self,tcp).
_ENVIRONMENT_PROPAGATING = ('srun', 'srunalloc')


class SiteTuning(rfm.RegressionTestPlugin):
    """What a site's MPI stack needs at launch, for every check that launches MPI ranks.

    - The ReFrame environment may name its own launcher (`extras.launcher`), since one
      partition runs several MPI stacks (Open MPI's mpirun, MVAPICH's mpirun_rsh, ...).
    - The run-time variables of the environment (the papers' tuning: VIADEV_*, PSM2_*,
      ...) and of the test (threads, binding) are given to the launcher too; launchers that
      do not pass the job's environment to remote ranks put them on the launch line
      (hpcbench.backends), the others ignore them: the job script exports them anyway.
      srun is not given them: it passes the job's environment on by itself.
    """

    @run_after('setup')
    def use_stack_launcher(self):
        name = self.current_environ.extras.get('launcher')
        if name:
            self.job.launcher = getlauncher(name)()

    @run_before('run')
    def keep_mpi_files_in_the_job(self):
        # On one node: Open MPI's session directory and shared-memory segments, which an
        # interrupted job would leave in /tmp and /dev/shm, go where the job removes them.
        # (On several nodes that directory would exist on the first node only.)
        if self.num_tasks <= (self.num_tasks_per_node or self.num_tasks):
            self.prerun_cmds = [*job_script.mpi_scratch(), *self.prerun_cmds]

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
    (None) is the check's default. One error names every bad value."""
    input_kinds = {}

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

    - Just before its launch, the job checks the node it runs on (hpcbench.quiet_node): the
      CPU other processes use, the memory in use, the load. Settings per partition:
      `extras.quiet_node` (action fail/warn/off, max_busy_cores, max_memory_in_use,
      sample, wait); for a run: `-S quiet_node_action=warn`, `-S quiet_node_wait=0`. A
      busy node is surveyed again for up to `wait` seconds (60): a passing load delays the
      launch; one that stays fails the test (or, with `warn`, which does not wait, warns)
      naming the culprits. The check's line is kept as `node_state` (perflog, results
      database), with the seconds waited.
    - Before that check, the job takes the node's launch lock and keeps it to its end
      (hpcbench.quiet_node.LAUNCH_LOCK: one per node, for every checkout and user), so that
      two runs never measure at the same time; a job that waited for another says so in
      `node_state`, naming it. Waited for `lock_wait` seconds (an hour; `-S
      quiet_node_lock_wait=`), then the node is busy.
    - The job's exit status must be 0 (IOR, for one, returns the count of data errors).
    """
    #: The node check's verdict and figures, from the job's output.
    node_state = variable(str, value='')

    @run_after('setup')
    def choose_node_check(self):
        part = self.current_partition
        try:
            self.quiet_node_settings = quiet_node.settings(part.extras.get('quiet_node'),
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

        output = os.path.join(self.stagedir, sn.evaluate(self.stdout))
        text = open(output, errors='replace').read() if os.path.exists(output) else ''
        line = next((ln for ln in text.splitlines() if ln.startswith(quiet_node.MARKER)), '')
        self.node_state = line[len(quiet_node.MARKER):].strip()
        if self.node_state.startswith('BUSY'):
            if self.quiet_node_settings['action'] == 'fail':
                raise SanityError(f'the node was not quiet before the launch: {self.node_state}')
            getlogger().warning(f'{self.display_name}: measured on a busy node: '
                                f'{self.node_state}')
        if self.job.exitcode:
            raise SanityError(f'the job exited with status {self.job.exitcode} '
                              f'(see {self.job.stdout} and {self.job.stderr})')


class StackCoverage(rfm.RegressionTestPlugin):
    """Which MPI stacks a check's cases run on.

    Every stack the check is valid for, unless `every_stack` is False (quick mode,
    hpcbench.rfmconfig.MODES): then a case whose figures do not depend on the MPI stack
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

        skip_unless_first_stack(self, 'its figures do not depend on the MPI stack')


def skip_unless_first_stack(test, why):
    """Skip `test` unless its environment has the partition's first MPI stack (the MPI of
    the first of its environments the check is valid for), saying `why` and where it is
    measured (quick mode)."""
    valid = rt.valid_sysenv_comb(test.valid_systems, test.valid_prog_environs)
    first = next(envs[0] for part, envs in valid.items()
                 if part.fullname == test.current_partition.fullname)
    mpi = test.current_environ.extras.get('spack_mpi')
    test.skip_if(mpi != first.extras.get('spack_mpi'),
                 f'{why}: measured on {first.name} (quick mode; MODE=full runs it on every '
                 'stack)')


class Provenance(rfm.RegressionTestPlugin):
    """What exactly produced a test's figures (hpcbench.provenance), as loggable variables:
    ReFrame keeps them in the perflog line and in the results database with every other
    variable the check set."""
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
        facts = provenance.session_facts(part.extras.get('spack_env'))
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

    def record_samples(self, how, **values):
        """Record each reported variable's values (a sequence) and how its figure was
        aggregated from them."""
        values = {name: [float(v) for v in sample] for name, sample in values.items()
                  if name in self.perf_variables}
        self.samples = {**self.samples, **values}
        self.record_aggregation(how, *values)

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
                 'real clock (extras clock_hz; on this machine HPCBENCH_CLOCK_HZ)')
        return True

    def _withhold(self, name, why):
        """Take the figure `name` out of the reported ones, kept in `flagged` with why."""
        self.flagged = {**self.flagged, name: why}
        del self.perf_variables[name]


def nominal_peak(partition):
    """The nominal peak of one node of `partition` and where its clock comes from, in words:
    `2 cores x 2.596 GHz (/proc/cpuinfo's cpu MHz: ...) x 32 flop/cycle = 166.1 GFLOP/s`."""
    node_ = partition_node(partition)
    source = partition.extras.get('clock_source') or "the partition's clock_hz"
    return (f'nominal peak {node_.num_cores} cores x {node_.clock_hz / 1e9:g} GHz ({source}) '
            f'x {node_.flops_per_cycle} flop/cycle = {node_.peak_flops / 1e9:.1f} GFLOP/s a '
            'node')


_SAID = set()


def say_once(about, message):
    """A warning a run prints once about `about` (a partition), however many of its tests
    find it."""
    if about not in _SAID:
        _SAID.add(about)
        getlogger().warning(message)


class BenchmarkRun(rfm.RunOnlyRegressionTest, CheckedInputs, StackCoverage, QuietNode, Provenance,
                   Samples):
    """What every benchmark check is, and what it may rely on:

    - its program comes from a `build` fixture (a BenchmarkBuild: Spack's or a registry's);
    - the numeric inputs it declares in `input_kinds` are checked in setup (CheckedInputs);
    - its job checks that the node is quiet before the launch and fails when its exit status
      is not 0 (QuietNode);
    - its figures carry their provenance (Provenance) and, where the job measured a figure
      several times, its values and how they were aggregated (Samples);
    - a case whose figures do not depend on the MPI stack says so (`depends_on_stack`), and
      quick mode runs it on the first stack only (StackCoverage).
    Checks that launch MPI ranks mix in SiteTuning too."""


class NodeCeilings(BenchmarkRun):
    """The node's sustained peak, bandwidth ceiling and ordinary-store triad (hpcbench.
    ceilings: likwid-bench on all cores), for HPL's ratios and the report (STREAM measures its
    own beside it, reframe-checks/stream.py). One job per partition; likwid-bench pins its
    own threads."""
    descr = 'Sustained peak flop rate and memory bandwidth of one node (likwid-bench)'
    valid_systems = ['*']
    valid_prog_environs = ['*']
    repeats = variable(int, value=ceilings.REPEATS)
    input_kinds = {'repeats': 'positive'}
    #: What this run used (kernels and working sets), for the perflog and results database.
    inputs = variable(str, value='')
    num_tasks = 1
    time_limit = '10m'

    @run_after('setup')
    def configure_run(self):
        node_ = partition_node(self.current_partition)
        self.kernels = ceilings.kernels(node_.flops_per_cycle)
        sizes = ceilings.working_sets(self.kernels, node_.num_cores, node_.llc_bytes_total,
                                      node_.memory_bytes)
        self.inputs = ' '.join(f'{k}={sizes[k]}' for k in self.kernels) + \
            f' threads={node_.num_cores} repeats={self.repeats}'
        self.job.launcher = getlauncher('local')()
        run_script(self, ceilings.SCRIPT,
                   ceilings.script(self.kernels, node_.num_cores, sizes, self.repeats))
        self.rpeak_gflops = node_.peak_flops / 1e9

    def _build_description(self):
        return '' if self.is_dry_run() else \
            f'likwid-bench {debian.upstream_version_of("likwid")} (Debian likwid)'

    @sanity_function
    def every_kernel_ran(self):
        try:
            self.result = ceilings.parse(job_output(self), self.kernels, self.repeats)
        except ceilings.CeilingOutputError as err:
            raise SanityError(str(err)) from None

        runs = f'best of {self.repeats} runs'
        self.record_samples(f'{self.kernels.peak}, {runs}', peak_gflops=self.result.peak_gflops)
        self.record_samples(f'{self.kernels.bandwidth}, {runs}',
                            bandwidth=self.result.bandwidth_mbps)
        self.record_samples(f'{self.kernels.read}, {runs}', read_bandwidth=self.result.read_mbps)
        self.record_samples(f'{self.kernels.cached_store}, {runs}',
                            cached_store_bandwidth=self.result.cached_store_mbps)
        self.record_aggregation(f'best {self.kernels.peak} / nominal Rpeak '
                                f'({self.rpeak_gflops:.1f} GFLOP/s)', 'peak_of_rpeak')
        return True

    @run_before('performance')
    def judge_the_nominal_peak(self):
        if not self.is_dry_run():
            self.withhold_ratio_to_nominal_peak(
                'peak_of_rpeak', 100 * max(self.result.peak_gflops) / self.rpeak_gflops,
                self.rpeak_gflops, {'sustained peak': max(self.result.peak_gflops)})

    @performance_function('GFLOP/s')
    def peak_gflops(self):
        return max(self.result.peak_gflops)

    @performance_function('%')
    def peak_of_rpeak(self):
        return 100 * max(self.result.peak_gflops) / self.rpeak_gflops

    @performance_function('MB/s')
    def bandwidth(self):
        return max(self.result.bandwidth_mbps)

    @performance_function('MB/s')
    def read_bandwidth(self):
        return max(self.result.read_mbps)

    @performance_function('MB/s')
    def cached_store_bandwidth(self):
        """The triad with ordinary stores (their write-allocate reads uncounted), as a
        compiled STREAM does it."""
        return max(self.result.cached_store_mbps)
