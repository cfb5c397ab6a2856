"""IOR: file per process, shared file segmented and shared file strided (CHiC §4), each with
POSIX, MPI-IO independent and MPI-IO collective, safe on a production file system.

- Target directory: the `io_directory` of the partition's description; each job works in a
  directory of
  its own below it, removed when the job ends, fails or is interrupted (a shell trap), and
  IOR writes nowhere else. On Lustre the job stripes it first (`io_stripe_count`,
  `io_stripe_size`, default 1 MiB as CHiC) with `lfs setstripe`; elsewhere it says so.
- Sizes: transfer = the stripe size; block per task from the policy that keeps reads out of
  the page cache (hpcbench.core.node.READ_CACHE_POLICIES; the partition's
  `io_read_cache_policy`, else `reorder` on several nodes and `size` on one).
- The free space of the directory is checked in the setup phase: a run whose data would not
  fit with a margin is refused before its job is written.
- Write and read are reported separately: best and mean MiB/s over `repetitions`.
"""
import os
import shlex
import shutil

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import ior
from hpcbench.core import layout
from hpcbench.results import reference_schema, references
from hpcbench.stack import machine_systems
from hpcbench.rfm.partition import (given_or_paper, job_output, paper_settings,
                                    partition_layout, partition_node, partition_num_nodes,
                                    repeat_launch, skip_beyond_partition)
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.machine.from_reframe import partition_description
from hpcbench.rfm.plugins import SiteTuning
from hpcbench.rfm.run import BenchmarkRun


# What a paper's IOR run may set (its description's ior); tasks_per_node is a list there, one test
# case per value.
PAPER_SETTINGS = ('num_nodes', 'tasks_per_node', 'block_size', 'transfer_size',
                  'stripe_count', 'read_cache_policy')


def _partition_tasks_per_node(partition, paper):
    return sorted(paper.get('tasks_per_node')
                  or [partition_layout(partition, 'per-core').ranks_per_node])


def _configured_tasks_per_node():
    """Every partition's tasks per node, for any pattern and API (a partition skips the
    others). A bad paper's `ior` is reported by the test's setup."""
    system = rt.runtime().system
    values = set()
    for part in system.partitions:
        for pattern in ior.PATTERNS:
            for api in ior.APIS:
                try:
                    paper = references.paper_settings(
                        system.name, 'ior', partition_description(part).ior, PAPER_SETTINGS,
                        {'pattern': pattern, 'api': api})
                    values.update(_partition_tasks_per_node(part, paper))
                except (reference_schema.ReferenceError, layout.LayoutError):
                    continue

    return sorted(values) or [1]


class IorBuild(BenchmarkBuild):
    spec = 'ior'
    needs_mpi = True


@rfm.simple_test
class IorCheck(BenchmarkRun, SiteTuning):
    descr = 'IOR write and read per access pattern and API'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi +spack-builds']
    build = fixture(IorBuild, scope='environment')
    pattern = parameter(ior.PATTERNS)
    api = parameter(list(ior.APIS))
    #: Tasks per node: the paper's (its description's ior, e.g. Oakforest-PACS's 16, 32 and
    #: 64), else
    #: one per core; each partition runs its own values.
    tasks_per_node = parameter(_configured_tasks_per_node())
    #: Bytes per transfer (None: the partition's stripe size, else 1 MiB).
    transfer_size = variable(int, type(None), value=None)
    #: Bytes per task (None: from the read cache policy; `size` derives it from memory).
    block_size = variable(int, type(None), value=None)
    #: How reads avoid the writers' page cache (None: the partition's, else by node count).
    read_cache_policy = variable(str, type(None), value=None)
    #: Nodes (None: the paper's, else every node of the partition); kept in the variable,
    #: so that references match what ran.
    num_nodes = variable(int, type(None), value=None)
    #: Lustre stripe count of the job's directory (None: the paper's, else the partition's
    #: io_stripe_count; CHiC measured file per process on 1 OST and on all 20).
    stripe_count = variable(int, type(None), value=None)
    repetitions = variable(int, value=3)
    #: IOR's data verification (hpcbench.benchmarks.ior.verify_options).
    verify = variable(typ.Bool, value=False)
    #: More IOR options, appended as given.
    extra_options = variable(typ.List[str], value=[])
    inputs = variable(str, value='')
    # stripe_count: -1 is Lustre's "every OST".
    input_kinds = {'transfer_size': 'positive', 'block_size': 'positive',
                   'tasks_per_node': 'positive', 'num_nodes': 'positive',
                   'repetitions': 'positive'}
    time_limit = '1h'
    tags = {'ior', 'io'}

    def depends_on_stack(self):
        # POSIX I/O does not go through the MPI library; MPI-IO is its ROMIO or OMPIO.
        return self.api != 'posix'

    @run_after('setup')
    def configure_run(self):
        part = self.current_partition
        described = partition_description(part)
        # -S values win, then the paper's run (the description's ior, cited), then the
        # description's io_* fields and the derived defaults.
        paper = paper_settings(self, 'ior', PAPER_SETTINGS, pattern=self.pattern,
                               api=self.api)
        wanted = _partition_tasks_per_node(part, paper)
        self.skip_if(self.tasks_per_node not in wanted,
                     f'{part.fullname} runs IOR at {", ".join(map(str, wanted))} task(s) '
                     'per node')
        directory = described.io_directory
        # A dry run may write the job of another machine (a paper's system), whose
        # directory, free space and permissions cannot be checked from here.
        on_this_machine = (not self.is_dry_run()
                           or self.current_system.name in machine_systems.machine_systems())
        if not directory or (on_this_machine and not os.path.isdir(directory)):
            raise ReframeError(f'{part.fullname}: io_directory {directory!r} is not an '
                               'existing directory')

        nodes = self.num_nodes = given_or_paper(self, 'num_nodes', paper,
                                                partition_num_nodes(part))
        skip_beyond_partition(self, nodes)
        per_node = self.tasks_per_node
        policy = (given_or_paper(self, 'read_cache_policy', paper)
                  or described.io_read_cache_policy or ('reorder' if nodes > 1 else 'size'))
        transfer = given_or_paper(self, 'transfer_size', paper,
                                  described.io_stripe_size or ior.DEFAULT_TRANSFER)
        try:
            ior.check_policy(policy, self.api, nodes, os.geteuid() == 0)
            block = given_or_paper(self, 'block_size', paper) or (
                ior.block_size(partition_node(part).memory_bytes, per_node, transfer)
                if policy == 'size' else ior.DEFAULT_BLOCK)
            base = ior.ior_options(self.pattern, self.api, block, transfer)
            total = block * per_node * nodes
            if on_this_machine:
                ior.check_writable(directory)
                ior.check_space(directory, total, shutil.disk_usage(directory).free)
        except ior.IorInputError as err:
            raise ReframeError(f'{part.fullname}: {err}') from None

        self.num_tasks = per_node * nodes
        self.num_tasks_per_node = per_node
        program = self.build.program('ior')
        phases, self.loops = ior.phase_options(policy, self.repetitions)
        runs = [[*base, *opts, *(ior.verify_options(opts) if self.verify else []),
                 *map(shlex.quote, self.extra_options), '-o', '"$workdir/ior"']
                for opts in phases]
        stripes = self.stripe_count = given_or_paper(self, 'stripe_count', paper,
                                                     described.io_stripe_count
                                                     if described.io_stripe_count is not None
                                                     else -1)
        self.prerun_cmds = ior.job_prologue(directory, stripes, transfer)
        self.executable = program
        self.executable_opts = runs[-1]
        self.earlier_runs = runs[:-1]
        self.inputs = (f'{self.pattern} {self.api} tasks={self.num_tasks} '
                       f'({nodes} node(s) x {per_node}) block={block}B transfer={transfer}B '
                       f'total={total / ior.GIB:.2f}GiB read-cache={policy} dir={directory}')
        self.perf_variables = {
            name: sn.make_performance_function(self.figure, 'MiB/s', phase, stat)
            for name, (phase, stat) in ior.PERFORMANCE_VARIABLES.items()
        }
        self.reference = references.reframe_reference(self)

    @run_before('run')
    def write_before_dropping_caches(self):
        # drop-caches: each repetition writes, drops the page cache, then reads (the launch
        # line); the write runs use the same launcher as the read runs.
        if not self.earlier_runs:
            return

        # The launcher line needs the task counts, which ReFrame gives the job only later.
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        launch = self.job.launcher.run_command(self.job)
        repeat_launch(self, self.loops)
        for opts in self.earlier_runs:
            self.prerun_cmds += [f'{launch} {self.executable} {" ".join(opts)} || exit 1',
                                 ior.DROP_CACHES]

    @sanity_function
    def both_phases_measured(self):
        try:
            self.phases = ior.parse(job_output(self), self.num_tasks, self.repetitions,
                                    self.loops)
        except ior.IorOutputError as err:
            raise SanityError(str(err)) from None

        for name, (phase, stat) in ior.PERFORMANCE_VARIABLES.items():
            self.record_samples(f'{stat} of {self.repetitions} repetitions',
                                **{name: self.phases[phase].rates})
        return True

    def figure(self, phase, stat):
        return getattr(self.phases[phase], f'{stat}_mib_s')
