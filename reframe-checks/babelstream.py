"""BabelStream: the memory bandwidth of each GPU of a node (CUDA model, version 5.0).

The arrays are sized from the partition's GPUs (hpcbench.benchmarks.babelstream: three
arrays of at most 1/8 of a device's memory, each at least 4x its L2 where the partition's
description gives it (accelerators.l2_bytes; no tool reports it): 2^29 doubles on an H200),
BabelStream runs once per GPU (one rank each, hpcbench.rfm.gpu), validates its own results
and prints CSV. The figures are the median over the node's GPUs of each kernel's best rate,
every GPU's kept as the sample; triad is judged against the datasheet memory bandwidth
(hpcbench.core.accelerators: 4.8 TB/s for the H200; 82.2 % measured there).
"""

import reframe as rfm
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import ReframeError

from hpcbench.benchmarks import babelstream
from hpcbench.results import references
from hpcbench.rfm.gpu import GpuProgramBuild, GpuRun


class BabelStreamBuild(GpuProgramBuild):
    spec_of = staticmethod(babelstream.spack_spec)


@rfm.simple_test
class BabelStreamCheck(GpuRun):
    descr = 'GPU memory bandwidth: BabelStream 5.0 (CUDA) on every GPU of a node'
    build = fixture(BabelStreamBuild, scope='environment')
    #: Calls of each kernel.
    num_times = variable(int, value=babelstream.NUM_TIMES)
    input_kinds = {**GpuRun.input_kinds, 'num_times': 'positive'}
    time_limit = '10m'
    tags = {'gpu', 'memory', 'quick'}

    @run_after('setup')
    def configure_run(self):
        gpus = self.gpus()
        try:
            self.elements = babelstream.array_elements(gpus['memory_bytes'],
                                                       gpus.get('l2_bytes'))
        except babelstream.BabelStreamInputError as err:
            raise ReframeError(f'{self.current_partition.fullname}: {err}') from None
        sheet = gpus.get('datasheet') or {}
        self.datasheet_bandwidth = sheet.get('memory_bandwidth')
        if not self.datasheet_bandwidth:
            del self.perf_variables['triad_datasheet_efficiency']
        self.run_one_rank_per_gpu(self.build.program(babelstream.PROGRAM),
                                  *babelstream.command_options(self.elements, self.num_times))
        self.inputs = (f'arraysize={self.elements} numtimes={self.num_times} '
                       f'gpus={self.num_tasks}')
        self.reference = references.reframe_reference(self)

    @sanity_function
    def every_gpu_validates(self):
        ranks = self.each_rank(lambda _, text: babelstream.parse(text, self.elements,
                                                                 self.num_times),
                               babelstream.BabelStreamOutputError)
        figures = [babelstream.figures(run, self.datasheet_bandwidth) for *_, run in ranks]
        how = (f'median over {len(figures)} GPU(s) of BabelStream\'s best of '
               f'{self.num_times} calls')
        self.record_gpu_samples(how, [(gpu, host) for _, gpu, host, _ in ranks],
                                **{v: [f[v][0] for f in figures] for v in figures[0]})
        return True

    @run_before('performance')
    def judge_the_datasheet(self):
        """Triad above the datasheet's bandwidth: the arrays were not in the device's memory
        alone, or the datasheet is not this device's: the ratio is withheld, saying so."""
        if self.datasheet_bandwidth and not self.is_dry_run():
            self.withhold_ratio_above_ceiling(
                'triad_datasheet_efficiency', self.median('triad_datasheet_efficiency'),
                f'triad outran the datasheet\'s {self.datasheet_bandwidth / 1e9:g} GB/s')

    @performance_function('GB/s')
    def copy_bandwidth(self):
        return self.median('copy_bandwidth')

    @performance_function('GB/s')
    def mul_bandwidth(self):
        return self.median('mul_bandwidth')

    @performance_function('GB/s')
    def add_bandwidth(self):
        return self.median('add_bandwidth')

    @performance_function('GB/s')
    def triad_bandwidth(self):
        return self.median('triad_bandwidth')

    @performance_function('GB/s')
    def dot_bandwidth(self):
        return self.median('dot_bandwidth')

    @performance_function('%')
    def triad_datasheet_efficiency(self):
        """Triad against the datasheet's memory bandwidth."""
        return self.median('triad_datasheet_efficiency')
