"""README.md and the documentation site: README stays an entry (about 200 lines at most,
its two set-up commands first), every link in it leads to a file of the project and every
anchor to a heading there; the site builds with `mkdocs build --strict`, which fails on a
broken link, a missing anchor or a page left out of its nav (shown here on copies)."""
import os
import re
import shutil
import subprocess

import pytest
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
    assert text.startswith('```sh\nmake run\nmake test\n```\n')


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
