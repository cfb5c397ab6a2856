"""The systems this machine builds a Spack stack for, and what each is made of: the machine's
own (local, testbed) and the clusters new-system described (machine_systems), their MPI
stacks, BLAS libraries, nodes and GPU programs, and each system's host.yaml, the externals
and the node's settings its Spack environment reads (host_config, write_host_yaml). Set-up
itself is hpcbench.stack.bootstrap."""

import socket
import subprocess

import yaml

from hpcbench.benchmarks import babelstream, dgemm, host_device, nccl_tests, osu, stream
from hpcbench.core import node, paths
from hpcbench.machine import described_system, device_buffers, host
from hpcbench.machine.gpus import measured_gpus
from hpcbench.stack import (blas, cuda, debian, described_stacks, mpi_stacks, nccl, provenance,
                            testbed_system)

LOCAL_SYSTEM, LOCAL_PARTITION = 'local', 'default'

# The systems on this machine: `local` (the host) and `testbed` (the Slurm cluster
# ci/testbed emulates on it). Both build with this machine's externals (host.yaml), as does
# a cluster `hpcbench new-system` described from this login node (machine_systems()).
MACHINE_SYSTEMS = ('local', 'testbed')


def say(msg):
    print(f'[bootstrap] {msg}', flush=True)


class BootstrapError(RuntimeError):
    pass


def machine_systems():
    """The systems whose stack this machine builds: MACHINE_SYSTEMS, then the clusters
    described from it (hpcbench.machine.described_system)."""
    return (*MACHINE_SYSTEMS, *described_system.described_systems())


def described_gpus(system):
    """The GPUs of a described cluster's partitions whose drivers answer and which its GPU
    checks measure (hpcbench.machine.gpus.measured_gpus)."""
    description, _ = described_system.description_of(system)
    return [gpu for entry in description['partitions'] if not entry.get('gpus_stand_in')
            for gpu in measured_gpus(entry, system)]


def machine_stacks(system='local'):
    """The MPI stacks a system on this machine runs (testbed: those it can launch; a
    described cluster: those its description names)."""
    if system == 'testbed':
        return testbed_system.mpi_stacks_launched()
    if system not in MACHINE_SYSTEMS:
        return described_stacks.stacks_of(*described_system.description_of(system))
    return mpi_stacks.local_stacks()


def machine_blas(system='local'):
    """The BLAS libraries a system on this machine builds with, the default first (testbed:
    the default only; the BLAS comparison is the host's)."""
    return testbed_system.blas_libraries() if system == 'testbed' else blas.local_libraries()


def machine_nodes(system):
    """The nodes site-configs/<system>.py describes (local: the host; testbed: one emulated
    node; a described cluster: each partition's), from the same functions."""
    if system not in MACHINE_SYSTEMS:
        description, path = described_system.description_of(system)
        return [node.from_partition(entry['processor'], entry, f'{path}: {entry["name"]}')
                for entry in description['partitions']]

    processor = host.processor_info(LOCAL_SYSTEM, LOCAL_PARTITION)
    if system == 'testbed':
        return [node.from_partition(processor,
                                    testbed_system.node_facts(
                                        testbed_system.configured_nodes()), system)]

    return [node.from_partition(processor, host.partition_facts(), system)]


def gpu_specs(cuda_archs):
    """The GPU programs an environment builds for each of Spack's `cuda_archs`: BabelStream,
    the DGEMM ceiling through cuBLAS and the host link's copies."""
    return [spec for arch in cuda_archs
            for spec in (babelstream.spack_spec(arch), dgemm.cuda_spack_spec(arch),
                         host_device.spack_spec(arch))]


def gpu_mpi_specs(cuda_archs, mpi, cuda_aware=()):
    """The GPU programs launched by MPI an environment builds for each of Spack's
    `cuda_archs`: nccl-tests on its first MPI stack (`mpi`, a Spack package: NCCL moves the
    data, MPI only starts the ranks, so one stack does), OSU +cuda on each MPI that sends
    from GPU memory (`cuda_aware`, Spack packages: hpcbench.machine.device_buffers)."""
    return [*([f'{nccl_tests.spack_spec(arch)} ^{mpi}' for arch in cuda_archs] if mpi else []),
            *(f'{osu.spack_spec(arch)} ^{aware}' for aware in cuda_aware
              for arch in cuda_archs)]


def cuda_aware_mpis(stacks, cuda_toolkit):
    """The Spack packages of `stacks` that send from GPU memory, as each MPI says
    (hpcbench.machine.device_buffers), and that OSU is not known to crash with
    (hpcbench.benchmarks.osu.KNOWN_FAILURES), where OSU +cuda can be built with
    `cuda_toolkit`: it links the driver's API (-lcuda; the wheels' toolkit is given a library
    to link, hpcbench.stack.cuda.add_driver_link_library). [] where it cannot: said."""
    aware = [s.spack_name for s in stacks
             if (s.device_buffers() or device_buffers.DeviceBuffers(False, '')).cuda
             and s.spack_name not in osu.KNOWN_FAILURES]
    if not aware or not cuda_toolkit:
        return []
    try:
        if cuda_toolkit.prefix == cuda.wheels_prefix():
            cuda.add_driver_link_library(cuda_toolkit.prefix)
        elif not cuda.has_driver_link_library(cuda_toolkit.prefix):
            raise cuda.CudaError(f'{cuda_toolkit.prefix} holds no lib64/libcuda.so or '
                                 'lib64/stubs/libcuda.so and this machine has no driver')
    except cuda.CudaError as err:
        say(f'OSU +cuda is not built: {err}')
        return []
    return aware


def gpu_nccl():
    """The NCCL nccl-tests is built with (hpcbench.stack.nccl: the site's, else the wheel's
    laid out on first use); None where it cannot be had, said: nccl-tests is then not built,
    the other GPU programs are."""
    try:
        return nccl.library()
    except (nccl.NcclError, subprocess.CalledProcessError, OSError) as err:
        say(f'nccl-tests is not built: {err}')
        return None


def gpu_build(accelerators):
    """(cuda_archs, toolkit) of this machine's GPU programs (hpcbench.stack.cuda.build_archs:
    its GPUs', or HPCBENCH_CUDA_ARCH's), the toolkit installed only then; ([], None) for
    none. A toolkit that cannot be had is said and the GPU programs are not built: the CPU
    checks still run."""
    try:
        archs = cuda.build_archs(accelerators)
    except cuda.CudaError as err:
        raise BootstrapError(str(err)) from None
    if not archs:
        return [], None
    driver = next((a.driver_version for a in accelerators if a.driver_version), None)
    try:
        return archs, cuda.toolkit(driver)
    except (cuda.CudaError, subprocess.CalledProcessError, OSError) as err:
        say(f'no GPU program is built: {err}')
        return [], None


def host_config(stacks, tools, nodes, system='local', detected=(), blas_libraries=(),
                cuda_archs=(), cuda_toolkit=None, nccl_library=None):
    """The machine-specific half of spack-envs/local (the other half is committed): the
    externals, the MPI stacks (`mpis`) and STREAM specs the environment builds for, and its
    BLAS libraries (hpcbench.stack.blas): `blas_default`, with which HPL and HPCC are built
    on every MPI stack, `blas_others`, each on `blas_mpi` (the first stack),
    `blas_libraries` (all, for the DGEMM ceiling). `detected`: the externals Spack's
    detection described (detected_mpi_externals). `cuda_archs`, `cuda_toolkit`: the GPU
    programs built (`gpu_specs`) and the toolkit they are built with (gpu_build);
    `nccl_library`: the NCCL nccl-tests is built with (gpu_nccl; `gpu_mpi_specs`)."""
    packages = dict(tools)
    for stack in stacks:
        try:
            external = (detected[stack.spack_name] if stack.spack_detects
                        else stack.spack_external())
        except RuntimeError as err:
            raise BootstrapError(str(err)) from None

        packages[stack.spack_name] = {'externals': [external],
                                      'buildable': False}

    # Debian's OpenBLAS is always an external (hpcc from Debian runs on it); Spack may build
    # another OpenBLAS beside it when that is one of the BLAS libraries.
    packages['openblas'] = {'externals': [blas.debian_openblas().spack_external()],
                            'buildable': any(isinstance(b, blas.SpackOpenblas)
                                             for b in blas_libraries)}
    for library in blas_libraries:
        external = library.spack_external()
        if external and library.package != 'openblas':
            packages[library.package] = {'externals': [external], 'buildable': False}
    # Spack cannot detect autoconf-archive (hpl needs its AX_PROG_CC_MPI).
    archive = debian.upstream_version_of('autoconf-archive')   # 20220903 -> 2022.09.03
    packages['autoconf-archive'] = {
        'externals': [{'spec': f'autoconf-archive@{archive[:4]}.{archive[4:6]}.{archive[6:]}',
                       'prefix': '/usr'}],
        'buildable': False}
    if cuda_toolkit:
        packages['cuda'] = {'externals': [cuda_toolkit.spack_external()], 'buildable': False}
    if cuda_toolkit and nccl_library:
        packages['nccl'] = {'externals': [nccl_library.spack_external()], 'buildable': False}
    stream_specs = []
    for each in nodes:
        try:
            spec = stream.spack_spec(stream.array_size(each.llc_bytes_total, each.memory_bytes))
        except stream.StreamInputError as err:
            # A node too small for STREAM's rule (a VM may report a host-sized LLC) loses
            # STREAM, not the whole set-up; its StreamCheck refuses in setup with the same
            # words.
            say(f'{system}: STREAM is not built: {err}')
            continue
        if spec not in stream_specs:
            stream_specs.append(spec)
    return {
        'packages': packages,
        'definitions': [{'stream_specs': stream_specs},
                        {'mpis': [stack.spack_name for stack in stacks]},
                        {'blas_default': [b.spack_spec for b in blas_libraries[:1]]},
                        {'blas_mpi': [stack.spack_name for stack in stacks[:1]]},
                        {'blas_others': [b.spack_spec for b in blas_libraries[1:]]},
                        {'blas_libraries': [b.spack_spec for b in blas_libraries]},
                        {'gpu_mpi_specs': gpu_mpi_specs(
                            cuda_archs,
                            stacks[0].spack_name if cuda_toolkit and nccl_library and stacks
                            else None,
                            cuda_aware_mpis(stacks, cuda_toolkit) if cuda_archs else ())},
                        {'gpu_specs': gpu_specs(cuda_archs) if cuda_toolkit else []}],
    }


def write_host_yaml(config, target):
    header = (f'# Generated by `hpcbench bootstrap` on {socket.gethostname()}: this machine\'s '
              'externals and the inputs derived from its topology.\n# Not committed; '
              'regenerated when the machine changes.\n')
    text = header + yaml.safe_dump(config, sort_keys=False)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
        say(f'wrote {target}')


def write_host_yamls(system, tools, detected, this_host):
    """host.yaml of every system on this machine (hpcbench.stack.bootstrap): `tools` and
    `detected` as Spack found them, `this_host` the GPU build of this host's GPUs. A
    described cluster whose description fails is skipped, saying why, unless it is
    `system`, the one being set up."""
    for each in machine_systems():
        try:
            cuda_archs, cuda_toolkit = (this_host if each in MACHINE_SYSTEMS
                                        else gpu_build(described_gpus(each)))
            nccl_library = gpu_nccl() if cuda_toolkit else None
            config = host_config(machine_stacks(each), tools, machine_nodes(each), each,
                                 detected, machine_blas(each), cuda_archs, cuda_toolkit,
                                 nccl_library)
        except (described_system.DescriptionError, node.NodeDescriptionError) as err:
            if each == system:
                raise BootstrapError(str(err)) from None
            say(f'skipped {each}: {err}')
            continue
        write_host_yaml(config, paths.SPACK_ENVS_DIR / each / 'host.yaml')


def session_extras(system):
    """A run's provenance on `system` as ReFrame's --session-extras (`make run`'s and
    `hpcbench accept`'s): the project's and Spack's commits, the lock's hash and, where the
    suite runs here, which BLAS this machine's HPL is built with and since when (the user's
    change); RuntimeError in one sentence where a fact cannot be written."""
    facts = provenance.session_facts(str(paths.SPACK_ENVS_DIR / system))
    if system in machine_systems():
        facts = {**facts, **blas.choice_provenance()}
    try:
        return provenance.session_extras(facts)
    except ValueError as err:
        raise RuntimeError(str(err)) from None
