"""README.md and the documentation site: README stays an entry (about 200 lines at most,
its title and then its two set-up commands first), every link in it leads to a file of the
project and every anchor to a heading there; the site builds with `mkdocs build --strict`,
which fails on a broken link, a missing anchor or a page left out of its nav (shown here on
copies). What --strict does not see is checked here: sub-lists indented as Python-Markdown
nests them, a heading per check, the index listing every page, the report's picture on its
page, nothing loaded from another site."""
import os
import re
import shutil
import subprocess

import markdown
import pytest
import yaml
from markdown.extensions.toc import slugify

from conftest import BIN, ROOT

README = ROOT / 'README.md'
# [text](target): a Markdown link or image whose target is a path in the project.
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')


def headings(markdown_file):
    """The anchors Python-Markdown's toc gives a page's headings (what mkdocs links to)."""
    text = re.sub(r'^```.*?^```', '', markdown_file.read_text(), flags=re.M | re.S)
    return {slugify(m.group(1).strip(), '-') for m in re.finditer(r'^#+ (.+)$', text, re.M)}


def test_readme_is_an_entry_and_starts_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    title, blank, *rest = text.splitlines(keepends=True)
    assert title.startswith('# ') and blank == '\n'
    assert ''.join(rest).startswith('```sh\nmake run\nmake test\n```\n')


def test_every_link_of_the_readme_leads_somewhere():
    links = LINK.findall(README.read_text())
    assert len(links) > 10
    for target in links:
        assert not target.startswith(('http:', 'https:')), f'{target}: the project has it'
        path, _, anchor = target.partition('#')
        assert (ROOT / path).is_file(), f'README links to {target}: no such file'
        if anchor:
            assert anchor in headings(ROOT / path), f'README links to {target}: no such heading'


def _build(project, site):
    return subprocess.run([str(BIN / 'mkdocs'), 'build', '--strict', '--site-dir', str(site)],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})


@pytest.fixture
def docs_copy(tmp_path):
    project = tmp_path / 'project'
    project.mkdir()
    shutil.copy(ROOT / 'mkdocs.yml', project)
    shutil.copytree(ROOT / 'docs', project / 'docs')
    return project


def test_the_site_builds_strictly_and_has_every_page(docs_copy, tmp_path):
    built = _build(docs_copy, tmp_path / 'site')
    assert built.returncode == 0, built.stderr[-3000:]
    pages = {p.stem for p in (ROOT / 'docs').glob('*.md')}
    assert {'index', 'setup', 'checks', 'results', 'report', 'systems', 'offline',
            'testbed-and-ci', 'guarantees', 'contributing'} <= pages
    for page in pages - {'index'}:
        assert (tmp_path / 'site' / page / 'index.html').is_file(), page


@pytest.mark.parametrize('broken, said', [
    ('[the set-up](setup.md#no-such-heading)', "does not contain an anchor '#no-such-heading'"),
    ('[a page](no-such-page.md)', "'no-such-page.md', but the target is not found"),
    ('[outside](../README.md)', "'../README.md', but the target is not found"),
])
def test_a_broken_link_fails_the_build(docs_copy, tmp_path, broken, said):
    index = docs_copy / 'docs' / 'index.md'
    index.write_text(index.read_text() + f'\n{broken}\n')
    built = _build(docs_copy, tmp_path / 'site')
    assert built.returncode != 0 and said in built.stderr, built.stderr[-3000:]


def test_a_page_missing_from_the_nav_fails_the_build(docs_copy, tmp_path):
    (docs_copy / 'docs' / 'stray.md').write_text('# A page no one can reach\n')
    built = _build(docs_copy, tmp_path / 'site')
    assert built.returncode != 0 and 'stray.md' in built.stderr, built.stderr[-3000:]


# A list item's marker and its indentation (outside code blocks).
LIST_ITEM = re.compile(r'^( *)(?:[-*+]|\d+\.) ')


def shallow_sublists(text):
    """(line number, line) of every list item indented by other than a multiple of 4
    spaces: Python-Markdown (mkdocs) nests a sub-list only at 4, where GitHub nests at 2,
    so a 2-space sub-list reads nested in README's view and flat on the site."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
        item = LIST_ITEM.match(line)
        if item and not fenced and len(item.group(1)) % 4:
            found.append((number, line))
    return found


def _site_markdown(text):
    """HTML of `text` as the site renders it (mkdocs.yml's Markdown extensions)."""
    config = yaml.safe_load((ROOT / 'mkdocs.yml').read_text())
    extensions = [e if isinstance(e, str) else next(iter(e)) for e in
                  config['markdown_extensions']]
    return markdown.markdown(text, extensions=extensions)


def test_a_2_space_sub_list_renders_flat_and_is_found():
    two = '- a check\n  - its input\n'
    four = '- a check\n    - its input\n'
    assert _site_markdown(four).count('<ul>') == 2 and _site_markdown(two).count('<ul>') == 1
    assert shallow_sublists(two) == [(2, '  - its input')] and shallow_sublists(four) == []


@pytest.mark.parametrize('page', sorted(p.name for p in (ROOT / 'docs').glob('*.md')))
def test_every_sub_list_of_the_site_is_indented_as_it_nests(page):
    assert shallow_sublists((ROOT / 'docs' / page).read_text()) == []


def test_each_check_has_its_own_heading():
    text = (ROOT / 'docs' / 'checks.md').read_text()
    titles = set(re.findall(r'(?m)^##+ (.+)$', text))
    for check in ('STREAM', 'HPL', 'HPL tuning sweep', 'Slow-node screening', 'HPCC', 'IMB',
                  'Collective variability', 'MPI start-up', 'IOR', 'BabelStreamCheck',
                  'GpuDgemmCheck', 'HostDeviceBandwidthCheck', 'GpuNodeScreen'):
        assert check in titles, f'docs/checks.md: no heading {check!r}'
    checks = re.findall(r'(?m)^@rfm\.simple_test\nclass (\w+)',
                        '\n'.join(p.read_text() for p in (ROOT / 'reframe-checks').glob('*.py')))
    assert checks and all(c in text for c in checks), 'a check docs/checks.md never names'


def test_the_index_lists_every_page_of_the_nav():
    nav = yaml.safe_load((ROOT / 'mkdocs.yml').read_text())['nav']
    pages = [next(iter(entry.values())) for entry in nav]
    index = (ROOT / 'docs' / 'index.md').read_text()
    assert [p for p in pages if p != 'index.md' and f']({p})' not in index] == []


def test_the_report_page_shows_the_report(docs_copy, tmp_path):
    assert '](img/report.png)' in (ROOT / 'docs' / 'report.md').read_text()
    assert '](img/acceptance-page.png)' in (ROOT / 'docs' / 'acceptance.md').read_text()
    assert (ROOT / 'docs' / 'img' / 'acceptance-page.png').read_bytes()[:4] == b'\x89PNG'
    built = _build(docs_copy, tmp_path / 'site')
    assert built.returncode == 0, built.stderr[-3000:]
    page = (tmp_path / 'site' / 'report' / 'index.html').read_text()
    image, = re.findall(r'<img alt="[^"]*" src="([^"]+)"', page)
    assert (tmp_path / 'site' / 'report' / image).resolve().is_file()


def test_the_site_loads_nothing_from_another_site(docs_copy, tmp_path):
    """Fonts, scripts and style sheets all served by the site itself: it is read where
    there is no internet (an offline bundle's machine). Links a reader follows may leave."""
    built = _build(docs_copy, tmp_path / 'site')
    assert built.returncode == 0, built.stderr[-3000:]
    loaded = re.compile(r'<(?:link|script|img|source)\b[^>]*\b(?:href|src)="(https?:)?//([^"]+)"')
    for page in (tmp_path / 'site').rglob('*.html'):
        assert not loaded.findall(page.read_text()), page
    for sheet in (tmp_path / 'site').rglob('*.css'):
        assert not re.findall(r'@import\s+url\(["\']?https?:', sheet.read_text()), sheet
