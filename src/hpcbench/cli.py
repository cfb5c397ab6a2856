"""`hpcbench`: the suite's commands (bootstrap, install, baseline)."""
import argparse
import sys

from hpcbench import spack


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hpcbench')
    sub = parser.add_subparsers(dest='command', required=True)
    boot = sub.add_parser('bootstrap', help='set up this machine (idempotent)')
    boot.add_argument('--refresh', action='store_true',
                      help='detect compilers and build tools again')
    sub.add_parser('install', help='bootstrap, then concretize and install spack-envs/local')
    args = parser.parse_args(argv)

    from hpcbench import bootstrap
    try:
        found = bootstrap.bootstrap(refresh=getattr(args, 'refresh', False))
        if args.command == 'install':
            bootstrap.install_local_environment(found)
    except (spack.SpackNotFound, bootstrap.BootstrapError) as err:
        print(f'error: {err}', file=sys.stderr)
        return 1

    return 0


if __name__ == '__main__':
    sys.exit(main())
