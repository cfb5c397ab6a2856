"""`hpcbench`: the suite's commands (bootstrap, install, baseline)."""
import argparse
import datetime
import sys
from pathlib import Path

from hpcbench import spack
from hpcbench.bootstrap import MACHINE_SYSTEMS


def _bootstrap(args):
    from hpcbench import bootstrap
    if args.command == 'setup':
        if args.registry_only:
            bootstrap.registry_only()
        else:
            if args.bundle:
                from hpcbench import bundle
                bundle.unpack(args.bundle)
            bootstrap.setup(refresh=args.refresh, system=args.system)
        return

    found = bootstrap.bootstrap(refresh=args.refresh)
    if args.command == 'install':
        bootstrap.install_environment(found, args.system)


def _stored_session(args):
    """The session --session names, else the newest stored one of --system."""
    from hpcbench import results
    config = results.site_config(args.system)
    data = (results.session(config, args.session) if args.session
            else results.latest_session(config))
    if not data:
        raise RuntimeError(f'no stored session for {args.system}: run the suite first')

    return data


def _baseline(args):
    """Record the system's stored results as references/<system>.yaml (a baseline): each
    figure's median over the runs of the sessions chosen (--session, else every session of
    the last --days that measured the system, the newest --last of them), with bounds from
    their spread (hpcbench.references.baseline_bounds). Sessions without valid performance
    results (an aborted or failed run's) are skipped, and said so."""
    from hpcbench import references, results
    references.check_tolerance(args.tolerance)
    references.check_tolerance(args.margin, 'margin')
    for option in ('days', 'last'):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise RuntimeError(f'--{option} {getattr(args, option)}: 1 or more')
    config = results.site_config(args.system)
    if args.session:
        sessions = [results.session(config, uuid) for uuid in args.session]
    else:
        sessions = results.stored_sessions(config, f'now-{args.days}d:now')
    if not sessions:
        raise RuntimeError(f'no stored session of {args.system} in the last {args.days} days: '
                           'run the suite first')
    measured = []
    for data in sessions:
        info = data['session_info']
        if any(c['system'] == args.system for c in results.measured_runs(data)):
            measured.append(data)
        else:
            print(f'session {info["uuid"]} ({info.get("time_start", "?")}) has no valid '
                  'performance results: skipped')
    measured = measured[:args.last]
    if not measured:
        raise RuntimeError(f'no stored session of {args.system} has valid performance results')

    infos = [d['session_info'] for d in measured]
    started = {i['uuid']: datetime.datetime.fromtimestamp(
        i['time_start_unix'], datetime.timezone.utc).isoformat(timespec='minutes')
        for i in infos}
    refs = references.baseline_from_samples(
        args.system, results.figure_samples(measured, args.system), started, args.margin,
        args.tolerance, host=', '.join(sorted({i['hostname'] for i in infos})))
    target = references.reference_file(args.system)
    target.write_text(references.dump(refs))
    guesses = sum(f.sample['bound'].startswith('guess') for f in refs.figures)
    print(f'{target}: {len(refs.figures)} figures from {len(measured)} session(s), '
          f'{min(started.values())} to {max(started.values())}: '
          f'{refs.sources["baseline"]["rule"]}')
    if guesses:
        print(f'{guesses} figure(s) come from fewer than {references.BASELINE_SESSIONS} '
              'sessions: their bound is a guess (run the suite at other times and record again)')


def _hpl_tuning(args):
    """The HPL tuning sweep's table (T2K Tables 2-4) from a stored session."""
    from hpcbench import hpl, results
    uuid, cases = results.check_cases(results.site_config(args.system), 'HplTuningSweep',
                                      args.session)
    tables = {}
    for case in cases:
        rates = tables.setdefault((case['partition'], case['environ']), {})
        for name, (value, _unit) in case['perfvalues'].items():
            setting, label = name.split('=', 1)
            rates.setdefault(setting, {})[label] = value

    print(f'HPL tuning sweep, session {uuid}')
    for (partition, environ), rates in sorted(tables.items()):
        print(f'\n{args.system}:{partition} {environ}')
        print(hpl.tuning_table(rates))


def _screen_nodes(args):
    """Nodes more than --threshold % below the median single-node HPL (T2K 4.2)."""
    from hpcbench import hpl, results
    uuid, cases = results.check_cases(results.site_config(args.system), 'HplNodeScreen',
                                      args.session)
    groups = {}
    for case in cases:
        node = ','.join(case['nodelist']) or '?'
        rate = case['perfvalues']['gflops'][0]
        groups.setdefault((case['partition'], case['environ']), {})[node] = rate

    print(f'HPL node screening, session {uuid}, threshold {args.threshold:g} % below the '
          'median')
    slow_total = 0
    for (partition, environ), rates in sorted(groups.items()):
        screening = hpl.screen_nodes(rates, args.threshold)
        print(f'\n{args.system}:{partition} {environ}: {len(rates)} node(s), median '
              f'{screening.median_gflops:.2f} GFLOP/s')
        for node, rate in sorted(rates.items()):
            flag = (f'  SLOW ({screening.slow[node][1]:.1f} % below)'
                    if node in screening.slow else '')
            print(f'  {node:<24}{rate:>10.2f} GFLOP/s{flag}')

        slow_total += len(screening.slow)

    if slow_total:
        raise RuntimeError(f'{slow_total} slow node(s) flagged')


def _compare_stacks(args):
    """Each test case's figures side by side per environment (MPI stack and BLAS), from a
    stored session, the ceilings the checks divide by included; where a case ran with
    several BLAS libraries, its first figure as BLAS x MPI."""
    import re

    from hpcbench import results
    try:
        pattern = re.compile(args.check)
    except re.error as err:
        raise RuntimeError(f'--check {args.check!r}: {err}') from None

    data = _stored_session(args)
    cases = [c for c in results.measured_cases(data, fixtures=True)
             if pattern.search(c['check'])]
    groups = results.side_by_side(cases)
    print(f'MPI stacks and BLAS libraries side by side, session '
          f'{data["session_info"]["uuid"]} ({len(groups)} test case(s) measured in more than '
          'one environment)')
    for heading, group in groups:
        inputs = {c['inputs'] for c in group.values()}
        print(f'\n{heading}' + (f'\n  inputs: {inputs.pop()}' if len(inputs) == 1 else ''))
        print(results.stacks_table(group))
        for line in results.withheld_lines(group):
            print(f'  {line}')
    grids = results.blas_mpi_grids(groups)
    if grids:
        print('\nBLAS x MPI')
    for heading, variable, unit, grid in grids:
        print(f'\n{heading}\n{results.grid_table(variable, unit, grid)}')
    _print_rankings(groups)


def _stored_run(args):
    """This run's session UUID (make run), once the results database holds it."""
    from hpcbench import results
    print(results.this_run(results.site_config(args.system), args.report))


def _time_per_check(args):
    """Each check's test cases and the seconds of their jobs in a stored session, and the
    share of its wall time that benchmark jobs took."""
    from hpcbench import results
    data = _stored_session(args)
    print(f'Time per check, session {data["session_info"]["uuid"]}')
    print(results.time_table(data))


def _print_rankings(groups):
    """Each case's environments ranked by its compared figures (its headline, HPL's DGEMM
    ceiling), where they have samples (--repeat, or a job's own repeats), each against the
    next with a statistic."""
    from hpcbench import results, verdicts
    ranked = [(heading, variable, verdicts.ranking_lines(group, variable))
              for heading, group in groups
              for variable in results.compared_variables(group)]
    ranked = [entry for entry in ranked if entry[2]]
    if ranked:
        print(f'\nRanked (a one-sided Mann-Whitney U test of each against the next, at '
              f'p <= {verdicts.ALPHA:g} and more than {verdicts.THRESHOLD:g} % apart)')
    for heading, variable, lines in ranked:
        print(f'\n{heading}: {variable}')
        for line in lines:
            print(f'  {line}')


def _reference_counts(args):
    """Figures per system and benchmark: references, comparisons, qualitative statements."""
    from hpcbench import references
    known = references.systems_with_references()
    unknown = [s for s in args.system or [] if s not in known]
    if unknown:
        raise RuntimeError(f'no references for {", ".join(unknown)}; systems with '
                           f'references: {", ".join(known)}')

    systems = args.system or known
    if args.rewrite:
        for system in systems:
            changed = references.rewrite(system)
            print(f'{references.reference_file(system)}: '
                  f'{"rewritten in its one form" if changed else "unchanged"}')
        return
    rows = [(system, *row) for system in systems
            for row in references.counts(references.load(system))]
    header = ('system', 'benchmark', 'references', 'comparisons', 'qualitative')
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print('  '.join(str(v).ljust(w) if i < 2 else str(v).rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths))))


def _changed_checks(args):
    """The check files a merge request changed (hpcbench.ci), one per line."""
    from hpcbench import ci
    for check in ci.changed_checks(ci.git_changed_files(args.base), ci.project_checks()):
        print(check)


def _ci_pipeline(args):
    """ReFrame's generated pipeline, made runnable from the project (hpcbench.ci)."""
    import yaml

    from hpcbench import ci
    try:
        generated = yaml.safe_load(open(args.generated))
    except (OSError, yaml.YAMLError) as err:
        raise RuntimeError(f'{args.generated}: {err}') from None
    if not isinstance(generated, dict) or 'stages' not in generated:
        raise RuntimeError(f'{args.generated} is not a pipeline written by reframe --ci-generate')

    child = ci.child_pipeline(generated)
    with open(args.output, 'w') as fp:
        yaml.safe_dump(child, fp, sort_keys=False, width=1000)
    tests = [name for name in child if name not in ('stages', ci.TESTBED_STOP_JOB)]
    print(f'{args.output}: {len(tests)} ReFrame job(s) ({", ".join(tests)}), then the testbed '
          'stops')


def _provenance(args):
    """The session's provenance as ReFrame --session-extras (what `make run` passes)."""
    from hpcbench import blas, paths, provenance
    facts = provenance.session_facts(str(paths.SPACK_ENVS_DIR / args.system))
    if args.system in MACHINE_SYSTEMS:
        # Which BLAS this machine's HPL is built with, and since when (the user's change).
        facts = {**facts, **blas.choice_provenance()}
    try:
        print(provenance.session_extras(facts))
    except ValueError as err:
        raise RuntimeError(str(err)) from None


def _default_mode(args):
    """quick where the suite runs here (this machine, the testbed: HPL at 1/50 of the
    memory), full on a paper's system, whose default run is its paper's."""
    from hpcbench import bootstrap
    print('quick' if args.system in bootstrap.MACHINE_SYSTEMS else 'full')


def _mode_options(args):
    """A ReFrame mode's options, shell-quoted, for a command line that puts the user's own
    after them. (ReFrame's --mode merges a user's -p with the default instead of letting it
    win: `--mode=quick -p openmpi` selected every environment.)"""
    import shlex

    from hpcbench import rfmconfig
    print(shlex.join(rfmconfig.mode_options(args.mode, args.system)))


def _report(args):
    """The HTML report and Markdown summary of a system's stored results."""
    from hpcbench import paths, report
    directory = Path(args.output) if args.output else paths.VAR_DIR / 'report' / args.system
    index = report.from_database(args.system, directory, args.session, args.against,
                                 args.threshold, args.days)
    print(f'Markdown summary: {index.parent / "summary.md"}')
    if args.check:
        from hpcbench import browser
        try:
            seen = browser.inspect(index, index.parent / 'screenshot.png')
        except browser.BrowserUnavailable as err:
            print(f'not opened in a browser: {err}')
        else:
            print(browser.describe(seen))
            if not seen.ok:
                raise RuntimeError(f'{index} does not display completely in Chromium')
    print(f'Report: {index}')


def _judging_options(parser):
    from hpcbench import verdicts
    parser.add_argument('--threshold', type=_threshold, default=verdicts.THRESHOLD,
                        help='percent a median must get worse by to count as a regression '
                             f'(default {verdicts.THRESHOLD:g})')
    parser.add_argument('--days', type=_days, default=verdicts.DAYS,
                        help='judge against the sessions of this many days before '
                             f'(default {verdicts.DAYS})')


def _days(text):
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        raise argparse.ArgumentTypeError(f'{text!r}: a number of days, 1 or more')
    return days


def _threshold(text):
    from hpcbench import verdicts
    try:
        return verdicts.check_threshold(float(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _compare(args):
    """Judge sessions against earlier ones, figure by figure (hpcbench.verdicts); exit
    status 1 on a regression."""
    from hpcbench import references, report, results, verdicts
    stored = results.stored_sessions(results.site_config(args.system))
    new = results.resolve(stored, args.new, '--new')
    old = results.resolve(stored, args.old, '--old')
    if args.baseline:
        recorded = references.load(args.system).sources.get('baseline')
        if not recorded:
            raise RuntimeError(f'{references.reference_file(args.system)} is no baseline: '
                               'record one with make baseline')
        old = [u for u in results.resolve(stored, recorded['baseline_sessions'],
                                          f'the baseline\'s session (in '
                                          f'{references.reference_file(args.system)})')
               if u not in new]
    compared = verdicts.sessions_to_judge(stored, args.system, new, old, args.days)
    if not compared:
        raise RuntimeError(f'nothing to compare: no stored session of {args.system} has '
                           f'an earlier one (within {args.days} days) to judge it against')
    rows = verdicts.compare(stored, args.system, *compared, threshold=args.threshold,
                            across_stacks=args.across_stacks)
    comparison = report.Comparison(*compared, rows, args.threshold)
    print(comparison.describe())
    shown = [r for r in rows if args.all or r.verdict.verdict != 'no change']
    print(report.text_table(report.COMPARISON_HEADER,
                            [report.comparison_cells(r) for r in shown]))
    if comparison.regressions:
        raise RuntimeError(f'{len(comparison.regressions)} regression(s)')


def _blas(args):
    """HPL's default BLAS on this machine: shown (where it came from, its changes, what the
    newest measurement suggests), or changed by the user (--default): the one way the stack
    a run measures changes."""
    from hpcbench import blas, bootstrap
    if args.default:
        if args.default not in blas.BY_SPEED:
            raise RuntimeError(f'--default {args.default}: the BLAS libraries are '
                               f'{", ".join(blas.BY_SPEED)}')
        try:
            choice, uuid = bootstrap.suggested_blas()
        except RuntimeError:        # a results database that cannot be read: still the user's
            choice = None
        why = 'asked: hpcbench blas --default' + (
            f' (session {uuid} measured: {choice.reason})'
            if choice and choice.order[0] == args.default else '')
        old, new = blas.set_default(args.default, why)
        if old == new:
            print(f"HPL's default BLAS is {new} already: nothing changes")
            return
        print(f"HPL's default BLAS: {old} -> {new} (recorded in {blas.order_path()}). The "
              'next make run concretizes spack-envs/local again and builds HPL and HPCC with '
              f'{new} on every MPI stack; its sessions name the change in their provenance, '
              "and compare reports figures across it as 'stack changed', not as the "
              "machine's. HPCBENCH_BLAS still overrides it for one run.")
        return

    order = blas.recorded_order()
    history = blas.choice_history()
    print(f"HPL's default BLAS: {order[0]} ({blas.choice_provenance()['blas_default_from']}); "
          f'the others, each on the first MPI stack: {", ".join(order[1:])}')
    for change in history:
        print(f'  {change["time"]}: {change["from"]} -> {change["to"]}: {change["reason"]}')
    choice, uuid = bootstrap.suggested_blas()
    if choice:
        print(f'DGEMM ceilings of session {uuid}: {choice.reason}'
              + (f' (to make it the default: hpcbench blas --default {choice.order[0]})'
                 if choice.changed else ''))


def _shell(args):
    from hpcbench import shell
    print(shell.shell_code(args.system, args.mpi, args.blas), end='')


def _bundle(args):
    from hpcbench import bundle
    start = datetime.datetime.now()
    output, manifest = bundle.make(args.system, args.output, binaries=not args.sources_only)
    print(bundle.describe(output, manifest))
    print(f'made in {(datetime.datetime.now() - start).total_seconds():.0f} s; on a machine '
          f'without internet: make run BUNDLE={output}')


def _push_buildcache(args):
    from hpcbench import bootstrap
    bootstrap.push_buildcache(spack.locate_or_clone(), args.system)


def main(argv=None):
    from hpcbench import references     # the baseline's defaults
    parser = argparse.ArgumentParser(prog='hpcbench')
    sub = parser.add_subparsers(dest='command', required=True)
    for name, text in (('bootstrap', 'set up this machine for Spack (idempotent)'),
                       ('install', 'bootstrap, then concretize and install '
                                   'spack-envs/<system>'),
                       ('setup', 'install when a Spack is found or can be cloned, else set '
                                 'up the registry-only path (what `make run` does)')):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument('--refresh', action='store_true',
                         help='detect compilers and build tools again')
        if name != 'bootstrap':
            cmd.add_argument('--system', default='local', choices=MACHINE_SYSTEMS,
                             help='the system on this machine whose environment to install')
        if name == 'setup':
            cmd.add_argument('--registry-only', action='store_true',
                             help='only the registry-only path (Debian HPCC), no Spack')
            cmd.add_argument('--bundle', metavar='ARCHIVE',
                             help='first unpack this offline bundle (make bundle) into the '
                                  'per-user cache: Spack, sources, build cache, wheels')
        cmd.set_defaults(func=_bootstrap)

    base = sub.add_parser('baseline', help='record stored results as the references of a '
                                           'system, so that later runs flag regressions')
    base.add_argument('--system', default='local')
    base.add_argument('--session', action='append',
                      help='a session UUID to use (repeatable; default: every session of the '
                           'last --days)')
    base.add_argument('--days', type=int, default=30,
                      help='use the sessions of this many last days (default 30)')
    base.add_argument('--last', type=int,
                      help='use only the newest N of those sessions (default: all)')
    base.add_argument('--margin', type=float, default=references.MARGIN,
                      help='fraction of the median beyond the runs\' 5th (95th) percentile '
                           f'that the bound allows (default {references.MARGIN:g})')
    base.add_argument('--tolerance', type=float, default=references.GUESS,
                      help='the least bound, as a fraction of the median, of a figure from '
                           f'fewer than {references.BASELINE_SESSIONS} sessions, whose spread is '
                           f'a guess (default {references.GUESS:g})')
    base.set_defaults(func=_baseline)
    tuning = sub.add_parser('hpl-tuning', help="print the HPL tuning sweep's best values")
    tuning.add_argument('--system', default='local')
    tuning.add_argument('--session', help='session UUID (default: the newest with a sweep)')
    tuning.set_defaults(func=_hpl_tuning)
    screen = sub.add_parser('screen-nodes', help='flag nodes whose single-node HPL is slow')
    screen.add_argument('--system', default='local')
    screen.add_argument('--session', help='session UUID (default: the newest screening)')
    screen.add_argument('--threshold', type=float, default=5.0,
                        help='percent below the median that flags a node (default 5)')
    screen.set_defaults(func=_screen_nodes)
    stacks = sub.add_parser('compare-stacks',
                            help='print each test case side by side per MPI stack')
    stacks.add_argument('--system', default='local')
    stacks.add_argument('--session', help='session UUID (default: the newest)')
    stacks.add_argument('--check', default='',
                        help='only checks whose name matches this regular expression')
    stacks.set_defaults(func=_compare_stacks)
    timing = sub.add_parser('time-per-check',
                            help="print where a session's wall time went, per check")
    timing.add_argument('--system', default='local')
    timing.add_argument('--session', help='session UUID (default: the newest)')
    timing.set_defaults(func=_time_per_check)
    stored = sub.add_parser('stored-run',
                            help="print the session UUID of a run's report once the results "
                                 'database holds it; fail saying why when it does not (make '
                                 'run, before it shows anything as the run\'s)')
    stored.add_argument('--system', default='local')
    stored.add_argument('--report', required=True, help='the run report the run wrote')
    stored.set_defaults(func=_stored_run)
    counts = sub.add_parser('references',
                            help='count the reference figures per system and benchmark')
    counts.add_argument('--system', action='append',
                        help='only this system (repeatable; default: every references file)')
    counts.add_argument('--rewrite', action='store_true',
                        help='write each file in its one form (key order, one-line match and '
                             'tolerance, folded strings) after a hand edit')
    counts.set_defaults(func=_reference_counts)
    changed = sub.add_parser('changed-checks',
                             help='the check files changed since a base commit (merge '
                                  'requests run only these)')
    changed.add_argument('--base', required=True, help='the merge request\'s target commit')
    changed.set_defaults(func=_changed_checks)
    child = sub.add_parser('ci-pipeline', help='make the pipeline reframe --ci-generate wrote '
                                               'runnable from the project (GitLab child pipeline)')
    child.add_argument('generated', help='the file reframe --ci-generate wrote')
    child.add_argument('output', help='the child pipeline to write')
    child.set_defaults(func=_ci_pipeline)
    cache = sub.add_parser('buildcache', help="push an environment's builds to the Spack "
                                              'build cache directory (kept between pipelines)')
    cache.add_argument('--system', default='local', choices=MACHINE_SYSTEMS)
    cache.set_defaults(func=_push_buildcache)
    offline = sub.add_parser('bundle', help="write one archive with all a machine without "
                                            "internet needs for a system's Spack stack "
                                            '(make run BUNDLE=<it> there)')
    offline.add_argument('--system', default='local', choices=MACHINE_SYSTEMS)
    offline.add_argument('--output', help='directory (default: var/bundles)')
    offline.add_argument('--sources-only', action='store_true',
                         help='no build cache: the receiving machine builds everything from '
                              "the mirror's sources (binaries that do not fit its CPUs)")
    offline.set_defaults(func=_bundle)
    choose = sub.add_parser('blas', help="show HPL's default BLAS on this machine, or change "
                                         'it (--default): the one way the stack changes')
    choose.add_argument('--default', metavar='NAME',
                        help='make this library the default (mkl, openblas-spack, openblas, '
                             'blis): the next make run builds HPL with it')
    choose.set_defaults(func=_blas)
    env_shell = sub.add_parser('shell', help="print the shell code that puts a system's "
                                             'Spack-built benchmarks and one MPI on PATH: '
                                             'eval "$(.venv/bin/hpcbench shell)"')
    env_shell.add_argument('--system', default='local', choices=MACHINE_SYSTEMS)
    env_shell.add_argument('--mpi', help='the MPI stack (default: the first of this '
                                         'machine: openmpi, mpich, intelmpi, mvapich2)')
    env_shell.add_argument('--blas', help="HPL's and HPCC's BLAS (default: the system's "
                                          'default; another one is built on the first MPI)')
    env_shell.set_defaults(func=_shell)
    facts = sub.add_parser('provenance', help="print the session's provenance (project and "
                                              'Spack commits, spack.lock hash, host) as '
                                              'reframe --session-extras')
    facts.add_argument('--system', default='local')
    facts.set_defaults(func=_provenance)
    mode = sub.add_parser('mode-options', help="print a ReFrame mode's options (make run "
                                               'puts them before RFM_OPTS)')
    mode.add_argument('mode', help='quick or full (hpcbench.rfmconfig.MODES)')
    mode.add_argument('--system', help="the system whose mode (full: its paper's run, node "
                                       'screening included where its paper screened)')
    mode.set_defaults(func=_mode_options)
    default_mode = sub.add_parser('default-mode', help="the mode make uses without MODE= "
                                                       '(quick here, full on a paper system)')
    default_mode.add_argument('--system', default='local')
    default_mode.set_defaults(func=_default_mode)
    judge = sub.add_parser('compare', help='judge stored sessions against earlier ones: '
                                           'regression, improvement, no change or '
                                           'inconclusive per figure (exit 1 on a regression)')
    judge.add_argument('--system', default='local')
    judge.add_argument('--new', nargs='+', metavar='UUID',
                       help='sessions to judge (default: the newest)')
    against = judge.add_mutually_exclusive_group()
    against.add_argument('--old', nargs='+', metavar='UUID',
                         help='sessions to judge against (default: those of the --days before)')
    against.add_argument('--baseline', action='store_true',
                         help='judge against the sessions the baseline (make baseline) was '
                              'made from')
    _judging_options(judge)
    judge.add_argument('--all', action='store_true', help="list the 'no change' figures too")
    judge.add_argument('--across-stacks', action='store_true',
                       help='judge figures whose stack changed (another build, BLAS or MPI) '
                            "too, instead of saying 'stack changed': compares two stacks")
    judge.set_defaults(func=_compare)
    rep = sub.add_parser('report', help='write the HTML report and Markdown summary of the '
                                        "stored results (ReFrame's results database)")
    rep.add_argument('--system', default='local')
    rep.add_argument('--session', help='show this session (default: each check\'s newest)')
    rep.add_argument('--against', help='judge it against this session (default: those of '
                                       'the --days before it)')
    _judging_options(rep)
    rep.add_argument('--output', help='directory (default: var/report/<system>)')
    rep.add_argument('--check', action='store_true',
                     help='open the report in headless Chromium: screenshot, images, links')
    rep.set_defaults(func=_report)
    args = parser.parse_args(argv)

    from hpcbench import bootstrap, references
    try:
        args.func(args)
    except (spack.SpackNotFound, bootstrap.BootstrapError, references.ReferenceError,
            RuntimeError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # What each step leaves is whole or gone (clones and unpacking into temporary
        # directories renamed at the end, Spack's own installs): no traceback to read.
        print(f'hpcbench {args.command}: interrupted; run it again to go on', file=sys.stderr)
        return 130

    return 0


if __name__ == '__main__':
    sys.exit(main())
