"""The report: latest results against references, comparisons of sessions, plots, and the
page itself as Chromium shows it. Fixtures: two sessions of the whole suite run here in
quick mode (`reframe --describe-stored-sessions`, builds left out)."""
import dataclasses
import json
import re
import shutil

import pytest

from hpcbench.report import browser, contents, pages, trend_plots
from hpcbench.results import measured, picture, session_time
from conftest import FIXTURES

REPORT_FIXTURES = FIXTURES / 'report'


def _sessions():
    """The two stored sessions, newest first."""
    return [json.loads((REPORT_FIXTURES / name).read_text())
            for name in ('session-new.json', 'session-old.json')]


def _uuid(data):
    return data['session_info']['uuid']


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    new, old = _sessions()
    directory = tmp_path_factory.mktemp('report')
    comparison = picture.judged([new, old], 'local', [_uuid(new)], [_uuid(old)])
    index = pages.write(directory, picture.of_sessions('local', [new, old], comparison))
    return index


def test_latest_results_come_from_the_newest_session_that_ran_each_check():
    new, old = _sessions()
    cases, used = picture.latest_cases([new, old], 'local')
    new_checks = {c.check for c in picture.system_cases(new, 'local')}
    assert {c.session for c in cases if c.check in new_checks} == {_uuid(new)}
    # A check only the older session measured still shows, from that session.
    only_old = {c.check for c in picture.system_cases(old, 'local')} - new_checks
    assert {c.check for c in cases if c.session == _uuid(old)} == only_old
    assert [_uuid(d) for d in used] == [_uuid(new)] + ([_uuid(old)] if only_old else [])
    assert picture.latest_cases([new, old], 'testbed') == ([], [])


def test_a_run_of_a_few_cases_hides_none_of_those_an_earlier_fuller_run_measured():
    """Issue 51, item 20: after a full run (HPL on four BLAS) and a narrow one (`-n
    'StreamCheck|HplCheck' -p 'openmpi$'`), the report took HPL's cases of the narrow run
    alone and said "No test case ran with more than one BLAS". The full run is the real
    session of HPL on four BLAS; the narrow one is its `openmpi` case, run again later."""
    from hpcbench.results import stack_comparison
    full = json.loads((FIXTURES / 'reframe' / 'blas-hpl-n20000-session.json').read_text())
    narrow = json.loads(json.dumps(full))
    narrow['session_info']['uuid'] = 'f0000000-0000-4000-8000-000000000001'
    narrow['session_info']['time_start_unix'] += 86400
    for run in narrow['runs']:
        run['testcases'] = [tc for tc in run['testcases'] if tc['environ'] == 'openmpi']
    cases, used = picture.latest_cases([narrow, full], 'local')
    assert {(c.environ, c.session) for c in cases} == {
        ('openmpi', _uuid(narrow)), ('openmpi-blis', _uuid(full)),
        ('openmpi-openblas', _uuid(full)), ('openmpi-openblas-spack', _uuid(full))}
    assert [_uuid(d) for d in used] == [_uuid(narrow), _uuid(full)]
    grids = stack_comparison.blas_mpi_grids(stack_comparison.side_by_side(cases))
    assert grids and len(grids[0][3][1]) > 1      # BLAS rows of HPL's grid


def test_a_check_that_failed_sanity_has_no_results_but_one_below_its_reference_has():
    new, _ = _sessions()
    failed = {tc['name'].split()[0] for run in new['runs'] for tc in run['testcases']
              if tc['result'] == 'fail' and tc.get('fail_phase') == 'sanity'}
    below = [tc for run in new['runs'] for tc in run['testcases']
             if tc.get('fail_phase') == 'performance']
    assert below, 'the fixture session has a test case that missed its reference'
    cases = picture.system_cases(new, 'local')
    names = {c.variables['name'] for c in cases}
    assert all(tc['name'] in names for tc in below)
    for name in failed:
        assert all(c.variables['result'] != 'fail' or c.variables['fail_phase'] != 'sanity'
                   for c in cases if c.check == name)


def test_reference_rows_give_reframes_verdict_and_the_margin():
    new, _ = _sessions()
    case = next(c for c in picture.system_cases(new, 'local')
                if c.variables.get('fail_phase') == 'performance')
    rows = {r.variable: r for r in contents.reference_rows(case, None)}
    failing = [r for r in rows.values() if r.result == 'fail']
    assert failing
    for row in failing:
        figure = case.figures[row.variable]
        value, ref, lower, upper = row.value, figure.reference, figure.lower, figure.upper
        assert row.margin == pytest.approx(100 * (value - ref) / ref)
        outside_low = lower is not None and value < ref * (1 + lower)
        outside_high = upper is not None and value > ref * (1 + upper)
        assert outside_low or outside_high
    unreferenced = next(c for c in picture.system_cases(new, 'local')
                        if c.check == 'HplCheck')
    rows = contents.reference_rows(unreferenced, None)
    assert {r.result for r in rows} == {'no reference'}


def test_report_has_every_plot_the_comparison_and_provenance(written):
    html = written.read_text()
    plots = sorted(p.name for p in (written.parent / 'plots').iterdir())
    assert {'hpl-efficiency.png', 'stream-triad.png', 'imb-pingpong.png', 'ior.png',
            'mpi-startup.png'} <= set(plots)
    for name in plots:
        assert f'<img src="plots/{name}"' in html
    # The papers are cited in the captions.
    for cited in ('tsubame2007 Table 3-6', 't2k2008', 'chic2007 Table 1', 'ofp2018'):
        assert cited in html
    # Two sessions of one run each: nothing beyond the threshold can be told from noise.
    assert '0 regression(s)</strong>' in html and '<th>verdict</th>' in html
    assert 'inconclusive' in html and 'no change' in html
    new, _ = _sessions()
    assert new['session_info']['project_commit'] in html
    assert 'HPL.dat' in html and '^mpi=' in html
    summary = (written.parent / 'summary.md').read_text()
    assert summary.startswith('# hpcbench report: local')
    assert '## Comparison with earlier sessions' in summary and '**fail**' in summary
    assert all(f'(plots/{name})' in summary for name in plots)


def _samples_session():
    return json.loads((REPORT_FIXTURES / 'session-samples.json').read_text())


def test_report_shows_how_each_figure_was_measured_and_its_trend(tmp_path):
    sessions = [_samples_session(), *_sessions()]
    index = pages.write(tmp_path, picture.of_sessions('local', sessions))
    html = index.read_text()
    # The job's own repeats, e.g. HPL's three solves: how, and their range.
    assert re.search(r'best of 3 solve\(s\): median [\d.]+, [\d.]+ to [\d.]+ \(n=3, spread '
                     r'\d+ %\)', html)
    assert 'mean of 5 launches' in html
    trends = sorted(p.name for p in (tmp_path / 'plots').glob('trend-*.png'))
    assert len(trends) == len(trend_plots.TRENDS)
    assert all(f'<img src="plots/{name}"' in html for name in trends)
    # Three sessions: the caption says how change points are found, and how many.
    assert 'change points, where the sessions before and after differ by more than 5 %' in html


def test_a_ratio_above_its_ceiling_is_shown_withheld_with_why():
    case = next(c for c in picture.system_cases(_samples_session(), 'local')
                if c.check == 'HplCheck')
    why = '118.3 % of the ceiling: HPL reached 86.1 GFLOP/s against a DGEMM ceiling of 72.8'
    case = dataclasses.replace(
        case, withheld={'ceiling_efficiency': why},
        figures={k: v for k, v in case.figures.items() if k != 'ceiling_efficiency'})
    rows = {r.variable: r for r in contents.reference_rows(case, None)}
    assert rows['ceiling_efficiency'].result == 'withheld'
    assert rows['ceiling_efficiency'].value is None
    assert rows['ceiling_efficiency'].measured_as == why


def test_a_stored_ratio_above_100_percent_is_never_shown_without_its_reason():
    """Sessions stored before the checks withheld such ratios hold them as figures (NodeCeilings'
    peak_of_rpeak: 126.1 % of a nominal peak from this VM's base clock): every reader of the
    database (pages, compare-stacks, compare, baselines, trends) gets it withheld, saying
    why; the stored session itself is left as it is."""
    data = json.loads((FIXTURES / 'reframe' / 'blas-hpl-n20000-session.json').read_text())
    stored = json.dumps(data)
    case = next(c for c in measured.measured_cases(data, fixtures=True)
                if c.check == 'NodeCeilings')
    assert 'peak_of_rpeak' not in case.figures and 'peak_gflops' in case.figures
    why = case.withheld['peak_of_rpeak']
    assert why.startswith('126.1 % of its peak or ceiling, stored without a reason')
    assert 'the peak is wrong (a nominal clock below the one the cores run at' in why
    row = next(r for r in contents.reference_rows(
        case, None) if r.variable == 'peak_of_rpeak')
    assert (row.result, row.value, row.measured_as) == ('withheld', None, why)
    assert json.dumps(data) == stored
    # No ratio above 100 % is left among any fixture session's figures.
    for path in sorted([*(FIXTURES / 'reframe').glob('*session*.json'),
                        *REPORT_FIXTURES.glob('session-*.json')]):
        loaded = json.loads(path.read_text())
        for session in loaded if isinstance(loaded, list) else [loaded]:
            for case in measured.measured_cases(session, fixtures=True):
                above = {name: f.value for name, f in case.figures.items()
                         if name in measured.PEAK_RATIOS and f.value and f.value > 100}
                assert not above, (path.name, case.check, above)


def test_report_without_results_of_the_system_says_so(tmp_path):
    with pytest.raises(RuntimeError, match='no stored session has results of testbed'):
        picture.of_sessions('testbed', _sessions())


def test_a_directory_of_someone_elses_files_is_refused_and_left_alone(tmp_path):
    import subprocess
    from conftest import BIN
    theirs = tmp_path / 'theirs'
    (theirs / 'plots').mkdir(parents=True)
    (theirs / 'plots' / 'keep.png').write_bytes(b'not ours')
    (theirs / 'index.html').write_text('their page')
    proc = subprocess.run([str(BIN / 'hpcbench'), 'report', '--output', str(theirs)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == (f'error: {theirs} holds files that no hpcbench report wrote: give '
                           '--output a new or empty directory (nothing was written)\n')
    assert (theirs / 'plots' / 'keep.png').read_bytes() == b'not ours'
    assert (theirs / 'index.html').read_text() == 'their page'
    # A report's own directory is rewritten: the second report replaces the first.
    ours = tmp_path / 'ours'
    pages.write(ours, picture.of_sessions('local', _sessions()))
    first = sorted(p.name for p in (ours / 'plots').iterdir())
    pages.write(ours, picture.of_sessions('local', _sessions()))
    assert sorted(p.name for p in (ours / 'plots').iterdir()) == first


def _browser_or_skip():
    try:
        browser.ensure()
    except browser.BrowserUnavailable as err:
        pytest.skip(f'no headless Chromium: {err}')


def test_report_opens_in_chromium_with_every_image_and_link_working(written, tmp_path):
    _browser_or_skip()
    seen = browser.inspect(written, tmp_path / 'screenshot.png')
    assert seen.ok, browser.describe(seen)
    assert seen.title == 'hpcbench report: local'
    assert len(seen.images) == len(list((written.parent / 'plots').iterdir()))
    assert all(i['width'] >= 300 and i['height'] >= 200 for i in seen.images)
    assert any(h.startswith('#') for h in seen.links) and 'summary.md' in seen.links
    png = (tmp_path / 'screenshot.png').read_bytes()
    assert png.startswith(b'\x89PNG') and len(png) > 20000


def test_chromium_check_catches_a_missing_plot_and_a_dead_link(written, tmp_path):
    _browser_or_skip()
    broken = tmp_path / 'broken'
    shutil.copytree(written.parent, broken)
    (broken / 'plots' / 'ior.png').unlink()
    page = broken / 'index.html'
    page.write_text(page.read_text().replace(
        '</body>', '<a href="#no-such-section">x</a><a href="missing.md">y</a></body>'))
    seen = browser.inspect(page, tmp_path / 'broken.png')
    assert not seen.ok
    assert seen.broken_images == ['plots/ior.png']
    assert {href for href, _ in seen.broken_links} == {'#no-such-section', 'missing.md',
                                                       'plots/ior.png'}


def test_plots_label_one_node_keep_markers_apart_and_colour_the_ior_legend_as_its_bars():
    """Issue 22: the HPL plot's 1-node tick had no label and the local points sat on each
    other; the IOR plot's legend swatches were all blue, its title cut off on the right."""
    import matplotlib.colors
    from hpcbench.report import plots
    from hpcbench.results import references
    new, _ = _sessions()
    cases = [c for c in measured.measured_cases(new) if c.system == 'local']
    papers = [references.load(s) for s in references.systems_with_references()]
    hpl_plot = plots.hpl_efficiency(cases, papers, 'local')
    ax = hpl_plot.figure.axes[0]
    hpl_plot.figure.canvas.draw()
    labels = {t.get_text() for t in ax.get_xticklabels() if t.get_text()}
    assert {'1', '2', '4'} <= labels
    lines_measured = [line for line in ax.get_lines() if '(measured)' in line.get_label()
                and 'HPCC' not in line.get_label()]
    at_one_node = [x for line in lines_measured for x in line.get_xdata() if 0.5 < x < 1.5]
    assert len(at_one_node) > 1 and len(set(at_one_node)) == len(at_one_node)

    ior_plot = plots.ior(cases, papers, 'local')
    ax = ior_plot.figure.axes[0]
    swatches = {t.get_text(): matplotlib.colors.to_hex(h.get_facecolor())
                for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert swatches == {'write, measured': '#1f77b4', 'read, measured': '#ff7f0e',
                        'write, paper': matplotlib.colors.to_hex('lightsteelblue'),
                        'read, paper': matplotlib.colors.to_hex('navajowhite')}
    bar_colours = {matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches}
    assert set(swatches.values()) <= bar_colours
    # Title and axis label inside the figure.
    ior_plot.figure.canvas.draw()
    renderer = ior_plot.figure.canvas.get_renderer()
    width = ior_plot.figure.bbox.width
    for text in (ax.title, ax.xaxis.label):
        assert text.get_window_extent(renderer).x1 <= width


def test_time_per_check_says_no_build_ran_beside_a_benchmark_and_names_one_that_did():
    """Issue 22: a real quick make run (123 cases; its job times only): each of its 35
    build jobs ended before the next benchmark job started. Moved 2 s into HPL's job (a
    build run as a local job beside the partition's, as before this suite ran builds as
    the partition's jobs), it is named with the seconds they shared."""
    data = json.loads((FIXTURES / 'reframe' / 'quick-run-job-times.json').read_text())
    assert session_time.builds_beside_benchmarks(data) == []
    assert session_time.time_table(data).endswith('benchmark jobs 1055 s of 1148 s wall (92 %)\n'
                                                  'no build ran beside a benchmark job')
    testcases = data['runs'][0]['testcases']
    build = next(tc for tc in testcases if tc['name'].startswith('HplBuild'))
    hpl = next(tc for tc in testcases if tc['name'].startswith('HplCheck')
               and tc['job_submit_time'])
    start = hpl['job_submit_time'] + 10
    build['build_job_interval'] = [start, start + 2]
    (named, beside, seconds), = session_time.builds_beside_benchmarks(data)
    assert (named, beside) == (build['name'], hpl['name']) and seconds == pytest.approx(2)
    assert session_time.time_table(data).endswith(
        f'builds beside benchmark jobs (1): {build["name"]} beside {hpl["name"]} for 2.0 s')
    # A session stored before build jobs were timed says nothing either way.
    for tc in testcases:
        tc.pop('build_job_interval')
    assert session_time.builds_beside_benchmarks(data) is None
    assert 'beside' not in session_time.time_table(data)


def test_time_per_check_says_where_the_wall_time_went():
    """A real session (the BLAS libraries' HPL at N = 20000): HPL's four jobs took 951 s,
    the benchmark jobs 1017 s of 1027 s wall; builds that only located their prefix have
    no job, a second or so each. A job counted twice (overlapping itself) adds nothing."""
    data = json.loads((FIXTURES / 'reframe' / 'blas-hpl-n20000-session.json').read_text())
    checks, benchmark, wall = session_time.time_per_check(data)
    assert checks['HplCheck'][:2] == [4, pytest.approx(951, abs=1)]
    assert checks['HplBuild'][1] == 0 and 0 < checks['HplBuild'][2] < 10
    assert benchmark == pytest.approx(1017, abs=1) and wall == pytest.approx(1027, abs=1)
    text = session_time.time_table(data)
    assert text.splitlines()[2].split()[:3] == ['HplCheck', '4', '951']
    assert text.endswith('benchmark jobs 1017 s of 1027 s wall (99 %)')
    testcases = data['runs'][0]['testcases']
    testcases.append(dict(next(tc for tc in testcases if tc['name'].startswith('HplCheck'))))
    assert session_time.time_per_check(data)[1] == pytest.approx(benchmark)


def _stored_case(check, figures, parameters=None, environ='openmpi', partition='gpu',
                 **variables):
    """The MeasuredCase of a test case stored as ReFrame stores one (`figures`: {variable:
    (value, unit)}; `variables`: the check's, such as samples, aggregation, flagged)."""
    name = ' '.join([check, *(f'%{k}={v}' for k, v in (parameters or {}).items())])
    stored = {'name': name, 'display_name': name, 'system': 'cluster', 'partition': partition,
              'environ': environ, 'result': 'pass', 'fixture': False, **(parameters or {}),
              **variables,
              'perfvalues': {f'cluster:{partition}:{variable}': [value, 0, None, None, unit,
                                                                 'pass']
                             for variable, (value, unit) in figures.items()}}
    case, = measured.measured_cases(json.loads(json.dumps({'runs': [{'testcases': [stored]}]})))
    return case


def test_a_gpu_section_sets_each_gpu_figure_against_its_datasheet_and_tsubames_board_beside():
    """No GPU has run here: the case is stored as the GPU DGEMM check stores one (its H100
    node's figures: 52.3 TFLOP/s at n = 24576, 698 W, fixtures/gpu/h100), TSUBAME's board
    from references/tsubame.yaml."""
    from hpcbench.results import references
    figures = {'tflops': (52.3, 'TFLOP/s'), 'fp64_peak_efficiency': (78.1, '%'),
               'power': (697.7, 'W'), 'gflops_per_watt': (75.0, 'GFLOP/s/W')}
    how = {'aggregation': {'tflops': 'median over 1 GPU(s) of the best of 139 calls'},
           'samples': {'tflops': [52.3]}, 'device_figures': {'h100-node:gpu0': {
               'tflops': 52.3, 'fp64_peak_efficiency': 78.1}}}
    case = _stored_case('GpuDgemmCheck', figures, **how)
    assert [(str(g.key), g.figures['tflops']) for g in case.gpus] == [('h100-node:gpu0', 52.3)]
    rows = contents.gpu_rows([case], [references.load('tsubame')])
    assert [r[2:5] for r in rows] == [
        ['tflops = 52.3 TFLOP/s', 'datasheet FP64 peak', '78.1 %'],
        ['gflops_per_watt = 75 GFLOP/s/W', '697.7 W drawn', ''],
        ['gflops_per_watt = 2 GFLOP/s/W', "the paper's figures", '']]
    assert rows[2][0] == 'tsubame:clearspeed (2007)'
    assert rows[0][5] == 'median over 1 GPU(s) of the best of 139 calls: 52.3 (n=1)'
    del figures['fp64_peak_efficiency']
    case = _stored_case('GpuDgemmCheck', figures, **how,
                        flagged={'fp64_peak_efficiency': '104.5 % of the ceiling: ...'})
    assert contents.gpu_rows([case])[0][4:] == ['withheld', '104.5 % of the ceiling: ...']
    # No GPU figure, no section (the papers' boards alone are not shown).
    assert contents.gpu_rows([], [references.load('tsubame')]) == []


def test_the_gpu_to_gpu_section_sets_each_figure_against_the_link_and_the_host_floor():
    """No GPU has run these checks: the cases are stored as the checks store them, their
    figures from the real runs here (IMB-MPI1-GPU's host-buffer PingPong, 35.1 GB/s at its
    best) and the H200 node's pinned copy (55.4 GB/s, tests/fixtures/gpu/h200-jobs)."""
    pair = _stored_case(
        'DeviceBufferPairCheck', {'bandwidth': (31.0, 'GB/s'),
                                  'link_efficiency': (6.9, '%'),
                                  'slowest_pair_link_efficiency': (6.2, '%'),
                                  'bidirectional_bandwidth': (40.0, 'GB/s'),
                                  'latency': (2.75, 'us')},
        {'path': 'intra-node'}, environ='intelmpi')
    copy = _stored_case('HostDeviceBandwidthCheck', {'host_to_device_pinned': (55.4, 'GB/s')},
                        environ='intelmpi')
    nccl = _stored_case('NcclTestsCheck', {'busbw': (470.2, 'GB/s'),
                                           'published_busbw_ratio': (98.0, '%')},
                        {'collective': 'all_reduce'}, environ='intelmpi')
    rows = contents.gpu_to_gpu_rows([pair, copy, nccl])
    assert [r[2:5] for r in rows] == [
        ['bandwidth = 31 GB/s', "the pair's link (topology)", '6.9 %'],
        ['bandwidth = 31 GB/s', "the slowest pair's link", '6.2 %'],
        ['bidirectional_bandwidth = 40 GB/s', 'both ways at once', ''],
        ['latency = 2.75 us', 'half a round trip', ''],
        ['bandwidth = 31 GB/s', 'host-staged floor: pinned copy 55.4 GB/s', '56.0 %'],
        ['busbw = 470.2 GB/s', 'published 8-GPU node', '98.0 %']]
    assert rows[4][5] == 'the device path is no faster than staging through the host'
    # A case that stored no pair's own figures has no matrix (each pair's: tests/benchmarks/
    # test_gpu_mpi.py, a real 8-GPU node).
    assert contents.gpu_pair_matrices([pair, copy, nccl]) == []
    assert contents.gpu_to_gpu_rows([copy]) == []


def test_a_stored_key_that_names_no_gpu_is_refused_naming_the_case():
    with pytest.raises(RuntimeError, match=r"^test case GpuDgemmCheck: 'gpu0' is no GPU, GPU-pair or NIC key"):
        _stored_case('GpuDgemmCheck', {'tflops': (52.3, 'TFLOP/s')},
                     device_figures={'gpu0': {'tflops': 52.3}})
