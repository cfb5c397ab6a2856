"""GPU node screening, in the spirit of `make screen` (which runs it on every node with
`--distribute=all`): each node's GPUs as its nvidia-smi reports them idle, against the
partition's description (count, model, memory, power limit, maximum SM clock, ECC, no clocks
event reason of power or heat while idle), then a short cuBLAS DGEMM on each GPU (one rank
per GPU) naming a GPU more than 5 % below the median of the node's. A wrong GPU fails the
node, naming it; a slow one is named in the run's log and in the figures. The rules:
hpcbench.benchmarks.gpu_screen.
"""

import statistics

import reframe as rfm
from reframe.core.builtins import (fixture, performance_function, run_after, sanity_function,
                                   variable)
from reframe.core.exceptions import SanityError
from reframe.core.logging import getlogger

from hpcbench.benchmarks import dgemm, gpu_screen
from hpcbench.core import accelerators
from hpcbench.results import references
from hpcbench.rfm.gpu import GpuDgemmBuild, GpuRun

GPUS_MARK = '== gpus'
REASONS_MARK = '== idle reasons'


@rfm.simple_test
class GpuNodeScreen(GpuRun):
    descr = 'GPU node screening: the GPUs against the description, a short DGEMM on each'
    # The DGEMM check's build: one build job for both.
    build = fixture(GpuDgemmBuild, scope='environment')
    repeats = variable(int, value=gpu_screen.REPEATS)
    #: A GPU this many percent below the median of its node's is named slow.
    slow_percent = variable(float, int, value=gpu_screen.SLOW_PERCENT)
    input_kinds = {**GpuRun.input_kinds, 'repeats': 'positive', 'slow_percent': 'positive'}
    time_limit = '5m'
    tags = {'gpu', 'screen'}

    @run_after('setup')
    def configure_run(self):
        gpus = self.gpus()
        peak = (gpus.get('datasheet') or {}).get('fp64_tensor_flops') or 10e12
        self.order = dgemm.gpu_plan(peak, gpus['memory_bytes'])[0]
        # The GPUs at idle, before the calls.
        self.prerun_cmds = [
            *self.prerun_cmds,
            f'echo {GPUS_MARK!r}',
            f'nvidia-smi --query-gpu={",".join(accelerators.QUERY_FIELDS)} --format=csv '
            '|| exit $?',
            f'echo {REASONS_MARK!r}',
            f'nvidia-smi --query-gpu={",".join(gpu_screen.REASON_FIELDS)} --format=csv '
            '|| exit $?']
        self.run_one_rank_per_gpu(self.build.program(dgemm.CUDA_PROGRAM), self.order,
                                  self.repeats)
        self.inputs = f'order={self.order} repeats={self.repeats} gpus={self.num_tasks}'
        self.reference = references.reframe_reference(self)

    @sanity_function
    def gpus_as_described(self):
        text = open(f'{self.stagedir}/{self.stdout}').read()
        try:
            found = accelerators.from_query_csv(_between(text, GPUS_MARK, REASONS_MARK))
            reasons = gpu_screen.idle_reasons(_between(text, REASONS_MARK, '== rank '))
        except (accelerators.AcceleratorError, gpu_screen.ScreenOutputError) as err:
            raise SanityError(f'nvidia-smi\'s report: {err}') from None
        wrong = gpu_screen.problems(self.gpus(), found, reasons)
        if wrong:
            raise SanityError('; '.join(wrong))
        rates = {f'GPU {gpu} on {host}': result.best / 1e3 for _, gpu, host, result in
                 self.each_rank(lambda _, text: dgemm.parse(text, self.repeats),
                                dgemm.DgemmOutputError)}
        self.screening = gpu_screen.slow_gpus(rates, self.slow_percent)
        for who, (tflops, below) in sorted(self.screening.slow.items()):
            getlogger().warning(f'{self.unique_name}: {who} is slow: {tflops:.2f} TFLOP/s, '
                                f'{below:.1f} % below the median of the node\'s GPUs '
                                f'({self.screening.median:.2f} TFLOP/s)')
        self.record_samples(f'the slowest of {len(rates)} GPU(s), each the best of '
                            f'{self.repeats} calls',
                            slowest_gpu_tflops=sorted(rates.values()))
        return True

    @performance_function('TFLOP/s')
    def slowest_gpu_tflops(self):
        return min(self.screening.rates.values())

    @performance_function('%')
    def slowest_gpu_below_median(self):
        """How far the slowest GPU is below the median of the node's."""
        rates = self.screening.rates.values()
        return 100 * (statistics.median(rates) - min(rates)) / statistics.median(rates)


def _between(text, start, end):
    """The part of `text` after the line `start` and before the first `end` after it."""
    if start not in text:
        raise SanityError(f'no "{start}" in the output: nvidia-smi did not run')
    after = text[text.index(start) + len(start):]
    return after[:after.index(end)] if end in after else after
