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

    .venv/bin/python perf/hpl_efficiency.py [--repeat 5] [--mpi openmpi,mpich] [--full]
                                            [--var DIR] [--no-run]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    parser.add_argument('--repeat', type=int, default=5, help='quick-mode runs (jobs)')
    parser.add_argument('--mpi', default='openmpi', help="MPI stacks' environments, by comma")
    parser.add_argument('--full', action='store_true',
                        help='also one full-size run on the first MPI stack\'s default BLAS')
    parser.add_argument('--var', help='the results directory (default: a scratch one, kept)')
    parser.add_argument('--no-run', action='store_true',
                        help='only print the runs the results directory holds')
    args = parser.parse_args()
    var = Path(args.var or tempfile.mkdtemp(prefix='hpcbench-hpl-efficiency-')).absolute()
    mpis = [m for m in args.mpi.split(',') if m]
    if not args.no_run:
        environments = '|'.join(mpis)
        run(var, 'quick', f'^({environments})(-.+)?$', ['--repeat', str(args.repeat)])
        if args.full:
            run(var, 'full', f'^{mpis[0]}$', ['-S', 'HplCheck.repeats=1'])
    summary(var, mpis)


def run(var, mode, environments, extra):
    env = {**os.environ, 'HPCBENCH_VAR': str(var)}
    reframe = [str(ROOT / '.venv' / 'bin' / 'reframe'), '-C', 'site-configs/local.py',
               '--system', 'local', '-c', 'reframe-checks',
               *run_modes.mode_options(mode, 'local'), '-n', ONE_PROCESS,
               '-p', environments, *extra, '-r']
    started = time.monotonic()
    proc = subprocess.run(reframe, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    log = var / f'hpl-efficiency-{mode}.log'
    log.write_text(proc.stdout)
    print(f'{" ".join(reframe)}\n  exit {proc.returncode}, {time.monotonic() - started:.0f} s; '
          f'its output: {log}')


def _mode(case):
    """quick where the job sized N from its DGEMM rate (its inputs name the rule)."""
    return 'quick' if case.inputs.startswith('N for ') else 'full'


def _sizes(case):
    """The Ns a case's solves ran at, as its figure says how it came from them (`best of 2
    solve(s) of N=14400, ...`)."""
    figure = case.figures.get('gflops')
    match = re.search(r'of N=([\d,]+)', figure.how if figure else '')
    return [int(n) for n in match.group(1).split(',') if n] if match else []


def summary(var, mpis):
    os.environ['HPCBENCH_VAR'] = str(var)      # where results_db.Store reads
    found = {}
    for session in results_db.stored_sessions(results_db.site_config('local')):
        for case in measured.measured_runs(session):
            if (case.check != 'HplCheck' or case.parameters.get('layout_name') != 'per-socket'
                    or str(case.parameters.get('num_nodes')) != '1'
                    or not any(case.environ == m or case.environ.startswith(f'{m}-')
                               for m in mpis)):
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
