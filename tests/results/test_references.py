import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from hpcbench.results import (baselines, measured, reference_schema, references, references_text,
                              stack_comparison)
from conftest import FIXTURES, described_partition, needs_root

CHIC = {
    'system': 'chic',
    'sources': {'chic2007': {'seed': '001_ffdfcd1799e692fa.txt',
                             'title': 'Design and Evaluation of a 2048 Core Cluster System',
                             'year': 2007}},
    'figures': [
        {'check': 'StreamCheck', 'partition': 'compute', 'match': {'num_threads': 1},
         'variable': 'triad', 'value': 3731.0, 'unit': 'MB/s', 'tolerance': [-0.1, None],
         'source': 'chic2007', 'where': 'Table 1', 'quote': '8 DIMMs 3731.0 11.1',
         'configuration': '1 thread, 8 DIMMs, gcc-4.2 -O3, Opteron 2.6 GHz'},
        {'check': 'StreamCheck', 'partition': 'compute', 'match': {'num_threads': 1},
         'variable': 'triad', 'value': 5769.8, 'unit': 'MB/s', 'source': 'chic2007',
         'where': 'Table 1', 'use': 'comparison', 'quote': '5769.8 7.2 3959.6 16.2',
         'configuration': '1 thread, 8 DIMMs, pathscale-3.0 -O3, Opteron 2.6 GHz'},
        {'check': 'StreamCheck', 'partition': 'compute', 'match': {'num_threads': 2},
         'variable': 'triad', 'value': 4854.7, 'unit': 'MB/s', 'source': 'chic2007',
         'where': 'Table 1', 'quote': '8 DIMMs 4854.7 17.1',
         'configuration': '2 threads, 8 DIMMs, gcc-4.2 -O3'},
    ],
}


def _write(tmp_path, data, system='chic'):
    path = tmp_path / f'{system}.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


def _test(system, partition, environ, **attrs):
    cls = type('StreamCheck', (), {})
    test = cls()
    test.current_system = SimpleNamespace(name=system)
    test.current_partition = described_partition(partition, memory_dimms=8)
    test.current_environ = SimpleNamespace(name=environ)
    test.perf_variables = dict.fromkeys(('copy', 'scale', 'add', 'triad', 'balance'))
    for k, v in attrs.items():
        setattr(test, k, v)

    return test


def test_a_test_gets_the_figure_of_its_configuration(tmp_path, monkeypatch):
    monkeypatch.setattr(references.paths, 'REFERENCES_DIR', tmp_path)
    _write(tmp_path, CHIC)
    ref = references.reframe_reference(_test('chic', 'compute', 'gcc', num_threads=2))
    assert ref == {'chic:compute': {'triad': (4854.7, None, None, 'MB/s')}}
    ref = references.reframe_reference(_test('chic', 'compute', 'gcc', num_threads=1))
    assert ref['chic:compute']['triad'] == (3731.0, -0.1, None, 'MB/s')


def test_comparison_figures_are_kept_apart(tmp_path):
    refs = references.load('chic', _write(tmp_path, CHIC))
    chosen = references.select(refs, 'StreamCheck', 'compute', 'gcc', {'num_threads': 1},
                               use='comparison')
    assert chosen['triad'].configuration.startswith('1 thread, 8 DIMMs, pathscale')


def test_a_system_without_references_has_none(tmp_path, monkeypatch):
    monkeypatch.setattr(references.paths, 'REFERENCES_DIR', tmp_path)
    assert references.reframe_reference(_test('nowhere', 'p', 'e')) == {'nowhere:p': {}}


@pytest.mark.parametrize('mutate, message', [
    (lambda d: d['figures'][0].pop('where'), "'where' is a required property"),
    (lambda d: d['figures'][0].update(source='nope'), "unknown source 'nope'"),
    (lambda d: d['sources']['chic2007'].update(seed='paper.pdf'), 'does not match'),
    (lambda d: d['figures'][0].update(value='fast'), "'fast' is not of type 'number'"),
    (lambda d: d['figures'][1].pop('quote'), r"figures/1: a figure from a seed \(chic2007\) "
                                             "needs `quote`"),
    (lambda d: d['figures'][2].update(match={'num_threads': 1}), 'two reference figures'),
    (lambda d: d['figures'][1].update(check='StreamChek'), "figures/1: unknown check "
                                                           "'StreamChek'; the checks: "),
])
def test_bad_reference_files_give_one_clear_error(tmp_path, mutate, message):
    data = json.loads(json.dumps(CHIC))
    mutate(data)
    with pytest.raises(reference_schema.ReferenceError, match=message):
        refs = references.load('chic', _write(tmp_path, data))
        references.select(refs, 'StreamCheck', 'compute', 'gcc', {'num_threads': 1})


def test_a_reference_file_edited_between_two_loads_is_read_again(tmp_path):
    """load() parses a file once per text (a dry run asks for it in every test case's setup):
    an edit within one process, of the same size, gives the new figure; a broken edit is an
    error, not the figure parsed before."""
    path = _write(tmp_path, CHIC)
    assert references.load('chic', path) is references.load('chic', path)
    edited = json.loads(json.dumps(CHIC))
    edited['figures'][2]['value'] = 4900.0
    path.write_text(yaml.safe_dump(edited))
    assert len(path.read_text()) == len(yaml.safe_dump(CHIC))
    assert references.load('chic', path).figures[2].value == 4900.0
    path.write_text(path.read_text().replace('where:', 'whre:', 1))
    with pytest.raises(reference_schema.ReferenceError, match="'where' is a required property"):
        references.load('chic', path)


def test_a_figure_of_a_variable_the_test_does_not_report_fails_its_setup(tmp_path,
                                                                          monkeypatch):
    """A variable the check reports in some test cases, not this one (STREAM's ratio to the
    node's ceiling, measured at the node's every core only): lint cannot know, the test's
    setup does."""
    from reframe.core.exceptions import ReframeError
    monkeypatch.setattr(references.paths, 'REFERENCES_DIR', tmp_path)
    data = json.loads(json.dumps(CHIC))
    data['figures'][2].update(variable='triad_ceiling_efficiency', unit='%', value=80.0)
    _write(tmp_path, data)
    with pytest.raises(ReframeError, match=r'StreamCheck reports no variable '
                                           r'triad_ceiling_efficiency \(Table 1\); '
                                           r'its variables: add, balance, copy, scale, triad'):
        references.reframe_reference(_test('chic', 'compute', 'gcc', num_threads=2))
    # A test the figure does not apply to is not concerned.
    assert references.reframe_reference(_test('chic', 'compute', 'gcc', num_threads=1))


def test_every_check_class_is_known_to_the_references():
    import re
    from conftest import ROOT
    # Every class of a check file that runs a benchmark: not a build, not a base of others.
    declared = {name: bases for path in (ROOT / 'reframe-checks').glob('*.py')
                for name, bases in re.findall(r'^class (\w+)\(([^)]*)\)', path.read_text(),
                                              re.M)}
    bases = {b.strip() for b in declared.values() for b in b.split(',')}
    measuring = {n for n in declared if not n.endswith('Build') and n not in bases}
    assert measuring == set(references.BENCHMARK_OF_CHECK)


def test_file_for_another_system_is_refused(tmp_path):
    with pytest.raises(reference_schema.ReferenceError, match="describes system 'chic'"):
        references.load('t2k', _write(tmp_path, CHIC, 't2k'))


def _printed_numbers(fig):
    """The figure's number as its paper may print it: its `cited` text's numbers (when the
    unit was converted: 76.46 TFlops), else its value in the usual precisions."""
    if fig.cited:
        return re.findall(r'\d[\d,]*(?:\.\d+)?', fig.cited)
    v = fig.value
    return [n for n in {str(v), f'{v:.1f}', f'{v:.2f}', f'{v:.3f}',
                        str(int(v)) if v == int(v) else ''} if n]


def _prints(text, numbers):
    return any(re.search(rf'(?<![\d.]){re.escape(n)}(?![\d])', text) for n in numbers)


def _seed_figures():
    for path in sorted(references.paths.REFERENCES_DIR.glob('*.yaml')):
        refs = references.load(path.stem, path)
        for fig in refs.figures:
            if 'seed' in refs.sources[fig.source]:
                yield path.stem, refs.sources[fig.source]['seed'], fig


def _words(text):
    return ' '.join(text.split())


def test_every_paper_figure_is_printed_in_the_quote_stored_with_it():
    """What the repository itself holds: each paper figure's number (its `cited` text's,
    when the unit was converted) stands in the seed's words stored with it. A clone alone
    has no seeds: this is its check; test_every_quote_is_in_its_seed checks the quotes."""
    figures = list(_seed_figures())
    assert len(figures) > 150
    wrong = [f'{system}: {fig.check} {fig.variable} {fig.value} ({fig.where}): {fig.quote!r}'
             for system, _, fig in figures if not _prints(fig.quote, _printed_numbers(fig))]
    assert not wrong, '\n'.join(wrong)


_NO_SEEDS = (f'no seed papers at {references.paths.SEEDS_DIR} (a clone alone; HPCBENCH_SEEDS '
             'names another place): the paper figures were checked against the quotes stored '
             'with them only (test_every_paper_figure_is_printed_in_the_quote_stored_with_it)')


@pytest.mark.machine_dependent
@pytest.mark.skipif(not references.paths.SEEDS_DIR.is_dir(), reason=_NO_SEEDS)
def test_every_quote_is_in_its_seed():
    """Where the papers' texts are at hand: every seed cited exists, and every figure's quote
    is the seed's own words (its whitespace aside): no figure without a source, no typo."""
    texts, wrong = {}, []
    for system, seed, fig in _seed_figures():
        if seed not in texts:
            path = references.paths.SEEDS_DIR / seed
            assert path.is_file(), f'{system}: seed {seed} cited, not in {path.parent}'
            texts[seed] = _words(path.read_text())
        if _words(fig.quote) not in texts[seed]:
            wrong.append(f'{system}: {fig.check} {fig.variable} ({fig.where}): {fig.quote!r} '
                         f'is not in {seed}')
    assert not wrong, '\n'.join(wrong)


def _session():
    return json.loads((FIXTURES / 'reframe' / 'stream-session.json').read_text())[0]


def test_stored_session_gives_one_case_per_test_and_environment():
    cases = measured.measured_cases(_session())
    assert len(cases) == 6        # 2 thread counts x 3 MPI environments, fixtures left out
    # A session stored before STREAM had `stores`: its cases are the compiled stores'.
    case = next(c for c in cases if c.environ == 'openmpi' and c.parameters ==
                {'num_threads': 2, 'stores': 'compiled'})
    assert case.check == 'StreamCheck' and case.partition == 'default'
    assert (case.value('triad'), case.figures['triad'].unit) == (48037.4, 'MB/s')


def test_distributed_cases_stay_apart_per_node():
    """`make screen` (--distribute=all): ReFrame stores every node's case under the check's
    bare name, the node in its display name only. Read by name, the testbed's five nodes
    were two cases, and `hpcbench screen-nodes` screened one node per partition."""
    data = json.loads((FIXTURES / 'report' / 'screen-session.json').read_text())
    cases = measured.measured_cases(data)
    nodes = {case.partition: set() for case in cases}
    for case in cases:
        assert case.parameters['.nid'] == ','.join(case.nodes)
        nodes[case.partition].add(case.parameters['.nid'])
    assert nodes == {'batch': {'n1', 'n2', 'n3'}, 'gpu': {'g1', 'g2'}}


def _fail(session, environ, threads, phase):
    for tc in session['runs'][0]['testcases']:
        if tc['environ'] == environ and tc['name'] == f'StreamCheck %num_threads={threads}':
            tc.update(result='fail', fail_phase=phase)


def test_performance_failures_are_measurements_other_failures_are_not():
    session = _session()
    _fail(session, 'mpich', 2, 'performance')     # missed its references: a real figure
    _fail(session, 'openmpi', 1, 'sanity')         # wrong output: nothing was measured
    cases = measured.measured_cases(session)
    keys = {(c.environ, c.parameters['num_threads']): c for c in cases}
    assert len(cases) == 5 and ('openmpi', 1) not in keys
    assert keys[('mpich', 2)].variables['fail_phase'] == 'performance'
    assert keys[('mpich', 2)].value('triad') > 0


def _baseline(sessions, **kwargs):
    started = {d['session_info']['uuid']: d['session_info']['time_start'] for d in sessions}
    return baselines.baseline_from_samples('local', measured.figure_samples(sessions, 'local'),
                                           started, host='vm', recorded='2026-11-21T05:24',
                                           **kwargs)


def test_baseline_bounds_point_the_way_of_a_regression(tmp_path):
    refs = _baseline([_session()])
    path = tmp_path / 'local.yaml'
    path.write_text(references_text.dump(refs))
    loaded = references.load('local', path)
    assert len(loaded.figures) == 6 * 5
    chosen = references.select(loaded, 'StreamCheck', 'default', 'mpich',
                               {'num_threads': 1, 'stores': 'compiled'})
    # A session stored before STREAM had `stores` measured the compiled stores only.
    assert not references.select(loaded, 'StreamCheck', 'default', 'mpich',
                                 {'num_threads': 1, 'stores': 'nontemporal'})
    # One run of one session: the bound is the guess (10 %), and says so.
    assert chosen['triad'].tolerance == (-0.1, None)        # bandwidth: lower bound
    assert chosen['balance'].tolerance == (None, 0.1)       # flop/word: upper bound
    assert chosen['triad'].value == 24977.1
    assert chosen['triad'].sample['runs'] == chosen['triad'].sample['sessions'] == 1
    assert chosen['triad'].sample['bound'].startswith('guess')
    assert loaded.sources['baseline']['baseline_sessions'] == [_session()['session_info']['uuid']]


def test_a_baseline_from_many_runs_is_their_median_with_a_bound_from_their_spread():
    values = [100.0, 90.0, 104.0, 98.0, 101.0, 99.0, 103.0, 97.0, 102.0, 100.0]
    # 10 runs in 5 sessions: no guess; the bound is the 5th percentile less 5 %.
    bounds, rule = baselines.baseline_bounds('triad', 'MB/s', values, 5)
    p5 = 90 + 0.45 * (97 - 90)         # interpolated between the two lowest
    assert bounds[0] == pytest.approx(-(1 - p5 / 100) - 0.05) and bounds[1] is None
    assert rule == 'p5 - 5%'
    bounds, _ = baselines.baseline_bounds('latency', 'us', values, 5)
    assert bounds[0] is None and bounds[1] == pytest.approx(0.0355 + 0.05)   # p95 103.55
    # The same values from 2 sessions: at least the guess.
    bounds, rule = baselines.baseline_bounds('triad', 'MB/s', [100.0, 100.5], 2)
    assert bounds == (-0.1, None) and rule.startswith('guess: p5 - 5%, at least 10%')
    # A spread so wide that the bound would go below 0: 100 % (a speed is never negative).
    bounds, _ = baselines.baseline_bounds('triad', 'MB/s', [0.0, 0.0, 100.0, 100.0, 100.0], 3)
    assert bounds == (-1.0, None)
    assert baselines.baseline_bounds('barrier_cv', '%', values, 5)[0] == (None, None)


def test_a_baseline_of_two_real_sessions_keeps_every_run_and_its_provenance(tmp_path):
    sessions = [json.loads((FIXTURES / 'report' / f'session-{name}.json').read_text())
                for name in ('new', 'old')]
    refs = _baseline(sessions)
    path = tmp_path / 'local.yaml'
    path.write_text(references_text.dump(refs))
    loaded = references.load('local', path)
    samples = measured.figure_samples(sessions, 'local')
    assert len(loaded.figures) == sum(len(figures) for figures in samples.values())
    assert sorted(loaded.sources['baseline']['baseline_sessions']) == sorted(
        d['session_info']['uuid'] for d in sessions)
    both = [f for f in loaded.figures if f.sample['sessions'] == 2]
    assert both and all(f.sample['min'] <= f.value <= f.sample['max'] for f in both)
    assert all(f.sample['first'] < f.sample['last'] for f in both)
    assert 'alias' not in path.read_text() and '&id' not in path.read_text()


def test_a_baseline_judges_only_the_build_it_measured_and_the_newest_stack():
    """Of two real sessions whose HPL builds differ in their BLAS (the older one's changed
    in a copy), the baseline keeps the newer stack's runs alone, and its figure matches
    that build: a build with another BLAS gets no reference from it."""
    new, old = [json.loads((FIXTURES / 'report' / f'session-{name}.json').read_text())
                for name in ('new', 'old')]
    for run in old['runs']:
        for tc in run['testcases']:
            tc['build_spec'] = re.sub(r'\^blas=\S+', '^blas=intel-oneapi-mkl@2025.3.0',
                                      tc.get('build_spec') or '')
    refs = _baseline([new, old])
    hpl = [f for f in refs.figures if f.check == 'HplCheck' and f.variable == 'gflops']
    assert hpl and all(f.sample['sessions'] == 1 for f in hpl)
    assert all(f.match['build_spec'].endswith('^blas=openblas@0.3.21') for f in hpl)
    fig = hpl[0]
    attrs = {**{k: v for k, v in fig.match.items()}}
    assert references.select(refs, 'HplCheck', fig.partition, fig.environ, attrs)
    other = {**attrs, 'build_spec': attrs['build_spec'].replace('openblas@0.3.21',
                                                                'intel-oneapi-mkl@2025.3.0')}
    assert 'gflops' not in references.select(refs, 'HplCheck', fig.partition, fig.environ,
                                             other)


def _imb_session():
    """A real session of IMB PingPong and MPI start-up on the three MPI stacks (other test
    cases left out of the fixture)."""
    return json.loads((FIXTURES / 'reframe' / 'imb-session.json').read_text())[0]


def test_baseline_of_switch_points_and_variation_has_no_bounds(tmp_path):
    session = _imb_session()
    refs = _baseline([session])
    case = next(c for c in measured.measured_cases(session) if c.check == 'ImbPairCheck'
                and c.environ == 'openmpi' and c.parameters['benchmark'] == 'PingPong')
    chosen = references.select(refs, 'ImbPairCheck', 'default', 'openmpi',
                               {'benchmark': 'PingPong', 'inputs': case.inputs})
    assert chosen['latency'].tolerance == (None, 0.1)               # us: upper bound
    assert chosen['peak_bandwidth'].tolerance == (-0.1, None)
    assert chosen['switch_size'].tolerance == (None, None)          # a size, not a speed


def test_mpi_stacks_side_by_side_from_a_real_session():
    cases = measured.measured_cases(_imb_session())
    groups = dict(stack_comparison.side_by_side(cases))
    assert sorted(groups) == ['ImbPairCheck benchmark=PingPong on local:default',
                              'MpiStartupCheck num_nodes=1 on local:default']
    pingpong = groups['ImbPairCheck benchmark=PingPong on local:default']
    assert list(pingpong) == ['openmpi', 'mpich', 'intelmpi']
    assert pingpong['openmpi'].inputs.startswith('PingPong placement=1 node(s) x 2 rank(s)')
    table = stack_comparison.stacks_table(pingpong).splitlines()
    assert table[0].split() == ['figure', 'openmpi', 'mpich', 'intelmpi']
    rows = {line.split()[0]: line.split()[2:] for line in table[2:]}
    assert rows['latency'] == [f'{pingpong[e].value("latency"):.4g}' for e in pingpong]
    assert rows['bandwidth_4MiB'] == [f'{pingpong[e].value("bandwidth_4MiB"):.0f}'
                                      for e in pingpong]
    # Intel MPI's curve shows no switch: its column says so rather than a number.
    assert rows['switch_size'][-1] == '-' and rows['switch_size'][0] == '4096'


def test_hardware_in_a_figure_matches_the_partition_and_parameter_tuples_their_name():
    fig = references.Figure(check='StreamCheck', partition='compute', variable='triad',
                            value=1.0, unit='MB/s', source='s', where='w', configuration='c',
                            match={'num_threads': 4, 'memory_dimms': 8})
    test = _test('chic', 'compute', 'gcc', num_threads=4)
    assert fig.applies_to('StreamCheck', 'compute', 'gcc', references._test_attrs(test, [fig]))
    test.current_partition = described_partition('compute', memory_dimms=4)
    assert not fig.applies_to('StreamCheck', 'compute', 'gcc',
                              references._test_attrs(test, [fig]))
    assert references.match_value(('swap_threshold', 64)) == 'swap_threshold-64'


def test_a_baseline_judges_only_runs_of_the_inputs_it_was_measured_with():
    cases = measured.measured_cases(_imb_session())
    refs = _baseline([_imb_session()])
    case = next(c for c in cases if c.check == 'ImbPairCheck'
                and c.environ == 'openmpi' and c.parameters['benchmark'] == 'PingPong')
    assert case.inputs
    same = {'benchmark': 'PingPong', 'inputs': case.inputs}
    other = {'benchmark': 'PingPong', 'inputs': case.inputs + ' iterations=50'}
    assert references.select(refs, 'ImbPairCheck', 'default', 'openmpi', same)
    assert references.select(refs, 'ImbPairCheck', 'default', 'openmpi', other) == {}


@pytest.mark.parametrize('fraction', [-0.5, 0, 1.5, float('nan')])
@pytest.mark.parametrize('name', ['margin', 'guess'])
def test_a_baseline_margin_out_of_range_is_refused_before_anything_is_written(name, fraction):
    with pytest.raises(reference_schema.ReferenceError, match='a fraction of the baseline in'):
        baselines.baseline_from_samples('local', {}, {}, **{name: fraction})


# --- a paper's run configuration (partition extras such as hpl_tuning, ior) ----------------

TSUBAME_LIKE = [
    {'settings': {'nb': 240, 'bcast': 3}, 'source': 'tsubame2007', 'where': 'Figure 3-1'},
    {'match': {'num_nodes': 648}, 'settings': {'bcast': 0, 'grid': [36, 144]},
     'source': 'tsubame2007', 'where': 'Figure 3-7; Table 3-6'},
]
KNOWN = ('nb', 'bcast', 'grid')


def test_paper_settings_apply_per_match_and_later_entries_win():
    assert references.paper_settings('tsubame', 'hpl_tuning', TSUBAME_LIKE, KNOWN,
                                     {'num_nodes': 648}) == {'nb': 240, 'bcast': 0,
                                                             'grid': [36, 144]}
    assert references.paper_settings('tsubame', 'hpl_tuning', TSUBAME_LIKE, KNOWN,
                                     {'num_nodes': 512}) == {'nb': 240, 'bcast': 3}
    # One entry needs no list; a partition without one is silent.
    assert references.paper_settings('tsubame', 'hpl_tuning', TSUBAME_LIKE[0], KNOWN) == {
        'nb': 240, 'bcast': 3}
    assert references.paper_settings('tsubame', 'hpl_tuning', None, KNOWN) == {}


@pytest.mark.parametrize('entry, message', [
    ({'settings': {'nb': 240}}, 'hpl_tuning[0] needs source, where'),
    ({'settings': {'nbs': 240}, 'source': 'tsubame2007', 'where': 'w'},
     'unknown setting(s) nbs; known: nb, bcast, grid'),
    ({'settings': {'nb': 240}, 'source': 'tsubame2006', 'where': 'w'},
     "source 'tsubame2006' is not one of references/tsubame.yaml (tsubame2007)"),
    ({'settings': {'nb': 240}, 'source': 'tsubame2007', 'where': 'w', 'nodes': 4},
     'unknown key(s) nodes'),
    ({'match': {'layout_name': 'per-core'}, 'settings': {'nb': 240},
      'source': 'tsubame2007', 'where': 'w'}, 'cannot match on layout_name'),
])
def test_paper_settings_are_cited_and_named_as_the_checks_variables(entry, message):
    with pytest.raises(reference_schema.ReferenceError, match=re.escape(message)):
        references.paper_settings('tsubame', 'hpl_tuning', [entry], KNOWN, {'num_nodes': 1})


def test_a_comparison_machine_has_comparisons_only(tmp_path):
    data = yaml.safe_load((references.paths.REFERENCES_DIR / 'chic.yaml').read_text())
    woodcrest = next(f for f in data['figures'] if f['partition'] == 'woodcrest')
    del woodcrest['use']
    path = tmp_path / 'chic.yaml'
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(reference_schema.ReferenceError, match='woodcrest is a comparison machine'):
        references.load('chic', path)


# --- Hostile references files (issue 38): refused when the file loads, one message each ----

_BOMB = '''a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
system: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
'''


@pytest.mark.parametrize('text, message', [
    (_BOMB, r'an alias \(\*a\): this file is plain data'),
    (yaml.safe_dump(CHIC) + 'system: chic\n', "the key 'system' is given twice"),
    (yaml.safe_dump(CHIC).replace('- -0.1\n  - null', '- 0.1\n  - -0.1'),
     r'figures/0: tolerance \[0.1, -0.1\]: \(lower, upper\) fractions of the value'),
    # A number that is none is refused as the YAML is read (issue 70), at its line.
    (yaml.safe_dump(CHIC).replace('3731.0', '.nan'), r"not valid YAML: line \d+, column \d+: "
                                                     r"'.nan' is not a finite number"),
    (yaml.safe_dump(CHIC).replace('3731.0', '.inf'), r"line \d+, column \d+: '.inf' is not"),
    (yaml.safe_dump(CHIC).replace('3731.0', '-3731.0'), 'figures/0: value -3731.0'),
    (yaml.safe_dump(CHIC).replace('- -0.1\n  - null', '- .nan\n  - null'),
     r"line \d+, column \d+: '.nan' is not a finite number"),
])
def test_a_hostile_references_file_is_refused_when_it_loads_in_one_message(
        tmp_path, text, message):
    path = tmp_path / 'chic.yaml'
    path.write_text(text)
    with pytest.raises(reference_schema.ReferenceError, match=message) as raised:
        references.load('chic', path)
    assert '\n' not in str(raised.value) and len(str(raised.value)) < 1000


def test_a_huge_references_file_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / 'chic.yaml'
    figure = yaml.safe_dump(CHIC['figures'][:1])
    path.write_text(yaml.safe_dump({k: v for k, v in CHIC.items() if k != 'figures'}) + \
                    'figures:\n' + figure * (2 * reference_schema.MAX_FILE_BYTES // len(figure)))
    with pytest.raises(reference_schema.ReferenceError, match=r'chic.yaml: 2.0 MiB, a references '
                       r'file is at most 1 MiB'):
        references.load('chic', path)


def test_a_schema_error_shows_a_huge_value_cut_short(tmp_path):
    data = json.loads(json.dumps(CHIC))
    data['figures'][0]['value'] = 'x' * 100_000
    with pytest.raises(reference_schema.ReferenceError) as raised:
        references.load('chic', _write(tmp_path, data))
    assert len(str(raised.value)) < 1000 and 'is not of type' in str(raised.value)


def test_hpcbench_references_refuses_a_bad_file_in_one_line(tmp_path):
    import os
    import subprocess
    from conftest import BIN, ROOT
    (tmp_path / 'chic.yaml').write_text(_BOMB)
    proc = subprocess.run([str(BIN / 'hpcbench'), 'references'], cwd=ROOT, timeout=60,
                          env={**os.environ, 'HPCBENCH_REFERENCES': str(tmp_path)},
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith('error: ') \
        and 'an alias (*a)' in proc.stderr and 'Traceback' not in proc.stderr, proc.stderr


def _mixin_figures():
    from hpcbench.rfm import gpu_to_gpu
    return {'GpuPairs': {*gpu_to_gpu.PAIR_FIGURES, *gpu_to_gpu.LINK_FIGURES}}


FIGURES_A_MIXIN_ADDS = _mixin_figures()


def _reported_by_the_checks():
    """{check class: (its performance functions and the variables its code names as
    literals, whether that is all of them)} read from reframe-checks/ (ast): a class's own
    and its bases' in the same file."""
    import ast
    from conftest import ROOT
    found = {}
    for path in sorted((ROOT / 'reframe-checks').glob('*.py')):
        classes = {node.name: node for node in ast.parse(path.read_text()).body
                   if isinstance(node, ast.ClassDef)}

        def names(cls):
            own, literal_only, replaces = set(), True, False
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef) and any(
                        isinstance(d, ast.Call) and getattr(d.func, 'id', '') ==
                        'performance_function' for d in node.decorator_list):
                    own.add(node.name)
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if getattr(target, 'attr', '') == 'perf_variables':
                            replaces = True
                            if isinstance(node.value, ast.Dict):
                                own |= {k.value for k in node.value.keys
                                        if isinstance(k, ast.Constant)}
                            else:
                                literal_only = False
                        if (isinstance(target, ast.Subscript)
                                and getattr(target.value, 'attr', '') == 'perf_variables'):
                            if isinstance(target.slice, ast.Constant):
                                own.add(target.slice.value)
                            else:
                                literal_only = False
            # A class that sets its perf_variables whole reports those, not its bases'.
            for base in cls.bases:
                # A mix-in of hpcbench.rfm that adds its figures where they apply.
                own |= FIGURES_A_MIXIN_ADDS.get(getattr(base, 'id', None), set())
                if getattr(base, 'id', None) in classes and not replaces:
                    inherited, whole = names(classes[base.id])
                    own |= inherited
                    literal_only &= whole
            return own, literal_only

        for name, cls in classes.items():
            if name in references.BENCHMARK_OF_CHECK:
                found[name] = names(cls)
    return found


def test_lint_knows_every_variable_a_check_reports_and_no_other():
    """What references.reported_variables declares (make lint checks figures against it)
    is what the checks' code reports: every performance function and literal name is
    declared, and a check that names its variables by literals alone declares exactly
    those."""
    found = _reported_by_the_checks()
    assert set(found) == set(references.BENCHMARK_OF_CHECK)
    # The two IMB checks share ImbBenchmark's code (switch_size where PingPong or PingPing
    # shows the switch): each is held to what either declares.
    imb = references.reported_variables('ImbPairCheck') | references.reported_variables(
        'ImbGroupCheck')
    for check, (names, literal_only) in found.items():
        declared = references.reported_variables(check)
        assert names <= (imb if check.startswith('ImbP') or check.startswith('ImbG')
                         else declared), (check, names - declared)
        if literal_only:
            assert names == declared, (check, declared - names)


def test_a_figure_of_a_variable_its_check_never_reports_is_refused_by_lint(tmp_path):
    data = json.loads(json.dumps(CHIC))
    data['figures'][0]['variable'] = 'triad_bandwith'
    with pytest.raises(reference_schema.ReferenceError,
                       match=r"figures/0: StreamCheck reports no 'triad_bandwith'; it reports: "
                             r'add, balance, copy, scale, triad, '):
        references.load('chic', _write(tmp_path, data))
    imb = {**json.loads(json.dumps(CHIC)), 'figures': [{
        **CHIC['figures'][0], 'check': 'ImbPairCheck', 'match': {'benchmark': 'PingPong'},
        'variable': 'message_rate', 'unit': 'msg/s'}]}
    with pytest.raises(reference_schema.ReferenceError, match="ImbPairCheck reports no "
                       "'message_rate'"):
        references.load('chic', _write(tmp_path, imb))


# --- One form for every references file (issue 39) -----------------------------------------

@pytest.mark.parametrize('system', references.systems_with_references())
def test_every_references_file_is_in_its_one_form(system):
    """Written again with no change, each file is byte for byte what it was; loaded, written
    and loaded again, the same figures."""
    path = references.reference_file(system)
    text = path.read_text()
    data = yaml.load(text, Loader=reference_schema.DataLoader)
    assert references_text.to_text(data, str(path)) == text
    again = references.parse(yaml.safe_load(references_text.to_text(data)), 'again')
    assert again.figures == references.load(system).figures
    assert '&id' not in text and '*id' not in text


def _rewrite(references_dir):
    import os
    import subprocess
    from conftest import BIN, ROOT
    return subprocess.run([str(BIN / 'hpcbench'), 'references', '--rewrite', '--system',
                           'chic'], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, 'HPCBENCH_REFERENCES': str(references_dir)})


def test_rewrite_refuses_what_it_would_lose_or_write_through_and_says_so(tmp_path):
    """Issue 51, item 17: --rewrite dropped hand-written comments without a word, wrote
    through a symbolic link out of references/, and an unwritable file gave a traceback."""
    edited = tmp_path / 'edited'
    edited.mkdir()
    path = edited / 'chic.yaml'
    text = yaml.safe_dump(CHIC, sort_keys=True)
    commented = text.replace('system: chic\n', 'system: chic  # the cluster in Chemnitz\n')
    path.write_text('# checked against the paper on 2026-11-20\n' + commented)
    run = _rewrite(edited)
    assert run.returncode == 2 and 'Traceback' not in run.stderr
    assert run.stderr == (f'error: {path} has 2 comment(s) (line 1: # checked against the '
                          'paper on 2026-11-20; line 45: system: chic  # the cluster in '
                          "Chemnitz): the one form keeps none, so --rewrite would drop them; "
                          "say it in the file's `about`, a figure's `where` or `notes`, then "
                          'rewrite\n'), run.stderr
    assert path.read_text().startswith('# checked against')
    # A `#` inside a string is no comment.
    assert references_text.comments("about: 'see #3'\nx: a#b\n") == []

    outside = tmp_path / 'outside.yaml'
    outside.write_text(text)
    path.unlink()
    path.symlink_to(outside)
    run = _rewrite(edited)
    assert run.returncode == 2 and run.stderr == (
        f'error: {path} is a symbolic link (to {outside}): --rewrite writes the files of '
        'references/ themselves, never through a link\n'), run.stderr
    assert outside.read_text() == text

    path.unlink()
    path.write_text(text)
    edited.chmod(0o555)
    try:
        if os.access(edited, os.W_OK):
            return              # root writes anywhere: the unwritable case needs a user
        run = _rewrite(edited)
        assert run.returncode == 2 and run.stderr.startswith(f'error: {path} cannot be '
                                                             'rewritten (Permission denied')
        assert path.read_text() == text
    finally:
        edited.chmod(0o755)


@needs_root
def test_rewrite_of_a_file_on_a_read_only_mount_is_one_message(tmp_path, mounted):
    source = tmp_path / 'source'
    source.mkdir()
    text = yaml.safe_dump(CHIC, sort_keys=True)
    (source / 'chic.yaml').write_text(text)
    read_only = mounted('--bind', '-o', 'ro', str(source))
    subprocess.run(['mount', '-o', 'remount,bind,ro', str(read_only)], check=True)
    run = _rewrite(read_only)
    assert run.returncode == 2 and 'Traceback' not in run.stderr
    assert run.stderr.startswith(f'error: {read_only}/chic.yaml cannot be rewritten '
                                 '(Read-only file system'), run.stderr
    assert (read_only / 'chic.yaml').read_text() == text


def test_a_hand_edit_is_put_back_in_the_one_form_and_nothing_invalid_is_written(tmp_path):
    import os
    import subprocess
    from conftest import BIN, ROOT
    path = tmp_path / 'chic.yaml'
    path.write_text(yaml.safe_dump(CHIC, sort_keys=True))     # another order, block lists
    run = subprocess.run([str(BIN / 'hpcbench'), 'references', '--rewrite'], cwd=ROOT,
                         env={**os.environ, 'HPCBENCH_REFERENCES': str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and 'rewritten in its one form' in run.stdout, run.stderr
    assert path.read_text().startswith('system: chic\nsources:\n')
    assert 'match: {num_threads: 1}' in path.read_text()
    assert "tolerance: [-0.1, null]" in path.read_text()
    assert references.load('chic', path).figures == references.parse(CHIC, 'x').figures
    broken = json.loads(json.dumps(CHIC))
    broken['figures'][0]['value'] = float('nan')
    with pytest.raises(reference_schema.ReferenceError, match='value nan'):
        references_text.to_text(broken)


def test_a_broken_references_file_is_its_own_one_line_not_a_failed_read_of_the_results(
        tmp_path):
    """Issue 51, item 18: an invalid references file was reported as "reading the results
    database failed", with a line of ReFrame's traceback; and every ReFrame command left its
    startup log (/tmp/rfm-*.log) behind."""
    import shutil
    import tempfile
    from conftest import BIN, ROOT, run_reframe
    refs = tmp_path / 'references'
    shutil.copytree(ROOT / 'references', refs)
    (refs / 'local.yaml').write_text('system: local\nsources: {}\nfigures: [1\n')
    said = (f"error: {refs}/local.yaml: not valid YAML: line 4, column 1: expected ',' or "
            "']', but got '<stream end>'\n")
    env = {'HPCBENCH_REFERENCES': str(refs), 'HPCBENCH_VAR': str(tmp_path / 'var')}
    for command in (['compare'], ['report']):
        done = subprocess.run([str(BIN / 'hpcbench'), *command], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, **env}, timeout=300)
        assert done.returncode == 2 and done.stderr == said, done.stderr
    startup_logs = set(Path(tempfile.gettempdir()).glob('rfm-*.log'))
    listed = run_reframe('-l', env=env)
    assert listed.returncode == 1 and listed.stderr == said, listed.stderr
    assert run_reframe('-l', env={'HPCBENCH_VAR': str(tmp_path / 'var')}).returncode == 0
    assert set(Path(tempfile.gettempdir()).glob('rfm-*.log')) <= startup_logs


def test_a_references_file_that_is_a_fifo_is_refused_at_once(tmp_path):
    """Read as a description is (hpcbench.core.paths.read_regular): a FIFO in a references
    file's place blocked every command that loads the system's references."""
    import os
    fifo = tmp_path / 'chic.yaml'
    os.mkfifo(fifo)
    with pytest.raises(reference_schema.ReferenceError, match='not a regular file, so not a '
                                                              'references file'):
        references.load('chic', fifo)
