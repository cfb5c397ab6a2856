"""A node's GPUs identified, in one place: as its own tool names them (the node facts' GPUs,
completed from their model's datasheet), as Slurm's GRES declares them, as a description
groups them (one entry per model), and which of them the GPU checks measure. What each tool
prints is parsed in hpcbench.core.accelerators; this says which GPUs a node is described
with."""
import dataclasses

from hpcbench.core import accelerators
from hpcbench.core.gres import gres_gpus
from hpcbench.machine import datasheets


# What the facts job says of each GPU (fields of hpcbench.core.accelerators.Accelerator).
NODE_GPU_FIELDS = ('vendor', 'kind', 'model', 'arch', 'memory_bytes', 'index', 'uuid',
                   'pci_bus_id', 'max_sm_clock_hz', 'power_limit_w', 'driver_version')


# The tool that names a vendor's GPUs on a node (print_node_facts asks the first it finds).
TOOL_OF_VENDOR = {'nvidia': 'nvidia-smi', 'amd': 'rocm-smi', 'intel': 'xpu-smi'}


def tool_of(gpus):
    """The tool that named `gpus` (nvidia-smi for a node without any: the first asked)."""
    return TOOL_OF_VENDOR.get(gpus[0].vendor if gpus else 'nvidia', 'the GPU tool')


def _completed(gpu, entries):
    """A GPU as its node's tool named it, its architecture and memory from its model's
    datasheet where the tool does not print them (rocm-smi -a prints no GFX version on some
    releases, xpu-smi's discovery no memory)."""
    sheet = datasheets.find(gpu.model, entries) if entries is not None else None
    if sheet is None:
        return gpu
    return dataclasses.replace(gpu, arch=gpu.arch or sheet.arch or '',
                               memory_bytes=gpu.memory_bytes or int(sheet.memory_bytes or 0))


def node_gpus(partition, facts, known=None, entries=None):
    """(the GPUs a node of `partition` is described with, [what to ask]): those its own tool
    named (the facts job's `gpus`: model, memory, power limit as the node says), else those
    its GRES declares (a label the datasheets `entries` know, or a GPU of unknown model).
    Slurm's count and the node's that differ are asked about; Slurm's count is what a job
    gets."""
    node, asks = partition.smallest, []
    where = f'partitions[{partition.name}]'
    declared = from_gres(node.gres, known)
    said = [_completed(accelerators.Accelerator(**{k: v for k, v in gpu.items()
                                                   if k in NODE_GPU_FIELDS}), entries)
            for gpu in facts.get('gpus') or []]
    if facts.get('gpu_tool_error'):
        asks.append(f'{where}: the GPU tool on {facts["hostname"]} failed: '
                    f'{facts["gpu_tool_error"]}')
    if said and not declared:
        asks.append(f'{where}: {tool_of(said)} on {facts["hostname"]} shows {len(said)} GPU(s) '
                    f'({said[0].model}) that Slurm does not schedule (no GPU in its GRES '
                    f'{node.gres or "(null)"}): described without GPUs; declare them in '
                    'slurm.conf and gres.conf to measure them')
        return [], asks
    if said and len(said) != len(declared):
        asks.append(f'{where}: Slurm\'s GRES {node.gres} gives a job {len(declared)} GPU(s), '
                    f'{tool_of(said)} on {facts["hostname"]} shows {len(said)}: described with '
                    'the node\'s; check gres.conf')
    return said or declared, asks


def gpu_groups(gpus, source):
    """The description's `gpus` of a node's GPUs: one entry per model, with its count."""
    groups = {}
    for gpu in gpus:
        key = (gpu.vendor, gpu.kind, gpu.model, gpu.arch)
        if key not in groups:
            groups[key] = {'vendor': gpu.vendor, 'kind': gpu.kind, 'model': gpu.model,
                           'arch': gpu.arch, 'count': 0, 'memory_bytes': gpu.memory_bytes,
                           'power_limit_w': gpu.power_limit_w,
                           'max_sm_clock_hz': gpu.max_sm_clock_hz,
                           'driver_version': gpu.driver_version, 'source': source}
        group = groups[key]
        group['count'] += 1
        for field in ('memory_bytes', 'power_limit_w', 'max_sm_clock_hz'):
            group[field] = min(group[field], getattr(gpu, field))
    return list(groups.values())


def gpus_of(entry, known=None):
    """The GPUs of one node of a described partition (its `gpus`, else its GRES: a
    description written before `gpus`, its labels named by `known`: hpcbench.machine.
    datasheets.gres_model), as hpcbench.core.accelerators.Accelerator."""
    if entry.get('gpus') is None:
        return from_gres(entry.get('gres', ''), known)
    found = []
    for group in entry['gpus']:
        fields = {k: v for k, v in group.items() if k not in ('count', 'source')}
        found += [accelerators.Accelerator(**fields, index=len(found) + i)
                  for i in range(group['count'])]
    return found


def measured_gpus(entry, system):
    """The GPUs of a node of described partition `entry` the GPU checks measure: its GPUs
    (gpus_of, GRES labels named by `system`'s datasheets), none where they are of several
    models (`gpus_mixed`: one model per partition) or of a model no tool named. A datasheets
    file that is not one is a DescriptionError."""
    gpus = gpus_of(entry, datasheets.gres_model(datasheets.table(system)))
    if entry.get('gpus_mixed') or len({g.model for g in gpus}) > 1 or \
            any(g.vendor == accelerators.UNKNOWN_VENDOR for g in gpus):
        return []
    return gpus


def from_gres(gres, known=None):
    """The GPUs of a node whose Slurm GRES is `gres`, where no tool on the node describes
    them: a label `known` names ((model as its tool prints it, vendor, kind, arch, memory)
    or None: hpcbench.machine.datasheets.gres_model) gives that model; any other, or none, a
    GPU of a model not known ('GPU (GRES gpu:rtx2080ti)', vendor and architecture unknown:
    it is measured by nothing until the node's own tool names it). [] without a GPU. Power
    limit, clocks and ECC are not known from it (0 and None)."""
    gpus = []
    for item in gres_gpus(gres):
        named = known(item.label) if known and item.label else None
        for _ in range(item.count):
            if named:
                model, vendor, kind, arch, memory = named
                gpus.append(accelerators.Accelerator(vendor, kind, model, arch, memory,
                                                     index=len(gpus)))
            else:
                label = f'gpu:{item.label}' if item.label else 'gpu, untyped'
                gpus.append(accelerators.Accelerator(accelerators.UNKNOWN_VENDOR, 'gpu',
                                                     f'GPU (GRES {label})', '', 0,
                                                     index=len(gpus)))
    return gpus


def one_model(devices):
    """(vendor, kind, model, arch) of a node's devices, all of one model; a node of
    several is an AcceleratorError naming each model and its devices."""
    models = {}
    for a in devices:
        models.setdefault((a.vendor, a.kind, a.model, a.arch), []).append(str(a.index))
    if len(models) > 1:
        raise accelerators.AcceleratorError(
            'a node of several accelerator models ('
            + '; '.join(f'{model[2]} ({model[3]}): '
                        f'{"devices" if len(indices) > 1 else "device"} {", ".join(indices)}'
                        for model, indices in models.items())
            + '): the checks measure one model per partition; describe each model as a '
            'partition of its own (a site config whose partitions set CUDA_VISIBLE_DEVICES)')
    return next(iter(models))


def devices_entry(devices):
    """ReFrame's `devices` of a partition whose nodes each have `devices`: [] for none."""
    if not devices:
        return []
    _vendor, kind, model, arch = one_model(devices)
    return [{'type': kind, 'arch': arch, 'model': model, 'num_devices': len(devices)}]


def partition_facts(devices, topology=None, sheet=None):
    """A partition's description of its nodes' accelerators: {'accelerators': {...}} with
    what the tool reported of one device (the least of each limit over the node's), its
    datasheet's figures (`sheet`: hpcbench.machine.datasheets.find) and the node's GPU
    topology (hpcbench.core.gpu_topology, or None), or {} for none. A model without a
    datasheet has `datasheet: None`; a topology of another count of GPUs is an
    AcceleratorError."""
    if not devices:
        return {}
    if topology is not None and len(topology.gpus) != len(devices):
        raise accelerators.AcceleratorError(
            f'nvidia-smi topo -m shows {len(topology.gpus)} GPUs, its query {len(devices)}: '
            'not one node\'s')
    vendor, kind, model, arch = one_model(devices)
    described = {
        'vendor': vendor, 'kind': kind, 'model': model, 'arch': arch,
        'count': len(devices),
        'memory_bytes': min(a.memory_bytes for a in devices),
        'max_sm_clock_hz': min(a.max_sm_clock_hz for a in devices),
        'power_limit_w': min(a.power_limit_w for a in devices),
        'ecc_enabled': (None if any(a.ecc_enabled is None for a in devices)
                        else all(a.ecc_enabled for a in devices)),
        'driver_version': devices[0].driver_version,
        'datasheet': dataclasses.asdict(sheet) if sheet else None,
        **({'topology': topology.to_description()} if topology is not None else {}),
    }
    return {'accelerators': described}


def features(devices):
    """The partition features of its devices: their kind (`gpu`, `accelerator`), and
    the vendor's programming model (`cuda` for NVIDIA's; `clearspeed` for ClearSpeed's
    boards, driven through its BLAS)."""
    if not devices:
        return []
    vendor, kind, _model, _arch = one_model(devices)
    return [kind, *{'nvidia': ['cuda'], 'amd': ['rocm'],
                     'clearspeed': ['clearspeed']}.get(vendor, [])]
