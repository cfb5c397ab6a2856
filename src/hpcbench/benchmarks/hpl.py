"""HPL: inputs derived from the machine and the HPL.dat file (its output: hpl_output; the
tuning sweep: hpl_sweep; quick mode's size chosen in the job: hpl_quick_size).

Shared by the HPL checks and the HPCC check (whose hpccinf.txt is an HPL.dat plus PTRANS
lines). The rules come from the papers:

- process grid near square with P <= Q (TSUBAME §3 "Process Grid", T2K §3.2);
- N from a memory fraction, 80 % on one node and 75 % on several (TSUBAME §3, Figure 3-11),
  rounded down to a multiple of NB x lcm(P, Q) so that every process gets the same number
  of blocks (T2K §4.5: "divisible by P x NB");
- memory of N x N x 8 + 2 x N x 8 + N x 4 bytes (TSUBAME §3) plus the panel buffers;
- 2/3 N^3 + 2 N^2 floating-point operations. TSUBAME §3 prints (2 N^3) / (3 + 2 N^2), a
  misprint of 2 N^3 / 3 + 2 N^2, the count HPL itself reports its Gflops with.
"""
import math
from dataclasses import dataclass, field, replace
from hpcbench.benchmarks.reports import Reports
from hpcbench.core.node import DEFAULT_OS_RESERVE_BYTES


GIB = 1 << 30

# HPL.dat codes and the names HPL and the papers use for them.
BCAST_NAMES = {0: '1ring', 1: '1ringM', 2: '2ring', 3: '2ringM', 4: 'long', 5: 'longM'}
FACT_NAMES = {0: 'left', 1: 'crout', 2: 'right'}
FACT_LETTERS = {'L': 0, 'C': 1, 'R': 2}
SWAP_NAMES = {0: 'binary-exchange', 1: 'long', 2: 'mix'}
PMAP_NAMES = {0: 'row-major', 1: 'column-major'}

# One node keeps more of its memory for the matrix than several, whose MPI and InfiniBand
# buffers grow with the node count (TSUBAME §3, Figure 3-11: 80 % vs 75 % were fastest).
SINGLE_NODE_MEMORY_FRACTION = 0.80
MULTI_NODE_MEMORY_FRACTION = 0.75
# The tuning sweep's size: T2K tuned at N = 300,000, about 1/25 of the memory of the full
# run (N = 1,508,000: (300/1508)^2 = 0.04), §4.4.
TUNING_MEMORY_FRACTION = 0.04
# Quick mode's size where no DGEMM rate sizes it (an HPL job without one, -S sizing=quick
# on HplNodeScreen): half of T2K's tuning size.
QUICK_MEMORY_FRACTION = 0.02
# Quick mode's size in HplCheck's job (make run): a solve takes at most QUICK_SOLVE_SECONDS
# at the DGEMM rate measured in the job just before HPL (within that budget the N where HPL's
# curve flattens: hpl_quick_size), so that a fast node gets the N that
# measures it and a slow one stays quick (a fixed 1/50 of the memory, N = 7872 here, gave
# OpenBLAS 0.3.28 at 215 GFLOP/s 81 % of its ceiling against 90 to 94 % for the slower
# libraries). HPL's share of the DGEMM rate grows with N, and faster a BLAS needs a larger
# N for the same share (its non-DGEMM work does not speed up). Measured here, 2026-11-26,
# one rank of 2 threads, one solve each, DGEMM 97 to 111 GFLOP/s: OpenBLAS 0.3.28 83.5, 85.9,
# 87.3, 90.3, 92.9 % at N = 7872, 9600, 12672, 14400, 16128 (3.6 to 27.9 s a solve); 0.3.21
# 83.3, 85.8, 87.6, 90.1 %; MKL 87.6, 87.8, 92.3, 91.9 %; BLIS 90.2, 90.0, 85.3, 88.5 % up
# to N = 14400. Two make runs at 20 s a solve (best of 3) gave the four libraries 89.1 to
# 92.9 %: at 30 s (N near 17,000 at 110 GFLOP/s) none is at the edge. Chosen among sizes
# QUICK_SIZE_STEP apart (quick_sizes: the same N run after run unless the rate moves by a
# step), at most QUICK_MAX_MEMORY_FRACTION of the memory.
QUICK_SOLVE_SECONDS = 30.0
# Solves of that N in one quick job (three otherwise): the spread still shows, and the job
# takes as long as three solves of 20 s did (seven quick HPL jobs: 596 to 641 s here).
QUICK_REPEATS = 2
QUICK_SIZE_STEP = 1.04
QUICK_MAX_MEMORY_FRACTION = 0.25
# The performance variables of every HPL job (HplBase: HplNodeScreen reports these), and
# of HplCheck, which measures its DGEMM ceiling in the job too (reframe-checks/hpl.py; the
# tuning sweep reports sweep_variables()).
RUN_VARIABLES = ('gflops', 'efficiency')
CHECK_VARIABLES = RUN_VARIABLES + ('dgemm_ceiling', 'gflops_mean', 'spread', 'time',
                                   'ceiling_efficiency', 'sustained_peak_efficiency')


class HplInputError(ValueError):
    """An HPL input that cannot run: refused before any job starts."""


@dataclass(frozen=True)
class Tuning:
    """Every HPL.dat setting except N and the process grid, with the defaults we run.

    Lists are HPL's own: HPL runs every combination of them (each one a result line).
    """
    nbs: tuple = (192,)           # block size; the tuning sweep finds this machine's best
    pmap: int = 0                 # row-major process mapping (T2K Table 5)
    threshold: float = 16.0       # residual threshold (HPL's default, T2K Table 5)
    pfacts: tuple = (2,)          # panel factorization: right-looking (HPL's sample)
    nbmins: tuple = (4,)          # recursion stopping criterion (T2K Table 5)
    ndivs: tuple = (2,)           # panels in recursion (T2K Table 5)
    rfacts: tuple = (2,)          # recursive panel factorization: right (T2K Table 2)
    bcasts: tuple = (3,)          # 2ring-modified: best in TSUBAME Fig. 3-6 and T2K Table 3
    depths: tuple = (1,)          # look-ahead depth 1 (HPL's recommendation; T2K used 0)
    swap: int = 2                 # mix of binary exchange and long (T2K Table 5)
    swap_threshold: int = 64      # best of 64/128/192 in T2K Table 4
    l1_transposed: bool = True    # L1 in transposed form (T2K Table 5)
    u_transposed: bool = True     # U in transposed form (T2K Table 5)
    equilibration: bool = True    # (T2K Table 5)
    alignment: int = 8            # memory alignment in doubles; HPL requires > 0

    def __post_init__(self):
        for name in ('nbs', 'pfacts', 'nbmins', 'ndivs', 'rfacts', 'bcasts', 'depths'):
            values = tuple(getattr(self, name))
            if not values:
                raise HplInputError(f'HPL {name}: at least one value is needed')

            object.__setattr__(self, name, values)

        checks = [
            (all(nb > 0 for nb in self.nbs), 'NB must be positive'),
            (self.pmap in PMAP_NAMES, 'PMAP is 0 (row-major) or 1 (column-major)'),
            (all(f in FACT_NAMES for f in self.pfacts + self.rfacts),
             'PFACT/RFACT are 0 (left), 1 (Crout) or 2 (right)'),
            (all(n >= 1 for n in self.nbmins), 'NBMIN must be >= 1'),
            (all(n >= 2 for n in self.ndivs), 'NDIV must be >= 2'),
            (all(b in BCAST_NAMES for b in self.bcasts), 'BCAST is 0..5'),
            (all(d >= 0 for d in self.depths), 'DEPTH must be >= 0'),
            (self.swap in SWAP_NAMES, 'SWAP is 0, 1 or 2'),
            (self.swap_threshold >= 0, 'the swapping threshold must be >= 0'),
            (self.alignment > 0, 'the memory alignment must be > 0'),
            (self.threshold > 0, 'the residual threshold must be > 0'),
        ]
        for ok, message in checks:
            if not ok:
                raise HplInputError(f'HPL input: {message}')

    @property
    def combinations(self):
        """Result lines HPL prints per N and process grid."""
        return math.prod(len(v) for v in (self.nbs, self.pfacts, self.nbmins, self.ndivs,
                                          self.rfacts, self.bcasts, self.depths))


# --- process grid and problem size -----------------------------------------------------------

# The checks' tuning variables (one value each, -S or a paper's): those that set a list of
# Tuning (the one value as its list), by the field they set, and those that set a field of
# their own name.
TUNING_LISTS = {'nb': 'nbs', 'pfact': 'pfacts', 'nbmin': 'nbmins', 'ndiv': 'ndivs',
                'rfact': 'rfacts', 'bcast': 'bcasts', 'depth': 'depths'}
TUNING_SCALARS = ('pmap', 'swap', 'swap_threshold', 'l1_transposed', 'u_transposed',
                  'equilibration', 'alignment', 'threshold')
TUNING_SETTINGS = (*TUNING_LISTS, *TUNING_SCALARS)


# NB where a BLAS library's HPL does better with another block than Tuning's 192 (by
# Spack package name), each with the measurement that chose it: perf/hpl_efficiency.py and
# HplCheck at other NBs, one process, quick mode, Open MPI. A BLAS not named keeps 192:
# MKL and both OpenBLAS ran their updates at 92.5 to 96.5 % of their DGEMM ceilings there.
NB_BY_BLAS = {
    'blis': (256, 'BLIS 0.9.0 on Zen 3 (2 cores, 2026-12-05): at NB 192 its updates ran '
                  'at 82.3 % of its DGEMM ceiling and HPL at 80.1 % (median of 5 runs); at '
                  'NB 256 at 91.0 % and 91.2 % (3 runs), at NB 384 at 93.4 % and 89.7 % (3 runs)'),
}


def blas_nb(blas_spec):
    """(NB, why) for the BLAS a build names (`blis`, `openblas@0.3.28 threads=openmp`):
    NB_BY_BLAS's, else Tuning's with no reason."""
    name = (blas_spec or '').split('@')[0].split()[0] if (blas_spec or '').strip() else ''
    return NB_BY_BLAS.get(name, (Tuning().nbs[0], ''))


def tuned(chosen):
    """The Tuning of the `chosen` settings ({variable of TUNING_SETTINGS: value, or None for
    the default}): Tuning checks every value (HplInputError) and turns lists into tuples."""
    return replace(Tuning(), **{TUNING_LISTS.get(name, name):
                                (value,) if name in TUNING_LISTS else value
                                for name, value in chosen.items() if value is not None})


def process_grids(ranks):
    """Every P x Q = ranks with P <= Q, the nearest to square first."""
    if ranks < 1:
        raise HplInputError(f'HPL needs at least one process, not {ranks}')

    grids = [(p, ranks // p) for p in range(1, math.isqrt(ranks) + 1) if ranks % p == 0]
    return sorted(grids, key=lambda g: g[1] - g[0])


def process_grid(ranks):
    return process_grids(ranks)[0]


def default_memory_fraction(num_nodes):
    return SINGLE_NODE_MEMORY_FRACTION if num_nodes == 1 else MULTI_NODE_MEMORY_FRACTION


# How big a run is, by name: `full` as a Top500 run (TSUBAME's fractions), `tuning` at T2K's
# 1/25 of the memory (seconds to minutes per solve; the tuning sweep's), `quick` at 1/50
# (what `make run` uses by default).
SIZINGS = ('full', 'tuning', 'quick')


def memory_fraction(sizing, num_nodes):
    if sizing == 'full':
        return default_memory_fraction(num_nodes)

    if sizing == 'tuning':
        return TUNING_MEMORY_FRACTION

    if sizing == 'quick':
        return QUICK_MEMORY_FRACTION

    raise HplInputError(f'unknown HPL sizing {sizing!r}; known: {", ".join(SIZINGS)}')


# The share of its target N a coarser granule may cost before a finer one is used.
GRANULE_LOSS = 0.01


def block_granule(n, nb, p, q):
    """What an N near `n` (its target) is made a multiple of: the coarsest granule that
    costs at most GRANULE_LOSS of it.

    1. NB x lcm(P, Q): every process gets as many blocks (equal shares);
    2. NB x max(P, Q): the block rows or columns divide evenly over the longer grid side;
    3. NB: whole blocks.
    A grid whose lcm is huge (1056 ranks = 32 x 33 on 16 Oakforest-PACS nodes: NB x lcm =
    202,752 against a target of 393,000) would otherwise lose half of N, a quarter of the
    memory. N is thus within one granule of its target, and within 1 % of it unless the
    target is under a hundred blocks."""
    for granule in (nb * math.lcm(p, q), nb * max(p, q)):
        if granule <= n and n % granule <= GRANULE_LOSS * n:
            return granule

    return nb


def problem_size(total_memory_bytes, nb, p, q, fraction):
    """Largest N using at most `fraction` of the memory for the matrix, a multiple of the
    coarsest granule that costs at most 1 % of it (block_granule)."""
    if not 0 < fraction < 1:
        raise HplInputError(f'HPL memory fraction must be between 0 and 1, not {fraction}')

    n = math.isqrt(int(fraction * total_memory_bytes / 8))
    granule = block_granule(n, nb, p, q)
    n -= n % granule
    if n < granule:
        raise HplInputError(
            f'{fraction:.0%} of {total_memory_bytes / GIB:.2f} GiB holds no HPL matrix of '
            f'at least one block of NB = {nb}')

    return n


# What the BLAS allocates per node beside the matrix: Goto BLAS's buffers, 1 GB (T2K §4.5).
BLAS_BUFFER_BYTES = 1 * GIB


def huge_page_problem_size(num_nodes, pages, page_bytes, nb, p, q,
                           buffer_bytes=BLAS_BUFFER_BYTES):
    """The largest N whose matrix (8 N (N + 1) bytes) and the BLAS buffers fit the nodes'
    huge pages, a multiple of its granule (block_granule): how T2K sized its 625-node run
    (§4.5: 14,400 pages of 2 MB per node, N divisible by P x NB, 1 GB of BLAS buffers;
    N = 1,508,000 with P = Q = 50, NB = 232)."""
    usable = num_nodes * (pages * page_bytes - buffer_bytes)
    if usable <= 0:
        raise HplInputError(f'{pages} huge pages of {page_bytes} B hold less than the BLAS '
                            f'buffers ({buffer_bytes} B)')
    target = (math.isqrt(4 * usable // 8 + 1) - 1) // 2       # 8 N (N + 1) <= usable
    granule = block_granule(target, nb, p, q)
    return target - target % granule


def memory_needed(n, nb, p, q, depth=1):
    """Bytes HPL allocates over all processes for order n: the matrix with its right-hand
    side and pivots (TSUBAME §3), plus each process's panel buffers (depth + 1 panels of
    NB columns over its local rows and columns), an estimate of HPL_pdpanel_init's work."""
    matrix = 8 * n * n + 2 * 8 * n + 4 * n
    local_rows, local_cols = math.ceil(n / p), math.ceil(n / q)
    panels = p * q * (depth + 1) * 8 * nb * (local_rows + local_cols + nb)
    return matrix + panels


def check_fits(n, nb, p, q, depth, num_nodes, node_memory_bytes,
               reserve_bytes=DEFAULT_OS_RESERVE_BYTES):
    """Refuse an N whose HPL would not fit in the nodes' memory (less the OS reserve: the
    node's os_reserve_bytes)."""
    needed = memory_needed(n, nb, p, q, depth)
    available = num_nodes * (node_memory_bytes - reserve_bytes)
    if needed > available:
        raise HplInputError(
            f'HPL N={n} needs {needed / GIB:.1f} GiB but {num_nodes} node(s) of '
            f'{node_memory_bytes / GIB:.1f} GiB leave {available / GIB:.1f} GiB after '
            f'{reserve_bytes / GIB:.1f} GiB per node for the system: use a smaller N or '
            f'memory fraction')

    return needed


def fitting_size(n, nb, p, q, depth, num_nodes, node_memory_bytes,
                 reserve_bytes=DEFAULT_OS_RESERVE_BYTES):
    """`n`, or the largest smaller multiple of its granule (block_granule) that fits beside
    the OS reserve: on small nodes (CHiC's 4 GiB) 75 % of the memory for the matrix leaves
    too little for the system and HPL's buffers."""
    granule = block_granule(n, nb, p, q)
    available = num_nodes * (node_memory_bytes - reserve_bytes)
    while n > granule and memory_needed(n, nb, p, q, depth) > available:
        n -= granule

    return n


# A process's local matrix whose leading dimension is a multiple of this many doubles (4 KiB)
# maps its columns onto the same cache sets: measured here with BLIS (one rank of 2 threads),
# N = 12288 and 13824 (24 and 27 x 512) ran at 64.6 and 63.9 to 66.8 GFLOP/s, N = 13632 and
# 14016 at 90.3 and 94.6.
ALIASED_LEADING_DIMENSION = 512


def local_rows(n, nb, p):
    """The rows of the local matrix of each process row (ScaLAPACK's numroc): its leading
    dimension."""
    blocks, rest = divmod(n, nb)
    return [blocks // p * nb + (nb if row < blocks % p else rest if row == blocks % p else 0)
            for row in range(p)]


def aliased(n, nb, p):
    """Whether some process row's leading dimension is a multiple of 4 KiB."""
    return any(rows and rows % ALIASED_LEADING_DIMENSION == 0 for rows in local_rows(n, nb, p))


def quick_sizes(node, num_nodes, nb, p, q, depth=1):
    """The Ns quick mode chooses from in the job (size_for_rate), largest first: from
    QUICK_MAX_MEMORY_FRACTION of the nodes' memory (fitting beside the OS) down by
    QUICK_SIZE_STEP, each a multiple of its granule (block_granule), the next granule down
    where a process's leading dimension would be a multiple of 4 KiB (aliased), down to 8
    blocks per process row or column."""
    total = num_nodes * node.memory_bytes
    n = fitting_size(problem_size(total, nb, p, q, QUICK_MAX_MEMORY_FRACTION), nb, p, q, depth,
                     num_nodes, node.memory_bytes, node.os_reserve_bytes)
    smallest = 8 * nb * max(p, q)
    sizes = []
    while n >= smallest and (not sizes or n < sizes[-1]):
        granule = block_granule(n, nb, p, q)
        while aliased(n, nb, p) and n - granule >= smallest:
            n -= granule
        sizes.append(n)
        n = int(n / QUICK_SIZE_STEP)
        n -= n % block_granule(n, nb, p, q)
    return tuple(sizes) or (n,)


def flop_count(n):
    """Floating-point operations of an HPL solve of order n (HPL's own count)."""
    return 2 / 3 * n ** 3 + 2 * n ** 2


def estimated_seconds(n, rpeak_flops, efficiency=1.0):
    """Run time of one solve at the given fraction of Rpeak (TSUBAME §3, corrected)."""
    return flop_count(n) / (rpeak_flops * efficiency)


# --- HPL.dat ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Inputs:
    ns: tuple
    grids: tuple                      # ((P, Q), ...)
    tuning: Tuning = field(default_factory=Tuning)

    @property
    def expected_results(self):
        return len(self.ns) * len(self.grids) * self.tuning.combinations


# --- the inputs of one run -------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What one HPL job will run, and what it needs."""
    inputs: Inputs
    num_nodes: int
    memory_bytes: int          # HPL's allocation over all nodes (estimate)
    rpeak_flops: float
    estimated_seconds: float   # all repeats and combinations at Rpeak


def plan(node, num_nodes, ranks_per_node, tuning=Tuning(), fraction=None, n=None,
         repeats=1, grids=None, sizing='full', huge_pages=None):
    """The inputs of an HPL run on `num_nodes` nodes like `node`, checked to fit.

    N is given; or, for a full-size run on nodes that reserve `huge_pages` (pages per node,
    bytes per page) with no fraction given, the largest that fits them
    (huge_page_problem_size); or it comes from the memory fraction, given or by `sizing`
    (see SIZINGS). The grid is the nearest-square one unless given. Raises HplInputError,
    with the reason, for an input that cannot run.
    """
    ranks = num_nodes * ranks_per_node
    grids = tuple(grids or [process_grid(ranks)])
    for p, q in grids:
        if p * q != ranks:
            raise HplInputError(f'process grid {p}x{q} does not use the {ranks} processes')

    nb = max(tuning.nbs)
    depth = max(tuning.depths)
    total_memory = num_nodes * node.memory_bytes
    if n is None and fraction is None and sizing == 'full' and huge_pages:
        n = min(huge_page_problem_size(num_nodes, *huge_pages, nb, p, q) for p, q in grids)
    if n is None:
        if fraction is None:
            fraction = memory_fraction(sizing, num_nodes)
        n = min(fitting_size(problem_size(total_memory, nb, p, q, fraction), nb, p, q, depth,
                             num_nodes, node.memory_bytes, node.os_reserve_bytes)
                for p, q in grids)

    if n < 1:
        raise HplInputError(f'HPL N must be positive, not {n}')

    if repeats < 1:
        raise HplInputError(f'HPL repeats must be at least 1, not {repeats}')

    needed = max(check_fits(n, nb, p, q, depth, num_nodes, node.memory_bytes,
                            node.os_reserve_bytes) for p, q in grids)
    inputs = Inputs(ns=(n,) * repeats, grids=grids, tuning=tuning)
    rpeak = node.peak_flops_of(num_nodes)
    return Plan(inputs, num_nodes, needed, rpeak,
                inputs.expected_results * estimated_seconds(n, rpeak))


# --- output ------------------------------------------------------------------------------------


# --- tuning sweep ----------------------------------------------------------------------------


# --- slow-node screening -------------------------------------------------------------------


def run_words(plan, sizes, solve_seconds, layout_words):
    """(what makes two runs of `plan` the same test case, in words; the largest N its job may
    choose). Where the job sizes N itself from its DGEMM rate (`sizes`, the Ns it chooses
    among, at most `solve_seconds` a solve: hpl_quick_size), the sizing rule, not an N."""
    inputs = plan.inputs
    nbs = inputs.tuning.nbs
    largest = max(sizes or inputs.ns)
    if sizes:
        size = (f'N where HPL\'s curve flattens, at most {solve_seconds:g} s a solve at the DGEMM '
                f'ceiling ({min(sizes)} to {largest})')
        needed = max(memory_needed(largest, max(nbs), p, q) for p, q in inputs.grids)
        memory = f'memory<={needed / GIB:.1f}GiB'
    else:
        size, memory = f'N={inputs.ns[0]}', f'memory={plan.memory_bytes / GIB:.1f}GiB'
    if len(inputs.grids) == 1:
        (p, q), = inputs.grids
        grid = f'P={p} Q={q}'
    else:   # the tuning sweep's grids, in one job
        grid = 'grids=' + ','.join(f'{p}x{q}' for p, q in inputs.grids)
    return (f'{size} NB={",".join(map(str, nbs))} {grid} {layout_words} '
            f'nodes={plan.num_nodes} {memory}'), largest


def huge_pages_check(pages, page_kib):
    """A job-script line that stops the job unless the node has `pages` huge pages of
    `page_kib` KiB reserved (T2K reserved 14,400 pages of 2 MiB per node for the matrix)."""
    if pages < 1 or page_kib < 1:
        raise HplInputError(f'huge pages: {pages} pages of {page_kib} KiB')

    return (f'awk -v need={pages} -v kib={page_kib} '
            "'/^HugePages_Total:/ { total = $2 } /^Hugepagesize:/ { size = $2 } "
            'END { if (size != kib || total < need) { printf "huge pages: %d of %d kB '
            'reserved, the run needs %d of %d kB\\n", total, size, need, kib > "/dev/stderr"; '
            "exit 1 } }' /proc/meminfo || exit 1")

# What this module's checks report (hpcbench.benchmarks.reports).
_UNITS = {'gflops': 'GFLOP/s', 'efficiency': '%', 'dgemm_ceiling': 'GFLOP/s',
          'gflops_mean': 'GFLOP/s', 'spread': '%', 'time': 's', 'ceiling_efficiency': '%',
          'sustained_peak_efficiency': '%'}
REPORTS = {'HplCheck': Reports('HPL', CHECK_VARIABLES, _UNITS),
           'HplNodeScreen': Reports('HPL', RUN_VARIABLES, _UNITS)}
