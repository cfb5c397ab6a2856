#!/usr/bin/env python3
"""Benchmark (not a test): HPL in quick and full mode against its DGEMM ceiling and the
model's bound, per MPI stack and BLAS, on whatever machine it runs (issue 74).

It runs HplCheck's one-process layout (where the BLAS's threads do all the work and the
model applies: hpcbench.benchmarks.hpl_model) through ReFrame into a results directory
(HPCBENCH_VAR, default a scratch one): quick mode --repeat times on every environment of
the MPI stacks asked for (each BLAS), and with --full a full-size run (80 % of the memory,
one solve) on the first of them. Then, read back from the results database as `hpcbench
compare` reads it, per mode, MPI and BLAS: the runs, N, the median share of the DGEMM
ceiling HPL reached (ceiling_efficiency), the model's bound at that N and NB
(model_ceiling_efficiency), the updates' own share (update_ceiling_efficiency) and where
the solves' time went by HPL's own timers (update, row swap, panel and other shares).

With --curve N,N,...: HPL's efficiency curve instead, one solve of each N in a job of its
own (its own DGEMM ceiling), the Ns in turn --repeat times so that the machine's drift falls
on all of them, on the environments named (--environs, default the MPI stack's default BLAS
and Spack's OpenBLAS); per BLAS and N the median share of the ceiling, and the curve quick
mode sizes by (hpcbench.benchmarks.hpl_quick_size) fitted to the runs: E(N) = E_inf - A / N^2,
A / the DGEMM rate beside the suite's QUICK_FLATTENING, and where it is within
QUICK_FLAT_POINTS of E_inf.

    .venv/bin/python perf/hpl_efficiency.py [--repeat 5] [--mpi openmpi,mpich] [--full]
                                            [--var DIR] [--no-run]
    .venv/bin/python perf/hpl_efficiency.py --curve 7872,11712,15552,19392,23232 --repeat 2
                                            [--environs openmpi,openmpi-openblas-spack]
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpcbench.benchmarks import hpl_quick_size
from hpcbench.results import case_builds, measured, results_db
from hpcbench.rfm import run_modes

ROOT = Path(__file__).resolve().parent.parent
ONE_PROCESS = 'HplCheck%layout_name=per-socket%num_nodes=1'
FIGURES = ('ceiling_efficiency', 'model_ceiling_efficiency', 'update_ceiling_efficiency',
           'update_share', 'row_swap_share', 'panel_share', 'other_share')
# The goals: quick mode at least 85 % of the DGEMM ceiling, full mode 90 %.
GOALS = {'quick': 85.0, 'full': 90.0}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeat', type=int, default=5,
                        help='quick-mode runs (jobs); 0 for --full alone')
    parser.add_argument('--mpi', default='openmpi', help="MPI stacks' environments, by comma")
    parser.add_argument('--full', action='store_true',
                        help='also one full-size run on the first MPI stack\'s default BLAS')
    parser.add_argument('--var', help='the results directory (default: a scratch one, kept)')
    parser.add_argument('--no-run', action='store_true',
                        help='only print the runs the results directory holds')
    parser.add_argument('--curve', help='the Ns of an efficiency curve, by comma')
    parser.add_argument('--environs', default='openmpi,openmpi-openblas-spack',
                        help="the curve's environments, by comma")
    args = parser.parse_args()
    var = Path(args.var or tempfile.mkdtemp(prefix='hpcbench-hpl-efficiency-')).absolute()
    mpis = [m for m in args.mpi.split(',') if m]
    if args.curve:
        ns = [int(n) for n in args.curve.split(',') if n]
        environs = [e for e in args.environs.split(',') if e]
        if not args.no_run:
            for turn in range(args.repeat):
                for n in ns:
                    run(var, f'curve-{turn}-{n}', f'^({"|".join(environs)})$',
                        ['-S', f'HplCheck.n={n}', '-S', 'HplCheck.repeats=1'], mode='quick')
        curve_summary(var, environs)
        return
    if not args.no_run:
        environments = '|'.join(mpis)
        if args.repeat > 0:
            run(var, 'quick', f'^({environments})(-.+)?$', ['--repeat', str(args.repeat)])
        if args.full:
            run(var, 'full', f'^{mpis[0]}$', ['-S', 'HplCheck.repeats=1'])
    summary(var, mpis)


def run(var, name, environments, extra, mode=None):
    env = {**os.environ, 'HPCBENCH_VAR': str(var)}
    reframe = [str(ROOT / '.venv' / 'bin' / 'reframe'), '-C', 'site-configs/local.py',
               '--system', 'local', '-c', 'reframe-checks',
               *run_modes.mode_options(mode or name, 'local'), '-n', ONE_PROCESS,
               '-p', environments, *extra, '-r']
    started = time.monotonic()
    proc = subprocess.run(reframe, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    log = var / f'hpl-efficiency-{name}.log'
    log.write_text(proc.stdout)
    print(f'{" ".join(reframe)}\n  exit {proc.returncode}, {time.monotonic() - started:.0f} s; '
          f'its output: {log}')


def _mode(case):
    """quick where the job sized N from its DGEMM rate (its inputs name the rule)."""
    return 'quick' if 'a solve at the DGEMM ceiling (' in case.inputs else 'full'


def _sizes(case):
    """The Ns a case's solves ran at, as its figure says how it came from them (`best of 2
    solve(s) of N=14400, ...`)."""
    figure = case.figures.get('gflops')
    match = re.search(r'of N=([\d,]+)', figure.how if figure else '')
    return [int(n) for n in match.group(1).split(',') if n] if match else []


def one_process_runs(var):
    """HplCheck's one-process cases the results directory holds."""
    os.environ['HPCBENCH_VAR'] = str(var)      # where results_db.Store reads
    for session in results_db.stored_sessions(results_db.site_config('local')):
        for case in measured.measured_runs(session):
            if (case.check == 'HplCheck' and case.parameters.get('layout_name') == 'per-socket'
                    and str(case.parameters.get('num_nodes')) == '1'):
                yield case


def curve_summary(var, environs):
    """Per BLAS and N, the median share of the DGEMM ceiling; the curve fitted to the runs."""
    points = {}
    for case in one_process_runs(var):
        if case.environ in environs and _sizes(case):
            blas = case_builds.stack_of(case).get('blas', case.environ)
            points.setdefault(blas, {}).setdefault(_sizes(case)[0], []).append(case)
    if not points:
        sys.exit('no one-process HplCheck run in the results directory: see the output above')
    for blas, by_n in sorted(points.items()):
        print(f'{blas}: N, runs, median % of the DGEMM ceiling (each run), model bound, '
              'DGEMM GFLOP/s, bandwidth ceiling GB/s')
        runs = []                       # (N, % of the ceiling, DGEMM GFLOP/s) of each run
        for n, cases in sorted(by_n.items()):
            shares = [(c.value('ceiling_efficiency'), c.value('dgemm_ceiling')) for c in cases
                        if c.value('ceiling_efficiency') is not None]
            if not shares:
                continue
            runs += [(n, share, rate) for share, rate in shares]
            model = [c.value('model_ceiling_efficiency') for c in cases
                     if c.value('model_ceiling_efficiency') is not None]
            bandwidth = [b for b in map(_bandwidth, cases) if b]
            print(f'  {n:>6} {len(shares):>2} '
                  f'{statistics.median(s for s, _ in shares):6.1f} '
                  f'({", ".join(f"{s:.1f}" for s, _ in shares)}) '
                  f'{statistics.median(model) if model else float("nan"):6.1f} '
                  f'{statistics.median(r for _, r in shares):6.1f} '
                  f'{statistics.median(bandwidth) if bandwidth else float("nan"):6.1f}')
        if len({n for n, _, _ in runs}) < 3:
            continue
        # E(N) = E_inf - A / N^2, A = flattening x the DGEMM rate (GFLOP/s).
        slope, limit = statistics.linear_regression([r / n ** 2 for n, _, r in runs],
                                                    [share for _, share, _ in runs])
        rate = statistics.median(r for _, _, r in runs)
        flat = math.sqrt(max(-slope, 0) * rate / hpl_quick_size.QUICK_FLAT_POINTS)
        print(f'  fitted: E(N) = {limit:.1f} - {-slope:.3g} x GFLOP/s / N^2 (the suite\'s: '
              f'{hpl_quick_size.QUICK_FLATTENING:.3g}); within '
              f'{hpl_quick_size.QUICK_FLAT_POINTS:g} points of it from N = {flat:.0f} at '
              f'{rate:.1f} GFLOP/s')


def _bandwidth(case):
    """The bandwidth ceiling (GB/s) the model's figure names (`... at the bandwidth ceiling
    (60.1 GB/s, ...`), or None."""
    figure = case.figures.get('model_ceiling_efficiency')
    match = re.search(r'bandwidth ceiling \(([\d.]+) GB/s', figure.how if figure else '')
    return float(match.group(1)) if match else None


def summary(var, mpis):
    found = {}
    for case in one_process_runs(var):
        if not any(case.environ == m or case.environ.startswith(f'{m}-') for m in mpis):
            continue
        mpi = next(m for m in mpis if case.environ == m or case.environ.startswith(f'{m}-'))
        blas = case_builds.stack_of(case).get('blas', case.environ)
        found.setdefault((_mode(case), mpi, blas), []).append(case)
    if not found:
        sys.exit('no one-process HplCheck run in the results directory: see the output above')
    print(f'{"mode":<6} {"MPI":<10} {"BLAS":<28} {"runs":>4} {"N":>7} '
          + ' '.join(f'{name.replace("_efficiency", "").replace("_share", "%"):>9}'
                     for name in FIGURES) + '  goal')
    for (mode, mpi, blas), cases in sorted(found.items()):
        medians = []
        for name in FIGURES:
            values = [c.value(name) for c in cases if c.value(name) is not None]
            medians.append(statistics.median(values) if values else None)
        sizes = sorted({size for c in cases for size in _sizes(c)})
        n = '/'.join(map(str, sizes)) if sizes else '-'
        reached = medians[0]
        goal = '' if reached is None else \
            f'{"met" if reached >= GOALS[mode] else "missed"} ({GOALS[mode]:g} %)'
        print(f'{mode:<6} {mpi:<10} {blas:<28} {len(cases):>4} {n:>7} '
              + ' '.join('        -' if m is None else f'{m:>9.1f}' for m in medians)
              + f'  {goal}')


if __name__ == '__main__':
    main()
