"""The GPU's DGEMM ceiling: cuBLAS DGEMM on each GPU of a node, with its power and clocks (and
an accelerator driven through its vendor's BLAS: TSUBAME's ClearSpeed boards, below).

`dgemm-rate-cuda` (our `dgemm-rate +cuda`) multiplies the same random matrices as the CPU's
`dgemm-rate` and verifies sampled entries of the product alike (never zeros: on the H200
zero-filled matrices ran 65.4 TFLOP/s at 457 W and full clock, random data 52 to 60 TFLOP/s
at the 700 W power limit). The order and the number of calls come from the partition's GPUs
(hpcbench.benchmarks.dgemm.gpu_plan: about a second a call at peak, at least 20 s in all),
one rank per GPU (hpcbench.rfm.gpu); beside each rank's calls nvidia-smi samples its GPU's
power, clocks and clocks event reasons (hpcbench.benchmarks.gpu_power), so that a slow GPU
is told from a capped one.

Figures, the median over the node's GPUs (each GPU's kept as the sample): TFLOP/s (its
median call: the rate sustained at the power limit, not the first calls' before the cap
holds the clocks down), percent of the datasheet FP64 peak with tensor cores, the power
drawn during the calls and GFLOP/s per watt, both of the same calls; where the clocks were
held down the reasons are said. A power trace that does not cover the calls (a sampler that
started late, stopped early or stalled: hpcbench.benchmarks.gpu_power.during_calls) is no
power figure: power and GFLOP/s per watt are withheld, saying why, and the rate stands.

On an accelerator its vendor drives through a BLAS (partition feature `clearspeed`:
TSUBAME's ClearSpeed Advance boards and ClearSpeed's CSXL, hpcbench.benchmarks.dgemm.
BLAS_OF_ACCELERATOR) the same check runs the CPU's dgemm-rate linked with that BLAS, sized
from the host's memory; no tool samples such a board's power, so it reports neither power
nor GFLOP/s per watt there (the paper's 25 W and 2 GFLOPS/W are comparisons).
"""

import reframe as rfm
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.logging import getlogger

from hpcbench.benchmarks import dgemm, gpu_power
from hpcbench.core import gpu_ranks
from hpcbench.results import references
from hpcbench.rfm.gpu import GpuDgemmBuild, GpuRun
from hpcbench.rfm.partition import partition_node


@rfm.simple_test
class GpuDgemmCheck(GpuRun):
    descr = 'GPU DGEMM ceiling: cuBLAS on random data, power and clocks sampled, every GPU'
    valid_systems = ['+gpu +cuda', '+clearspeed']
    build = fixture(GpuDgemmBuild, scope='environment')
    #: The matrices' order and the timed calls; None: from the GPU (dgemm.gpu_plan).
    order = variable(int, type(None), value=None)
    repeats = variable(int, type(None), value=None)
    input_kinds = {**GpuRun.input_kinds, 'order': 'positive', 'repeats': 'positive'}
    time_limit = '10m'
    tags = {'gpu', 'dgemm', 'quick'}

    @run_after('setup')
    def configure_run(self):
        gpus = self.gpus()
        sheet = gpus.get('datasheet') or {}
        self.peak = sheet.get('fp64_tensor_flops')
        if not self.peak:
            del self.perf_variables['fp64_peak_efficiency']
        # nvidia-smi samples NVIDIA's GPUs; a board driven through its BLAS has no such tool.
        self.sampled = gpus['vendor'] not in dgemm.BLAS_OF_ACCELERATOR
        if not self.sampled:
            self.measured_only_variables = ('power', 'gflops_per_watt')
            for name in self.measured_only_variables:
                del self.perf_variables[name]
        memory = gpus['memory_bytes'] or partition_node(self.current_partition).memory_bytes
        planned = dgemm.gpu_plan(self.peak or 10e12, memory)
        self.order = self.order or planned[0]
        self.repeats = self.repeats or planned[1]
        self.run_one_rank_per_gpu(
            self.build.program(dgemm.CUDA_PROGRAM if self.sampled else 'dgemm-rate'),
            self.order, self.repeats, sample=gpu_power.QUERY_FIELDS if self.sampled else None)
        self.inputs = f'order={self.order} repeats={self.repeats} gpus={self.num_tasks}'
        self.reference = references.reframe_reference(self)

    @sanity_function
    def every_product_verified(self):
        def parse(rank, text):
            result = dgemm.parse(text, self.repeats)
            if not self.sampled:
                return result, None
            try:
                return result, self.power_of(rank, text)
            except gpu_power.TraceError as err:
                return result, f'rank {rank}: {err}'

        self.per_gpu, gpus = [], []
        unsampled = []
        for rank, gpu, host, (result, summary) in self.each_rank(parse,
                                                                 dgemm.DgemmOutputError):
            if isinstance(summary, str):
                unsampled.append(summary)
            elif summary and summary.limited_by:
                getlogger().info(f'{self.unique_name}: rank {rank} (GPU {gpu} on {host}): '
                                 'clocks held down by '
                                 f'{", ".join(summary.limited_by)} at '
                                 f'{summary.power_median_w:.0f} W, SM '
                                 f'{summary.sm_clock_min_hz / 1e6:.0f}-'
                                 f'{summary.sm_clock_max_hz / 1e6:.0f} MHz')
            self.per_gpu.append((result, summary))
            gpus.append((gpu, host))
        how = f'median over {len(self.per_gpu)} GPU(s) of '
        self.record_gpu_samples(how + f'the median of {self.repeats} calls', gpus,
                                tflops=[r.median / 1e3 for r, _ in self.per_gpu],
                                fp64_peak_efficiency=[self.percent(r) for r, _ in self.per_gpu])
        per_watt = []
        for rank, (result, summary) in enumerate(self.per_gpu):
            if self.sampled and not unsampled:
                try:
                    per_watt.append(gpu_power.gflops_per_watt(result.median * 1e9,
                                                              summary.power_median_w))
                except gpu_power.TraceError as err:
                    unsampled.append(f'rank {rank}: {err}')
        if unsampled:
            # A trace that does not cover the calls is no record of their power: the rate
            # stands, its power is not reported.
            for name in ('power', 'gflops_per_watt'):
                self.withhold_figure(name, f'no power figure: {"; ".join(unsampled)}')
        elif self.sampled:
            self.record_gpu_samples(how + 'the median power of the samples during the calls',
                                    gpus, power=[s.power_median_w for _, s in self.per_gpu],
                                    gflops_per_watt=per_watt)
        return True

    @run_before('performance')
    def judge_the_peak(self):
        """A GPU above its datasheet's peak: the datasheet is not this GPU's (another model
        under the same name, a clock raised): the ratio is withheld, saying so."""
        if self.peak and not self.is_dry_run():
            self.withhold_ratio_above_ceiling(
                'fp64_peak_efficiency', self.median('fp64_peak_efficiency'),
                f'the DGEMM outran the datasheet\'s FP64 peak ({self.peak / 1e12:g} TFLOP/s): '
                'it is not this GPU\'s')

    def power_of(self, rank, text):
        """The summary of rank's power trace during its calls; TraceError where there is
        none, or it does not cover the calls (gpu_power.during_calls)."""
        window = gpu_ranks.calls_window(text)
        if not window:
            raise gpu_power.TraceError('no "calls from/to" stamps: the rank was not sampled')
        try:
            with open(f'{self.stagedir}/power-rank-{rank}.csv') as fp:
                samples = gpu_power.parse_trace(fp.read())
        except OSError as err:
            raise gpu_power.TraceError(f'no power trace: {err.strerror}') from None
        start, end = (gpu_power.parse_stamp(t) for t in window)
        return gpu_power.window(gpu_power.during_calls(samples, start, end))

    def percent(self, result):
        return 100 * result.median * 1e9 / self.peak if self.peak else None

    @performance_function('TFLOP/s')
    def tflops(self):
        return self.median('tflops')

    @performance_function('%')
    def fp64_peak_efficiency(self):
        """The median call against the datasheet's FP64 peak with tensor cores."""
        return self.median('fp64_peak_efficiency')

    @performance_function('W')
    def power(self):
        return self.median('power')

    @performance_function('GFLOP/s/W')
    def gflops_per_watt(self):
        return self.median('gflops_per_watt')
