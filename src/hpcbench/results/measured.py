"""What a stored session measured, read from its record (hpcbench.results.results_db): each
test case's runs and figures with the inputs and build that made them, ratios stored
without a reason withheld, figures keyed by session and by stack (the build's MPI and
BLAS), the DGEMM ceilings per BLAS."""
import re
import statistics

from hpcbench.results.results_db import session, started_of, stored_sessions, uuid_of

# Test parameters in a case's display name, including --distribute's `.part` and `.nid`.
_PARAM = re.compile(r'%([\w.$]+)=(\S+)')
# The parameter ReFrame's --repeat gives each run of a case (in its display name).
REPEAT_PARAMETER = '.repeat_no'


# Parameters a check gained after sessions were stored, with the value that ran before it
# had them: a session stored earlier stays the same test case as a newer one.
ADDED_PARAMETERS = {'StreamCheck': {'stores': 'compiled'}}


def with_added_parameters(check, match):
    """A case's parameters (`match`, as stored) with those its check gained since, at the
    value that ran before the check had them (ADDED_PARAMETERS)."""
    return {**ADDED_PARAMETERS.get(check, {}), **match}


# Figures that are ratios to a peak or a ceiling (percent): above 100 % the peak or the
# ceiling is wrong, never the figure a result. The checks withhold such a ratio with its
# reason (hpcbench.rfm.plugins.Samples); one stored without (a session from before they did) is
# withheld here, saying so.
PEAK_RATIOS = ('efficiency', 'ceiling_efficiency', 'sustained_peak_efficiency',
               'peak_of_rpeak', 'hpl_efficiency', 'hpl_ceiling_efficiency',
               'triad_ceiling_efficiency', 'triad_cached_store_efficiency',
               # The GPU checks' ratios to their device's datasheet.
               'triad_datasheet_efficiency', 'fp64_peak_efficiency',
               'host_to_device_link_efficiency', 'device_to_host_link_efficiency')


UNEXPLAINED_RATIO = ('{value:.1f} % of its peak or ceiling, stored without a reason (a '
                     'session from before the suite withheld such ratios): above 100 % the '
                     'peak is wrong (a nominal clock below the one the cores run at, a '
                     'ceiling measured low), so it is no result')


def _withhold_unexplained_ratios(tc, perf, refs):
    """perf and refs without the ratios above 100 % a test case stored without a reason,
    and the test case with those in its `flagged` figures."""
    above = {name: value for name, (value, unit) in perf.items()
             if name in PEAK_RATIOS and unit == '%' and value is not None and value > 100}
    if not above:
        return tc, perf, refs

    flagged = {**{name: UNEXPLAINED_RATIO.format(value=value) for name, value in above.items()},
               **(tc.get('flagged') or {})}
    return ({**tc, 'flagged': flagged}, {k: v for k, v in perf.items() if k not in above},
            {k: v for k, v in refs.items() if k not in above})


def measured_runs(session_data, fixtures=False):
    """Every valid run of the session's test cases, in order (ReFrame's --repeat and
    --reruns give a case several): those that passed, and those that failed only against
    their references (their figures are real; re-baselining is how a new level is
    accepted). A case that failed anything else (build, run, sanity) measured nothing.
    `fixtures`: the fixtures' too (the ceilings the checks divide by). A ratio to a peak
    above 100 % is never among the figures: it is withheld, with its reason (PEAK_RATIOS)."""
    for run in session_data['runs']:
        for tc in run['testcases']:
            valid = tc['result'] == 'pass' or tc.get('fail_phase') == 'performance'
            if (tc['fixture'] and not fixtures) or not valid or not tc.get('perfvalues'):
                continue

            check = tc['name'].split()[0]
            # Typed values where the case records them (parameters), else the name's text.
            # A case of --distribute is stored under its check's bare name; its partition
            # and node (%.part, %.nid) are in its display name only. --repeat's runs
            # (%.repeat_no there too) are runs of one case.
            named = tc.get('display_name') or tc['name']
            match = with_added_parameters(
                check, {p: tc.get(p, text) for p, text in _PARAM.findall(named)
                        if p != REPEAT_PARAMETER})
            perf, refs = {}, {}
            for key, (value, ref, lower, upper, unit, result) in tc['perfvalues'].items():
                perf[key.rsplit(':', 1)[1]] = (value, unit)
                refs[key.rsplit(':', 1)[1]] = (ref, lower, upper, result)
            tc, perf, refs = _withhold_unexplained_ratios(tc, perf, refs)

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
    """The session's measured test cases (measured_runs), the last run of each, with every
    run's figures in `runs` ({variable: [value per run]}: --repeat gives several)."""
    cases, runs = {}, {}
    for case in measured_runs(session_data, fixtures):
        key = case_key(case)
        cases[key] = case
        for variable, (value, _) in case['perfvalues'].items():
            if value is not None:
                runs.setdefault(key, {}).setdefault(variable, []).append(value)
    for key, case in cases.items():
        case['runs'] = runs.get(key, {})
    return list(cases.values())


def figure_samples(sessions, system):
    """Every figure of `system` measured in `sessions`, as a sample over their runs:
    {(check, partition, environ, parameters, inputs): {variable: {'unit', 'values',
    'sessions', 'times', 'stacks'}}}, one entry of each list per run: its figure, its
    session's UUID and start (Unix time), and the software that produced it (run_stack).
    Runs of other inputs (a quick run and a full one, another -S) are other samples: a
    figure is compared only with itself; runs of another stack are told apart by
    by_stack."""
    samples = {}
    for data in sessions:
        uuid, started = uuid_of(data), started_of(data)
        for case in measured_runs(data):
            if case['system'] != system:
                continue
            figures = samples.setdefault((*case_key(case), case['inputs']), {})
            for variable, (value, unit) in case['perfvalues'].items():
                if value is None:
                    continue
                figure = figures.setdefault(variable, {'unit': unit, 'values': [],
                                                       'sessions': [], 'times': [],
                                                       'stacks': []})
                figure['values'].append(value)
                figure['sessions'].append(uuid)
                figure['times'].append(started)
                figure['stacks'].append(run_stack(case))
    return samples


def by_session(figure):
    """A figure (a figure_samples entry) session by session, oldest first:
    [(session start, UUID, [its runs' values])]."""
    sessions = {}
    for value, uuid, started in zip(figure['values'], figure['sessions'], figure['times']):
        sessions.setdefault((started, uuid), []).append(value)
    return [(started, uuid, values) for (started, uuid), values
            in sorted(sessions.items(), key=lambda item: item[0][0] or 0)]


def run_stack(case):
    """The software that produced a case's figures: its build's spec as recorded (hpcbench.
    provenance.build_spec: package, variants, target, hash, compiler, MPI and BLAS with
    versions; a registry binary's package and version); '' where none was recorded."""
    return case['testcase'].get('build_spec') or ''


def by_stack(figure):
    """A figure (a figure_samples entry) split by the stack of its runs: {stack: the same
    entry of those runs only}, in the order the stacks first ran."""
    fields = ('values', 'sessions', 'times', 'stacks')
    runs = sorted(zip(*(figure[name] for name in fields)), key=lambda run: run[2] or 0)
    parts = {}
    for run in runs:
        part = parts.setdefault(run[3], {'unit': figure['unit'], **{n: [] for n in fields}})
        for name, value in zip(fields, run):
            part[name].append(value)
    return parts


def _stack_parts(stack):
    """A build spec's parts by what they are: {'build': name@version, 'variants', 'target',
    'hash', and each named virtual (mpi, blas, c, ...): its provider}."""
    parts = {}
    for token in stack.split():
        if token.startswith('^') and '=' in token:
            virtuals, provider = token[1:].split('=', 1)
            parts[virtuals] = provider
        elif token.startswith('/'):
            parts['hash'] = token
        elif token.startswith('arch='):
            parts['target'] = token[5:]
        elif token[0] in '+~':
            parts['variants'] = f'{parts.get("variants", "")} {token}'.strip()
        else:
            parts['build'] = f'{parts.get("build", "")} {token}'.strip()
    return parts


def stack_change(old, new):
    """What changed from stack `old` to `new`, in words: `blas intel-oneapi-mkl@2025.3.0 ->
    openblas@0.3.28, hash /5vtt4bg -> /kq2x7fa`; the whole stacks where either was not
    recorded."""
    if not old or not new:
        return f'{old or "(not recorded)"} -> {new or "(not recorded)"}'
    before, after = _stack_parts(old), _stack_parts(new)
    changed = [f'{key} {before.get(key, "(none)")} -> {after.get(key, "(none)")}'
               for key in dict.fromkeys([*before, *after]) if before.get(key) != after.get(key)]
    return ', '.join(changed) or 'the same'


def case_figure(case, variable):
    """A case's figure in a session: the median of its runs where it ran more than once
    (--repeat), else its one value."""
    runs = case.get('runs', {}).get(variable, [])
    return statistics.median(runs) if len(runs) > 1 else case['perfvalues'][variable][0]


# A build spec's virtual providers: ^mpi=openmpi@4.1.4.
_PROVIDER = re.compile(r'\^([\w,]+)=(\S+)')


def stack_of(case):
    """{'mpi': 'openmpi@4.1.4', 'blas': 'intel-oneapi-mkl@2025.3.0'} of a case's build, as its
    provenance names them ({} for a build Spack did not make)."""
    stack = {}
    for virtuals, provider in _PROVIDER.findall(case['testcase'].get('build_spec') or ''):
        for virtual in virtuals.split(','):
            stack[virtual] = provider
    return stack


# Where a session holds DGEMM ceilings: HPL's jobs measure theirs just before HPL; sessions
# stored before that have them as a check of their own.
DGEMM_FIGURES = {'HplCheck': 'dgemm_ceiling', 'DgemmCeiling': 'gflops'}


def dgemm_by_blas(session_data):
    """The DGEMM ceilings of a session per BLAS its build used: {provider (`openblas@0.3.28`):
    [GFLOP/s of every call]}, each case's calls (its job's repeats) pooled across the
    cases that share a BLAS (HPL's layouts, the MPI stacks with the default one)."""
    rates = {}
    for case in measured_cases(session_data, fixtures=True):
        provider = stack_of(case).get('blas')
        variable = DGEMM_FIGURES.get(case['check'])
        if provider and variable in case['perfvalues']:
            calls = (case['testcase'].get('samples') or {}).get(variable) or [
                case_figure(case, variable)]
            rates.setdefault(provider, []).extend(calls)
    return rates


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
