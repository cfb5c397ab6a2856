"""A GPU's power and clocks sampled during its calls (hpcbench.benchmarks.gpu_power), on the
real traces of an H200 node (cuBLAS DGEMM on zero-filled matrices) and an H100 node (DGEMM on
random data, copies), both 2026-11-26, and on broken copies of them."""
import datetime
import re

import pytest

from conftest import FIXTURES
from hpcbench.benchmarks import gpu_power

H200 = (FIXTURES / 'gpu' / 'h200' / 'power-during-dgemm.csv').read_text()
H100 = (FIXTURES / 'gpu' / 'h100' / 'power-during-probe.csv').read_text()


def test_zero_filled_matrices_ran_at_full_clock_far_below_the_power_limit():
    samples = gpu_power.parse_trace(H200)
    assert len(samples) == 30
    summary = gpu_power.window(samples)
    assert summary.power_median_w == pytest.approx(457.0, abs=0.1)
    assert summary.sm_clock_min_hz == summary.sm_clock_max_hz == 1980e6
    assert summary.reasons == () and summary.limited_by == ()


def test_random_data_ran_at_the_power_limit_with_the_clock_held_down_and_says_why():
    samples = gpu_power.parse_trace(H100)
    # The probe's DGEMM: from its idle start to the end of its power cap (copies follow).
    start, end = (gpu_power.parse_stamp(t) for t in ('2026/11/26 11:22:24.339',
                                                     '2026/11/26 11:22:31.000'))
    summary = gpu_power.window(gpu_power.during_calls(samples, start, end))
    assert (summary.samples, summary.power_median_w) == (32, pytest.approx(697.7, abs=0.1))
    assert summary.sm_clock_min_hz == 1395e6 and summary.limited_by == ('sw_power_cap',)
    # The whole trace has the idle GPU before and after too.
    assert gpu_power.window(samples).reasons == ('gpu_idle', 'sw_power_cap')
    # The H200 node's own DGEMM on random data (its README): 53.8 TFLOP/s at 699 W.
    assert gpu_power.gflops_per_watt(53.8e12, 699) == pytest.approx(77.0, abs=0.1)


def test_a_window_takes_the_samples_of_the_calls_only():
    samples = gpu_power.parse_trace(H100)
    start, end = samples[10].time, samples[12].time
    assert gpu_power.window(samples, start, end).samples == 3
    with pytest.raises(gpu_power.TraceError, match=r'no sample from .* \(sample more often\)'):
        gpu_power.window(samples, end, start)


def test_the_rank_s_sampler_asks_for_what_the_parser_reads(tmp_path):
    """The rank wrapper a GPU job runs (hpcbench.core.gpu_ranks), told to sample as
    GpuDgemmCheck tells it, starts nvidia-smi with the fields the parser reads; a stand-in
    that writes the H100 node's recorded trace where it is told gives a trace the parser
    reads whole."""
    import os
    import subprocess
    from hpcbench.core import gpu_ranks
    tools = tmp_path / 'bin'
    tools.mkdir()
    listing = FIXTURES / 'gpu' / 'nvidia-smi-list' / 'a100-mig-published.txt'
    (tools / 'nvidia-smi').write_text(
        f'#!/bin/sh\n[ "$1" = -L ] && exec cat "{listing}"\necho "$@" > {tmp_path}/asked\n'
        'while [ $# -gt 1 ]; do [ "$1" = -f ] && cp '
        f'"{FIXTURES / "gpu" / "h100" / "power-during-probe.csv"}" "$2"; shift; done\n'
        'exec sleep 30\n')
    (tools / 'nvidia-smi').chmod(0o755)
    script = tmp_path / gpu_ranks.SCRIPT
    script.write_text(gpu_ranks.wrapper_script())
    done = subprocess.run(['sh', str(script), '--sample', ','.join(gpu_power.QUERY_FIELDS),
                           'true'], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={'PATH': f'{tools}:{os.environ["PATH"]}', 'SLURM_LOCALID': '0',
                               'SLURM_PROCID': '0', 'CUDA_VISIBLE_DEVICES': '0'})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / 'asked').read_text().split() == [
        '-i', '0', '--query-gpu=' + ','.join(gpu_power.QUERY_FIELDS), '--format=csv', '-lms',
        str(gpu_ranks.SAMPLE_MS), '-f', 'power-rank-0.csv']
    assert gpu_power.parse_trace((tmp_path / 'power-rank-0.csv').read_text()) == \
        gpu_power.parse_trace(H100)


def test_reasons_are_named_bit_by_bit_and_an_unknown_bit_by_its_value():
    assert gpu_power.reasons_of(0x45) == ['gpu_idle', 'sw_power_cap', 'hw_thermal_slowdown']
    assert gpu_power.reasons_of(0x1000) == ['0x1000']


def _broken(old, new):
    assert old in H200
    return H200.replace(old, new, 1)


@pytest.mark.parametrize('text, said', [
    ('', 'the trace is empty'),
    (_broken('power.draw [W], ', ''), 'nvidia-smi: no power.draw in its header'),
    (_broken('380.47 W', '[N/A]'), "line 2: power '[N/A]' is no number"),
    (_broken('0x0000000000000000', 'Not Active'), "line 2: clocks event reasons 'Not Active'"),
    (_broken('2026/11/26 05:20:33.313', 'soon'), "line 2: 'soon' is no time"),
    (_broken(', 44, 0x0000000000000000', ''), 'nvidia-smi: line 2 has 4 fields, the header 6'),
    # Issue 51, item 9: what no GPU draws, and units that are not watts.
    (_broken('380.47 W', '-380.47 W'), "line 2: power '-380.47 W' is no value a GPU has (from "
                                       "0 to 5000 W)"),
    (_broken('380.47 W', '99999999 W'), "line 2: power '99999999 W' is no value a GPU has"),
    (_broken('380.47 W', '380470 mW'), "line 2: power.draw '380470 mW' is not in its header's "
                                       "unit, W"),
    (_broken('380.47 W', '380.47 J'), "line 2: power.draw '380.47 J' is not in its header's "
                                      "unit, W"),
    (_broken('380.47 W', '3.8047e+02.1 W'), "line 2: power '3.8047e+02.1 W' is no number"),
])
def test_a_broken_trace_is_refused_naming_its_line(text, said):
    with pytest.raises(gpu_power.TraceError, match=re.escape(said)):
        gpu_power.parse_trace(text)


def test_a_power_in_scientific_notation_or_a_header_s_unit_is_read_as_watts():
    """`6.980e+02 W` was read as 7.0 W, a [kW] header as watts."""
    assert gpu_power.parse_trace(_broken('380.47 W', '3.8047e+02 W'))[0].power_w == 380.47
    kilowatts = H200.replace('power.draw [W]', 'power.draw [kW]')
    kilowatts = re.sub(r', (\d+\.\d+) W,', lambda m: f', {float(m.group(1)) / 1e3:.5f},',
                       kilowatts)
    first = gpu_power.parse_trace(kilowatts)[0]
    assert first.power_w == pytest.approx(380.47)


def test_a_gpu_that_drew_no_power_is_one_message():
    with pytest.raises(gpu_power.TraceError, match=r'a power of 0 W during the calls'):
        gpu_power.gflops_per_watt(53.8e12, 0.0)


def test_samples_come_in_time_order():
    lines = H200.splitlines()
    shuffled = '\n'.join([lines[0], *reversed(lines[1:])]) + '\n'
    times = [s.time for s in gpu_power.parse_trace(shuffled)]
    assert times == sorted(times) and times[0] == datetime.datetime(2026, 11, 26, 5, 20, 33, 313000)


def test_calls_shorter_than_the_sampling_interval_are_covered_by_the_samples_around_them():
    samples = gpu_power.parse_trace(H100)
    start = samples[10].time + datetime.timedelta(milliseconds=50)
    end = start + datetime.timedelta(milliseconds=60)
    assert gpu_power.during_calls(samples, start, end) == []
    with pytest.raises(gpu_power.TraceError, match=r'the sampler missed more than 20 % of'):
        gpu_power.during_calls(samples[::3], samples[10].time, samples[40].time)
