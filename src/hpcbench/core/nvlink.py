"""Each GPU's NVLinks as `nvidia-smi nvlink -s` prints them (issue 73): every link's rate,
or `<inactive>` where it is down. A GPU with links down still runs and passes a short
benchmark; its NCCL traffic to its peers crawls (Azure's node health checks fail it, fault
code NHC2016; a V100 with links 3 and 5 inactive: Azure/azhpc-diagnostics issue 73).

The GPUs are numbered as nvidia-smi numbers them (its index: the suite's GPU key, its place
in nvidia-smi's list). A line that is neither a GPU's nor a link's is refused: a misread
link is worse than one not read. Standard library only: it runs on compute nodes too."""
import re
from dataclasses import dataclass

MAX_BYTES = 1 << 20
# NVLink 5 has 18 links a GPU; more than this is no GPU's.
MAX_LINKS = 64
_GPU = re.compile(r'GPU (\d{1,3}): (.{1,200}?) \(UUID: ([^)]{0,100})\)')
_LINK = re.compile(r'Link (\d{1,3}): (?:(\d+(?:\.\d+)?) GB/s|<inactive>)')


class NvlinkError(ValueError):
    pass


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's NVLinks: ((link, GB/s or None where inactive), ...)."""
    index: int
    model: str
    links: tuple = ()

    @property
    def inactive(self):
        return tuple(link for link, rate in self.links if rate is None)


def parse(text):
    """The GpuLinks of every GPU `nvidia-smi nvlink -s` printed, in its order."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_BYTES:
            raise NvlinkError(f'nvidia-smi nvlink -s: {len(text)} bytes, more than any node '
                              'prints')
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as err:
            raise NvlinkError(f'nvidia-smi nvlink -s: not UTF-8 ({err.reason} at byte '
                              f'{err.start})') from None
    gpus = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        gpu, link = _GPU.fullmatch(line), _LINK.fullmatch(line)
        if gpu:
            gpus.append(GpuLinks(int(gpu.group(1)), gpu.group(2)))
        elif link and gpus:
            links = gpus[-1].links
            if len(links) >= MAX_LINKS:
                raise NvlinkError(f'nvidia-smi nvlink -s: GPU {gpus[-1].index} has more '
                                  f'than {MAX_LINKS} links: no GPU has so many')
            rate = None if link.group(2) is None else float(link.group(2))
            gpus[-1] = GpuLinks(gpus[-1].index, gpus[-1].model,
                                (*links, (int(link.group(1)), rate)))
        else:
            raise NvlinkError(f'nvidia-smi nvlink -s: line {number} ({line[:60]!r}) is '
                              'neither a GPU\'s nor a link\'s')
    return tuple(gpus)
