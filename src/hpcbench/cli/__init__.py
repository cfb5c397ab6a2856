"""`hpcbench`, the command line (hpcbench.cli.main): one module per command group. The top
layer: it may import every other, and nothing imports it.

Exit statuses, the same for every command, so that a CI job can tell "slower" from
"broken": 0 done (and, for a command that judges, nothing got worse); 1 a command that
judges found something worse (`compare`: a regression; `screen-nodes`: a slow node);
2 an error (bad input, a missing file, an unreadable database, no Spack; argparse's usage
errors are 2 as well); 128 + N interrupted by signal N.
"""
EXIT_OK, EXIT_WORSE, EXIT_ERROR = 0, 1, 2


class Worse(Exception):
    """A judging command's verdict that something got worse: exit status 1, and its
    message on stderr (no `error:`: nothing failed)."""
