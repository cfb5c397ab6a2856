"""Host-device bandwidth: each GPU's copies to and from its host, pinned and pageable, and
within the device (our `host-device-bandwidth`, one rank per GPU: hpcbench.rfm.gpu).

Pinned copies run at the link's rate and are judged against the datasheet's host link, each
direction (hpcbench.core.accelerators: PCIe 5.0 x16, 64 GB/s, for the H100 and H200;
55.5 GB/s measured on the H200 node); pageable copies go through a staging copy by the CPU
and are reported, not judged. Parsing and the math: hpcbench.benchmarks.host_device.
"""

import reframe as rfm
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)

from hpcbench.benchmarks import host_device
from hpcbench.results import references
from hpcbench.rfm.gpu import GpuProgramBuild, GpuRun


class HostDeviceBuild(GpuProgramBuild):
    spec_of = staticmethod(host_device.spack_spec)


@rfm.simple_test
class HostDeviceBandwidthCheck(GpuRun):
    descr = 'Host-device bandwidth of every GPU: pinned and pageable, both directions'
    build = fixture(HostDeviceBuild, scope='environment')
    #: Bytes a copy moves, and the timed copies of each kind.
    copy_bytes = variable(int, value=host_device.BYTES)
    repeats = variable(int, value=host_device.REPEATS)
    input_kinds = {**GpuRun.input_kinds, 'copy_bytes': 'positive', 'repeats': 'positive'}
    time_limit = '10m'
    tags = {'gpu', 'link', 'quick'}

    @run_after('setup')
    def configure_run(self):
        sheet = self.gpus().get('datasheet') or {}
        self.link_bandwidth = sheet.get('host_link_bandwidth')
        if not self.link_bandwidth:
            for ratio in host_device.LINK_RATIOS:
                del self.perf_variables[ratio]
        self.run_one_rank_per_gpu(self.build.program(host_device.PROGRAM),
                                  *host_device.command_options(self.copy_bytes, self.repeats))
        self.inputs = f'bytes={self.copy_bytes} repeats={self.repeats} gpus={self.num_tasks}'
        self.reference = references.reframe_reference(self)

    @sanity_function
    def every_copy_verified(self):
        ranks = self.each_rank(
            lambda _, text: host_device.parse(text, self.copy_bytes, self.repeats),
            host_device.HostDeviceOutputError)
        self.per_gpu = [copies for *_, copies in ranks]
        how = f'median over {len(self.per_gpu)} GPU(s) of the best of {self.repeats} copies'
        values = {v: [c.best(v) for c in self.per_gpu] for v in host_device.COPIES}
        if self.link_bandwidth:
            values.update({ratio: [host_device.link_efficiency(c, copy, self.link_bandwidth)
                                   for c in self.per_gpu]
                           for ratio, copy in host_device.LINK_RATIOS.items()})
        self.record_gpu_samples(how, [(gpu, host) for _, gpu, host, _ in ranks], **values)
        return True

    @run_before('performance')
    def judge_the_link(self):
        """A pinned copy above the datasheet's link: the datasheet's link is not this GPU's
        (another generation or width): the ratio is withheld, saying so."""
        if self.link_bandwidth and not self.is_dry_run():
            for ratio in host_device.LINK_RATIOS:
                self.withhold_ratio_above_ceiling(
                    ratio, self.median(ratio),
                    f'the copies outran the datasheet\'s {self.link_bandwidth / 1e9:g} GB/s link')

    @performance_function('GB/s')
    def host_to_device_pinned(self):
        return self.median('host_to_device_pinned')

    @performance_function('GB/s')
    def device_to_host_pinned(self):
        return self.median('device_to_host_pinned')

    @performance_function('GB/s')
    def host_to_device_pageable(self):
        return self.median('host_to_device_pageable')

    @performance_function('GB/s')
    def device_to_host_pageable(self):
        return self.median('device_to_host_pageable')

    @performance_function('GB/s')
    def device_to_device(self):
        return self.median('device_to_device')

    @performance_function('%')
    def host_to_device_link_efficiency(self):
        """Pinned copies to the device against the datasheet's host link."""
        return self.median('host_to_device_link_efficiency')

    @performance_function('%')
    def device_to_host_link_efficiency(self):
        """Pinned copies from the device against the datasheet's host link."""
        return self.median('device_to_host_link_efficiency')
