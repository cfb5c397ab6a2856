"""A node's generic resources (GRES) as Slurm prints them, read for their GPUs: each GPU item
as the site's label, its count and Slurm's binding. (Which GPUs those are is identified in
hpcbench.machine.gpus.)"""
import re
from dataclasses import dataclass

from hpcbench.core.accelerators import MAX_DEVICES, AcceleratorError


# A GPU item of a GRES as Slurm prints it: `gpu:COUNT` or `gpu:TYPE:COUNT`, then what Slurm
# adds in parentheses (the sockets it is bound to, `(S:0-1)`; with -d the indices,
# `(IDX:0-3)`). The type is the site's own label.
_GRES_GPU = re.compile(r'^gpu(?::(?P<type>[^:(]+))?:(?P<count>[0-9]{1,12})(?P<at>\(.*\))?$')


# A node's GRES as Slurm prints it is a short list: far longer is no node's.
MAX_GRES_CHARACTERS = 4096


@dataclass(frozen=True)
class GresGpus:
    """GPUs of one item of a node's GRES: the site's label ('' untyped), how many, and
    Slurm's binding as printed ('(S:0-1)', or '')."""
    label: str
    count: int
    binding: str = ''


def gres_items(gres):
    """The comma-separated items of a GRES (`gpu:a100:1(S:0),gpu:h100:1(S:1-2)`), a comma
    inside parentheses kept in its item; in one pass (a split that looked ahead for each
    comma took 104 s on a long one)."""
    items, depth, start = [], 0, 0
    for at, char in enumerate(gres):
        if char == '(':
            depth += 1
        elif char == ')':
            depth = max(depth - 1, 0)
        elif char == ',' and depth == 0:
            items.append(gres[start:at])
            start = at + 1
    items.append(gres[start:])
    return items


def gres_gpus(gres):
    """The GPU items of a node's GRES as Slurm prints it ('gpu:h200:4', 'gpu:4', 'gpu:v100:4(S:
    0-1),nvme:3600', 'gpu:a100:1(S:0),gpu:h100:1(S:1)', '(null)'), as GresGpus, in order;
    items of other resources (nvme, mps, shard, bandwidth, VramPerGpu) are not GPUs and are
    left out, as are GPU items of no device (a count of 0). A GPU item that is not
    `gpu[:TYPE]:COUNT`, or more GPUs than a node has, is an AcceleratorError."""
    if len(gres or '') > MAX_GRES_CHARACTERS:
        raise AcceleratorError(f'GRES of {len(gres)} characters ({gres[:40]!r}...): no node\'s '
                               f'(at most {MAX_GRES_CHARACTERS})')
    found, total = [], 0
    for item in gres_items(gres or ''):
        item = item.strip()
        if item.split(':', 1)[0].split('(', 1)[0].lower() != 'gpu':
            continue
        match = _GRES_GPU.fullmatch(item)
        if not match:
            raise AcceleratorError(f'GRES {item!r} is not gpu[:TYPE]:COUNT')
        count = int(match.group('count'))
        total += count
        if total > MAX_DEVICES:
            raise AcceleratorError(f'GRES {item!r}: {total} GPUs are not what a node has (from '
                                   f'1 to {MAX_DEVICES})')
        if count:
            found.append(GresGpus((match.group('type') or '').strip(), count,
                                  match.group('at') or ''))
    return tuple(found)


def gres_gpu_count(gres):
    """How many GPUs Slurm allocates on a node of GRES `gres` (0 without)."""
    return sum(item.count for item in gres_gpus(gres))
