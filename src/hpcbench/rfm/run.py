"""The run base classes the checks in reframe-checks/ derive from: `BenchmarkRun` (a run of
a build fixture's program with every plugin of hpcbench.rfm.plugins) and `NodeCeilings`
(likwid-bench's sustained flop rate and memory bandwidth of the node, the ceilings that
HPL's and STREAM's figures are compared with).
"""

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import (performance_function, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpcbench.benchmarks import ceilings
from hpcbench.stack import debian
from hpcbench.rfm.required_attributes import SubclassContract
from hpcbench.rfm.partition import job_output, partition_node, run_script
from hpcbench.rfm.hardware_facts import HardwareFacts
from hpcbench.rfm.plugins import (CheckedInputs, JobNodes, PinnedNodes, Provenance, QuietNode,
                                  Samples, StackCoverage)


class BenchmarkRun(rfm.RunOnlyRegressionTest, CheckedInputs, StackCoverage, QuietNode,
                   PinnedNodes, JobNodes, HardwareFacts, Provenance, Samples,
                   SubclassContract):
    """What every benchmark check is. A check deriving from it defines:

    - in its class body: what its base requires (`required_attributes`, refused at init
      when left out: hpcbench.rfm.required_attributes), `build`, a fixture of a BenchmarkBuild
      (hpcbench.rfm.build: Spack's build or a registry's program), `valid_systems`,
      `valid_prog_environs`, and in
      `input_kinds` the numeric inputs a user may set with -S ({name: 'positive', ...});
    - by the end of setup: its job (executable, options, tasks, input files) from its pure
      module in hpcbench.benchmarks; `depends_on_stack()` False for a case whose figures no
      MPI stack changes;
    - a `@sanity_function` and `@performance_function`s that delegate to that module, with
      record_samples() and record_aggregation() where its job measured a figure several
      times.

    What it gets, phase by phase:

    - setup: inputs refused in one message before anything runs (CheckedInputs); the
      build's spec recorded (Provenance); the partition's quiet-node policy; in quick mode a
      case no MPI stack changes skipped on all but the first stack (StackCoverage);
    - before the run: the node's launch lock and quiet-node check first in the job
      (QuietNode); the nodes it was given by name, if any (PinnedNodes); the job's own word
      on where it runs (JobNodes); the node's health facts read after the quiet-node
      check and as the job's last line (HardwareFacts); the session's commits and the
      node's topology (Provenance);
    - before sanity: the node's state as the job found it (`node_state`); a job whose exit
      status is not 0 fails; where it ran (`ran_on`), a job pinned elsewhere failing; the
      node's fact figures over the job (`node_facts`, `device_facts`, `facts_unread`).

    Checks that launch MPI ranks mix in SiteTuning (hpcbench.rfm.plugins) too."""


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
