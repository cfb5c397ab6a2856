#!/usr/bin/env python3
"""Benchmark (not a test): the set-up part of `make run` from a cold per-user cache, then
again warm, phase by phase.

A fresh clone of this checkout's HEAD (as a new user gets it) in a scratch directory, with a
per-user cache (HPCBENCH_CACHE) that holds only Spack, spack-packages and the source mirror,
copied from this machine's cache (where `fetch` and the README's steps put them). There:
`make venv`, then `hpcbench setup --system local` twice. Each prints its phases (hpcbench.
stack.bootstrap.Phases: packages, wheels, externals, concretize, install, push); this script
prints them side by side with the venv's and the whole command's wall time. Nothing of this
checkout or of its cache is written.

    .venv/bin/python perf/setup_phases.py [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpcbench.core import paths

ROOT = Path(__file__).resolve().parent.parent
# What a cold cache is given: the pinned Spack, its packages and the source mirror.
RESTORED = ('spack', 'spack-packages', 'mirror')
PHASE_LINE = re.compile(r'set-up phases \(s\): (.*); total ([\d.]+)')


def timed(argv, cwd, env, log):
    """(seconds, output) of a command, its output also appended to `log`."""
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    with open(log, 'a') as handle:
        handle.write(f'$ {" ".join(argv)}\n{proc.stdout}\n')
    if proc.returncode:
        sys.exit(f'{" ".join(argv)} failed (exit {proc.returncode}); its output is in {log}')
    return time.monotonic() - started, proc.stdout


def phases(output):
    found = PHASE_LINE.findall(output)
    if not found:
        return {}
    parts, _ = found[-1]
    return {name: float(value) for name, value in
            (part.split() for part in parts.split(', '))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--keep', help='do it in DIR (kept) instead of a scratch directory')
    args = parser.parse_args()
    cache = paths.cache_dir()
    missing = [name for name in RESTORED if not (cache / name).is_dir()]
    if missing:
        sys.exit(f'{cache} has no {", ".join(missing)}: restore them as README says first')
    scratch = Path(args.keep or tempfile.mkdtemp(prefix='hpcbench-setup-'))
    scratch.mkdir(parents=True, exist_ok=True)
    log = scratch / 'setup.log'
    clone, cold = scratch / 'clone', scratch / 'cache'
    try:
        subprocess.run(['git', 'clone', '--quiet', str(ROOT), str(clone)], check=True)
        cold.mkdir()
        for name in RESTORED:
            shutil.copytree(cache / name, cold / name, symlinks=True)
        env = {**os.environ, 'HPCBENCH_CACHE': str(cold)}
        for name in ('HPCBENCH_VAR', 'HPCBENCH_BUILDCACHE', 'HPCBENCH_MIRROR', 'VIRTUAL_ENV'):
            env.pop(name, None)
        venv_seconds, _ = timed(['make', 'venv'], clone, env, log)
        rows = []
        for label in ('cold', 'warm'):
            seconds, output = timed([str(clone / '.venv' / 'bin' / 'hpcbench'), 'setup',
                                     '--system', 'local'], clone, env, log)
            rows.append((label, seconds, phases(output)))
        print(f'CPU: {cpu_model()}, {os.cpu_count()} cores; make venv {venv_seconds:.0f} s '
              f'(not a phase of hpcbench setup)')
        names = ('packages', 'wheels', 'externals', 'concretize', 'install', 'push')
        print(f'{"cache":<6}' + ''.join(f'{n:>11}' for n in names) + f'{"setup (s)":>11}')
        for label, seconds, spent in rows:
            print(f'{label:<6}' + ''.join(f'{spent.get(n, 0.0):>11.1f}' for n in names)
                  + f'{seconds:>11.1f}')
        print(f'(commands and their output: {log})')
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


def cpu_model():
    for line in Path('/proc/cpuinfo').read_text().splitlines():
        if line.startswith('model name'):
            return line.split(':', 1)[1].strip()
    return 'unknown'


if __name__ == '__main__':
    main()
