"""What each check reports is declared once, in the benchmark module it delegates to
(hpcbench.benchmarks.reports): every check of reframe-checks/ is declared, by one module,
and the references registry is those declarations."""
import json
import re
import sys

import pytest

from conftest import ROOT
from hpcbench.benchmarks import reports
from hpcbench.results import references


def _checks():
    text = '\n'.join(p.read_text() for p in sorted((ROOT / 'reframe-checks').glob('*.py')))
    return set(re.findall(r'(?m)^@rfm\.simple_test\nclass (\w+)', text))


def test_every_check_is_declared_by_one_benchmark_module():
    assert _checks() and set(reports.declared()) == _checks()
    assert references.BENCHMARK_OF_CHECK == {
        check: declared.benchmark for check, declared in reports.declared().items()}


def test_a_check_declared_by_two_modules_is_one_error_naming_both(tmp_path, monkeypatch):
    package = tmp_path / 'twice'
    package.mkdir()
    (package / '__init__.py').write_text('')
    for name in ('first', 'second'):
        (package / f'{name}.py').write_text(
            'from hpcbench.benchmarks.reports import Reports\n'
            "REPORTS = {'StreamCheck': Reports('STREAM', ('triad',))}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match='^StreamCheck is declared by first and second$'):
        reports.declared('twice')
    sys.modules.pop('twice', None)


def test_what_an_imb_check_reports_follows_the_benchmark_its_figure_names():
    pair = reports.declared()['ImbPairCheck']
    assert 'switch_size' in pair.variables_for({'benchmark': 'PingPong'})
    assert 'switch_size' not in pair.variables_for({'benchmark': 'Exchange'})
    assert pair.variables_for() >= pair.variables_for({'benchmark': 'PingPong'})


def _closure_unit(performance_function):
    """The unit a check's @performance_function was given (ReFrame keeps it in the
    decorated function's closure)."""
    cells = dict(zip(performance_function.__code__.co_freevars,
                     (c.cell_contents for c in performance_function.__closure__)))
    return cells['unit']


def test_every_declared_figure_has_the_unit_its_check_s_performance_function_declares():
    from conftest import check_classes_of
    classes = check_classes_of(*sorted(p.name for p in (ROOT / 'reframe-checks').glob('*.py')))
    compared = 0
    for check, declared in reports.declared().items():
        variables = declared.variables_for()
        assert all(declared.unit_of(v) for v in variables), check
        for name, function in classes[check]._rfm_perf_fns.items():
            if name in variables:
                assert _closure_unit(function) == declared.unit_of(name), (check, name)
                compared += 1
    assert compared >= 49


def _stored_sessions():
    for path in sorted((ROOT / 'tests' / 'fixtures').rglob('*.json')):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        for session in data if isinstance(data, list) else [data]:
            if isinstance(session, dict) and 'runs' in session and 'session_info' in session:
                yield path, session


def test_the_declared_units_are_those_of_every_real_stored_run():
    """The units set in the checks' hooks (HPCC's, IMB's, IOR's, the GPU pairs') as every
    stored real session of the fixtures recorded them."""
    declared = reports.declared()
    seen = set()
    for path, session in _stored_sessions():
        for run in session['runs']:
            for tc in run['testcases']:
                check = tc['name'].split()[0]
                if check not in declared:
                    continue
                match = {'benchmark': tc['benchmark']} if 'benchmark' in tc else {}
                for key, value in (tc.get('perfvalues') or {}).items():
                    variable, unit = key.split(':')[-1], value[4]
                    assert declared[check].unit_of(variable, match) == unit, \
                        (path.name, check, variable, unit)
                    seen.add((check, variable))
    assert {'HpccCheck', 'ImbPairCheck', 'IorCheck'} <= {check for check, _ in seen}
    assert len(seen) > 40
