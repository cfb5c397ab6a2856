"""HPCC's input and summary, and the DGEMM ceiling's output: real outputs captured here and
broken copies of them."""
import re

import pytest

from hpcbench.benchmarks import dgemm, hpcc, hpl, hpl_input_file
from conftest import FIXTURES

HPCC_OUTPUT = FIXTURES / 'hpcc' / 'debian-openmpi-2-ranks.hpccoutf.txt'
DGEMM_OUTPUT = FIXTURES / 'dgemm' / 'local-2-cores.out'


def test_hpccinf_is_hpl_dat_plus_ptrans_lines():
    inputs = hpl.Inputs(ns=(2304,), grids=((1, 2),))
    lines = hpcc.hpccinf(inputs).splitlines()
    assert lines[:31] == hpl_input_file.hpl_dat(inputs, device_out=8).splitlines()
    assert lines[31].startswith('##### This line (no. 32) is ignored')
    assert len(lines) == 36


def test_hpccinf_refuses_several_hpl_runs():
    with pytest.raises(hpl.HplInputError, match='HPCC runs one HPL'):
        hpcc.hpccinf(hpl.Inputs(ns=(2304, 2304), grids=((1, 2),)))


def test_parse_reads_the_summary_of_a_real_run():
    figures = hpcc.parse(HPCC_OUTPUT.read_text(), ranks=2)
    assert figures == {
        'hpl': 0.0639047, 'star_dgemm': 50.5162, 'star_stream_triad': 63.9967,
        'pingpong_latency': 0.355389, 'pingpong_bandwidth': 13.5571,
        'random_ring_latency': 0.275446, 'random_ring_bandwidth': 13.2717,
    }


def test_crlf_line_endings_are_read():
    # hpccoutf.txt copied through a Windows share: every line ends in CRLF.
    text = HPCC_OUTPUT.read_text()
    assert hpcc.parse(text.replace('\n', '\r\n'), ranks=2) == hpcc.parse(text, ranks=2)


def test_one_process_has_no_communication_figures():
    text = HPCC_OUTPUT.read_text().replace('CommWorldProcs=2', 'CommWorldProcs=1')
    assert set(hpcc.parse(text, ranks=1)) == {'hpl', 'star_dgemm', 'star_stream_triad'}


def _hpcc_mutations(real):
    return {
        'Success=0': real.replace('Success=1', 'Success=0'),
        'summary cut short': real[:real.index('StarSTREAM_Triad=')],
        'HPL residual FAILED': real.replace('...... PASSED', '...... FAILED'),
        'HPL result missing': re.sub(r'(?m)^WR\w+.*\n', '', real),
        'other process count': real.replace('CommWorldProcs=2', 'CommWorldProcs=4'),
        'StarDGEMM missing': re.sub(r'(?m)^StarDGEMM_Gflops=.*\n', '', real),
        'triad nan': re.sub(r'(?m)^StarSTREAM_Triad=.*$', 'StarSTREAM_Triad=nan', real),
        'latency negative': re.sub(r'(?m)^AvgPingPongLatency_usec=.*$',
                                   'AvgPingPongLatency_usec=-1', real),
    }


HPCC_MUTATIONS = list(_hpcc_mutations(HPCC_OUTPUT.read_text()))


@pytest.mark.parametrize('mutation', HPCC_MUTATIONS)
def test_parse_rejects_a_broken_real_hpcc_output(mutation):
    with pytest.raises(hpcc.HpccOutputError):
        hpcc.parse(_hpcc_mutations(HPCC_OUTPUT.read_text())[mutation], ranks=2)


def test_dgemm_order_takes_about_a_second_at_peak_within_memory():
    peak = 2 * 2.596e9 * 32
    n = dgemm.matrix_order(peak, 24 << 30)
    assert n % 256 == 0 and 2 * n ** 3 <= peak * 1.0 < 2 * (n + 256) ** 3
    assert dgemm.matrix_order(peak * 1000, 1 << 30) <= (0.05 * (1 << 30) / 24) ** 0.5
    assert dgemm.matrix_order(1e6, 1 << 30) == 256


def test_dgemm_parse_reads_a_real_run():
    result = dgemm.parse(DGEMM_OUTPUT.read_text(), expected_repeats=5)
    assert result.order == 4352 and len(result.rates) == 5
    assert result.best == 108.862 and result.mean == pytest.approx(108.283, abs=1e-3)
    assert result.median == 108.058


def _dgemm_mutations(real):
    return {
        'not verified': real.replace('Result verified', 'Result WRONG'),
        'cut short': real[:real.rindex('repeat ')],
        'no header': real[real.index('\n') + 1:],
        'rate nan': re.sub(r'(?m)^(repeat 1: \S+ s )\S+', r'\g<1>nan', real),
    }


@pytest.mark.parametrize('mutation', list(_dgemm_mutations(DGEMM_OUTPUT.read_text())))
def test_dgemm_parse_rejects_a_broken_real_output(mutation):
    with pytest.raises(dgemm.DgemmOutputError):
        dgemm.parse(_dgemm_mutations(DGEMM_OUTPUT.read_text())[mutation], 5)


def test_a_gpu_s_dgemm_is_sized_from_its_datasheet_peak_and_memory():
    """The H200 (67 TFLOP/s with tensor cores, 141 GB): three matrices of order 17664 in 5 %
    of its memory, 0.16 s a call at peak, 122 calls for 20 s; at 1 GFLOP/s, 0.9 s a call."""
    assert dgemm.gpu_plan(67e12, 143771 << 20) == (17664, 122)
    assert dgemm.gpu_plan(1e9, 1 << 30) == (768, 23)
    assert dgemm.cuda_spack_spec('90') == 'dgemm-rate +cuda cuda_arch=90'
