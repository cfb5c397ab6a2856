"""The node's ceilings (hpcbench.benchmarks.ceilings): kernels by flop/cycle, the job's
script, and the parser on a real likwid-bench job output (NodeCeilings on this machine) and
broken copies."""
import re
import subprocess

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import ceilings, stream
from hpcbench.machine import host

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


# STREAM's all-core job (StreamCheck, stores=compiled) of this machine: five rounds of the two
# likwid-bench triads, then both STREAM programs.
ROUNDS = (FIXTURES / 'stream' / 'local-2-threads-compiled-5-rounds.out').read_text()
ROUND_KERNELS = ['stream_avx512_fma', 'stream_mem_avx512']
ROUND_PROGRAMS = ['stream_nontemporal_c.exe', 'stream_c.exe']


def test_a_round_robin_script_runs_stream_programs_beside_kernels():
    script = ceilings.round_robin_script(
        [('stream_mem_avx512', ceilings.likwid_command('stream_mem_avx512', '393216kB', 2)),
         ('stream_c.exe', "'/opt/my stream/bin/stream_c.exe'")], 2)
    assert script == (
        '#!/bin/sh\nset -e\n'
        f'echo {ceilings.MARKER} stream_mem_avx512 1\n'
        'likwid-bench -t stream_mem_avx512 -W N:393216kB:2 -i 20\n'
        f"echo {ceilings.MARKER} stream_c.exe 1\n'/opt/my stream/bin/stream_c.exe'\n"
        f'echo {ceilings.MARKER} stream_mem_avx512 2\n'
        'likwid-bench -t stream_mem_avx512 -W N:393216kB:2 -i 20\n'
        f"echo {ceilings.MARKER} stream_c.exe 2\n'/opt/my stream/bin/stream_c.exe'\n")


def test_a_real_job_of_rounds_gives_each_runs_mean_rate_by_round():
    rounds = ceilings.parse_rounds(ROUNDS, ROUND_KERNELS, ROUND_PROGRAMS, 2, 5)
    assert [round(r.mean_mbps['stream_mem_avx512']) for r in rounds] == \
        [43457, 44344, 44988, 43181, 35751]
    # A STREAM program's rate is its triad's over the average time (not its best).
    first = rounds[0].streams['stream_c.exe']
    assert first.best_rate_mbps['Triad'] == 46186.3
    assert rounds[0].mean_mbps['stream_c.exe'] == first.mean_rate_mbps['Triad']
    assert round(rounds[0].mean_mbps['stream_c.exe']) == 43120


def test_a_ratio_is_taken_against_the_fastest_ceiling_run_of_the_same_round():
    """Round 1 came in a fast phase of the node's memory (the compiled triad at 97.4 % of the
    bandwidth ceiling, where write-allocate reads cap it near 75 %); the median is not
    moved by it. A run that is its own ceiling is exactly 100 %."""
    rounds = ceilings.parse_rounds(ROUNDS, ROUND_KERNELS, ROUND_PROGRAMS, 2, 5)
    bandwidth = ceilings.percent_of_fastest(rounds, 'stream_c.exe',
                                            ['stream_mem_avx512', 'stream_nontemporal_c.exe'])
    assert [round(p, 1) for p in bandwidth] == [97.4, 64.7, 61.5, 59.2, 65.4]
    cached_store = ceilings.percent_of_fastest(rounds, 'stream_c.exe',
                                               ['stream_avx512_fma', 'stream_c.exe'])
    assert [round(p, 1) for p in cached_store] == [100.0, 68.7, 89.6, 84.6, 100.0]
    assert cached_store[0] == 100.0


def _round_mutations(text):
    fifth = text.index(f'{ceilings.MARKER} stream_c.exe 5')
    third_kernel = text.index(f'{ceilings.MARKER} stream_mem_avx512 3\n')
    third_kernel_end = text.index(f'{ceilings.MARKER}', third_kernel + 1)
    return {
        'cut in the last STREAM': text[:text.index('Triad:', fifth)],
        'a kernel refused in round 3': text[:third_kernel] + f'{ceilings.MARKER} '
        'stream_mem_avx512 3\nUnknown test case stream_mem_avx512\n' + text[third_kernel_end:],
        'a STREAM failed its validation': text.replace(
            'Solution Validates: avg error less than 1.000000e-13 on all three arrays',
            'Failed Validation on array c[], AvgRelAbsErr > epsilon (1.000000e-13)', 1),
        'a round more': text + text[fifth:].replace('stream_c.exe 5', 'stream_c.exe 6'),
        'a run twice in one round': text.replace(f'{ceilings.MARKER} stream_c.exe 2',
                                                 f'{ceilings.MARKER} stream_c.exe 3'),
    }


ROUND_MUTATIONS = list(_round_mutations(ROUNDS))


@pytest.mark.parametrize('mutation, message', [
    ('cut in the last STREAM', 'no result for Triad'),
    ('a kernel refused in round 3', r'likwid-bench stream_mem_avx512: no MFlops/s in its '
                                    r'output \(Unknown test case'),
    ('a STREAM failed its validation', 'STREAM failed its validation'),
    ('a round more', 'stream_c.exe: 6 of 5 runs'),
    ('a run twice in one round', 'stream_c.exe ran twice in round 3')])
def test_a_broken_real_job_of_rounds_is_refused(mutation, message):
    broken = _round_mutations(ROUNDS)[mutation]
    assert broken != ROUNDS
    with pytest.raises((ceilings.CeilingOutputError, stream.StreamOutputError), match=message):
        ceilings.parse_rounds(broken, ROUND_KERNELS, ROUND_PROGRAMS, 2, 5)


def test_a_job_of_rounds_with_the_wrong_thread_count_is_refused():
    with pytest.raises(stream.StreamOutputError, match='2 OpenMP threads ran, 1 expected'):
        ceilings.parse_rounds(ROUNDS, ROUND_KERNELS, ROUND_PROGRAMS, 1, 5)
