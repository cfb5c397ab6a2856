"""The report of a system's stored results (`make report`, `hpcbench report`): an HTML page
and a Markdown summary built from ReFrame's results database.

- per check, its latest results against their references: pass or fail as ReFrame judged
  them, and the margin to the reference;
- plots of the results beside the papers' figures (hpcbench.report.plots);
- the newest session judged against the sessions before it, figure by figure, with
  a significance test (hpcbench.results.changes): regressions highlighted;
- the provenance each result carries (hpcbench.stack.provenance): session extras and the
  build, inputs and node of every test case.

This module writes them (write: index.html, summary.md and plots/ into a directory that is
the report's or empty) from one picture of what the system measured, which the results
layer builds (hpcbench.results.picture: from the database, or from sessions as data);
hpcbench.report.contents makes their rows and hpcbench.report.sections the typed sections
and tables, once; markdown_summary and html_page write those as text. The report renders;
it reads nothing itself but the papers' references for its plots.
"""
import datetime
import itertools
import shutil
from pathlib import Path

from hpcbench.report import plots, sections, trend_plots
from hpcbench.results import changes, picture, references
from hpcbench.report.markdown_summary import markdown
from hpcbench.report.html_page import render_html


# Marks a directory as a report's: only such a directory (or a new or empty one) is
# written into, and its plots/ replaced.
MARKER = '.hpcbench-report'


def claim_directory(directory):
    """Make `directory` a report's, or refuse one that holds anything else: a report
    replaces index.html, summary.md and plots/, which must never be a user's files."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RuntimeError(f'{directory} is not a directory')
    if (directory.is_dir() and any(directory.iterdir())
            and not (directory / MARKER).exists()):
        raise RuntimeError(f'{directory} holds files that no hpcbench report wrote: give '
                           '--output a new or empty directory (nothing was written)')
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text('Written by `hpcbench report`: it replaces index.html, '
                                    'summary.md and plots/ here.\n')


def write(directory, picture):
    """Write index.html, summary.md and plots/ of `picture` (hpcbench.results.picture: what
    a system measured) into directory, replacing an earlier report there and refusing a
    directory with other files (claim_directory). Returns the path of index.html."""
    directory = Path(directory)
    system = picture.system
    papers = [references.load(s) for s in references.systems_with_references()
              if s != system]
    claim_directory(directory)
    plot_dir = directory / 'plots'
    shutil.rmtree(plot_dir, ignore_errors=True)
    plot_dir.mkdir(parents=True)
    saved = [(plot, plots.save(plot, plot_dir))
             for plot in itertools.chain(plots.all_plots(picture.cases, papers, system),
                                         trend_plots.all_trends(picture.history,
                                                            picture.references, system,
                                                            picture.threshold))]
    generated = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    report = sections.build(picture, saved, papers, generated)
    (directory / 'summary.md').write_text(markdown(report))
    index = directory / 'index.html'
    index.write_text(render_html(report))
    return index


def from_database(system, directory, session=None, against=None,
                  threshold=changes.THRESHOLD, days=changes.DAYS):
    """The report of `system` from its results database (hpcbench.results.picture.
    from_database: the window it judges, and no older session, is read)."""
    if Path(directory).exists():
        claim_directory(directory)      # refused before the database is even read
    return write(directory, picture.from_database(system, session, against, threshold, days))
