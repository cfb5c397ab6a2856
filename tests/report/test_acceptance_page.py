"""The page a site signs (hpcbench.report.acceptance_page, acceptance_grid), on the real
runs of the testbed's 32-node acceptance (tests/fixtures/acceptance/testbed-32-nodes-hpcc-
session.json: HPCC on each node, three runs each; n7 at a quarter of one CPU, n20 drained
before the run and n25 during it), judged by the HPCC entries of contracts/testbed.yaml:
the verdict and the sentence first, every node in one picture, problems worst first,
sources cited once; at 1,000 nodes the picture groups the healthy ones and names the
problems; in Chromium the first screen (1,400 x 900) names all three and shows the
picture, and nothing reaches past the page's width."""
import dataclasses
import json
import re

import pytest

from conftest import FIXTURES, ROOT
from hpcbench.acceptance import assessment, contract, judgement, plan, scopes
from hpcbench.acceptance import state as states
from hpcbench.core import device_keys
from hpcbench.report import acceptance_grid, acceptance_page, browser, markdown_summary

SESSION = json.loads((FIXTURES / 'acceptance' / 'testbed-32-nodes-hpcc-session.json')
                     .read_text())
NODES = tuple(f'n{i}' for i in range(1, 33))


def _contract():
    read = contract.load(ROOT / 'contracts' / 'testbed.yaml', 'testbed')
    return dataclasses.replace(read, entries=tuple(e for e in read.entries
                                                   if e.check == 'HpccCheck'))


def _assessed(nodes=NODES, session=SESSION):
    state = states.State('testbed', '', [plan.PartitionNodes('srun', nodes, 0, True)],
                         [session['session_info']['uuid']], session['out_of_service'])
    return state, assessment.assess(_contract(), state, {session['session_info']['uuid']:
                                                         session})


def _thousand_nodes(failing=()):
    """The 32-node acceptance's verdicts spread over n1 to n1000: the real n7, n20 and n25 at
    their names, every other node one of the 29 healthy ones' real verdicts renamed; the
    nodes of `failing` given n7's."""
    state, assessed = _assessed()
    out = []
    for e in assessed.verdicts:
        by_node = {u.unit.key: u for u in e.units}
        healthy = [u for u in e.units if u.unit.key not in ('n7', 'n20', 'n25')]
        units = []
        for i in range(1, 1001):
            name = f'n{i}'
            model = by_node[name] if name in ('n7', 'n20', 'n25') else by_node['n7'] \
                if name in failing else healthy[i % len(healthy)]
            units.append(dataclasses.replace(model, unit=dataclasses.replace(model.unit,
                                                                             key=name)))
        out.append(dataclasses.replace(e, units=tuple(units)))
    return out, state.out_of_service


def test_the_verdict_names_the_slow_node_and_the_two_out_of_service_in_one_sentence():
    state, assessed = _assessed()
    assert acceptance_page.sentence(assessed.verdicts, state.out_of_service, assessed.blame) \
        == ('n7 fails hpl and star_dgemm and is slow in random_ring_bandwidth and '
            'pingpong_bandwidth; n20 and n25 were out of service.')
    passing = [dataclasses.replace(e, units=tuple(u for u in e.units if u.unit.key not in
                                                   ('n7', 'n20', 'n25')))
               for e in assessed.verdicts]
    assert acceptance_page.sentence(passing, {}) == 'Every one of 203 units met its entry.'


def test_the_problems_come_worst_first_and_a_node_out_of_service_is_one_row():
    state, assessed = _assessed()
    report = acceptance_page.build(_contract(), assessed.verdicts, state.out_of_service, 'now')
    failing = next(s for s in report.sections if s.anchor == 'failing').tables[0]
    assert [(r[0], r[2], r[3]) for r in failing.rows] == [
        ('node n7', 'HpccCheck-hpl-srun-openmpi', 'FAIL'),          # 14 % of its committed
        ('node n7', 'HpccCheck-star_dgemm-srun-openmpi', 'FAIL'),   # 47 %
        ('node n20', '7 entries', 'NOT_RUN'), ('node n25', '7 entries', 'NOT_RUN'),
        ('node n7', 'HpccCheck-random_ring_bandwidth-srun-openmpi', 'WARN'),
        ('node n7', 'HpccCheck-pingpong_bandwidth-srun-openmpi', 'PASS')]
    assert failing.rows[2][7].startswith('out of service: IDLE+DRAIN: drained (benchmark: '
                                         'drained before the run')


def test_a_source_is_cited_once_and_each_entry_takes_its_own_figure_of_it():
    """Every HPCC entry cites the same three baseline sessions: one source, [1], and each
    entry's row says which figure of it it takes, no session's UUID repeated."""
    state, assessed = _assessed()
    report = acceptance_page.build(_contract(), assessed.verdicts, state.out_of_service, 'now')
    (cited,) = next(s for s in report.sections if s.anchor == 'sources').tables[0].rows
    assert cited[:2] == ('[1]', 'baseline') and 'e8c2211e-745e-452d' in cited[2]
    entries = next(s for s in report.sections if s.anchor == 'entries').tables[0]
    column = entries.header.index('source')
    assert [r[column] for r in entries.rows][:2] == [
        '[1] the median of 12 value(s); 0.5 x 28.83', '[1] the median of 12 value(s); 0.5 x 2.999']
    page = acceptance_page.texts(report)[acceptance_page.MARKDOWN]
    # Once before the contract's own text, which says it as the site wrote it.
    assert page.split('## The contract')[0].count('e8c2211e-745e-452d') == 1


def test_the_grid_puts_the_problems_first_and_marks_slow_and_out_of_service():
    state, assessed = _assessed()
    (rows, made), = acceptance_grid.columns(assessed.verdicts, state.out_of_service).values()
    assert [c.label for c in made[:4]] == ['n7', 'n20', 'n25', 'n1'] and len(made) == 32
    hpl = [e.entry.figure for e in rows].index('hpl')
    assert made[0].cells[hpl] == ('FAIL', True)
    assert {c.cells[hpl] for c in made[1:3]} == {('OUT', False)}
    assert not any(c.problem for c in made[3:])
    assert acceptance_grid.grouped(made) == made         # 32 columns fit as they are
    words = acceptance_grid.words('node', rows, made)
    assert words.startswith('32 node unit(s) by 7 contract entries, problems first. n7: '
                            'FAIL in 2, slow in 4')
    assert words.endswith('n25: out of service in 7; 29 met every entry.')


def test_at_a_thousand_nodes_the_healthy_are_grouped_and_every_problem_named():
    verdicts, out = _thousand_nodes()
    (rows, made), = acceptance_grid.columns(verdicts, out).values()
    shown = acceptance_grid.grouped(made)
    assert len(shown) <= acceptance_grid.MAX_COLUMNS
    assert [c.label for c in shown[:3]] == ['n7', 'n20', 'n25']
    assert sum(c.count for c in shown) == 1000
    assert shown[3].label == 'n1..n18 (17)' and not any(c.problem for c in shown[3:])
    assert acceptance_grid.words('node', rows, shown).endswith('997 met every entry.')
    # Fifty failing: forty named, the other ten in one column of their worst cells.
    verdicts, out = _thousand_nodes(failing={f'n{i}' for i in range(100, 150)})
    (rows, made), = acceptance_grid.columns(verdicts, out).values()
    shown = acceptance_grid.grouped(made)
    named = [c for c in shown if c.count == 1]
    assert len(named) == acceptance_grid.MAX_NAMED and len(shown) <= 64
    rest, = [c for c in shown if c.label == '13 more with problems']
    assert rest.cells[[e.entry.figure for e in rows].index('hpl')] == ('FAIL', True)
    assert sum(c.count for c in shown) == 1000


def test_the_markdown_embeds_the_picture_and_shows_the_contract_as_written():
    state, assessed = _assessed()
    grids = acceptance_grid.plots(assessed.verdicts, state.out_of_service)
    report = acceptance_page.build(_contract(), assessed.verdicts, state.out_of_service,
                                   'now', 'contracts/testbed.yaml', assessed.blame, grids)
    text = acceptance_page.texts(report)[acceptance_page.MARKDOWN]
    assert re.search(r'^!\[32 node unit\(s\) by 7 contract entries.*\]\(plots/grid-node.svg\)$',
                     text, re.M)
    written = (ROOT / 'contracts' / 'testbed.yaml').read_text()
    assert f'```\n{written.rstrip()}\n```' in text
    # A text with a fence of its own is held by a longer one.
    from hpcbench.report.sections import Report, Section
    fenced = markdown_summary.markdown(Report('x', 'now', 'y', (
        Section('c', 'C', text='a\n````\nb'),)))
    assert '`````\na\n````\nb\n`````' in fenced
    svg = acceptance_grid.svg(grids[0][0])
    assert svg.lstrip().startswith('<?xml') and '<svg' in svg and 'Date' not in svg


def _browser_or_skip():
    try:
        browser.ensure()
    except browser.BrowserUnavailable as err:
        pytest.skip(f'no headless Chromium: {err}')


def _written(directory, verdicts, out_of_service, blame=None):
    directory.mkdir()
    assessed = assessment.Assessment(tuple(verdicts), blame or {})
    for name, text in acceptance_page.files(_contract(), assessed, out_of_service,
                                            'contracts/testbed.yaml').items():
        (directory / name).parent.mkdir(exist_ok=True)
        (directory / name).write_text(text)
    return directory / acceptance_page.HTML


def test_in_chromium_the_first_screen_names_the_three_and_shows_the_grid(tmp_path):
    """At 1,400 x 900: the banner and the picture within the first screen, the banner naming
    n7, n20 and n25, the picture loaded; nothing wider than the window; the page prints to
    PDF. The same at 1,000 nodes."""
    _browser_or_skip()
    state, assessed = _assessed()
    page = _written(tmp_path / 'a', assessed.verdicts, state.out_of_service)
    seen = browser.inspect(page, tmp_path / 'first-screen.png', (1400, 900),
                           pdf=tmp_path / 'page.pdf')
    assert seen.ok and seen.fits, browser.describe(seen)
    assert seen.places['verdict-banner'][1] <= 900 and seen.places['plot-grid-node'][1] <= 900
    banner = re.search(r'<div class="banner fail" id="verdict-banner">(.*?)</div>',
                       page.read_text(), re.S).group(1)
    assert all(re.search(rf'\b{n}\b', banner) for n in ('n7', 'n20', 'n25'))
    assert (tmp_path / 'page.pdf').read_bytes().startswith(b'%PDF')
    # acceptance.md: the same sections, rendered as GitHub and GitLab render Markdown (its
    # tables, fenced code), opens with the picture loaded and the three named first.
    import markdown
    text = (page.parent / acceptance_page.MARKDOWN).read_text()
    assert re.findall(r'^## (.*)$', text, re.M) == re.findall(r'<h2 id="[^"]*">([^<]*)</h2>',
                                                              page.read_text())
    rendered = page.parent / 'acceptance.md.html'
    rendered.write_text(markdown.markdown(text, extensions=['tables', 'fenced_code']))
    seen = browser.inspect(rendered, tmp_path / 'markdown.png', (1400, 900))
    assert seen.ok and seen.images[0]['src'] == 'plots/grid-node.svg', browser.describe(seen)
    first = text.split('## Every unit at a glance')[0]
    assert all(re.search(rf'\b{n}\b', first) for n in ('n7', 'n20', 'n25'))
    verdicts, out = _thousand_nodes()
    seen = browser.inspect(_written(tmp_path / 'b', verdicts, out), tmp_path / 'b.png',
                           (1400, 900))
    assert seen.ok and seen.fits, browser.describe(seen)
    assert seen.places['plot-grid-node'][1] <= 900


def test_a_node_out_of_service_is_one_row_with_its_gpus_units_counted():
    """A GPU entry beside the node entries: n20's four GPUs, not run with it, join its row
    (8 entries, 11 units) instead of four rows more."""
    state, assessed = _assessed()
    hpl = assessed.verdicts[0]
    gpu_entry = dataclasses.replace(hpl.entry, id='gpu-stream', scope=scopes.named('gpu'),
                                    figure='triad')
    units = tuple(judgement.UnitVerdict(scopes.Unit('gpu', 'srun', device_keys.Gpu(n, str(g))),
                                        'NOT_RUN' if n == 'n20' else 'PASS', (1.0,), 1.0)
                  for n in ('n1', 'n20') for g in range(4))
    verdicts = list(assessed.verdicts) + [judgement.EntryVerdict(gpu_entry, units, 'FAIL', '')]
    report = acceptance_page.build(_contract(), verdicts, state.out_of_service, 'now')
    failing = next(s for s in report.sections if s.anchor == 'failing').tables[0]
    (n20,) = [r for r in failing.rows if r[0] == 'node n20']
    assert n20[2] == '8 entries, 11 units'
    assert not any(r[0].startswith('GPU') for r in failing.rows)
