"""The partition a test runs on, and what a check's job script is made of.

- The node: `partition_node` (hpcbench.core.node.Node from ReFrame's processor description
  and the partition's description, hpcbench.machine.from_reframe), its node counts and layouts,
  its nominal peak;
- the job: a rank-binding wrapper (`bind_ranks`, `bound_command`), a script written to the
  stage (`run_script`), a launch repeated in one job (`repeat_launch`), a suite module run
  on the node (`suite_module_command`);
- a paper's run settings for a test (`paper_settings`, `given_or_paper`) and the skips a
  partition calls for (`skip_beyond_partition`, `skip_unless_node_count`) and a node
  that cannot run (`skip_node_out_of_service`).

Functions of a test or a partition; no test classes (hpcbench.rfm.build, .plugins, .run).
"""
import os
import shlex
import sys

import reframe.core.runtime as rt
import reframe.utility.sanity as sn
from reframe.core.exceptions import ReframeError
from reframe.core.logging import getlogger

from hpcbench.core import layout, node
from hpcbench.core.slurm_cluster import NODE_NAME, SlurmDescriptionError
from hpcbench.machine import slurm_query
from hpcbench.results import reference_schema, references
from hpcbench.machine.from_reframe import partition_description, stack_description

BIND_SCRIPT = 'bind-rank.sh'


def partition_node(partition):
    """hpcbench.core.node.Node of a ReFrame partition (processor + its description)."""
    described = partition_description(partition)
    return node.from_partition(partition.processor.info, {
        'memory_bytes': described.memory_bytes, 'clock_hz': described.clock_hz,
        'flops_per_cycle': described.flops_per_cycle,
        'node_clocks': [list(g) for g in described.node_clocks],
        'os_reserve_bytes': described.os_reserve_bytes}, partition.fullname)


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
    """Nodes of a partition: its description's num_nodes (1 when it does not say)."""
    return partition_description(partition).num_nodes


def node_counts(max_nodes):
    """Node counts a multi-node check runs at: powers of two below the partition's size,
    and the whole partition."""
    counts, n = set(), 1
    while n < max_nodes:
        counts.add(n)
        n *= 2

    return sorted(counts | {max_nodes})


def partition_node_counts(partition):
    """Node counts the multi-node checks run at on a partition: its description's
    node_counts when it lists them (the counts a paper measured), else node_counts(its
    size)."""
    listed = partition_description(partition).node_counts
    return sorted(listed) if listed else node_counts(partition_num_nodes(partition))


def configured_node_counts():
    counts = {n for part in rt.runtime().system.partitions for n in partition_node_counts(part)}
    return sorted(counts) or [1]


def configured_layout_names():
    """Layouts distinct on at least one partition of the current system, in the order of
    hpcbench.core.layout.LAYOUT_NAMES."""
    names = set()
    for part in rt.runtime().system.partitions:
        try:
            names.update(partition_layouts(part)[0])
        except layout.LayoutError:
            continue

    return [n for n in layout.LAYOUT_NAMES if n in names] or ['per-core']


def partition_layouts(partition):
    """The distinct layouts of a partition's node under its site's binding settings, and
    the names that equal one of them (hpcbench.core.layout.distinct_layouts)."""
    return layout.distinct_layouts(partition.processor.info,
                                   partition_description(partition).binding)


def partition_layout(partition, name):
    """The Layout called `name` on a partition; a name that equals another layout there
    (one socket that is the whole node) resolves to that one."""
    kept, same_as = partition_layouts(partition)
    return kept[same_as.get(name, name)]


def job_output(test, missing=None):
    """The text of a test's job's standard output; `missing` (a text) where the job wrote
    none, else the OSError."""
    path = os.path.join(test.stagedir, sn.evaluate(test.stdout))
    if missing is not None and not os.path.exists(path):
        return missing
    with open(path, errors='replace') as fp:
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
    """The settings the paper of `test`'s system ran it with on its partition (its
    description's `<extra>`, cited: hpcbench.results.references.paper_settings), for the
    test's `attrs` (those entries may match on); {} where the paper is silent. A bad entry is the
    test's setup error."""
    part = test.current_partition
    try:
        return references.paper_settings(test.current_system.name, extra,
                                          partition_description(part).paper_settings(extra),
                                          known, attrs)
    except reference_schema.ReferenceError as err:
        raise ReframeError(f'{part.fullname}: {err}') from None


def skip_known_failure(test, what):
    """Skip `what` (e.g. 'IMB Uniband') where the environment's MPI is known to crash in it
    (its stack's known_failures, hpcbench.stack.mpi_stacks.KNOWN_FAILURES), saying why."""
    reason = (stack_description(test.current_environ).known_failures or {}).get(what)
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


def job_python(partition):
    """The Python a job of `partition` runs the suite's own steps with (the node check, HPL's
    sizing), shell-quoted: this machine's jobs the suite's, elsewhere the node's python3."""
    return shlex.quote(sys.executable if partition.scheduler.registered_name == 'local'
                       else 'python3')


def suite_module(partition, module):
    """The shell words that run `python -m <module>` of the suite's own (stdlib only)
    modules on a node of `partition`, from the project's sources."""
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return f'PYTHONPATH={shlex.quote(source)} {job_python(partition)} -m {module}'


def suite_module_command(partition, module, *args):
    """The job script line that runs `python -m <module> args` on a node of `partition`
    (suite_module); the job ends with its status when it fails."""
    return (f'{suite_module(partition, module)} '
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


def nominal_peak(partition):
    """The nominal peak of one node of `partition` and where its clock comes from, in words:
    `2 cores x 2.596 GHz (/proc/cpuinfo's cpu MHz: ...) x 32 flop/cycle = 166.1 GFLOP/s`."""
    node_ = partition_node(partition)
    source = partition_description(partition).clock_source or "the partition's clock_hz"
    return (f'nominal peak {node_.num_cores} cores x {node_.clock_hz / 1e9:g} GHz ({source}) '
            f'x {node_.flops_per_cycle} flop/cycle = {node_.peak_flops / 1e9:.1f} GFLOP/s a '
            'node')


# The schedulers whose nodes are Slurm's (ReFrame's registered names).
SLURM_SCHEDULERS = ('slurm', 'squeue')


def job_nodes(test):
    """The nodes a test's job spans, from its tasks and tasks per node; None where it does
    not say how many a node (the scheduler places them)."""
    per_node = test.num_tasks_per_node
    return -(-test.num_tasks // per_node) if per_node and test.num_tasks else None


def given_nodes(test):
    """The nodes a test was given by name ([]: the scheduler chooses): one by --distribute
    (`make screen`), or its `pinned_nodes` (hpcbench.rfm.plugins.PinnedNodes: the
    acceptance's node pairs). Pinned names are refused here unless they are Slurm's node
    names, each once: they reach the controller's commands and the job's #SBATCH lines."""
    nid = getattr(test, '.nid', None)
    pinned = list(getattr(test, 'pinned_nodes', None) or [])
    name = type(test).__name__
    if nid and pinned:
        raise ReframeError(f'{name}: given its nodes twice (--distribute and pinned_nodes='
                           f'{",".join(pinned)}): nothing was run')
    if nid:
        return [nid] if isinstance(nid, str) else list(nid)
    bad = [n for n in pinned if not NODE_NAME.fullmatch(n)]
    if bad:
        raise ReframeError(f'{name}: pinned_nodes {", ".join(map(repr, bad))}: not a node '
                           'name (a letter or digit, then letters, digits, . _ -): nothing '
                           'was run')
    if len(set(pinned)) != len(pinned):
        raise ReframeError(f'{name}: pinned_nodes={",".join(pinned)} names a node twice: '
                           'nothing was run')
    return pinned


def skip_node_out_of_service(test):
    """A test given its nodes by name (given_nodes: one by --distribute, `make screen`
    over every node of the partition; a pair pinned by the acceptance) skips where its
    controller says one cannot run now (down, drained, not responding...), saying why: a
    job asked of it would wait for it forever, and the run report names it rather than
    leaving it out. A controller that does not answer is said once; the job then goes as
    asked."""
    nodes = given_nodes(test)
    partition = test.current_partition
    if not nodes or partition.scheduler.registered_name not in SLURM_SCHEDULERS:
        return
    # A job inside a reservation (the watch's re-test of a repaired node: -J--reservation)
    # runs on its reserved nodes.
    options = [*getattr(test.job, 'cli_options', ()), *test.job.options]
    in_reservation = any(str(o).startswith('--reservation') for o in options)
    try:
        out = slurm_query.nodes_out_of_service(nodes, in_reservation=in_reservation)
    except SlurmDescriptionError as err:
        say_once(f'{partition.fullname} node states', f'{partition.fullname}: node states '
                 f'not read ({err}); each node is asked for as given')
        return
    if out:
        test.skip('; '.join(f'node {name} cannot run now: {why}' for name, why in out.items()))


_SAID = set()


def say_once(about, message):
    """A warning a run prints once about `about` (a partition), however many of its tests
    find it."""
    if about not in _SAID:
        _SAID.add(about)
        getlogger().warning(message)
