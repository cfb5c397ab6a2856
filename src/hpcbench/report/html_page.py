"""The report's HTML page (index.html): the report's sections (hpcbench.report.sections), the
same the Markdown summary writes, with the plots inline, failures and regressions
highlighted, and every test case's provenance (session extras, build, inputs, node) one
click away. Plain HTML and CSS, no script."""
import html

from hpcbench.report.sections import paragraphs


_STYLE = '''
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { background: #e3f4e3; } .fail { background: #f9d6d5; font-weight: bold; }
.regression { background: #f9d6d5; font-weight: bold; } .improvement { background: #e3f4e3; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #444; }
pre { background: #f6f6f6; padding: 0.5em; font-size: 0.8em; overflow-x: auto; }
nav a { margin-right: 1em; } code { font-size: 0.9em; }
th, td { overflow-wrap: break-word; } .notrun { background: #ececec; }
.banner { padding: 0.5em 1em; margin: 0.5em 0 1em; border-left: 0.5em solid #888; }
.banner.fail { background: #f9d6d5; border-color: #c0392b; font-weight: normal; }
.banner.warn { background: #fcf3cf; border-color: #f1c40f; }
.banner.pass { background: #e3f4e3; border-color: #2e9e4f; }
.banner p { margin: 0.3em 0; } .banner strong { font-size: 1.3em; }
pre.written { white-space: pre-wrap; overflow-wrap: anywhere; }
@media print {
  body { max-width: none; margin: 0; font-size: 9pt; } nav { display: none; }
  a { color: inherit; text-decoration: none; } tr, figure, .banner { break-inside: avoid; }
  h2 { break-after: avoid; } details { display: none; }
}
'''


def _e(value):
    return html.escape(str(value))


def _html_table(table):
    out = ['<table><tr>' + ''.join(f'<th>{_e(h)}</th>' for h in table.header) + '</tr>']
    classes = table.row_classes or ('',) * len(table.rows)
    for row, cls in zip(table.rows, classes):
        cls = f' class="{cls}"' if cls else ''
        cells = ''.join(f'<td class="num">{_e(c)}</td>' if isinstance(c, (int, float))
                        or (isinstance(c, str) and c[:1] in '+-0123456789' and c != '-')
                        else f'<td>{_e(c)}</td>' for c in row)
        out.append(f'<tr{cls}>{cells}</tr>')
    return '\n'.join(out + ['</table>'])


def _section(section):
    out = [f'<h2 id="{_e(section.anchor)}">{_e(section.title)}</h2>']
    if section.links:
        out.append('<p>' + ' '.join(f'<a href="#{_e(target)}">{_e(text)}</a>'
                                    for text, target in section.links) + '</p>')
    lead = (f'<p>{_e(section.lead[0])} <strong>{_e(section.lead[1])}</strong>.</p>'
            if section.lead else '')
    intro = [f'<p>{_e(text)}</p>' for text in paragraphs(section.intro)]
    if section.banner:
        out.append(f'<div class="banner {_e(section.banner)}" id="{_e(section.anchor)}-banner">'
                   + lead + ''.join(intro) + '</div>')
    else:
        out += intro + ([lead] if lead else [])
    if section.empty and not section.tables and not section.plots:
        out.append(f'<p>{_e(section.empty)}</p>')
    for table in section.tables:
        if table.heading:
            ident = f' id="{_e(table.anchor)}"' if table.anchor else ''
            out.append(f'<h3{ident}>{_e(table.heading)}</h3>')
        out.append(_html_table(table))
        out += [f'<p>{_e(note)}</p>' for note in table.notes]
    for plot, name in section.plots:
        out.append(f'<figure id="plot-{_e(plot.name)}"><a href="plots/{_e(name)}">'
                   f'<img src="plots/{_e(name)}" alt="{_e(plot.title)}. {_e(plot.caption)}"></a>'
                   f'<figcaption>{_e(plot.title)}. {_e(plot.caption)}</figcaption></figure>')
    if section.text:
        out.append(f'<pre class="written">{_e(section.text)}</pre>')
    for details in section.details:
        facts = ''.join(f'<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in details.facts)
        files = ''.join(f'<p>{_e(name)}</p><pre>{_e(text)}</pre>' for name, text in details.files)
        out.append(f'<details><summary>{_e(details.summary)}</summary>'
                   f'<table>{facts}</table>{files}</details>')
    return out


def render_html(report):
    """index.html of a sections.Report."""
    out = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           f'<title>hpcbench {_e(report.kind)}: {_e(report.system)}</title>'
           f'<style>{_STYLE}</style></head><body>',
           f'<h1>hpcbench {_e(report.kind)}: {_e(report.system)}</h1>',
           f'<p>Generated {_e(report.generated)} from {_e(report.source)}: '
           f'{_e(report.about)}. Markdown summary: <a href="{_e(report.markdown_file)}">'
           f'{_e(report.markdown_file)}</a>.</p>',
           '<nav>' + ''.join(f'<a href="#{_e(s.anchor)}">{_e(s.title)}</a>'
                             for s in report.sections) + '</nav>']
    for section in report.sections:
        out += _section(section)
    out.append('</body></html>')
    return '\n'.join(out) + '\n'
