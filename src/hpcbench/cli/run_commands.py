"""`hpcbench` commands `make run` calls around ReFrame: reframe-command (ReFrame's command
line on the system), default-mode and mode-options (the execution mode's options),
exec-options (the system's), stored-run (this run's session,
once stored), time-per-check (where the session's wall time went)."""
from hpcbench.cli import system_name
from hpcbench.cli.results_commands import stored_session


def _stored_run(args):
    """This run's session UUID (make run), once the results database holds it."""
    from hpcbench.results import results_db
    print(results_db.this_run(results_db.site_config(args.system), args.report))


def _time_per_check(args):
    """Each check's test cases and the seconds of their jobs in a stored session, and the
    share of its wall time that benchmark jobs took."""
    from hpcbench.results import session_time
    data = stored_session(args)
    print(f'Time per check, session {data["session_info"]["uuid"]}')
    print(session_time.time_table(data))


def _default_mode(args):
    """The system's default mode (hpcbench.rfm.run_modes.default_mode)."""
    from hpcbench.rfm import run_modes
    print(run_modes.default_mode(args.system))


def _mode_options(args):
    """A ReFrame mode's options, shell-quoted, for a command line that puts the user's own
    after them. (ReFrame's --mode merges a user's -p with the default instead of letting it
    win: `--mode=quick -p openmpi` selected every environment.)"""
    import shlex

    from hpcbench.rfm import run_modes
    print(shlex.join(run_modes.mode_options(args.mode, args.system)))


def _exec_options(args):
    """The ReFrame options every run on the system takes (one job at a time where its nodes
    share a host), shell-quoted."""
    import shlex

    from hpcbench.rfm import run_modes
    print(shlex.join(run_modes.execution_options(args.system)))


def _reframe_command(args):
    """ReFrame's command line on the system, shell-quoted, its paths relative to the
    project's root (hpcbench.rfm.reframe_port.command_line: make's REFRAME)."""
    import shlex

    from hpcbench.core import paths
    from hpcbench.rfm import reframe_port
    print(shlex.join(reframe_port.command_line(args.system, root=paths.PROJECT_ROOT)))


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    timing = sub.add_parser('time-per-check',
                            help="print where a session's wall time went, per check")
    timing.add_argument('--system', type=system_name, default='local')
    timing.add_argument('--session', help='session UUID (default: the newest)')
    timing.set_defaults(func=_time_per_check)
    stored = sub.add_parser('stored-run',
                            help="print the session UUID of a run's report once the results "
                                 'database holds it; fail saying why when it does not (make '
                                 'run, before it shows anything as the run\'s)')
    stored.add_argument('--system', type=system_name, default='local')
    stored.add_argument('--report', required=True, help='the run report the run wrote')
    stored.set_defaults(func=_stored_run)
    mode = sub.add_parser('mode-options', help="print a ReFrame mode's options (make run "
                                               'puts them before RFM_OPTS)')
    mode.add_argument('mode', help='quick or full (hpcbench.rfm.run_modes.MODES)')
    mode.add_argument('--system', type=system_name, help="the system whose mode (full: its paper's run, node "
                                       'screening included where its paper screened)')
    mode.set_defaults(func=_mode_options)
    command = sub.add_parser('reframe-command', help="print ReFrame's command line on the "
                             "system: this venv's reframe, the system's site config and the "
                             "suite's checks (make's REFRAME; the acceptance runs the same)")
    command.add_argument('--system', type=system_name, default='local')
    command.set_defaults(func=_reframe_command)
    execution = sub.add_parser('exec-options', help="print the ReFrame options every run on "
                                                    'the system takes (make run, screen, '
                                                    'tune): one job at a time where its '
                                                    'Slurm nodes share a host')
    execution.add_argument('--system', type=system_name, default='local')
    execution.set_defaults(func=_exec_options)
    default_mode = sub.add_parser('default-mode', help="the mode make uses without MODE= "
                                                       '(quick here, full on a paper system)')
    default_mode.add_argument('--system', type=system_name, default='local')
    default_mode.set_defaults(func=_default_mode)
