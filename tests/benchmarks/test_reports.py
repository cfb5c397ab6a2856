"""What each check reports is declared once, in the benchmark module it delegates to
(hpcbench.benchmarks.reports): every check of reframe-checks/ is declared, by one module,
and the references registry is those declarations."""
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
