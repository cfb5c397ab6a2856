"""A base check's contract with the checks deriving from it is enforced when a test is made
(hpcbench.rfm.required_attributes), not stated in a comment: a check that forgets what its base
requires is refused by ReFrame, naming the check, the attribute and the base, and the
checks beside it in the file are still made."""
import textwrap

import pytest

from conftest import ROOT, run_reframe

# (the check file holding the base, the base, what a forgetful check still defines, what
# it forgets, what a whole one adds)
CONTRACTS = [
    ('hpl.py', 'HplBase', "layout_name = 'per-core'", 'num_nodes (the nodes of a run)',
     'num_nodes = 1'),
    ('imb.py', 'ImbBenchmark', '', "benchmark (the IMB benchmark's name)",
     "benchmark = 'PingPong'"),
]


@pytest.mark.parametrize('source, base, kept, forgotten, completed', CONTRACTS)
def test_a_check_that_forgets_what_its_base_requires_is_refused_by_name(
        tmp_path, source, base, kept, completed, forgotten):
    checks = tmp_path / 'contract_checks.py'
    checks.write_text(textwrap.dedent(f'''\
        import importlib.util
        import sys
        import reframe as rfm

        _spec = importlib.util.spec_from_file_location(
            'hpcbench_contract_base', {str(ROOT / 'reframe-checks' / source)!r})
        _module = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)


        @rfm.simple_test
        class Forgetful(_module.{base}):
            {kept or 'pass'}


        @rfm.simple_test
        class Whole(_module.{base}):
            {kept}
            {completed}
        '''))
    listed = run_reframe('-l', '--system', 'local', env={'HPCBENCH_VAR': str(tmp_path / 'var')},
                         checks=str(checks))
    said = listed.stdout + listed.stderr
    assert listed.returncode == 0, said[-3000:]
    assert (f"skipping test 'Forgetful': reframe syntax error: Forgetful leaves undefined "
            f'{forgotten}, which {base} requires') in said, said[-3000:]
    # The whole one is made (listed where this machine builds it: without a Spack no
    # environment has the feature its build asks for); the forgetful one never is.
    assert "skipping test 'Whole'" not in said and '- Forgetful' not in listed.stdout, \
        said[-3000:]
