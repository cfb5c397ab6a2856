"""The report of a system's stored results (`make report`, `hpcbench report`): an HTML page
and a Markdown summary built from ReFrame's results database.

- per check, its latest results against their references: pass or fail as ReFrame judged
  them, and the margin to the reference;
- plots of the results beside the papers' figures (hpcbench.report.plots);
- the newest session judged against the sessions before it, figure by figure, with
  a significance test (hpcbench.results.verdicts): regressions highlighted;
- the provenance each result carries (hpcbench.stack.provenance): session extras and the
  build, inputs and node of every test case.

This module writes them (write: index.html, summary.md and plots/ into a directory that is
the report's or empty; from_database: the sessions fetched first); hpcbench.report.contents
makes their rows, markdown_summary and html_page their text. Everything but from_database
works on data (sessions as `reframe --describe-stored-sessions` prints them).
"""
import datetime
import itertools
import shutil
from pathlib import Path

from hpcbench.report import plots, trend_plots
from hpcbench.results import measured, references, results_db, verdicts
from hpcbench.report.markdown_summary import markdown
from hpcbench.report.html_page import render_html
from hpcbench.report.contents import (Comparison, ceiling_cases, gpu_rows, latest_cases,
                                      over_stored_runs)


# --- Markdown ------------------------------------------------------------------------------


# --- HTML ----------------------------------------------------------------------------------


# --- Writing -------------------------------------------------------------------------------


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


def write(directory, system, sessions, compared=None, threshold=verdicts.THRESHOLD,
          stored=None):
    """Write index.html, summary.md and plots/ for `system` into directory (replacing an
    earlier report there; refusing a directory with other files: claim_directory):
    the results of `sessions` (newest first), and `compared`, (new UUIDs, old UUIDs)
    among `stored` (default: `sessions`), judged. Returns the path of index.html."""
    directory = Path(directory)
    cases, used = latest_cases(sessions, system)
    if not cases:
        raise RuntimeError(f'no stored session has results of {system}: run the suite first')

    reference_set = references.load(system)
    papers = [references.load(s) for s in references.systems_with_references()
              if s != system]
    comparison = None
    if compared:
        rows = verdicts.compare(stored or sessions, system, *compared, threshold=threshold)
        comparison = Comparison(*compared, rows, threshold) if rows else None

    claim_directory(directory)
    plot_dir = directory / 'plots'
    shutil.rmtree(plot_dir, ignore_errors=True)
    plot_dir.mkdir(parents=True)
    history = measured.figure_samples(stored or sessions, system)
    over_stored_runs(cases, history)
    saved = [(plot, plots.save(plot, plot_dir))
             for plot in itertools.chain(plots.all_plots(cases, papers, system),
                                         trend_plots.trends(history, reference_set, system,
                                                            threshold))]
    generated = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    ceilings = ceiling_cases(used, system)
    gpu = gpu_rows(cases, papers)
    (directory / 'summary.md').write_text(
        markdown(system, cases, reference_set, comparison, saved, generated, ceilings, gpu))
    index = directory / 'index.html'
    index.write_text(render_html(system, cases, used, reference_set, comparison, saved,
                                 generated, ceilings, gpu))
    return index


def from_database(system, directory, session=None, against=None,
                  threshold=verdicts.THRESHOLD, days=verdicts.DAYS):
    """The report of `system` from its results database: the latest results of every check
    measured in the window it judges (or those of `session`), and that session (default:
    the newest) judged against `against` (default: the sessions of the `days` before it).
    Only the window is read, and its trend plots cover it: a year of nightly history costs
    what a month does (hpcbench.results.results_db.Store)."""
    if Path(directory).exists():
        claim_directory(directory)      # refused before the database is even read
    config = results_db.site_config(system)
    references.load(system)     # a broken references file is named before anything is read
    stored = results_db.stored_sessions(config)
    session = session and results_db.resolve(stored, [session], '--session')[0]
    against = against and results_db.resolve(stored, [against], '--against')[0]

    compared = verdicts.sessions_to_judge(stored, system, session and [session],
                                          against and [against], days)
    if session:
        shown = [s for s in stored if results_db.uuid_of(s) == session]
    elif compared:
        shown = [s for s in stored if results_db.uuid_of(s) in {*compared[0], *compared[1]}]
    else:
        # Nothing to judge against: the newest session with results of the system.
        shown = [next((s for s in stored if verdicts.measures(s, system)), stored[0])
                 ] if stored else []
    window = [s for s in stored if results_db.uuid_of(s) in
              {*(compared[0] + compared[1] if compared else ()),
               *map(results_db.uuid_of, shown)}]
    return write(directory, system, shown, compared, threshold, window)
