"""`hpcbench`: the suite's commands, one module per group (hpcbench.cli.*_commands), each
adding its own to the parser. An error a command expects (no Spack, a bad references file,
a stored result missing) is one line on stderr and exit status 2; a judging command's
verdict that something got worse is exit status 1 (hpcbench.cli: EXIT_*); Ctrl-C is one
line too."""
import argparse
import os
import signal
import sys

from hpcbench.cli import (EXIT_ERROR, EXIT_OK, EXIT_WORSE, Worse, acceptance_commands,
                          ci_commands, report_commands, results_commands, run_commands,
                          stack_commands, watch_commands)

GROUPS = (stack_commands, run_commands, results_commands, acceptance_commands,
          watch_commands, report_commands, ci_commands)
# Commands that neither read nor write the results directory (make expands them before
# its recipes run): every other one claims it first (hpcbench.core.paths.claim_var_dir).
WITHOUT_RESULTS = ('default-mode', 'mode-options', 'exec-options', 'reframe-command',
                   'references', 'provenance', 'new-system')


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hpcbench')
    sub = parser.add_subparsers(dest='command', required=True)
    for group in GROUPS:
        group.register(sub)
    args = parser.parse_args(argv)

    from hpcbench.core import child_processes, paths, run_lock
    from hpcbench.results import reference_schema
    from hpcbench.stack import machine_systems, spack
    child_processes.end_on_signals()
    try:
        # A results directory that is not the suite's is refused before anything is read
        # or written there.
        if args.command not in WITHOUT_RESULTS:
            paths.claim_var_dir()
        args.func(args)
    except Worse as verdict:
        print(verdict, file=sys.stderr)
        return EXIT_WORSE
    except (spack.SpackNotFound, machine_systems.BootstrapError, reference_schema.ReferenceError,
            RuntimeError) as err:
        print(f'error: {err}', file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        # A file that cannot be written (a read-only or full results directory, cache or
        # checkout): which, and why, in one line.
        inside = os.path.abspath(err.filename or '').startswith(
            os.path.abspath(paths.VAR_DIR) + os.sep)
        print(f'error: {run_lock.unusable(paths.VAR_DIR, err)}' if inside else
              f'error: {err.strerror or err}: {err.filename or "?"}', file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as err:
        # What each step leaves is whole or gone (clones and unpacking into temporary
        # directories renamed at the end, Spack's own installs), and what it started has
        # ended (hpcbench.core.child_processes): no traceback to read.
        signal_name = str(err) if isinstance(err, child_processes.Terminated) else 'SIGINT'
        print(f'hpcbench {args.command}: interrupted ({signal_name}); run it again to go on',
              file=sys.stderr)
        return 128 + getattr(signal, signal_name)

    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
