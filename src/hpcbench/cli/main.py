"""`hpcbench`: the suite's commands, one module per group (hpcbench.cli.*_commands), each
adding its own to the parser. An error a command expects (no Spack, a bad references file,
a stored result missing) is one line on stderr and exit status 1; Ctrl-C is one line too."""
import argparse
import sys

from hpcbench.cli import (ci_commands, report_commands, results_commands, run_commands,
                          stack_commands)

GROUPS = (stack_commands, run_commands, results_commands, report_commands, ci_commands)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hpcbench')
    sub = parser.add_subparsers(dest='command', required=True)
    for group in GROUPS:
        group.register(sub)
    args = parser.parse_args(argv)

    from hpcbench.results import reference_schema
    from hpcbench.stack import bootstrap, spack
    try:
        args.func(args)
    except (spack.SpackNotFound, bootstrap.BootstrapError, reference_schema.ReferenceError,
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
