"""The node's ceilings (hpcbench.ceilings): kernels by flop/cycle, the job's script, and the
parser on a real likwid-bench job output (NodeCeilings on this machine) and broken copies."""
import re
import subprocess

import pytest

from conftest import FIXTURES
from hpcbench import ceilings, host, stream

OUTPUT = (FIXTURES / 'ceilings' / 'local-likwid.out').read_text()
AVX512 = ceilings.kernels(32)


def test_kernels_follow_the_cores_flops_per_cycle():
    assert tuple(AVX512) == ('peakflops_avx512_fma', 'stream_mem_avx512', 'load_avx512',
                             'stream_avx512_fma')
    assert ceilings.kernels(16).peak == 'peakflops_avx_fma'     # AVX2 with FMA
    assert ceilings.kernels(8).bandwidth == 'stream_mem_avx'    # Sandy Bridge
    assert ceilings.kernels(16).cached_store == 'stream_avx_fma'
    assert ceilings.kernels(4).peak == 'peakflops_sse'          # Opteron, Woodcrest


def test_working_sets_are_l1_for_the_peak_and_streams_arrays_for_bandwidth():
    # This VM as an AMD EPYC: 32 MiB of L3, 24 GiB: three arrays of 4 x 32 MiB, as STREAM's.
    sizes = ceilings.working_sets(AVX512, 2, 32 * 2**20, 24 * 2**30)
    assert sizes == {'peakflops_avx512_fma': '20kB', 'stream_mem_avx512': '393216kB',
                     'load_avx512': '393216kB', 'stream_avx512_fma': '393216kB'}
    assert 393216 * 1024 == 3 * stream.array_size(32 * 2**20, 24 * 2**30) * 8
    # As an Intel Xeon (480 MiB of L3, its host's), and a small node: a quarter of the memory.
    assert ceilings.working_sets(AVX512, 2, 480 * 2**20, 24 * 2**30)['load_avx512'] \
        == '5898240kB'
    assert ceilings.working_sets(AVX512, 2, 480 * 2**20, 4 * 2**30)['load_avx512'] == '1048576kB'


def test_the_script_runs_each_kernel_round_robin_after_a_marker():
    script = ceilings.script(AVX512, 2, ceilings.working_sets(AVX512, 2, 2**25, 2**34), 2)
    runs = re.findall(rf'^echo {ceilings.MARKER} (\S+) (\d)\n'
                      rf'likwid-bench -t \1 -W N:\d+kB:2 -i \d+$', script, re.M)
    assert runs == [(k, r) for r in '12' for k in AVX512]
    assert script.startswith('#!/bin/sh\nset -e\n')


def test_a_real_output_gives_every_run():
    result = ceilings.parse(OUTPUT, AVX512, 5)
    assert len(result.runs) == 20
    assert len(result.peak_gflops) == len(result.bandwidth_mbps) == len(result.read_mbps) \
        == len(result.cached_store_mbps) == 5
    # Sustained peak within sight of nominal Rpeak (2 x 2.596 GHz x 32 = 166 GFLOP/s).
    assert 50 < max(result.peak_gflops) < 200
    assert max(result.read_mbps) > 1000 and max(result.bandwidth_mbps) > 1000
    # Ordinary stores spend a write-allocate read per line that the triad does not count:
    # here the best run of each is below the non-temporal ceiling.
    assert max(result.cached_store_mbps) < max(result.bandwidth_mbps)


def _drop_run(text):
    marker = f'{ceilings.MARKER} load_avx512 5'
    return text[:text.index(marker)]


MUTATIONS = {
    'a run missing (job cut short)': _drop_run,
    'a kernel refused': lambda t: re.sub(r'(hpcbench-kernel peakflops_avx512_fma 3\n)'
                                         r'(?:(?!hpcbench-kernel).*\n)*',
                                         r'\1Unknown test case peakflops_avx512_fma\n', t),
    'no rate printed': lambda t: t.replace('MByte/s:', 'MByte:', 1),
}


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_a_broken_real_output_is_refused(mutation):
    broken = MUTATIONS[mutation](OUTPUT)
    assert broken != OUTPUT
    with pytest.raises(ceilings.CeilingOutputError, match='likwid-bench'):
        ceilings.parse(broken, AVX512, 5)


def test_the_script_runs_for_real_when_likwid_is_here(tmp_path):
    """One run of each kernel on a small working set: what the parser reads is what this
    likwid-bench prints."""
    if subprocess.run(['sh', '-c', 'command -v likwid-bench'], capture_output=True).returncode:
        pytest.skip('likwid-bench is not installed (Debian package likwid)')
    here = ceilings.kernels(host.flops_per_cycle())
    script = tmp_path / ceilings.SCRIPT
    script.write_text(ceilings.script(here, 1, {k: '20kB' for k in here}, 1))
    out = subprocess.run(['sh', str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(ceilings.parse(out.stdout, here, 1).runs) == 4
