"""Quick mode's HPL size, chosen in the job (`python -m hpcbench.benchmarks.hpl_quick_size
size`) from the DGEMM rate the job measured just before (hpcbench.benchmarks.dgemm verifies
it): among hpl.quick_sizes, the N where HPL's efficiency curve flattens at that rate if a
solve of it takes at most QUICK_SOLVE_SECONDS, else the largest N that does, written into
HPL.dat's Ns line. Standard library only: it runs on the node."""
import argparse
import math
import re
import sys

from hpcbench.benchmarks import dgemm
from hpcbench.benchmarks.hpl import QUICK_SOLVE_SECONDS, flop_count
from hpcbench.benchmarks.hpl_input_file import with_size


# Where HPL's efficiency curve flattens (issue 74). HPL's share of its DGEMM ceiling
# approaches its limit as E(N) = E_inf - A / N^2, A = QUICK_FLATTENING x the DGEMM rate
# (GFLOP/s): what a solve spends beside its N^3 arithmetic once per panel (N / NB of them)
# is a loss that shrinks as 1 / N^2 and grows with the rate, so that a faster BLAS needs a
# larger N for the same share. Fitted to HPL's curve (below: this form fitted it best, against A / N and A x DGEMM / bandwidth / N, the row swaps' and panels'
# memory traffic). Quick mode runs the smallest size within QUICK_FLAT_POINTS of E_inf,
# N >= sqrt(A / QUICK_FLAT_POINTS): a larger N costs time (N^3) and buys less than two
# runs of one N differ on a shared node; where that N does not fit the time budget, the
# largest that does, and the job says how far below E_inf the fitted curve puts it. Fitted
# on one process; a job of several nodes takes their summed rate (their panels' broadcasts
# add to the same per-panel term), which no measurement here has checked.
# Measured: HPL's curve on Zen 3 (2 cores, one process, NB 192, 2026-12-06,
# perf/hpl_efficiency.py --curve, N = 7872 to 23232, MKL 2025.3 and OpenBLAS 0.3.28, each N
# in a job of its own with its own DGEMM ceiling of 84 to 90 GFLOP/s, twice): one A / rate
# for both, 4.70e6, E_inf 95.1 and 95.2 %; medians by N 88.6, 92.0, 93.4, 94.7, 93.8 %
# (MKL) and 88.1, 92.3, 95.4, 94.4, 90.7 % (OpenBLAS); two runs of one N differed by 1.2 to
# 8.1 points (median 3.4).
QUICK_FLATTENING = 4.7e6
QUICK_FLAT_POINTS = 2.0


def flat_size(rate_flops, points=QUICK_FLAT_POINTS):
    """The N from which HPL's curve is within `points` of its limit at `rate_flops`."""
    return math.sqrt(QUICK_FLATTENING * rate_flops / 1e9 / points)


def size_for_rate(sizes, rate_flops, seconds=QUICK_SOLVE_SECONDS):
    """The smallest of `sizes` where HPL's curve is flat at `rate_flops` (flat_size) among
    those whose solve takes at most `seconds` at that rate; else the largest of those; else
    the smallest size (what the job computes from its DGEMM rate: size_in_job)."""
    fitting = [n for n in sizes if flop_count(n) / rate_flops <= seconds]
    flat = [n for n in fitting if n >= flat_size(rate_flops)]
    return min(flat) if flat else max(fitting) if fitting else min(sizes)


def curve_words(n, rate_flops, seconds):
    """Where N lies on HPL's curve at `rate_flops`, in words (the job prints them after its
    size): the suite's fitted curve, not one measured on this node, and said so."""
    flat = flat_size(rate_flops)
    where = (f'HPL\'s curve as the suite fitted it: within {QUICK_FLAT_POINTS:g} points of its '
             f'limit from N = {flat:.0f} at {rate_flops / 1e9:g} GFLOP/s')
    if n >= flat:
        return where
    below = QUICK_FLATTENING * rate_flops / 1e9 / n ** 2
    return (f'{where}, past the {seconds:g}-s budget: by that curve N = {n} is {below:.1f} '
            'points below its limit')


# The in-job sizing (quick mode): the DGEMM ceiling's output it reads, the line it prints.
DGEMM_OUTPUT = 'dgemm-rate.out'
SIZE_MARKER = 'hpl-size:'


def size_in_job(dgemm_output, hpl_dat, sizes, num_nodes, seconds=QUICK_SOLVE_SECONDS):
    """What HplCheck's job runs between its DGEMM ceiling and HPL (`python -m
    hpcbench.benchmarks.hpl_quick_size size ...`): the DGEMM rate from dgemm-rate's output
    (verified: hpcbench.benchmarks.dgemm.parse), times `num_nodes`, chooses N
    (size_for_rate), which replaces the Ns line of the HPL.dat text `hpl_dat`. Returns (the
    new HPL.dat, the line to print, with where N lies on HPL's curve: parse_size and
    parse_curve read it)."""
    rate = dgemm.parse(dgemm_output).best
    n = size_for_rate(sizes, num_nodes * rate * 1e9, seconds)
    return (with_size(hpl_dat, n),
            f'{SIZE_MARKER} N={n} for {seconds:g} s a solve at {rate:g} GFLOP/s a node (the DGEMM '
            f'ceiling) x {num_nodes} node(s); {curve_words(n, num_nodes * rate * 1e9, seconds)}')


def parse_size(output):
    """(N, seconds a solve, GFLOP/s a node) the job's sizing chose and printed; None when
    it did not run (an N given, or not quick mode)."""
    match = re.search(rf'^{re.escape(SIZE_MARKER)} N=(\d+) for (\S+) s a solve at (\S+) '
                      'GFLOP/s', output, re.M)
    return (int(match.group(1)), float(match.group(2)), float(match.group(3))) if match else None


def parse_curve(output):
    """Where the job's sizing line put N on HPL's curve (curve_words), or ''."""
    match = re.search(rf'^{re.escape(SIZE_MARKER)} N=\d+ for .*?; (HPL\'s curve .*)$', output,
                      re.M)
    return match.group(1) if match else ''


def main(argv=None):
    """`python -m hpcbench.benchmarks.hpl_quick_size size DGEMM_OUTPUT HPL.DAT --nodes N
    --seconds S SIZE...`: size_in_job, HPL.dat rewritten in place; exit 1, saying why,
    without a verified rate."""
    parser = argparse.ArgumentParser(prog='python -m hpcbench.benchmarks.hpl_quick_size')
    commands = parser.add_subparsers(dest='command', required=True)
    size = commands.add_parser('size', help="set HPL.dat's N from the DGEMM rate just measured")
    size.add_argument('dgemm_output')
    size.add_argument('hpl_dat')
    size.add_argument('sizes', nargs='+', type=int)
    size.add_argument('--nodes', type=int, default=1)
    size.add_argument('--seconds', type=float, default=QUICK_SOLVE_SECONDS)
    args = parser.parse_args(argv)
    try:
        with open(args.dgemm_output) as measured, open(args.hpl_dat) as written:
            dat, line = size_in_job(measured.read(), written.read(), args.sizes, args.nodes,
                                    args.seconds)
    except (OSError, dgemm.DgemmOutputError) as err:
        print(f'{SIZE_MARKER} no verified DGEMM rate in {args.dgemm_output} ({err}): HPL is '
              'not sized, not run', file=sys.stderr)
        return 1
    with open(args.hpl_dat, 'w') as fp:
        fp.write(dat)
    print(line, flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
