"""The site config of a system `hpcbench new-system` described (hpcbench.stack.
new_system): its description, site-configs/<name>.yaml, is data a person reviews and
corrects; this turns it into ReFrame's configuration, one partition per Slurm partition:

- the node as Slurm and the partition's own node described it (ReFrame's processor, the
  memory Slurm gives jobs, the clock and flop per cycle), its GPUs as the node's own tool
  named them, else as its GRES declares them (`gpus`: ReFrame's `devices`, features `gpu`
  and `cuda`, and the `gpu` resource the GPU checks ask for with --gres=gpu:N), linked as
  the node's nvidia-smi said (`gpu_topology`: the ranks are placed by it); GPUs of several
  models on one node, or of a model no tool named, are described and not measured;
- sbatch's `--partition` and the description's `access` options (account, QoS) on every job;
- one environment per MPI stack of the login node the description names (and each other
  BLAS, as on `local`), built by the system's Spack environment.

A description missing a field or holding a wrong one is one error naming the file and field
(hpcbench.machine.described_system.load).
"""
import sys
from pathlib import Path

from hpcbench.core import gpu_topology
from hpcbench.rfm import site_config, site_environments, site_partitions
from hpcbench.machine import described_system
from hpcbench.machine.gpus import measured_gpus
from hpcbench.stack import blas, described_stacks


def _gpus(entry, system):
    try:
        return measured_gpus(entry, system)
    except described_system.DescriptionError as err:
        sys.exit(f'error: {err}')


def _partition(where, system, entry, access, environs):
    gpu_settings, gpu_fields = site_partitions.accelerator_settings(
        _gpus(entry, system['name']),
        gpu_topology.from_description(entry.get('gpu_topology')), system['name'])
    if gpu_fields and entry.get('gpus_stand_in'):
        gpu_fields['accelerators']['stand_in'] = entry['gpus_stand_in']
    io = {'io_directory': entry['io_directory'], 'io_read_cache_policy': 'size'} \
        if entry.get('io_directory') else {}
    return site_partitions.reframe_partition(
        where, system['name'], entry['name'],
        {'num_nodes': entry['num_nodes'], 'memory_bytes': entry['memory_bytes'],
         'clock_hz': entry['clock_hz'],
         'clock_source': entry.get('clock_source', 'the description'),
         'flops_per_cycle': entry['flops_per_cycle'],
         'quiet_node': entry.get('quiet_node') or None,
         'os_reserve_bytes': entry.get('os_reserve_bytes'),
         **gpu_fields, **io},
        descr=entry['descr'], scheduler=system['scheduler'], launcher=system['launcher'],
        access=[f'--partition={entry["slurm_partition"]}', *access],
        **gpu_settings,
        **({'resources': site_partitions.SLURM_GPU_RESOURCES} if gpu_settings else {}),
        max_jobs=entry.get('max_jobs', 100), processor=entry['processor'],
        environs=environs)


def site_configuration(site_config_file):
    """ReFrame's configuration of the system whose description sits beside
    `site_config_file` (site-configs/<name>.py: site-configs/<name>.yaml)."""
    path = Path(site_config_file).with_suffix('.yaml')
    try:
        system = described_system.load(path)
        stacks = described_stacks.stacks_of(system, path)
    except described_system.DescriptionError as err:
        sys.exit(f'error: {err}')
    spack_fields, _ = site_partitions.spack_partition_settings()
    environments = site_environments.stack_environments(stacks, [system['name']], spack_fields,
                                                  blas.local_libraries(),
                                                  system.get('run_env') or {})
    environs = [env['name'] for env in environments]
    return site_config.site(
        systems=[{
            'name': system['name'],
            'descr': system['descr'],
            'hostnames': system['hostnames'],
            'modules_system': 'nomod',
            'partitions': [_partition(path, system, entry, system['access'], environs)
                           for entry in system['partitions']],
        }],
        environments=environments,
    )
