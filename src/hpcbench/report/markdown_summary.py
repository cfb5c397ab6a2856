"""The report's Markdown summary (summary.md): the report's sections (hpcbench.report.
sections) as Markdown, the plots linked (shown, where a section embeds them); and the
plain-text tables `hpcbench compare` prints."""
import re

from hpcbench.report.sections import paragraphs


# What a text the suite did not write (a Slurm reason, a failed run's message, a contract's
# words) may not do in Markdown: start HTML (`<script>` reached acceptance.md raw), end a
# table's cell or row (a `|`, a newline), link or emphasise. Each is shown as itself.
_MARKDOWN_ESCAPES = str.maketrans({'\\': '\\\\', '|': '\\|', '*': '\\*', '`': '\\`',
                                   '[': '\\[', ']': '\\]', '<': '&lt;', '>': '&gt;',
                                   '&': '&amp;', '#': '\\#'})


def plain(text):
    """`text` as Markdown shows it as itself, on one line: its control characters (a
    newline, a terminal's colours) as spaces and escapes, Markdown's own characters
    escaped."""
    text = ''.join(c if c.isprintable() else ' ' if c in '\t\n\r' else
                   f'\\x{ord(c):02x}' for c in str(text))
    return text.translate(_MARKDOWN_ESCAPES)


def _cell(text, strong):
    text = plain(text)
    return f'**{text}**' if strong else text


def md_table(table):
    """A sections.Table in Markdown: the cell of its `strong` column in bold in a row of
    class fail or regression."""
    lines = ['| ' + ' | '.join(plain(h) for h in table.header) + ' |',
             '|' + '---|' * len(table.header)]
    classes = table.row_classes or ('',) * len(table.rows)
    lines += ['| ' + ' | '.join(_cell(c, i == table.strong and cls in ('fail', 'regression'))
                                for i, c in enumerate(row)) + ' |'
              for row, cls in zip(table.rows, classes)]
    return '\n'.join(lines)


def text_table(header, rows):
    """Rows as aligned columns for a terminal."""
    rows = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)


def markdown(report):
    """summary.md of a sections.Report: every section but those of the page alone."""
    out = [f'# hpcbench {report.kind}: {report.system}', '',
           f'Generated {report.generated} from {report.source}: {report.about}. '
           f'HTML report with plots: [{report.html_file}]({report.html_file}).', '']
    for section in report.sections:
        if section.html_only:
            continue
        out += [f'## {section.title}', '']
        lead = [f'{plain(section.lead[0])} **{plain(section.lead[1])}**.', ''] \
            if section.lead else []
        intro = [line for text in paragraphs(section.intro) for line in (plain(text), '')]
        # A banner: its verdict first, as the page shows it.
        out += lead + intro if section.banner else intro + lead
        if section.empty and not section.tables and not section.plots:
            out += [plain(section.empty), '']
        for table in section.tables:
            out += [f'### {plain(table.heading)}', ''] if table.heading else []
            out += [md_table(table), '']
            out += [*(f'- {plain(note)}' for note in table.notes), ''] if table.notes else []
        if section.plots and section.embed:
            out += [*(f'![{plain(plot.caption)}](plots/{name})\n' for plot, name in
                      section.plots)]
        elif section.plots:
            out += [*(f'- [{plot.title}](plots/{name})' for plot, name in section.plots), '']
        if section.text:
            # Longer than any run of backticks in the text, which cannot then close it.
            fence = '`' * max(3, 1 + max(map(len, re.findall('`+', section.text)),
                                         default=0))
            out += [fence, section.text.rstrip('\n'), fence, '']
    return '\n'.join(out).rstrip('\n') + '\n'
