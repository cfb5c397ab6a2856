"""How an MPI stack becomes ReFrame environments: one per stack (and per other BLAS, per
other launcher), each with the features the checks ask for (BUILDS_FROM_SPACK,
OTHER_BLAS, OTHER_LAUNCHER, OPENMP_ONLY) and the run-time variables of its stack."""
import sys

from hpcbench.rfm import backends
from hpcbench.rfm.site_partitions import stack_extras


# The feature of an environment whose benchmarks Spack builds. The checks built only by Spack
# ask for it, so that where no Spack is they are not generated at all (rather than listed and
# skipped); checks a registry binary can run also accept `registry-<name>`.
BUILDS_FROM_SPACK = 'spack-builds'


# The feature of an environment that is one MPI stack's other launcher (MVAPICH2's
# mpirun_rsh beside its Hydra mpirun): only the checks that measure launching ask for it
# (MPI start-up); the others run each stack once, under the partition's launcher.
OTHER_LAUNCHER = 'mpi-launcher'
# Environment names of the other launchers: <stack>-<suffix>.
LAUNCHER_SUFFIXES = {'mpirun_rsh': 'rsh'}


# The feature of an environment that is one MPI stack with another BLAS than the default
# (hpcbench.stack.blas): only the checks a BLAS changes ask for it (HPL, HPCC and the DGEMM
# ceiling); the others run each stack once, with the default BLAS.
OTHER_BLAS = 'other-blas'


def _with_spack(spack_fields):
    """Whether Spack builds the checks: the partitions' `spack_fields` name a Spack, or this
    is a dry run (whose job scripts can be read without one)."""
    return bool(spack_fields.get('spack_root')) or '--dry-run' in sys.argv


# The feature of the environment in which a partition's OpenMP programs that use no MPI
# (STREAM) run: on this machine's systems, the first stack's only, so that they run once per
# partition, not once per MPI stack.
OPENMP_ONLY = 'openmp'


def mpi_environment(stack, target_systems, spack_fields, features=(), run_env=None,
                    launcher=None, blas=None, other_blas=False):
    """A ReFrame environment for one MPI stack of this machine: its wrappers first on PATH,
    its run-time variables (the stack's, updated with `run_env`), the `mpi` and `blas` Spack
    constraints the checks use to pick their builds (`blas`: a hpcbench.stack.blas library), and
    the binaries a registry ships built against it (feature `registry-<name>`, its stack's
    `registry_programs`: the path). Feature BUILDS_FROM_SPACK with a Spack (_with_spack).
    `launcher`: one of the stack's other_launchers, an environment of its own (<stack>-rsh,
    feature OTHER_LAUNCHER and no other `features`: no check that does not launch MPI runs
    in it) whose jobs list this host in the host file the launcher reads. `other_blas`: the
    stack with `blas`, not the default one, an environment of its own (<stack>-<blas>,
    feature OTHER_BLAS instead of `mpi`)."""
    registry = [] if launcher or other_blas else sorted(stack.registry_binaries.items())
    features = () if launcher else features
    name = stack.name
    if launcher:
        name, kind = f'{stack.name}-{LAUNCHER_SUFFIXES[launcher]}', OTHER_LAUNCHER
    elif other_blas:
        name, kind = f'{stack.name}-{blas.name}', OTHER_BLAS
    else:
        kind = 'mpi'
    return {
        'name': name,
        'target_systems': list(target_systems),
        'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpif90',
        'features': [kind, stack.name, *features,
                     *(f'registry-{n}' for n, _ in registry),
                     *([BUILDS_FROM_SPACK] if _with_spack(spack_fields) else [])],
        'extras': stack_extras(f'environment {name}', spack_mpi=stack.spack_name,
                               known_failures=stack.known_failures() or None,
                               spack_blas=blas.spack_spec if blas else None,
                               registry_programs=dict(registry) or None, launcher=launcher,
                               device_buffers=_device_buffers(stack)),
        'env_vars': [['PATH', f'{stack.bin_dir}:$PATH'],
                     *([k, v] for k, v in {**stack.run_env, **(run_env or {})}.items())],
        # One node, this host: its name, as the launcher compares it with its own to start
        # ranks without a remote shell.
        'prepare_cmds': backends.hostfile_lines('hostname', 1) if launcher else [],
    }


def _device_buffers(stack):
    answer = stack.device_buffers()
    return answer.to_description() if answer else None


def stack_environments(stacks, target_systems, spack_fields, blas_libraries=(),
                       run_env=None):
    """Every environment of these stacks: each under the partition's launcher and under
    each of its other launchers, with the default BLAS (the first of `blas_libraries`);
    and, where Spack builds the checks, the first stack with each other BLAS. The first
    stack's is the one OpenMP programs without MPI run in (OPENMP_ONLY). `run_env`:
    {stack name: its run-time variables on this system}."""
    default, *others = blas_libraries or [None]
    run_env = run_env or {}
    environments = [mpi_environment(stack, target_systems, spack_fields,
                                    (OPENMP_ONLY,) if stack is stacks[0] else (),
                                    run_env=run_env.get(stack.name), launcher=launcher,
                                    blas=default)
                    for stack in stacks for launcher in (None, *stack.other_launchers)]
    if stacks and _with_spack(spack_fields):
        environments += [mpi_environment(stacks[0], target_systems, spack_fields,
                                         run_env=run_env.get(stacks[0].name), blas=blas,
                                         other_blas=True)
                         for blas in others]
    return environments
