"""OSU Micro-Benchmarks 7.3 outputs (hpcbench.benchmarks.osu) read back, and refused when a
program failed, measured other buffers than asked or a row failed validation.

The outputs are real runs on this machine (tests/fixtures/gpu/osu, its README): host buffers
on Open MPI, the crash with Intel MPI, the `+cuda` build without a driver. A GPU run prints
the same columns under OSU's CUDA header and its buffer line: `_on_device` gives a host run
those two lines (OSU's print_header) where it stands for one."""
import re

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import osu

OSU = FIXTURES / 'gpu' / 'osu'
MAX = 4194304


def _text(name):
    return (OSU / name).read_text()


def _on_device(text, pair=True):
    text = text.replace('# OSU MPI ', '# OSU MPI-CUDA ', 1)
    if pair:
        first, rest = text.split('\n', 1)
        text = (f'{first}\n# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)\n'
                f'{rest}')
    return text


def test_the_options_put_both_buffers_on_the_gpu_and_validate():
    assert osu.command_options('osu_bw') == ['-m', f'1:{64 << 20}', '-c', '-d', 'cuda', 'D',
                                             'D']
    assert osu.command_options('osu_allreduce', 1024) == ['-m', '4:1024', '-c', '-d', 'cuda']
    assert osu.program_directory('osu_bw') == 'libexec/osu-micro-benchmarks/mpi/pt2pt'
    assert osu.spack_spec('90') == 'osu-micro-benchmarks@7.3 +cuda cuda_arch=90'


@pytest.mark.parametrize('program', ['osu_latency', 'osu_bw', 'osu_bibw'])
def test_each_pair_program_s_real_run(program):
    run = osu.parse(_text(f'{program}-host-buffers.out'), program, device=False, max_bytes=MAX)
    assert [size for size, _ in run.rows] == osu.sizes(program, MAX)
    size, value = run.best()
    if program == 'osu_latency':
        assert run.unit == 'us' and value == min(v for _, v in run.rows)
    else:
        assert run.unit == 'MB/s' and value == max(v for _, v in run.rows)


def test_the_allreduce_s_real_run_from_4_bytes():
    run = osu.parse(_text('osu_allreduce-host-buffers.out'), 'osu_allreduce', device=False,
                    max_bytes=MAX)
    assert run.rows[0] == (4, 0.38) and run.at(8) == 0.24
    assert run.rows[-1] == (4194304, 1085.13)


def test_a_gpu_run_s_header_and_buffers_are_read():
    text = _on_device(_text('osu_bw-host-buffers.out'))
    assert osu.parse(text, 'osu_bw', max_bytes=MAX).rows[0] == (1, 16.65)
    with pytest.raises(osu.OsuError, match='buffers on the host, device buffers asked'):
        osu.parse(_text('osu_bw-host-buffers.out'), 'osu_bw', max_bytes=MAX)
    host_side = text.replace('Receive Buffer on DEVICE (D)', 'Receive Buffer on HOST (H)')
    with pytest.raises(osu.OsuError, match='send and receive buffers DEVICE and HOST, DEVICE '
                                           'and DEVICE asked'):
        osu.parse(host_side, 'osu_bw', max_bytes=MAX)


@pytest.mark.parametrize('name, said', [
    ('osu_bw-intel-mpi-crash.out', 'osu_bw failed: ===== BAD TERMINATION'),
    ('osu_bw-cuda-no-driver.out', 'error while loading shared libraries: libcuda.so.1'),
])
def test_a_crash_or_a_missing_driver_is_one_message(name, said):
    with pytest.raises(osu.OsuError) as err:
        osu.parse(_text(name), 'osu_bw', max_bytes=MAX)
    assert said.replace('=====', '') in str(err.value).replace('=', '')


def _broken(name, old, new):
    text = _text(name)
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize('text, program, said', [
    (_broken('osu_bw-host-buffers.out', '16.65              Pass',
             '16.65              Fail'), 'osu_bw', 'osu_bw size 1: validation failed'),
    (_broken('osu_latency-host-buffers.out', '4194304', '4194300'), 'osu_latency',
     'sizes 4194304 missing of 1 to 4194304'),
    (_text('osu_bw-host-buffers.out'), 'osu_latency', "no column 'Latency (us)'"),
    (_broken('osu_bw-host-buffers.out', 'v7.3', 'v7.4'), 'osu_bw', 'OSU 7.4 (MPI), 7.3 asked'),
    ('', 'osu_bw', 'no OSU header'),
])
def test_a_broken_run_is_one_message(text, program, said):
    with pytest.raises(osu.OsuError, match=re.escape(said)):
        osu.parse(text, program, device=False, max_bytes=MAX)


def test_another_site_s_osu_7_5_is_refused_for_its_version():
    """A real OSU 7.5 run of another site (CSCS, GH200 nodes, device buffers): this suite
    builds and reads 7.3, and 7.5 no longer says which buffers it sent from."""
    text = (FIXTURES / 'gpu' / 'osu' / 'osu_bibw-cuda-7.5-cscs.out').read_text()
    with pytest.raises(osu.OsuError, match=r'^OSU 7.5 \(MPI-CUDA\), 7.3 asked$'):
        osu.parse(text, 'osu_bibw', max_bytes=1 << 22)


@pytest.mark.parametrize('text, said', [
    # Issue 70, item 19: AMD's OSU 7.0 ROCm run (tests/fixtures/gpu/osu/README.md) was
    # refused as "did not start".
    ((FIXTURES / 'gpu' / 'osu' / 'osu_bw-rocm-7.0-amd-lab-notes.out').read_text(),
     r'^OSU 7.0 \(MPI-ROCM\), 7.3 asked$'),
    # Its version the suite's, its flavour another (a variation not seen).
    ((FIXTURES / 'gpu' / 'osu' / 'osu_bw-rocm-7.0-amd-lab-notes.out').read_text().replace(
        'v7.0', 'v7.3'), r'^OSU MPI-ROCM: this suite builds and reads MPI-CUDA and MPI'),
    ('# OSU MPI-LEVEL-ZERO Bandwidth Test v7.1\n', r'^OSU 7.1 \(MPI-LEVEL-ZERO\), 7.3 asked$'),
])
def test_an_osu_of_another_flavour_or_version_is_named_as_it_is(text, said):
    with pytest.raises(osu.OsuError, match=said):
        osu.parse(text, 'osu_bw', max_bytes=1 << 24)


@pytest.mark.parametrize('benchmark, path, pairs, figures', [
    ('osu_latency', 'intra-node', [(0, 1), (4, 7)], {'latency'}),
    ('osu_bw', 'intra-node', [(0, 1), (4, 7)],
     {'bandwidth', 'link_efficiency', 'slowest_pair_link_efficiency'}),
    ('osu_bw', 'inter-node', [(0, 0)], {'bandwidth'}),
    ('osu_bw', 'intra-node', [(0, 0)], {'bandwidth'}),
    ('osu_bibw', 'intra-node', [(0, 1)], {'bidirectional_bandwidth'}),
])
def test_each_osu_pair_program_reports_its_figure_and_the_link_s_where_it_applies(
        benchmark, path, pairs, figures):
    """Issue 62, item 4: OsuPairCheck adds the figure its program measures, and the link's
    where the pairs are joined by links of known rate (the published 8 x H100 node's NVLinks),
    rather than declaring every figure and deleting those that do not apply."""
    import types
    from conftest import check_classes_of
    from hpcbench.core import gpu_topology
    from hpcbench.stack import testbed_system
    check = check_classes_of('osu.py')['OsuPairCheck']
    test = types.SimpleNamespace(
        benchmark=benchmark, path=path, pairs=pairs, perf_variables={},
        topology_of_node=gpu_topology.parse(testbed_system.GPU_TOPOLOGY_FILE.read_text()),
        sheet={'nvlink': 'NVLink 4', 'nvlink_links': 18, 'nvlink_bandwidth': 450e9})
    for name in ('pair_figures', 'add_pair_figures', 'link_rates'):
        setattr(test, name, types.MethodType(getattr(check, name), test))
    test.add_pair_figures()
    assert set(test.perf_variables) == figures
    assert set(figures) <= set(osu.PAIR_VARIABLES)
