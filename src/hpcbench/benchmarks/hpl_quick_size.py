"""Quick mode's HPL size, chosen in the job (`python -m hpcbench.benchmarks.hpl_quick_size
size`): the N whose solve takes QUICK_SOLVE_SECONDS at the DGEMM rate the job measured just
before (hpcbench.benchmarks.dgemm verifies it), among hpl.quick_sizes, written into
HPL.dat's Ns line. Standard library only: it runs on the node."""
import argparse
import re
import sys

from hpcbench.benchmarks import dgemm
from hpcbench.benchmarks.hpl import QUICK_SOLVE_SECONDS, flop_count
from hpcbench.benchmarks.hpl_input_file import with_size


def size_for_rate(sizes, rate_flops, seconds=QUICK_SOLVE_SECONDS):
    """The largest of `sizes` whose solve takes at most `seconds` at `rate_flops`, else the
    smallest (what the job computes from its DGEMM rate: size_in_job)."""
    fitting = [n for n in sizes if flop_count(n) / rate_flops <= seconds]
    return max(fitting) if fitting else min(sizes)


# The in-job sizing (quick mode): the DGEMM ceiling's output it reads, the line it prints.
DGEMM_OUTPUT = 'dgemm-rate.out'
SIZE_MARKER = 'hpl-size:'


def size_in_job(dgemm_output, hpl_dat, sizes, num_nodes, seconds=QUICK_SOLVE_SECONDS):
    """What HplCheck's job runs between its DGEMM ceiling and HPL (`python -m
    hpcbench.benchmarks.hpl_quick_size size ...`): the DGEMM rate from dgemm-rate's output
    (verified: hpcbench.benchmarks.dgemm.parse), times `num_nodes`, chooses N
    (size_for_rate), which replaces the Ns line of the HPL.dat text `hpl_dat`. Returns (the
    new HPL.dat, the line to print: parse_size reads it)."""
    rate = dgemm.parse(dgemm_output).best
    n = size_for_rate(sizes, num_nodes * rate * 1e9, seconds)
    return (with_size(hpl_dat, n),
            f'{SIZE_MARKER} N={n} for {seconds:g} s a solve at {rate:g} GFLOP/s a node (the DGEMM '
            f'ceiling) x {num_nodes} node(s)')


def parse_size(output):
    """(N, seconds a solve, GFLOP/s a node) the job's sizing chose and printed; None when
    it did not run (an N given, or not quick mode)."""
    match = re.search(rf'^{re.escape(SIZE_MARKER)} N=(\d+) for (\S+) s a solve at (\S+) '
                      'GFLOP/s', output, re.M)
    return (int(match.group(1)), float(match.group(2)), float(match.group(3))) if match else None


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
