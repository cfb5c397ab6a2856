"""HPC Challenge: its input file (HPL.dat plus PTRANS lines, from hpcbench.benchmarks.hpl)
and its summary section.

The CHiC paper (§4) names HPCC as the remedy for HPL's single number: one run measures HPL,
DGEMM, STREAM, PTRANS, RandomAccess, FFT and the b_eff latency/bandwidth patterns.
"""
import math
import re

from hpcbench.benchmarks import hpl, hpl_input_file, hpl_output
from hpcbench.core.parsing import any_newlines
from hpcbench.benchmarks.reports import Reports

# Sizes of PTRANS beyond HPL's: none; PTRANS then runs at HPL's N / 2 and NB (HPCC's rule).
_PTRANS_LINES = (
    '##### This line (no. 32) is ignored (it serves as a separator). ######',
    '0                               Number of additional problem sizes for PTRANS',
    '0                               values of N',
    '0                               number of additional blocking sizes for PTRANS',
    '0                               values of NB',
)

# Quick mode's share of the node's memory for HPCC (hpcbench.rfm.run_modes.MODES): its
# RandomAccess tables, FFT vectors and DGEMM and STREAM operands all scale with it. At T2K's
# 1/25 (HPL's quick size) a case took 67-78 s here, 158 s on MVAPICH2, half of it or more in
# the two MPI RandomAccess runs, which this suite does not report; HplCheck measures HPL
# anyway.
QUICK_MEMORY_FRACTION = 0.01

# Summary keys the check reports, with what HPCC's summary calls them.
FIGURES = {
    'hpl': ('HPL_Tflops', 'TFLOP/s'),
    'star_dgemm': ('StarDGEMM_Gflops', 'GFLOP/s per process'),
    'star_stream_triad': ('StarSTREAM_Triad', 'GB/s per process'),
    'pingpong_latency': ('AvgPingPongLatency_usec', 'us'),
    'pingpong_bandwidth': ('AvgPingPongBandwidth_GBytes', 'GB/s'),
    'random_ring_latency': ('RandomlyOrderedRingLatency_usec', 'us'),
    'random_ring_bandwidth': ('RandomlyOrderedRingBandwidth_GBytes', 'GB/s'),
}
# HPCC's PingPong message sizes (b_eff): latency with 8-byte messages, bandwidth with
# 2,000,000-byte ones.
PINGPONG_LATENCY_BYTES, PINGPONG_BANDWIDTH_BYTES = 8, 2_000_000
# Pairs of processes are needed for these.
COMMUNICATION_FIGURES = ('pingpong_latency', 'pingpong_bandwidth', 'random_ring_latency',
                         'random_ring_bandwidth')
# HpccCheck's performance variables: the communication figures where it runs several ranks.
VARIABLES = ('hpl', 'hpl_efficiency', 'hpl_ceiling_efficiency', 'star_dgemm',
             'star_stream_triad') + COMMUNICATION_FIGURES


class HpccOutputError(ValueError):
    pass


def hpccinf(inputs):
    """hpccinf.txt: the HPL.dat of `inputs` (one N and grid: HPCC runs one HPL) and PTRANS."""
    if len(inputs.ns) != 1 or len(inputs.grids) != 1 or inputs.tuning.combinations != 1:
        raise hpl.HplInputError('HPCC runs one HPL: one N, one grid, one value per setting')

    return hpl_input_file.hpl_dat(inputs, device_out=8) + '\n'.join(_PTRANS_LINES) + '\n'


@any_newlines
def parse(output, ranks):
    """{summary key: value} of a complete, successful HPCC output (hpccoutf.txt).

    Raises HpccOutputError unless the summary section is complete, HPCC reports Success=1
    (no test failed its own verification), the HPL part passed its residual check, and
    every figure the check reports is a finite positive number.
    """
    section = re.search(r'^Begin of Summary section\.\n(.*?)^End of Summary section\.',
                        output, re.M | re.S)
    if not section:
        raise HpccOutputError('no complete summary section (run cut short?)')

    summary = dict(re.findall(r'^(\w+)=(\S*)$', section.group(1), re.M))
    if summary.get('Success') != '1':
        raise HpccOutputError(f'HPCC reports Success={summary.get("Success")!r}: one of its '
                              'tests failed its verification')

    if summary.get('CommWorldProcs') != str(ranks):
        raise HpccOutputError(f'HPCC ran on {summary.get("CommWorldProcs")} processes, '
                              f'{ranks} expected')

    try:
        hpl_output.parse(output, expected_results=1)
    except hpl_output.HplOutputError as err:
        raise HpccOutputError(f'HPL part: {err}') from None

    wanted = [k for k in FIGURES if ranks > 1 or k not in COMMUNICATION_FIGURES]
    figures = {}
    for name in wanted:
        key = FIGURES[name][0]
        try:
            value = float(summary[key])
        except (KeyError, ValueError):
            raise HpccOutputError(f'summary has no number for {key}') from None

        if not math.isfinite(value) or value <= 0:
            raise HpccOutputError(f'summary {key}={summary[key]} is not a positive number')

        figures[name] = value

    return figures

# What this module's checks report (hpcbench.benchmarks.reports).
REPORTS = {'HpccCheck': Reports('HPCC', VARIABLES, {
    v: '%' if v.endswith('efficiency') else 'us' if v.endswith('latency')
    else 'GB/s' if v.endswith(('bandwidth', 'triad')) else 'GFLOP/s' for v in VARIABLES})}
