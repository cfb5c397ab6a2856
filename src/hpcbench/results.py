"""Reading ReFrame's results database (through ReFrame's own CLI, so its format is the
contract) and turning stored test cases into the figures of a baseline."""
import json
import re
import subprocess
import sys
from pathlib import Path

from hpcbench import paths

# Test parameters in a case's name, including --distribute's `.part` and `.nid`.
_PARAM = re.compile(r'%([\w.$]+)=(\S+)')


_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def reframe_json(config, *args):
    """Run `reframe -C config <args>` and parse its JSON output. A failure says why, as
    ReFrame put it (on its stdout: `ERROR: failed to retrieve session data: file is not a
    database`)."""
    if not Path(config).exists():
        systems = sorted(p.stem for p in paths.SITE_CONFIGS_DIR.glob('*.py'))
        raise RuntimeError(f'no site config {config}; the systems: {", ".join(systems)}')

    cmd = [str(Path(sys.executable).parent / 'reframe'), '-C', str(config), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        said = _ANSI.sub('', proc.stdout + proc.stderr).strip().splitlines()
        errors = [line for line in said if 'ERROR' in line or 'Error' in line]
        reason = '\n'.join(errors or said[-5:]) or f'exit status {proc.returncode}'
        raise RuntimeError(f'reading the results database of {Path(config).stem} '
                           f'({paths.VAR_DIR / "results.db"}) failed: {reason}')

    start = proc.stdout.find('[')
    if start < 0:
        raise RuntimeError(f'{" ".join(cmd)} printed no JSON')

    return json.loads(proc.stdout[start:])


def latest_session(config, period='now-365d:now'):
    """The newest stored session of this config's results database, or None."""
    sessions = reframe_json(config, f'--describe-stored-sessions={period}')
    return max(sessions, key=lambda s: s['session_info']['time_start_unix'], default=None)


def stored_sessions(config, period='now-365d:now'):
    """The stored sessions of `period`, newest first."""
    return sorted(reframe_json(config, f'--describe-stored-sessions={period}'),
                  key=lambda s: s['session_info']['time_start_unix'], reverse=True)


def session(config, uuid):
    found = reframe_json(config, f'--describe-stored-sessions={uuid}')
    if not found:
        raise RuntimeError(f'no stored session {uuid}')

    return found[0]


def measured_runs(session_data, fixtures=False):
    """Every valid run of the session's test cases, in order (ReFrame's --repeat and
    --reruns give a case several): those that passed, and those that failed only against
    their references (their figures are real; re-baselining is how a new level is
    accepted). A case that failed anything else (build, run, sanity) measured nothing.
    `fixtures`: the fixtures' too (the ceilings the checks divide by)."""
    for run in session_data['runs']:
        for tc in run['testcases']:
            valid = tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'
            if (tc['fixture'] and not fixtures) or not valid or not tc.get('perfvalues'):
                continue

            check = tc['name'].split()[0]
            # Typed values where the case records them (parameters), else the name's text.
            match = {p: tc.get(p, text) for p, text in _PARAM.findall(tc['name'])}
            perf, refs = {}, {}
            for key, (value, ref, lower, upper, unit, result) in tc['perfvalues'].items():
                perf[key.rsplit(':', 1)[1]] = (value, unit)
                refs[key.rsplit(':', 1)[1]] = (ref, lower, upper, result)

            yield {
                'check': check, 'system': tc['system'], 'partition': tc['partition'],
                'environ': tc['environ'], 'match': match, 'perfvalues': perf,
                'nodelist': tc.get('job_nodelist') or [],
                'inputs': tc.get('inputs') or '',
                # Per variable: (reference, lower, upper, 'pass'|'fail') as ReFrame judged
                # it; a reference of 0 with no bounds is no reference.
                'references': refs,
                'testcase': tc,
            }


def case_key(case):
    """What makes two runs the same test case: check, partition, environment, parameters."""
    return (case['check'], case['partition'], case['environ'],
            tuple(sorted(case['match'].items())))


def measured_cases(session_data, fixtures=False):
    """The session's measured test cases (measured_runs), the last run of each."""
    return list({case_key(case): case
                 for case in measured_runs(session_data, fixtures)}.values())


def figure_samples(sessions, system):
    """Every figure of `system` measured in `sessions`, as a sample over their runs:
    {(check, partition, environ, parameters, inputs): {variable: {'unit', 'values',
    'sessions', 'times'}}}, one entry of each list per run: its figure, its session's UUID
    and start (Unix time). Runs of other inputs (a quick run and a full one, another -S)
    are other samples: a figure is compared only with itself."""
    samples = {}
    for data in sessions:
        uuid = data['session_info']['uuid']
        started = data['session_info'].get('time_start_unix')
        for case in measured_runs(data):
            if case['system'] != system:
                continue
            figures = samples.setdefault((*case_key(case), case['inputs']), {})
            for variable, (value, unit) in case['perfvalues'].items():
                if value is None:
                    continue
                figure = figures.setdefault(variable, {'unit': unit, 'values': [],
                                                       'sessions': [], 'times': []})
                figure['values'].append(value)
                figure['sessions'].append(uuid)
                figure['times'].append(started)
    return samples


def by_session(figure):
    """A figure (a figure_samples entry) session by session, oldest first:
    [(session start, UUID, [its runs' values])]."""
    sessions = {}
    for value, uuid, started in zip(figure['values'], figure['sessions'], figure['times']):
        sessions.setdefault((started, uuid), []).append(value)
    return [(started, uuid, values) for (started, uuid), values
            in sorted(sessions.items(), key=lambda item: item[0][0] or 0)]


def site_config(system):
    return paths.SITE_CONFIGS_DIR / f'{system}.py'


def check_cases(config, check, uuid=None):
    """Measured cases of one check in a stored session (default: the newest that ran it)."""
    if uuid:
        data = [session(config, uuid)]
    else:
        data = stored_sessions(config)

    for candidate in data:
        cases = [c for c in measured_cases(candidate) if c['check'] == check]
        if cases:
            return candidate['session_info']['uuid'], cases

    raise RuntimeError(f'no stored session has results of {check}'
                       + (f' (session {uuid})' if uuid else ''))


def side_by_side(cases):
    """The same test case's figures per environment (MPI stack), for every case that ran
    in more than one: [(heading, {environ: case})], checks and parameters in order."""
    groups = {}
    for case in cases:
        params = ' '.join(f'{k}={v}' for k, v in sorted(case['match'].items()))
        heading = (f'{case["check"]} {params}'.strip()
                   + f' on {case["system"]}:{case["partition"]}')
        groups.setdefault(heading, {})[case['environ']] = case

    return [(heading, group) for heading, group in sorted(groups.items()) if len(group) > 1]


# A provider in a build's provenance line (hpcbench.provenance.build_spec):
# `^mpi=openmpi@4.1.4`, `^blas,lapack=openblas@0.3.21`.
_PROVIDER = re.compile(r'\^([\w,]+)=(\S+)')


def stack_of(case):
    """{'mpi': 'openmpi@4.1.4', 'blas': 'intel-oneapi-mkl@2025.3.0'} of a case's build, as its
    provenance names them ({} for a build Spack did not make)."""
    stack = {}
    for virtuals, provider in _PROVIDER.findall(case['testcase'].get('build_spec') or ''):
        for virtual in virtuals.split(','):
            stack[virtual] = provider
    return stack


def blas_mpi_grid(group, variable):
    """One figure of a case measured in several environments (side_by_side) as a row per
    BLAS and a column per MPI: (MPIs, [(BLAS, [value or None per MPI])]); None when its
    environments used fewer than two BLAS libraries."""
    cells = {}
    for case in group.values():
        stack = stack_of(case)
        if variable in case['perfvalues'] and 'blas' in stack:
            cells[(stack['blas'], stack.get('mpi', '-'))] = case['perfvalues'][variable][0]
    blases = list(dict.fromkeys(b for b, _ in cells))
    if len(blases) < 2:
        return None

    mpis = list(dict.fromkeys(m for _, m in cells))
    return mpis, [(b, [cells.get((b, m)) for m in mpis]) for b in blases]


def blas_mpi_grids(groups):
    """Of side_by_side's groups, those run with several BLAS libraries: their headline
    figure (`gflops`: HPL's, HPCC's, DGEMM's; else the first) as BLAS x MPI:
    [(heading, variable, unit, grid)]."""
    grids = []
    for heading, group in groups:
        perfvalues = next(iter(group.values()))['perfvalues']
        variable = 'gflops' if 'gflops' in perfvalues else next(iter(perfvalues))
        unit = perfvalues[variable][1]
        grid = blas_mpi_grid(group, variable)
        if grid:
            grids.append((heading, variable, unit, grid))
    return grids


def grid_rows(grid, fmt=None):
    """A blas_mpi_grid's rows of cells, '-' where that BLAS did not run on that MPI."""
    _, rows = grid
    fmt = fmt or _value
    return [[blas, *('-' if v is None else fmt(v) for v in values)] for blas, values in rows]


def grid_table(variable, unit, grid):
    """blas_mpi_grid as text."""
    return _text_table([f'{variable} [{unit}]: BLAS \\ MPI', *grid[0]], grid_rows(grid))


def _value(number):
    return f'{number:.0f}' if abs(number) >= 1000 else f'{number:.4g}'


def stacks_table(group):
    """One case's figures as a table: a row per performance variable, a column per
    environment; '-' where an environment did not report the variable."""
    environs = list(group)
    units = {}
    for case in group.values():
        for name, (_, unit) in case['perfvalues'].items():
            units.setdefault(name, unit)

    header = ['figure', *environs]
    # What each environment built with, where its provenance says (Spack builds).
    stacks = {env: stack_of(case) for env, case in group.items()}
    rows = [[virtual, *(stacks[env].get(virtual, '-') for env in environs)]
            for virtual in ('mpi', 'blas') if any(virtual in s for s in stacks.values())]
    rows += [[f'{name} [{unit}]',
              *(_value(group[env]['perfvalues'][name][0])
                if name in group[env]['perfvalues'] else '-' for env in environs)]
             for name, unit in units.items()]
    return _text_table(header, rows)


def _text_table(header, rows):
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ['  '.join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(r, widths)))
             for r in [header, *rows]]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(lines)
