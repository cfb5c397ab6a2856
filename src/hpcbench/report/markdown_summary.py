"""The report's Markdown summary (summary.md): the report's sections (hpcbench.report.
sections) as Markdown, the plots linked; and the plain-text tables `hpcbench compare`
prints."""


def _cell(text, strong):
    text = str(text).replace('|', '\\|')
    return f'**{text}**' if strong else text


def md_table(table):
    """A sections.Table in Markdown: the cell of its `strong` column in bold in a row of
    class fail or regression."""
    lines = ['| ' + ' | '.join(table.header) + ' |', '|' + '---|' * len(table.header)]
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
        if section.intro:
            out += [section.intro, '']
        if section.lead:
            out += [f'{section.lead[0]} **{section.lead[1]}**.', '']
        if section.empty and not section.tables and not section.plots:
            out += [section.empty, '']
        for table in section.tables:
            out += [f'### {table.heading}', ''] if table.heading else []
            out += [md_table(table), '']
            out += [*(f'- {note}' for note in table.notes), ''] if table.notes else []
        if section.plots:
            out += [*(f'- [{plot.title}](plots/{name})' for plot, name in section.plots), '']
    return '\n'.join(out).rstrip('\n') + '\n'
