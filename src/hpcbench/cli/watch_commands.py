"""`hpcbench watch SYSTEM`: one cycle of the watch after the acceptance (the nodes due
re-judged against the contract, their own accepted figures and their peers; scontrol lines
printed, or run with --act; the cycle's record signed; the metrics delivered), or a node's
history over the cycles (--history NODE)."""
import json
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


def history_lines(directory, node):
    """A node's figures over the watch's cycles beside its accepted median, one line per
    cycle and entry; RuntimeError where the watch never judged it."""
    from hpcbench.acceptance import watch_record
    lines = []
    for cycle_dir in sorted((Path(directory) / watch_record.CYCLES).glob('*/')):
        path = cycle_dir / watch_record.CYCLE_RECORD
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        drifts = {(d['entry'], d['unit']): d for d in record['drifts']}
        for f in (f for f in record['figures'] if f['node'] == node):
            d = drifts.get((f['entry'], f['unit']), {})
            effect = d.get('effect')
            lines.append(f'{record["cycle"]}  {f["entry"]:<28} {f["verdict"]:<8} '
                         f'{_number(f["median"])} {f["unit_of_figure"]:<8} accepted '
                         f'{_number(d.get("accepted_median"))}  '
                         f'{"" if effect is None else f"{100 * effect:+.1f} % worse"}  '
                         f'{d.get("verdict", "")}')
        if node in record['not_run']:
            lines.append(f'{record["cycle"]}  not run: {record["not_run"][node]}')
    if not lines:
        raise RuntimeError(f'{directory}: no cycle of the watch judged {node}')
    return lines


def _number(value):
    return f'{value:10.4g}' if value is not None else '         -'


def _watch(args):
    from hpcbench.acceptance import contract, watch, watch_record
    from hpcbench.acceptance.state import AcceptanceError
    from hpcbench.core import paths
    from hpcbench.report import watch_metrics
    acceptance, directory = _directories(args)
    if args.history:
        for line in history_lines(directory, args.history):
            print(line)
        return
    path = Path(args.contract) if args.contract else paths.CONTRACTS_DIR / \
        f'{args.system}.yaml'
    store = watch_metrics.MetricsStore(directory / 'spool', args.textfile_dir,
                                       args.pushgateway, args.victoria_metrics)
    try:
        cycle = watch.Watch(args.system, path, acceptance, directory, store=store,
                            budget=args.budget, max_drain=args.max_drain, act=args.act,
                            key=args.key, batch_nodes=args.batch_nodes, mode=args.mode,
                            allowed_signers=args.allowed_signers).cycle()
    except (contract.ContractError, AcceptanceError) as err:
        raise RuntimeError(str(err)) from None
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
    counts = {name: sum(o.outcome == name for o in cycle.outcomes.values())
              for name in ('PASS', 'FAIL', 'NOT_RUN')}
    print(f'\n{args.system}: cycle {cycle.name}: {len(cycle.due)} node(s) judged: '
          + ', '.join(f'{n} {name}' for name, n in counts.items() if n)
          + f'; record {directory / watch_record.CYCLES / cycle.name}')
    if counts['FAIL']:
        raise Worse(f'{args.system}: {counts["FAIL"]} node(s) failed this cycle')


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
    parser.set_defaults(func=_watch)
