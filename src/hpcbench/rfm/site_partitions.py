"""A system's partitions as ReFrame takes them: one function turns a partition's description
(hpcbench.machine.description) into ReFrame's partition (reframe_partition), its GPUs into
ReFrame's devices and resources (accelerator_settings, SLURM_GPU_RESOURCES), the host this
runs on (this_host), an MPI stack's description (stack_extras), and the Spack environment of
a system (spack_env_dir, spack_partition_settings)."""
import sys

from hpcbench.core import paths
from hpcbench.machine import datasheets, description, description_schema, gpus
from hpcbench.stack import spack


def accelerator_settings(accelerators, topology=None, system=None):
    """What a partition whose nodes each have `accelerators` (hpcbench.core.accelerators)
    linked as `topology` shows (hpcbench.core.gpu_topology, or None) adds to its
    description: ReFrame's `devices`, its features (`gpu`, `cuda`) and its description's
    `accelerators` with the model's datasheet (hpcbench.machine.datasheets: `system`'s own
    file first); {} and {} for none, so that a partition without any is described as
    before. A datasheets file that is not one stops the site config with one message."""
    if not accelerators:
        return {}, {}
    try:
        sheet = datasheets.find(accelerators[0].model, datasheets.table(system))
    except datasheets.DatasheetError as err:
        sys.exit(f'error: {err}')
    return ({'devices': gpus.devices_entry(accelerators),
             'features': gpus.features(accelerators)},
            gpus.partition_facts(accelerators, topology, sheet))


def reframe_partition(where, system, name, fields, env_vars=(), **reframe_fields):
    """ReFrame's partition `name` of `system` from its description `fields`
    (hpcbench.machine.description: validated here, once, for every route to a system; a
    description that is not one stops the site config with one message naming `where`, its
    file, and the field), pointed at the project's Spack and the system's environment
    (spack_partition_settings). `reframe_fields`: ReFrame's own (descr, scheduler,
    launcher, access, processor, environs, max_jobs, devices, features, resources);
    `env_vars`: ((name, value), ...) its jobs get besides the Spack's. A field set to None
    is unset."""
    spack_fields, spack_env_vars = spack_partition_settings()
    fields = {**fields, **spack_fields, 'spack_env': str(spack_env_dir(system))}
    try:
        described = description.partition({k: v for k, v in fields.items() if v is not None},
                                          f'{where}: partitions[{name}]')
    except description_schema.DescriptionError as err:
        sys.exit(f'error: {err}')
    return {'name': name, **reframe_fields,
            'env_vars': [*spack_env_vars, *(list(pair) for pair in env_vars)],
            'extras': described.to_extras()}


def this_host(where, facts):
    """`facts()`, what hpcbench.machine.host reads of this machine for a partition's
    description; a fact it cannot read, or one given that is none (HPCBENCH_CLOCK_HZ=-5),
    stops the site config `where` with one message."""
    try:
        return facts()
    except RuntimeError as err:
        sys.exit(f'error: {where}: {err}')


# The extras ReFrame's own and other sites' checks read of an environment, by convention:
# `omp_flag`, the compiler's OpenMP flag (ReFrame's tutorial STREAM check builds with
# `['-O3', extras['omp_flag']]`: without it, "failed to set variable 'cflags': ['-O3',
# None]" on every site config). The stacks' compiler wrappers drive GCC (Debian's, or the
# one Spack pins), which, like Clang and Intel's oneAPI compilers, takes -fopenmp.
CONVENTIONAL_EXTRAS = {'omp_flag': '-fopenmp'}


def stack_extras(where, **fields):
    """A ReFrame environment's `extras`: its MPI stack's description (hpcbench.machine.
    description.StackDescription), validated, None fields unset; and the conventional
    extras other sites' checks read (CONVENTIONAL_EXTRAS)."""
    try:
        return {**CONVENTIONAL_EXTRAS,
                **description.stack({k: v for k, v in fields.items() if v is not None},
                                    where).to_extras()}
    except description_schema.DescriptionError as err:
        sys.exit(f'error: {err}')


# The resource a Slurm partition's GPU checks ask for the node's GPUs with (hpcbench.rfm.gpu:
# one rank per GPU), by GRES.
SLURM_GPU_RESOURCES = [{'name': 'gpu', 'options': ['--gres=gpu:{num_gpus_per_node}']}]


def spack_env_dir(system):
    """The Spack environment of a system (spack-envs/<system>)."""
    return paths.SPACK_ENVS_DIR / system


def spack_partition_settings():
    """The description field (spack_root) and env_vars that point a partition's checks at
    the project's Spack.

    Without a Spack the checks that need one skip, saying so (see hpcbench.rfm.build).
    """
    found = spack.find()
    if not found:
        return {'spack_root': None}, []

    env = spack.isolated_environment(found)
    env_vars = [[k, v] for k, v in env.items()]
    env_vars.append(['PATH', f'{found.root}/bin:$PATH'])
    return {'spack_root': str(found.root)}, env_vars
