"""`hpcbench` commands on stored results: compare (verdicts against earlier sessions or the
baseline), baseline (stored results as references), references (count, rewrite),
compare-stacks, hpl-tuning (the sweep's best values), screen-nodes (slow nodes)."""
import argparse
import datetime

from hpcbench.cli import Worse, system_name


def stored_session(args):
    """The session --session names, else the newest stored one of --system."""
    from hpcbench.results import results_db
    config = results_db.site_config(args.system)
    data = (results_db.session(config, args.session) if args.session
            else results_db.latest_session(config))
    if not data:
        raise RuntimeError(f'no stored session for {args.system}: run the suite first')

    return data


def _baseline(args):
    """Record the system's stored results as references/<system>.yaml (a baseline): each
    figure's median over the runs of the sessions chosen (--session, else every session of
    the last --days that measured the system, the newest --last of them), with bounds from
    their spread (hpcbench.results.baselines.baseline_bounds). Sessions without valid
    performance results (an aborted or failed run's) are skipped, and said so."""
    from hpcbench.results import baselines, measured, references, references_text, results_db
    references.check_tolerance(args.tolerance)
    references.check_tolerance(args.margin, 'margin')
    for option in ('days', 'last'):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise RuntimeError(f'--{option} {getattr(args, option)}: 1 or more')
    config = results_db.site_config(args.system)
    if args.session:
        sessions = [results_db.session(config, uuid) for uuid in args.session]
    else:
        sessions = results_db.stored_sessions(config, args.days)
    if not sessions:
        raise RuntimeError(f'no stored session of {args.system} in the last {args.days} days: '
                           'run the suite first')
    valid = []
    for data in sessions:
        info = data['session_info']
        if any(c.system == args.system for c in measured.measured_runs(data)):
            valid.append(data)
        else:
            print(f'session {info["uuid"]} ({info.get("time_start", "?")}) has no valid '
                  'performance results: skipped')
    valid = valid[:args.last]
    if not valid:
        raise RuntimeError(f'no stored session of {args.system} has valid performance results')

    infos = [d['session_info'] for d in valid]
    started = {i['uuid']: datetime.datetime.fromtimestamp(
        i['time_start_unix'], datetime.timezone.utc).isoformat(timespec='minutes')
        for i in infos}
    refs = baselines.baseline_from_samples(
        args.system, measured.figure_samples(valid, args.system), started, args.margin,
        args.tolerance, host=', '.join(sorted({i['hostname'] for i in infos})))
    target = references.reference_file(args.system)
    target.write_text(references_text.dump(refs))
    guesses = sum(f.sample['bound'].startswith('guess') for f in refs.figures)
    print(f'{target}: {len(refs.figures)} figures from {len(valid)} session(s), '
          f'{min(started.values())} to {max(started.values())}: '
          f'{refs.sources["baseline"]["rule"]}')
    if guesses:
        print(f'{guesses} figure(s) come from fewer than {baselines.BASELINE_SESSIONS} '
              'sessions: their bound is a guess (run the suite at other times and record again)')


def _hpl_tuning(args):
    """The HPL tuning sweep's table (T2K Tables 2-4) from a stored session."""
    from hpcbench.benchmarks import hpl_sweep
    from hpcbench.results import measured, results_db
    uuid, cases = measured.check_cases(results_db.site_config(args.system), 'HplTuningSweep',
                                         args.session)
    figures = {}
    for case in cases:
        figures.setdefault((case.partition, case.environ), []).extend(
            (name, figure.runs) for name, figure in case.figures.items())
    tables = {where: hpl_sweep.rates_by_setting(pairs) for where, pairs in figures.items()}

    print(f'HPL tuning sweep, session {uuid}')
    for (partition, environ), rates in sorted(tables.items()):
        print(f'\n{args.system}:{partition} {environ}')
        print(hpl_sweep.tuning_table(rates))


# The screening checks and the figure of a node each gives (T2K 4.2's single-node HPL, and
# the slowest GPU of a GPU node).
SCREENS = (('HplNodeScreen', 'HPL', 'gflops', 'GFLOP/s'),
           ('GpuNodeScreen', 'GPU DGEMM (slowest GPU)', 'slowest_gpu_tflops', 'TFLOP/s'))


def _screen_nodes(args):
    """Nodes more than --threshold % below the median of their partition's, by single-node
    HPL (T2K 4.2) and by their slowest GPU's DGEMM."""
    from hpcbench.benchmarks import hpl_output
    from hpcbench.results import measured, results_db
    from hpcbench.machine import described_system
    config = results_db.site_config(args.system)
    described_states = described_system.node_states(args.system)
    slow_total, screened = 0, 0
    for check, what, variable, unit in SCREENS:
        try:
            uuid, cases = measured.check_cases(config, check, args.session)
        except RuntimeError:
            continue
        screened += 1
        groups = {}
        for case in cases:
            node = ','.join(case.nodes) or '?'
            groups.setdefault((case.partition, case.environ), {})[node] = case.value(variable)

        print(f'{what} node screening, session {uuid}, threshold {args.threshold:g} % below '
              'the median')
        for (partition, environ), rates in sorted(groups.items()):
            screening = hpl_output.screen_nodes(rates, args.threshold)
            print(f'\n{args.system}:{partition} {environ}: {len(rates)} node(s), median '
                  f'{screening.median:.2f} {unit}')
            for node, rate in sorted(rates.items()):
                flag = (f'  SLOW ({screening.slow[node][1]:.1f} % below)'
                        if node in screening.slow else '')
                print(f'  {node:<24}{rate:>10.2f} {unit}{flag}')
            for line in _unscreened_lines(rates, *described_states.get(partition, ({}, {}))):
                print(f'  {line}')

            slow_total += len(screening.slow)
    if not screened:
        raise RuntimeError('no stored session has results of '
                           + ' or '.join(check for check, *_ in SCREENS)
                           + (f' (session {args.session})' if args.session else ''))
    if slow_total:
        raise Worse(f'{slow_total} slow node(s) flagged')


def _unscreened_lines(rates, states, out_of_service):
    """What a screen of the nodes `rates` has figures of says of the partition's other nodes
    (`states`, `out_of_service`: as the controller printed them when the system was
    described): each node that could not run, why, and those that could but have no
    figure (busy the whole run, or their job failed)."""
    lines = [f'{node:<24}out of service when described: {why}'
             for node, why in sorted(out_of_service.items()) if node not in rates]
    missing = sorted(set(states) - set(rates) - set(out_of_service))
    if missing:
        lines.append(f'no figure of {len(missing)} node(s) in service when described: '
                     f'{", ".join(missing)} (busy or failed during the screen: see its log)')
    return lines


def _compare_stacks(args):
    """Each test case's figures side by side per environment (MPI stack and BLAS), from a
    stored session, the ceilings the checks divide by included; where a case ran with
    several BLAS libraries, its first figure as BLAS x MPI."""
    import re

    from hpcbench.results import measured, stack_comparison
    try:
        pattern = re.compile(args.check)
    except re.error as err:
        raise RuntimeError(f'--check {args.check!r}: {err}') from None

    data = stored_session(args)
    cases = [c for c in measured.measured_cases(data, fixtures=True)
             if pattern.search(c.check)]
    groups = stack_comparison.side_by_side(cases)
    print(f'MPI stacks and BLAS libraries side by side, session '
          f'{data["session_info"]["uuid"]} ({len(groups)} test case(s) measured in more than '
          'one environment)')
    for heading, group in groups:
        inputs = {c.inputs for c in group.values()}
        print(f'\n{heading}' + (f'\n  inputs: {inputs.pop()}' if len(inputs) == 1 else ''))
        print(stack_comparison.stacks_table(group))
        for line in stack_comparison.withheld_lines(group):
            print(f'  {line}')
    grids = stack_comparison.blas_mpi_grids(groups)
    if grids:
        print('\nBLAS x MPI')
    for heading, variable, unit, grid in grids:
        print(f'\n{heading}\n{stack_comparison.grid_table(variable, unit, grid)}')
    _print_rankings(groups)


def _print_rankings(groups):
    """Each case's environments ranked by its compared figures (its headline, HPL's DGEMM
    ceiling), where they have samples (--repeat, or a job's own repeats), each against the
    next with a statistic."""
    from hpcbench.results import changes, stack_comparison
    ranked = [(heading, variable, changes.ranking_lines(group, variable))
              for heading, group in groups
              for variable in stack_comparison.compared_variables(group)]
    ranked = [entry for entry in ranked if entry[2]]
    if ranked:
        print(f'\nRanked (a one-sided Mann-Whitney U test of each against the next, at '
              f'p <= {changes.ALPHA:g} and more than {changes.THRESHOLD:g} % apart)')
    for heading, variable, lines in ranked:
        print(f'\n{heading}: {variable}')
        for line in lines:
            print(f'  {line}')


def _reference_counts(args):
    """Figures per system and benchmark: references, comparisons, qualitative statements."""
    from hpcbench.results import references, references_text
    known = references.systems_with_references()
    unknown = [s for s in args.system or [] if s not in known]
    if unknown:
        raise RuntimeError(f'no references for {", ".join(unknown)}; systems with '
                           f'references: {", ".join(known)}')

    systems = args.system or known
    if args.rewrite:
        for system in systems:
            changed = references_text.rewrite(system)
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


def judging_options(parser):
    from hpcbench.results import changes
    parser.add_argument('--threshold', type=_threshold, default=changes.THRESHOLD,
                        help='percent a median must get worse by to count as a regression '
                             f'(default {changes.THRESHOLD:g})')
    parser.add_argument('--days', type=_days, default=changes.DAYS,
                        help='judge against the sessions of this many days before '
                             f'(default {changes.DAYS})')


def _days(text):
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days < 1:
        raise argparse.ArgumentTypeError(f'{text!r}: a number of days, 1 or more')
    return days


def _threshold(text):
    from hpcbench.results import changes
    try:
        return changes.check_threshold(float(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _compare(args):
    """Judge sessions against earlier ones, figure by figure, as the report does
    (hpcbench.results.picture.judged); exit status 1 on a regression, 2 when it cannot judge
    (hpcbench.cli)."""
    from hpcbench.report import markdown_summary, sections
    from hpcbench.results import picture, references, results_db
    # The system's references are checked first, as every ReFrame command does when it
    # loads the site config: a broken file is its own one line.
    references.load(args.system)
    stored = results_db.stored_sessions(results_db.site_config(args.system))
    new = results_db.resolve(stored, args.new, '--new')
    old = results_db.resolve(stored, args.old, '--old')
    both = sorted(set(new) & set(old))
    if both:
        raise RuntimeError(f'session(s) {", ".join(u[:8] for u in both)} given as both --new '
                           'and --old: a session is judged against others, not itself')
    if args.baseline:
        recorded = references.load(args.system).sources.get('baseline')
        if not recorded:
            raise RuntimeError(f'{references.reference_file(args.system)} is no baseline: '
                               'record one with make baseline')
        old = [u for u in results_db.resolve(stored, recorded['baseline_sessions'],
                                             f'the baseline\'s session (in '
                                             f'{references.reference_file(args.system)})')
               if u not in new]
    comparison = picture.judged(stored, args.system, new, old, args.days, args.threshold,
                                args.across_stacks)
    if not comparison:
        raise RuntimeError(f'nothing to compare: no stored session of {args.system} has '
                           f'an earlier one (within {args.days} days) to judge it against')
    print(comparison.describe())
    shown = [r for r in comparison.rows if args.all or r.verdict.verdict != 'no change']
    print(markdown_summary.text_table(sections.COMPARISON_HEADER,
                                      [sections.comparison_cells(r) for r in shown]))
    if comparison.regressions:
        raise Worse(f'{len(comparison.regressions)} regression(s)')


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    _register_baseline(sub)
    _register_readers(sub)
    _register_compare(sub)


def _register_baseline(sub):
    from hpcbench.results import baselines     # the baseline's defaults
    base = sub.add_parser('baseline', help='record stored results as the references of a '
                                           'system, so that later runs flag regressions')
    base.add_argument('--system', type=system_name, default='local')
    base.add_argument('--session', action='append',
                      help='a session UUID to use (repeatable; default: every session of the '
                           'last --days)')
    base.add_argument('--days', type=int, default=30,
                      help='use the sessions of this many last days (default 30)')
    base.add_argument('--last', type=int,
                      help='use only the newest N of those sessions (default: all)')
    base.add_argument('--margin', type=float, default=baselines.MARGIN,
                      help='fraction of the median beyond the runs\' 5th (95th) percentile '
                           f'that the bound allows (default {baselines.MARGIN:g})')
    base.add_argument('--tolerance', type=float, default=baselines.GUESS,
                      help='the least bound, as a fraction of the median, of a figure from '
                           f'fewer than {baselines.BASELINE_SESSIONS} sessions, whose spread is '
                           f'a guess (default {baselines.GUESS:g})')
    base.set_defaults(func=_baseline)


def _register_readers(sub):
    """The commands that read stored results: tuning, screening, stacks, references."""
    tuning = sub.add_parser('hpl-tuning', help="print the HPL tuning sweep's best values")
    tuning.add_argument('--system', type=system_name, default='local')
    tuning.add_argument('--session', help='session UUID (default: the newest with a sweep)')
    tuning.set_defaults(func=_hpl_tuning)
    screen = sub.add_parser('screen-nodes', help='flag nodes whose single-node HPL is slow '
                                                 '(exit 1: one is, 2: an error)')
    screen.add_argument('--system', type=system_name, default='local')
    screen.add_argument('--session', help='session UUID (default: the newest screening)')
    screen.add_argument('--threshold', type=float, default=5.0,
                        help='percent below the median that flags a node (default 5)')
    screen.set_defaults(func=_screen_nodes)
    stacks = sub.add_parser('compare-stacks',
                            help='print each test case side by side per MPI stack')
    stacks.add_argument('--system', type=system_name, default='local')
    stacks.add_argument('--session', help='session UUID (default: the newest)')
    stacks.add_argument('--check', default='',
                        help='only checks whose name matches this regular expression')
    stacks.set_defaults(func=_compare_stacks)
    counts = sub.add_parser('references',
                            help='count the reference figures per system and benchmark')
    counts.add_argument('--system', type=system_name, action='append',
                        help='only this system (repeatable; default: every references file)')
    counts.add_argument('--rewrite', action='store_true',
                        help='write each file in its one form (key order, one-line match and '
                             'tolerance, folded strings) after a hand edit')
    counts.set_defaults(func=_reference_counts)


def _register_compare(sub):
    judge = sub.add_parser('compare', help='judge stored sessions against earlier ones: '
                                           'regression, improvement, no change or '
                                           'inconclusive per figure (exit 0: none regressed, '
                                           '1: a regression, 2: an error)')
    judge.add_argument('--system', type=system_name, default='local')
    judge.add_argument('--new', nargs='+', metavar='UUID',
                       help='sessions to judge (default: the newest)')
    against = judge.add_mutually_exclusive_group()
    against.add_argument('--old', nargs='+', metavar='UUID',
                         help='sessions to judge against (default: those of the --days before)')
    against.add_argument('--baseline', action='store_true',
                         help='judge against the sessions the baseline (make baseline) was '
                              'made from')
    judging_options(judge)
    judge.add_argument('--all', action='store_true', help="list the 'no change' figures too")
    judge.add_argument('--across-stacks', action='store_true',
                       help='judge figures whose stack changed (another build, BLAS or MPI) '
                            "too, instead of saying 'stack changed': compares two stacks")
    judge.set_defaults(func=_compare)
