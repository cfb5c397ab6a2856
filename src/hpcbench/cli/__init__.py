"""`hpcbench`, the command line (hpcbench.cli.main): one module per command group. The top
layer: it may import every other, and nothing imports it.

Exit statuses, the same for every command, so that a CI job can tell "slower" from
"broken": 0 done (and, for a command that judges, nothing got worse); 1 a command that
judges found something worse (`compare`: a regression; `screen-nodes`: a slow node);
2 an error (bad input, a missing file, an unreadable database, no Spack; argparse's usage
errors are 2 as well); 128 + N interrupted by signal N.
"""
import argparse
import re

EXIT_OK, EXIT_WORSE, EXIT_ERROR = 0, 1, 2
# A system's name, as its site config's file is named (site-configs/<name>.py).
SYSTEM_NAME = re.compile(r'[a-z][a-z0-9-]{0,30}')


def system_name(text):
    """`--system`'s value: the name of one of the systems (a site config of
    site-configs/), refused before anything is read: `/path/x` ran /path/x.py as a site
    config, whatever it held, before it was said to be no system."""
    from hpcbench.core import paths
    if SYSTEM_NAME.fullmatch(text) and (paths.SITE_CONFIGS_DIR / f'{text}.py').is_file():
        return text
    known = sorted(p.stem for p in paths.SITE_CONFIGS_DIR.glob('*.py')
                   if SYSTEM_NAME.fullmatch(p.stem))
    raise argparse.ArgumentTypeError(f'{text[:80]!r} is not a system (the systems: '
                                     f'{", ".join(known)}; `hpcbench new-system` describes '
                                     'another)')


class Worse(Exception):
    """A judging command's verdict that something got worse: exit status 1, and its
    message on stderr (no `error:`: nothing failed)."""
