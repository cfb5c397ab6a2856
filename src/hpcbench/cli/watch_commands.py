"""`hpcbench watch SYSTEM`: one cycle of the watch after the acceptance (the nodes due
re-judged against the contract, their own accepted figures and their peers; scontrol lines
printed, or run with --act; the cycle's record signed; the metrics delivered), or a node's
history over the cycles (--history NODE)."""
from pathlib import Path

from hpcbench.cli import Worse, system_name


def _fraction(text):
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f'{text!r} is no share of a partition (a number '
                                         'in [0, 1], e.g. 0.05)')
    return value


def _directories(args):
    from hpcbench.acceptance import use_case, watch_record
    from hpcbench.core import paths
    acceptance = Path(args.acceptance) if args.acceptance else \
        paths.VAR_DIR / use_case.ACCEPTANCE_DIR / args.system
    directory = Path(args.output) if args.output else paths.VAR_DIR / watch_record.WATCH_DIR / \
        args.system
    return acceptance, directory


# The options of a cycle a schedule passes on: (option, its attribute).
_PASSED = (('--contract', 'contract'), ('--acceptance', 'acceptance'), ('--output', 'output'),
           ('--budget', 'budget'), ('--max-drain', 'max_drain'), ('--key', 'key'),
           ('--allowed-signers', 'allowed_signers'), ('--textfile-dir', 'textfile_dir'),
           ('--pushgateway', 'pushgateway'), ('--victoria-metrics', 'victoria_metrics'),
           ('--batch-nodes', 'batch_nodes'), ('--mode', 'mode'))


def _schedule(args, path, directory):
    """--install or --uninstall: the schedule of this watch's cycles."""
    import sys
    from hpcbench.acceptance import contract, watch_install
    from hpcbench.stack import testbed_system
    env = testbed_system.slurm_environment(args.system)
    where = Path(args.unit_dir) if args.unit_dir else (
        Path.home() / '.config' / 'systemd' / 'user' if (args.install or args.uninstall) ==
        'systemd' else directory)
    if args.uninstall:
        print(watch_install.uninstall(args.uninstall, args.system, where, env))
        return
    periods = [e.watch.period for e in contract.load(path, args.system).entries if e.watch]
    every = watch_install.schedule_seconds(args.every, periods)
    command = [str(Path(sys.executable).parent / 'hpcbench'), 'watch', args.system]
    for option, name in _PASSED:
        value = getattr(args, name)
        if value is not None:
            command += [option, str(Path(value).resolve()) if name in (
                'contract', 'acceptance', 'output', 'key', 'allowed_signers',
                'textfile_dir') else str(value)]
    command += ['--act'] if args.act else []
    print(watch_install.install(args.install, args.system, command, every, where, env,
                                partition=args.partition, qos=args.qos,
                                account=args.account))


def _history(directory, node):
    """--history NODE: its lines, and its plot beside the watch's records."""
    import os
    from hpcbench.report import watch_history
    if directory.exists() and directory.stat().st_uid != os.geteuid():
        raise RuntimeError(f'{directory} belongs to another user (uid '
                           f'{directory.stat().st_uid}): its history is theirs to plot; '
                           'give --output a watch of yours')
    points, not_run = watch_history.history(directory, node)
    if not points and not not_run:
        raise RuntimeError(f'{directory}: no cycle of the watch judged {node}')
    for line in watch_history.lines(points, not_run):
        print(line)
    if points:
        picture = directory / f'history-{node}.png'
        watch_history.plot(points, node, picture)
        print(f'plot: {picture}')


def _verify(args):
    """--verify CYCLE (hpcbench.acceptance.watch_record.verify)."""
    from hpcbench.acceptance import watch_record
    from hpcbench.cli.acceptance_commands import verified
    verified(watch_record.verify, args.verify, args.allowed_signers, args.identity,
             'the verdicts and drifts are what its runs give')


def _said(args, cycle, directory):
    """What a cycle found, one line per node that did not simply pass; Worse where one
    failed."""
    from hpcbench.acceptance import watch_record
    for outcome in sorted(cycle.outcomes.values(), key=lambda o: o.node):
        if outcome.outcome != 'PASS' or outcome.slow:
            print(outcome.words() + (f' (slow: {"; ".join(outcome.slow)})'
                                     if outcome.slow else ''))
    for node, what in sorted(cycle.returned.items()):
        print(f'{node}: marked repaired: {what}')
    for node, why in sorted(cycle.not_run.items()):
        print(f'{node}: not run: {why}')
    for node in sorted(cycle.stale):
        print(f'{node}: NOT_RUN: stale, not judged within its period')
    if args.junit:
        Path(args.junit).parent.mkdir(parents=True, exist_ok=True)
        Path(args.junit).write_text(watch_record.junit_xml(cycle.record))
    counts = {name: sum(o.outcome == name for o in cycle.outcomes.values())
              for name in ('PASS', 'FAIL', 'NOT_RUN')}
    print(f'\n{args.system}: cycle {cycle.name}: {len(cycle.due)} node(s) judged: '
          + ', '.join(f'{n} {name}' for name, n in counts.items() if n)
          + f'; record {directory / watch_record.CYCLES / cycle.name}')
    if counts['FAIL']:
        raise Worse(f'{args.system}: {counts["FAIL"]} node(s) failed this cycle')


def _watch(args):
    from hpcbench.acceptance import contract, watch, watch_record
    from hpcbench.acceptance.state import AcceptanceError
    from hpcbench.core import paths
    from hpcbench.report import watch_metrics
    acceptance, directory = _directories(args)
    if args.dashboard:
        from hpcbench.report import watch_dashboard
        Path(args.dashboard).write_text(watch_dashboard.text())
        print(f'{args.dashboard}: the watch\'s Grafana dashboard (import it; its data source: '
              'the Prometheus or VictoriaMetrics the metrics go to)')
        return
    if args.history:
        return _history(directory, args.history)
    if args.verify:
        return _verify(args)
    if args.report:
        from hpcbench.report import watch_page
        if not (directory / watch_record.CYCLES).is_dir():
            raise RuntimeError(f'{directory}: no cycle of the watch to report')
        print(f'the watch\'s page: {watch_page.write(args.system, directory)}')
        return
    path = Path(args.contract) if args.contract else paths.CONTRACTS_DIR / \
        f'{args.system}.yaml'
    try:
        if args.install or args.uninstall:
            return _schedule(args, path, directory)
        store = watch_metrics.MetricsStore(directory / 'spool', args.textfile_dir,
                                           args.pushgateway, args.victoria_metrics)
        cycle = watch.Watch(args.system, path, acceptance, directory, store=store,
                            budget=args.budget, max_drain=args.max_drain, act=args.act,
                            key=args.key, batch_nodes=args.batch_nodes, mode=args.mode,
                            allowed_signers=args.allowed_signers).cycle()
    except (contract.ContractError, AcceptanceError) as err:
        raise RuntimeError(str(err)) from None
    _said(args, cycle, directory)


def register(sub):
    """Add `watch` to the `hpcbench` parser's subparsers."""
    from hpcbench.acceptance import watch_record, watch_rules
    parser = sub.add_parser('watch', help='one cycle of the watch after the acceptance: the '
                            'nodes due re-judged against the contract and their own accepted '
                            'figures; or --history NODE')
    parser.add_argument('system', type=system_name)
    parser.add_argument('--contract', help='the contract, its watched entries with a watch: '
                        'clause (default: contracts/SYSTEM.yaml)')
    parser.add_argument('--acceptance', help='the signed acceptance the figures are judged '
                        'against (default: var/acceptance/SYSTEM)')
    parser.add_argument('--output', help='the watch\'s directory (default: var/watch/SYSTEM)')
    parser.add_argument('--budget', type=int, default=watch_record.DEFAULT_BUDGET,
                        help=f'nodes judged at once, at most (default {watch_record.DEFAULT_BUDGET})')
    parser.add_argument('--max-drain', type=_fraction, default=watch_rules.DEFAULT_MAX_DRAIN,
                        help='the most of a partition one cycle drains (default '
                        f'{watch_rules.DEFAULT_MAX_DRAIN:g}); beyond it, none')
    parser.add_argument('--act', action='store_true', help='run the scontrol lines (without: '
                        'they are printed)')
    parser.add_argument('--key', help='an SSH private key to sign each cycle\'s manifest with')
    parser.add_argument('--allowed-signers', help='the site\'s allowed signers file the '
                        'acceptance\'s signature is checked against')
    parser.add_argument('--textfile-dir', help='node_exporter\'s textfile-collector '
                        'directory to write the metrics into')
    parser.add_argument('--pushgateway', help='a Pushgateway (host:port) to push them to')
    parser.add_argument('--victoria-metrics', help='a VictoriaMetrics URL to import them '
                        'into, with their time (kept on disk while it does not answer)')
    parser.add_argument('--batch-nodes', type=int, default=None, help='nodes per ReFrame run')
    parser.add_argument('--mode', choices=('quick', 'full'), help="the runs' sizes")
    parser.add_argument('--history', metavar='NODE', help='a node\'s figures over the cycles '
                        'beside its accepted ones')
    parser.add_argument('--verify', metavar='CYCLE', help='check a cycle\'s directory: '
                        'every file\'s sha256, the signature, its verdicts and drifts judged '
                        'again')
    parser.add_argument('--identity', help='with --allowed-signers and --verify: the signer')
    parser.add_argument('--report', action='store_true', help='write the watch\'s page: the '
                        'newest cycle, its drifts, the cycles, and the history of every node '
                        'that failed or drifted (var/watch/SYSTEM/report/index.html)')
    parser.add_argument('--junit', metavar='FILE', help='the cycle\'s JUnit XML (a test '
                        'case per node) also to FILE')
    parser.add_argument('--dashboard', metavar='FILE', help='write the watch\'s Grafana '
                        'dashboard (JSON) to FILE')
    _schedule_options(parser)
    parser.set_defaults(func=_watch)


def _schedule_options(parser):
    """The options of --install and --uninstall."""
    from hpcbench.acceptance.watch_install import KINDS
    parser.add_argument('--install', choices=KINDS, help='schedule the cycles: a '
                        'self-resubmitting Slurm job, or a systemd timer')
    parser.add_argument('--uninstall', choices=KINDS, help='remove that schedule')
    parser.add_argument('--every', default='1h', help='with --install: the time between '
                        'cycles (30m, 1h, 1d; default 1h)')
    parser.add_argument('--partition', help='with --install sbatch: the job\'s partition')
    parser.add_argument('--qos', help='with --install sbatch: its QOS')
    parser.add_argument('--account', help='with --install sbatch: its account')
    parser.add_argument('--unit-dir', help='where the batch script or systemd units go '
                        '(default: the watch\'s directory; ~/.config/systemd/user)')
