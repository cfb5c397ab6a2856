"""`hpcbench report`: the HTML report and Markdown summary of a system's stored results."""
from pathlib import Path

from hpcbench.cli import system_name
from hpcbench.cli.results_commands import judging_options


def _report(args):
    """The HTML report and Markdown summary of a system's stored results."""
    from hpcbench.core import paths
    from hpcbench.report import pages
    directory = Path(args.output) if args.output else paths.VAR_DIR / 'report' / args.system
    index = pages.from_database(args.system, directory, args.session, args.against,
                                args.threshold, args.days)
    print(f'Markdown summary: {index.parent / "summary.md"}')
    if args.check:
        from hpcbench.report import browser
        try:
            seen = browser.inspect(index, index.parent / 'screenshot.png')
        except browser.BrowserUnavailable as err:
            print(f'not opened in a browser: {err}')
        else:
            print(browser.describe(seen))
            if not seen.ok:
                raise RuntimeError(f'{index} does not display completely in Chromium')
    print(f'Report: {index}')


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    rep = sub.add_parser('report', help='write the HTML report and Markdown summary of the '
                                        "stored results (ReFrame's results database)")
    rep.add_argument('--system', type=system_name, default='local')
    rep.add_argument('--session', help='show this session (default: each check\'s newest in '
                                       'the sessions judged: the newest and the --days before)')
    rep.add_argument('--against', help='judge it against this session (default: those of '
                                       'the --days before it)')
    judging_options(rep)
    rep.add_argument('--output', help='directory (default: var/report/<system>)')
    rep.add_argument('--check', action='store_true',
                     help='open the report in headless Chromium: screenshot, images, links')
    rep.set_defaults(func=_report)
