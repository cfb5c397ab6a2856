"""`hpcbench`: the suite's commands (bootstrap, install, baseline)."""
import argparse
import sys

from hpcbench import spack


def _bootstrap(args):
    from hpcbench import bootstrap
    found = bootstrap.bootstrap(refresh=args.refresh)
    if args.command == 'install':
        bootstrap.install_local_environment(found)


def _baseline(args):
    """Record a stored session's results as references/<system>.yaml (a baseline)."""
    from hpcbench import references, results
    config = results.site_config(args.system)
    data = (results.session(config, args.session) if args.session
            else results.latest_session(config))
    if not data:
        raise RuntimeError(f'no stored session for {args.system}: run the suite first')

    uuid = data['session_info']['uuid']
    cases = [c for c in results.measured_cases(data) if c['system'] == args.system]
    if not cases:
        raise RuntimeError(f'session {uuid} has no valid performance results on '
                           f'{args.system}')

    refs = references.baseline_from_testcases(args.system, cases, uuid, args.tolerance,
                                              host=data['session_info']['hostname'])
    target = references.reference_file(args.system)
    target.write_text(references.dump(refs))
    rebased = sum(not c['met_references'] for c in cases)
    print(f'{target}: {len(refs.figures)} figures from session {uuid} '
          f'(tolerance {args.tolerance:.0%}); {rebased} of {len(cases)} test cases had missed '
          'their previous references and are recorded at their new level')


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hpcbench')
    sub = parser.add_subparsers(dest='command', required=True)
    for name, text in (('bootstrap', 'set up this machine (idempotent)'),
                       ('install', 'bootstrap, then concretize and install spack-envs/local')):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument('--refresh', action='store_true',
                         help='detect compilers and build tools again')
        cmd.set_defaults(func=_bootstrap)

    base = sub.add_parser('baseline', help='record stored results as the references of a '
                                           'system, so that later runs flag regressions')
    base.add_argument('--system', default='local')
    base.add_argument('--session', help='session UUID (default: the newest)')
    base.add_argument('--tolerance', type=float, default=0.10,
                      help='allowed fraction below (or above, for times) the baseline')
    base.set_defaults(func=_baseline)
    args = parser.parse_args(argv)

    from hpcbench import bootstrap, references
    try:
        args.func(args)
    except (spack.SpackNotFound, bootstrap.BootstrapError, references.ReferenceError,
            RuntimeError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    return 0


if __name__ == '__main__':
    sys.exit(main())
