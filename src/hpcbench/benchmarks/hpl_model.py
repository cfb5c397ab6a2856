"""What share of its DGEMM ceiling HPL can reach on one node (issue 74): a bound from the
node's own measured DGEMM rate and memory bandwidth, phase by phase, to set beside what
HPL's timers measured (hpcbench.benchmarks.hpl_output.Phases).

A solve of order N with blocks of NB columns spends its time in three kinds of work:

- the trailing updates' arithmetic (update_flops: nearly all of 2/3 N^3), which runs
  at best at the DGEMM ceiling;
- their row swaps: after each panel, its NB pivot rows are exchanged with the panel's own
  rows across every column to its right. A column is contiguous in HPL's column-major
  matrix, so each column's swap reads and writes the panel's NB rows (NB x 8 bytes, one
  run) and NB pivot rows scattered below them (a cache line each): 2 x NB x (8 + 64)
  bytes a column, about 72 N^2 bytes a solve. They run at best at the memory bandwidth;
- the panels' factorization: each panel (its rows by NB) is swept once per level of its
  recursion (NDIV halves until NBMIN columns, then one pass of the base factorization),
  each sweep reading and writing it. At best at the memory bandwidth, and no faster than
  its own arithmetic (the rest of the solve's flops, about N^2 NB / 2) at the DGEMM
  ceiling: a large NB makes it the arithmetic's.

The bound is the solve's flops over the sum of those three times, against the ceiling: a
share HPL cannot pass on that node at that N and NB. Its phases say where a measured solve
loses against it: a measured row swap far slower than its bound is latency (a TLB miss
per column), not bandwidth. The back substitution (N^2 flops) is left out; so are the
panels' broadcasts, which one process does not make: the bound is for one process on the
node. With more processes the swaps and broadcasts are messages, which it does not
model, and bound() refuses them.
"""
import math
from dataclasses import dataclass

from hpcbench.benchmarks.hpl import flop_count

CACHE_LINE = 64
DOUBLE = 8


class HplModelError(ValueError):
    pass


@dataclass(frozen=True)
class Bound:
    """The least time each kind of work of one solve can take, and what share of the DGEMM
    ceiling the solve then reaches at most."""
    n: int
    nb: int
    ceiling_gflops: float
    update_seconds: float
    swap_seconds: float
    panel_seconds: float

    @property
    def seconds(self):
        return self.update_seconds + self.swap_seconds + self.panel_seconds

    @property
    def gflops(self):
        return flop_count(self.n) / self.seconds / 1e9

    @property
    def share(self):
        """The most HPL can reach, in % of the DGEMM ceiling."""
        return 100 * self.gflops / self.ceiling_gflops

    def words(self):
        """`at most 97.8 % of the DGEMM ceiling at N = 14400, NB = 192: the updates'
        arithmetic 96.8 % of the time, row swaps 1.8 %, panels 1.4 %`."""
        def share(seconds):
            return f'{100 * seconds / self.seconds:.1f} %'
        return (f'at most {self.share:.1f} % of the DGEMM ceiling at N = {self.n}, NB = '
                f'{self.nb}: the updates\' arithmetic {share(self.update_seconds)} of the '
                f'time, row swaps {share(self.swap_seconds)}, panels '
                f'{share(self.panel_seconds)}')


def update_flops(n, nb):
    """Floating-point operations of an HPL solve's trailing updates (HPL_pdupdate): after
    each panel of `nb` columns, the triangular solve of its block row of U (nb x nb by the
    m + 1 columns right of it, b included) and the product that updates the trailing m x
    (m + 1) matrix, m the rows below the panel. The rest of the solve's flops, about N^2 NB
    of them, are the panels' own factorization."""
    total = 0
    for first in range(0, n, nb):
        width = min(nb, n - first)
        rows = n - first - width
        total += width * width * (rows + 1) + 2 * rows * (rows + 1) * width
    return total


def swap_bytes(n, nb):
    """The bytes the row swaps of a solve move at least (read and written)."""
    total = 0
    for first in range(0, n, nb):
        width = min(nb, n - first)
        columns = n + 1 - first - width
        total += columns * 2 * width * (DOUBLE + CACHE_LINE)
    return total


def panel_sweeps(nb, nbmin=4, ndiv=2):
    """The sweeps of one panel: one per level of its recursion (NDIV parts until NBMIN
    columns or fewer) and one of the base factorization."""
    if nb < 1 or nbmin < 1 or ndiv < 2:
        raise HplModelError(f'NB {nb}, NBMIN {nbmin}, NDIV {ndiv}: no panel recursion '
                            '(NB and NBMIN at least 1, NDIV at least 2)')
    levels, width = 0, nb
    while width > nbmin:
        width = math.ceil(width / ndiv)
        levels += 1
    return levels + 1


def panel_bytes(n, nb, nbmin=4, ndiv=2):
    """The bytes the panels' factorization moves at least: each panel read and written
    once a sweep."""
    sweeps = panel_sweeps(nb, nbmin, ndiv)
    total = 0
    for first in range(0, n, nb):
        width = min(nb, n - first)
        total += (n - first) * width * DOUBLE * 2 * sweeps
    return total


def bound(n, nb, dgemm_gflops, bandwidth_gbs, nbmin=4, ndiv=2, processes=1):
    """The Bound of one HPL solve of order `n`, blocks of `nb`, on a node whose DGEMM
    ceiling is `dgemm_gflops` and memory bandwidth `bandwidth_gbs` (GB/s, its bandwidth
    ceiling); HplModelError for inputs it does not model (several processes) or that are
    none."""
    if processes != 1:
        raise HplModelError(f'{processes} processes: the bound is for one process on the '
                            'node (its swaps and broadcasts between processes are messages, '
                            'which it does not model)')
    if n < 1 or nb < 1:
        raise HplModelError(f'N {n}, NB {nb}: no solve')
    if not dgemm_gflops > 0 or not bandwidth_gbs > 0:
        raise HplModelError(f'a DGEMM rate of {dgemm_gflops} GFLOP/s and a bandwidth of '
                            f'{bandwidth_gbs} GB/s: both must be measured and positive')
    updates = update_flops(n, nb)
    rate, bandwidth = dgemm_gflops * 1e9, bandwidth_gbs * 1e9
    return Bound(n, nb, dgemm_gflops, updates / rate, swap_bytes(n, nb) / bandwidth,
                 max(panel_bytes(n, nb, nbmin, ndiv) / bandwidth,
                     (flop_count(n) - updates) / rate))
