"""The CUDA toolkit GPU programs are built with (hpcbench.stack.cuda): which architectures,
the site's toolkit or NVIDIA's wheels laid out as one, bounded by the node's driver; and the
GPU programs built by the pinned Spack with it, on this machine that has no GPU."""
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from hpcbench.benchmarks import osu
from hpcbench.core import accelerators, node
from hpcbench.stack import bootstrap, cuda, machine_systems, mpi_stacks, spack

from conftest import FIXTURES, ROOT

H200 = accelerators.from_query_csv((FIXTURES / 'gpu/h200/nvidia-smi-query.csv').read_text())


def test_the_programs_are_built_for_the_node_s_gpus_or_the_architectures_asked():
    assert cuda.build_archs(H200, {}) == ['90']
    assert cuda.build_archs([], {}) == []
    assert cuda.build_archs([], {cuda.ARCH_VARIABLE: '90, 80'}) == ['80', '90']
    with pytest.raises(cuda.CudaError, match=r"HPCBENCH_CUDA_ARCH='sm_90': .* e\.g\. 90"):
        cuda.build_archs(H200, {cuda.ARCH_VARIABLE: 'sm_90'})


def test_no_gpu_and_no_architecture_asked_installs_no_toolkit_and_builds_nothing(monkeypatch):
    monkeypatch.delenv(cuda.ARCH_VARIABLE, raising=False)
    monkeypatch.setattr(cuda, 'toolkit', lambda *a, **k: pytest.fail('toolkit installed'))
    assert machine_systems.gpu_build([]) == ([], None)


def test_host_yaml_gives_spack_the_toolkit_and_the_gpu_programs_for_each_architecture():
    small = node.Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=1 << 20,
                      memory_bytes=8 << 30, clock_hz=2.6e9, flops_per_cycle=32)
    toolkit = cuda.Toolkit(Path('/opt/cuda'), '13.0.88', 'CUDA_HOME')
    config = machine_systems.host_config([], {}, [small], 'local', cuda_archs=['80', '90'],
                                   cuda_toolkit=toolkit)
    assert config['packages']['cuda'] == {
        'externals': [{'spec': 'cuda@13.0.88', 'prefix': '/opt/cuda'}], 'buildable': False}
    assert config['definitions'][-1] == {'gpu_specs': [
        'babelstream +cuda cuda_arch=80', 'dgemm-rate +cuda cuda_arch=80',
        'host-device-bandwidth +cuda cuda_arch=80', 'babelstream +cuda cuda_arch=90',
        'dgemm-rate +cuda cuda_arch=90', 'host-device-bandwidth +cuda cuda_arch=90']}
    # No NCCL: no nccl-tests; the other GPU programs are built.
    assert 'nccl' not in config['packages']
    assert config['definitions'][-2] == {'gpu_mpi_specs': []}
    without = machine_systems.host_config([], {}, [small], 'local')
    assert 'cuda' not in without['packages']
    assert without['definitions'][-1] == {'gpu_specs': []}


def test_nccl_tests_are_built_on_the_first_mpi_stack_over_the_nccl_found():
    from hpcbench.stack import mpi_stacks, nccl
    small = node.Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=1 << 20,
                      memory_bytes=8 << 30, clock_hz=2.6e9, flops_per_cycle=32)
    toolkit = cuda.Toolkit(Path('/opt/cuda'), '13.0.88', 'CUDA_HOME')
    library = nccl.Nccl(Path('/opt/nccl'), '2.32.3', 'NCCL_HOME')

    class Stack(mpi_stacks.MpiStack):
        def version(self):
            return '5.0.0'

    stacks = [Stack('openmpi', 'openmpi', '', Path('/p'), Path('/p/bin')),
              Stack('mpich', 'mpich', '', Path('/q'), Path('/q/bin'))]
    config = machine_systems.host_config(stacks, {}, [small], 'local', cuda_archs=['90'],
                                         cuda_toolkit=toolkit, nccl_library=library)
    assert config['packages']['nccl'] == {
        'externals': [{'spec': 'nccl@2.32.3', 'prefix': '/opt/nccl'}], 'buildable': False}
    assert config['definitions'][-2] == {
        'gpu_mpi_specs': ['nccl-tests@2.16.3 +mpi cuda_arch=90 ^openmpi']}


def test_the_h200_s_driver_runs_cuda_13_0_and_an_older_driver_does_not():
    assert cuda.driver_supports(H200[0].driver_version, '13.0')       # 580.159.04
    assert not cuda.driver_supports('575.57.08', '13.0')
    assert cuda.driver_supports('575.57.08', '12.9')
    assert cuda.driver_supports('500.1', '99.9')        # not in the table: the node judges


def _fake_nvcc(prefix, version='13.0.88'):
    nvcc = prefix / 'bin' / 'nvcc'
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text('#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver"\n'
                    f'echo "Cuda compilation tools, release {version[:4]}, V{version}"\n')
    nvcc.chmod(0o755)
    return prefix


def test_the_site_s_toolkit_comes_first_and_is_given_to_spack_as_its_own(tmp_path):
    site = _fake_nvcc(tmp_path / 'cuda-12.8', '12.8.93')
    found = cuda.site_toolkit({'CUDA_HOME': str(site)})
    assert (found.version, found.minor, found.source) == ('12.8.93', '12.8', 'CUDA_HOME')
    assert found.spack_external() == {'spec': 'cuda@12.8.93', 'prefix': str(site)}
    on_path = cuda.site_toolkit({'PATH': str(site / 'bin')}, locations=())
    assert (on_path.prefix, on_path.source) == (site, 'nvcc on PATH')
    assert cuda.site_toolkit({'PATH': str(tmp_path)}, locations=()) is None


def test_a_cuda_home_without_nvcc_is_one_message(tmp_path):
    with pytest.raises(cuda.CudaError, match=rf'^CUDA_HOME={tmp_path}: no working .*/bin/nvcc$'):
        cuda.site_toolkit({'CUDA_HOME': str(tmp_path)})


def test_a_toolkit_newer_than_the_driver_is_refused_saying_what_to_set(tmp_path):
    site = _fake_nvcc(tmp_path / 'cuda', '13.0.88')
    environ = {'CUDA_HOME': str(site)}
    assert cuda.toolkit('580.159.04', environ).version == '13.0.88'
    with pytest.raises(cuda.CudaError, match=r'CUDA 13\.0\.88 toolkit .* newer than the GPU '
                                             r'driver 575\.57\.08 supports .*580\.65\.06.*'
                                             r'set CUDA_HOME'):
        cuda.toolkit('575.57.08', environ)
    with pytest.raises(cuda.CudaError, match=r'driver 575\.57\.08 is older than CUDA 13\.0 '
                                             r'needs .* set CUDA_HOME'):
        cuda.toolkit('575.57.08', {'PATH': str(tmp_path / 'none')})


def _wheel(path, files):
    """A wheel of `files` ({name: (text, mode)}) under the toolkit's tree."""
    with zipfile.ZipFile(path, 'w') as archive:
        for name, (text, mode) in files.items():
            info = zipfile.ZipInfo(cuda.WHEEL_TREE + name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, text)
        archive.writestr('nvidia_cuda_nvcc-13.0.88.dist-info/METADATA', 'Name: x\n')
    return path


def test_the_wheels_are_laid_out_as_an_installed_toolkit(tmp_path):
    wheels = [_wheel(tmp_path / 'nvcc.whl', {'bin/nvcc': ('#!/bin/sh\n', 0o755),
                                              'include/cuda.h': ('', 0o644)}),
              _wheel(tmp_path / 'cublas.whl', {'lib/libcublas.so.13': ('', 0o644)})]
    prefix = tmp_path / 'cache' / 'cuda' / '13.0.88'
    cuda.lay_out(wheels, prefix)
    assert os.access(prefix / 'bin' / 'nvcc', os.X_OK)
    assert (prefix / 'include' / 'cuda.h').is_file()
    assert os.readlink(prefix / 'lib64') == 'lib'
    assert os.readlink(prefix / 'lib' / 'libcublas.so') == 'libcublas.so.13'
    assert not (prefix / 'nvidia_cuda_nvcc-13.0.88.dist-info').exists()
    assert stat.S_IMODE(prefix.stat().st_mode) == 0o755
    assert sorted(p.name for p in prefix.parent.iterdir()) == ['13.0.88']


def test_wheels_without_nvcc_are_refused_and_leave_nothing(tmp_path):
    wheels = [_wheel(tmp_path / 'cublas.whl', {'lib/libcublas.so.13': ('', 0o644)})]
    with pytest.raises(cuda.CudaError, match=r'hold no nvidia/cu13/bin/nvcc'):
        cuda.lay_out(wheels, tmp_path / 'cache' / '13.0.88')
    assert list((tmp_path / 'cache').iterdir()) == []


def test_a_bad_command_is_one_usage_line():
    proc = subprocess.run([sys.executable, '-m', 'hpcbench.stack.cuda', 'remove'],
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (2, '')
    assert proc.stderr == 'usage: python -m hpcbench.stack.cuda [describe|install]\n'


@pytest.mark.spack
def test_the_gpu_programs_build_with_the_pinned_spack_on_a_machine_without_a_gpu():
    """The toolkit from the wheels (downloaded once into the per-user cache), then Spack builds
    BabelStream, dgemm-rate +cuda and host-device-bandwidth for sm_90, nccl-tests on Open MPI
    over NCCL's wheel, and OSU 7.3 +cuda (our recipe: CUDA 13) on Open MPI, linked against
    Debian's libcuda1, in an environment of their own beside the machine's (the same install
    tree: built once). Each program is there, holds sm_90 code, and here, without a driver,
    stops with one message."""
    from hpcbench.stack import nccl
    found = bootstrap.bootstrap()       # this machine's externals (host.yaml)
    toolkit = cuda.wheels_toolkit()
    assert toolkit.version == cuda.WHEELS['nvidia-cuda-nvcc']
    cuda.add_driver_link_library(toolkit.prefix)
    library = nccl.library()
    env = ROOT / 'var' / 'gpu-programs-build'   # $env/../.. is the checkout, as for local
    env.mkdir(parents=True, exist_ok=True)
    (env / 'spack.yaml').write_text(yaml.safe_dump({'spack': {
        'include': [{'path': str(ROOT / 'spack-envs' / 'this-machine.yaml')},
                    {'path': str(ROOT / 'spack-envs' / 'local' / 'host.yaml')}],
        'packages': {'cuda': {'externals': [toolkit.spack_external()], 'buildable': False},
                     'nccl': {'externals': [library.spack_external()], 'buildable': False}},
        'specs': [*machine_systems.gpu_specs(['90']),
                  *machine_systems.gpu_mpi_specs(['90'], 'openmpi', ['openmpi'])],
        'view': False}}))
    # As the set-up concretizes a machine's environment: without what it never builds.
    bootstrap.concretize(found, env)
    bootstrap.run_spack(found, '-e', str(env), 'install', '--fail-fast', quiet=True)
    programs = {}
    for spec, program in zip([*machine_systems.gpu_specs(['90']),
                              *machine_systems.gpu_mpi_specs(['90'], 'openmpi', ['openmpi'])],
                             ('cuda-stream', 'dgemm-rate-cuda', 'host-device-bandwidth',
                              'all_reduce_perf', 'osu_bw')):
        located = subprocess.run([str(found.executable), '-e', str(env), 'location', '-i', spec],
                                 capture_output=True, text=True,
                                 env={**os.environ, **spack.isolated_environment(found)},
                                 check=True)
        directory = osu.program_directory(program) if program == 'osu_bw' else 'bin'
        programs[program] = Path(located.stdout.strip()) / directory / program
    for program, path in programs.items():
        assert b'sm_90' in path.read_bytes(), f'{program} holds no sm_90 code'
        if program == 'osu_bw':
            # It links the driver's library (-lcuda, from Debian's libcuda1 here): without a
            # driver it does not start (tests/fixtures/gpu/osu/osu_bw-cuda-no-driver.out).
            run = subprocess.run([str(path)], capture_output=True, text=True, timeout=60)
            assert run.returncode != 0
            assert 'libcuda.so.1: cannot open shared object file' in run.stderr, run.stderr
            continue
        if program == 'all_reduce_perf':
            # An MPI program: one rank, as a singleton; its failure is one line of its own
            # among its header's (tests/fixtures/gpu/nccl/all-reduce-no-driver.out).
            run = subprocess.run([str(path), '-b', '8', '-e', '8'], capture_output=True,
                                 text=True, timeout=60,
                                 env={**os.environ, **mpi_stacks.OPEN_MPI_AS_ROOT})
            assert run.returncode != 0
            assert "Test CUDA failure common.cu:1030 'CUDA driver version is insufficient" \
                in run.stdout + run.stderr, (program, run.stdout, run.stderr)
            continue
        run = subprocess.run([str(path), *(['--list'] if program == 'cuda-stream' else ['8', '1'])],
                             capture_output=True, text=True, timeout=60)
        said = (run.stdout + run.stderr).strip().splitlines()
        assert run.returncode != 0 and len(said) == 1, (program, said)
        assert 'CUDA driver version is insufficient' in said[0], (program, said)


def test_an_offline_bundle_carries_the_wheels_only_where_the_environment_builds_with_them(
        tmp_path, monkeypatch):
    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    host_yaml = tmp_path / 'host.yaml'
    host_yaml.write_text(yaml.safe_dump({'packages': {'cuda': {'externals': [
        {'spec': 'cuda@13.0.88', 'prefix': str(cuda.wheels_prefix())}]}}}))
    assert cuda.environment_uses_wheels(host_yaml)
    host_yaml.write_text(yaml.safe_dump({'packages': {'cuda': {'externals': [
        {'spec': 'cuda@12.8.93', 'prefix': '/usr/local/cuda-12.8'}]}}}))
    assert not cuda.environment_uses_wheels(host_yaml)
    assert not cuda.environment_uses_wheels(tmp_path / 'none.yaml')
    assert cuda.REQUIREMENTS[0] == 'nvidia-cuda-nvcc==13.0.88' and '--no-deps' in cuda.PIP_OPTIONS
