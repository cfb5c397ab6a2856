"""One GPU's link to its host: our `host-device-bandwidth` program
(packages/spack_repo/hpcbench/packages/host_device_bandwidth) copies a buffer to and from the
device, from pinned (page-locked) and from pageable host memory, and within the device; its
output parsed and the pinned copies judged against the link's datasheet bandwidth.

Pinned copies are DMA at the link's rate (55.5 GB/s of PCIe 5.0 x16's 64 on the H200 node,
2026-11-26, either direction); pageable ones go through a staging copy by the CPU (10.0 GB/s
there) and measure the host as much as the link. A device-to-device copy reads and writes
each byte: its rate counts the bytes once, as cudaMemcpy's size.

Standard library only.
"""
import re
from dataclasses import dataclass

from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

PROGRAM = 'host-device-bandwidth'
# 1 GiB a copy: large enough that a copy's fixed cost is below 0.1 % on a 64 GB/s link.
BYTES = 1 << 30
REPEATS = 10
# The program's line for each copy, by the check's variable.
COPIES = {
    'host_to_device_pinned': 'host to device, pinned',
    'device_to_host_pinned': 'device to host, pinned',
    'host_to_device_pageable': 'host to device, pageable',
    'device_to_host_pageable': 'device to host, pageable',
    'device_to_device': 'device to device',
}
# The pinned copies' share of the link, each direction.
LINK_RATIOS = {'host_to_device_link_efficiency': 'host_to_device_pinned',
               'device_to_host_link_efficiency': 'device_to_host_pinned'}
# What the check reports.
VARIABLES = (*COPIES, *LINK_RATIOS)


class HostDeviceOutputError(ValueError):
    pass


def spack_spec(cuda_arch):
    """The root spec of the program for Spack's `cuda_arch` (90 for sm_90)."""
    return f'host-device-bandwidth +cuda cuda_arch={cuda_arch}'


def command_options(nbytes=BYTES, repeats=REPEATS):
    return [str(nbytes), str(repeats)]


@dataclass(frozen=True)
class Copies:
    device: str
    nbytes: int
    rates: dict             # {variable: (GB/s of each repeat, ...)}

    def best(self, variable):
        return max(self.rates[variable])


@any_newlines
def parse(text, nbytes=None, repeats=None):
    """The copies of the program's output. Refused with one message: a program that did not
    start, a copy missing or cut short, a rate that is none or not above 0, another size or
    count than was asked, or copied data that did not compare equal."""
    header = re.search(r'^device: (.+) pci=\S+ bytes=(\d+) repeats=(\d+)$', text, re.M)
    if not header:
        raise HostDeviceOutputError('no "device: ... bytes=... repeats=..." line: the program '
                                    'did not start')
    ran_bytes, ran_repeats = int(header.group(2)), int(header.group(3))
    if nbytes is not None and ran_bytes != nbytes:
        raise HostDeviceOutputError(f'{ran_bytes} bytes were copied, {nbytes} were asked')
    if repeats is not None and ran_repeats != repeats:
        raise HostDeviceOutputError(f'{ran_repeats} repeats ran, {repeats} were asked')
    rates = {}
    for variable, name in COPIES.items():
        line = re.search(rf'^{re.escape(name)}:(.*) GB/s; best \S+ mean \S+$', text, re.M)
        if not line:
            raise HostDeviceOutputError(f'no complete line of "{name}" copies')
        try:
            values = tuple(float(v) for v in line.group(1).split())
        except ValueError:
            raise HostDeviceOutputError(f'{name}: a rate is no number: '
                                        f'{line.group(1).strip()}') from None
        if len(values) != ran_repeats or not all(v > 0 for v in values):
            raise HostDeviceOutputError(f'{name}: {len(values)} rates ({line.group(1).strip()}) '
                                        f'for {ran_repeats} repeats, each above 0 expected')
        rates[variable] = values
    if not re.search(r'^copies verified$', text, re.M):
        raise HostDeviceOutputError('the copied data were not verified ("copies verified" '
                                    'missing)')
    return Copies(header.group(1).strip(), ran_bytes, rates)


def link_efficiency(copies, variable, link_bytes_per_s):
    """A pinned copy's best rate as a percentage of the link's datasheet bandwidth (one
    direction)."""
    return 100 * copies.best(variable) * 1e9 / link_bytes_per_s

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'HostDeviceBandwidthCheck': Reports(
    'Host-device bandwidth', VARIABLES,
    {v: '%' if v.endswith('efficiency') else 'GB/s' for v in VARIABLES})}
