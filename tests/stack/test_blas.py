"""The BLAS libraries side by side (issue 20): which the machine has and which is the default,
how host.yaml describes them to Spack, their ReFrame environments, and real HPL and DGEMM
runs on each, shown as BLAS x MPI."""
import ctypes
import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, FIXTURES, ROOT, run_reframe
from hpcbench.core import layout, node, paths
from hpcbench.report import contents
from hpcbench.results import case_builds, changes, measured, stack_comparison
from hpcbench.rfm import site_environments, site_partitions
from hpcbench.machine import host
from hpcbench.stack import blas, machine_systems
from hpcbench.rfm.build import PREFIX_FILE

ANSI = re.compile(r'\x1b\[[0-9;]*m')


def _names(libraries):
    return [b.name for b in libraries]


def test_the_default_is_the_fastest_the_machine_has_unless_hpcbench_blas_says(monkeypatch,
                                                                             tmp_path):
    monkeypatch.delenv('HPCBENCH_BLAS', raising=False)
    # No order measured on this machine yet: the one measured when hpcbench.stack.blas was
    # written.
    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    # A local mirror that holds OpenBLAS's source, and one that does not (an older cache
    # offline: building it would fail the whole install).
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path))
    assert _names(blas.local_libraries()) == ['mkl', 'openblas', 'blis']
    archive = (tmp_path / '_source-cache' / 'archive' / blas.SPACK_OPENBLAS_SHA256[:2]
               / f'{blas.SPACK_OPENBLAS_SHA256}.tar.gz')
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b'')
    assert _names(blas.local_libraries()) == list(blas.BY_SPEED)
    # No local mirror: Spack fetches it from upstream.
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path / 'none'))
    assert _names(blas.local_libraries()) == list(blas.BY_SPEED)
    monkeypatch.setenv('HPCBENCH_BLAS', 'blis, openblas')
    assert _names(blas.local_libraries()) == ['blis', 'openblas']


@pytest.mark.machine_dependent
def test_an_unknown_blas_is_one_error_and_nothing_runs(tmp_path):
    proc = run_reframe('-l', env={'HPCBENCH_BLAS': 'openblas,atlas',
                                  'HPCBENCH_VAR': str(tmp_path / 'var')})
    said = ANSI.sub('', proc.stdout + proc.stderr)
    assert proc.returncode != 0
    assert said.count("error: HPCBENCH_BLAS='openblas,atlas': the BLAS libraries are "
                      'mkl, openblas-spack, openblas, blis') == 1, said[-2000:]
    assert 'Found' not in said


def test_host_yaml_gives_spack_each_blas_and_what_to_build_with_it(monkeypatch, tmp_path):
    monkeypatch.delenv('HPCBENCH_BLAS', raising=False)
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path / 'none'))
    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    libraries = blas.local_libraries()
    roomy = node.Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=32 * 2**20,
                      memory_bytes=24 * 2**30, clock_hz=2.6e9, flops_per_cycle=32)
    config = machine_systems.host_config([], {}, [roomy], 'local', blas_libraries=libraries)
    packages, definitions = config['packages'], dict(kv for d in config['definitions']
                                                     for kv in d.items())
    assert packages['intel-oneapi-mkl'] == {'externals': [{
        'spec': f'intel-oneapi-mkl@{blas.MKL_VERSION}+shared~ilp64~cluster~gfortran~envmods '
                'threads=openmp %gcc', 'prefix': str(tmp_path / 'cache' / 'mkl' / blas.MKL_VERSION)}],
        'buildable': False}
    assert packages['blis']['externals'][0]['prefix'] == str(tmp_path / 'cache' / 'blas' / 'blis')
    # Debian's OpenBLAS stays an external; Spack may build the newer one beside it.
    assert packages['openblas']['externals'][0]['prefix'] == '/usr'
    assert packages['openblas']['buildable'] is True
    assert definitions['blas_default'] == ['intel-oneapi-mkl']
    assert definitions['blas_others'] == [
        f'openblas@{blas.SPACK_OPENBLAS_VERSION} threads=openmp ~dynamic_dispatch ~lapack '
        '~complex',
        'openblas threads=pthreads', 'blis']
    assert definitions['blas_libraries'] == [*definitions['blas_default'],
                                             *definitions['blas_others']]
    # Without the newer OpenBLAS, Spack builds no OpenBLAS at all.
    monkeypatch.setenv('HPCBENCH_BLAS', 'openblas,blis')
    config = machine_systems.host_config([], {}, [roomy], 'testbed',
                                   blas_libraries=blas.local_libraries()[:1])
    assert config['packages']['openblas']['buildable'] is False
    assert config['definitions'][2:] == [{'blas_default': ['openblas threads=pthreads']},
                                         {'blas_mpi': []}, {'blas_others': []},
                                         {'blas_libraries': ['openblas threads=pthreads']},
                                         {'gpu_mpi_specs': []}, {'gpu_specs': []}]


def test_each_other_blas_is_an_environment_of_the_first_stack_only(monkeypatch):
    from hpcbench.stack import mpi_stacks
    monkeypatch.delenv('HPCBENCH_BLAS', raising=False)
    stacks = mpi_stacks.local_stacks()[:2]
    libraries = blas.local_libraries()
    environments = site_environments.stack_environments(stacks, ['local'], {'spack_root': '/spack'},
                                                  libraries)
    by_name = {e['name']: e for e in environments}
    default = libraries[0]
    assert by_name['openmpi']['extras']['spack_blas'] == default.spack_spec
    assert by_name['mpich']['extras']['spack_blas'] == default.spack_spec
    others = [e for e in environments if site_environments.OTHER_BLAS in e['features']]
    assert [e['name'] for e in others] == [f'openmpi-{b.name}' for b in libraries[1:]]
    for env, library in zip(others, libraries[1:]):
        # Not an `mpi` environment: IMB, IOR, STREAM and start-up run once per stack.
        assert 'mpi' not in env['features']
        # The same MPI: its answer whether it sends from GPU memory (where it could be
        # asked: installed) is the stack's.
        asked = {k: v for k, v in by_name['openmpi']['extras'].items()
                 if k == 'device_buffers'}
        # And the extras other sites' checks read (omp_flag), as every environment.
        assert env['extras'] == {'spack_mpi': 'openmpi', 'spack_blas': library.spack_spec,
                                 **asked, **site_partitions.CONVENTIONAL_EXTRAS}
        assert env['env_vars'] == by_name['openmpi']['env_vars']
    # Without a Spack nothing builds them: no environment either.
    environments = site_environments.stack_environments(stacks, ['local'], {}, libraries)
    assert [e['name'] for e in environments] == ['openmpi', 'mpich']


def _dgemm_samples(fixture):
    """{library name: DGEMM GFLOP/s of every call} of a real session's DGEMM ceilings."""
    data = json.loads((FIXTURES / 'reframe' / fixture).read_text())
    data = data[0] if isinstance(data, list) else data
    return {blas.library_of(provider, LIBRARIES): rates
            for provider, rates in case_builds.dgemm_by_blas(data).items()}


class _Library(blas.BlasLibrary):
    """A library as the sessions' builds name it (their Debian versions: Debian 12's), so
    that the fixtures read the same on a machine without Debian's BLAS packages."""

    def __init__(self, name, spack_spec, version):
        super().__init__(name, spack_spec)
        self._version = version

    def version(self):
        return self._version


LIBRARIES = [_Library('mkl', 'intel-oneapi-mkl', blas.MKL_VERSION),
             _Library('openblas-spack', 'openblas', blas.SPACK_OPENBLAS_VERSION),
             _Library('openblas', 'openblas', '0.3.21'), _Library('blis', 'blis', '0.9.0')]


def test_the_default_blas_becomes_the_one_measured_fastest_when_it_is_ahead():
    """The VM as an AMD EPYC (a warm make run): OpenBLAS 0.3.21 and 0.3.28 ahead of MKL,
    the default until then, by 8 % over 5 against 20 calls (MKL's on four MPI stacks): the
    best median becomes the default; the others keep their places."""
    samples = _dgemm_samples('dgemm-four-blas-amd-session.json')
    assert {name: len(rates) for name, rates in samples.items()} == {
        'mkl': 20, 'openblas-spack': 5, 'openblas': 5, 'blis': 5}
    choice = blas.choose_default(samples, list(blas.BY_SPEED))
    assert choice.changed and choice.order == ('openblas', 'mkl', 'openblas-spack', 'blis')
    assert choice.medians['openblas'] == pytest.approx(108.19)
    assert choice.reason.startswith('openblas: the best DGEMM, openblas 108.2 GFLOP/s (median '
                                    'of 5), ahead of mkl 99.4 GFLOP/s (median of 20): median '
                                    '+8.8 %, Mann-Whitney U p = ')
    # Once OpenBLAS 0.3.28 is the default, 0.3.21's 0.5 % better median does not replace it:
    # the runs cannot tell them apart, and a swap would rebuild HPL on every stack.
    kept = blas.choose_default(samples, ['openblas-spack', 'mkl', 'openblas', 'blis'])
    assert not kept.changed and kept.order == ('openblas-spack', 'mkl', 'openblas', 'blis')
    assert 'openblas-spack stays: openblas 108.2 GFLOP/s (median of 5) is not told apart' \
        in kept.reason and 'within ±5 %' in kept.reason


def test_the_default_blas_stays_when_it_is_the_fastest_or_alone():
    """The VM as an Intel Xeon (DGEMM at N = 20000): MKL ahead of both OpenBLAS."""
    samples = _dgemm_samples('blas-hpl-n20000-session.json')
    choice = blas.choose_default(samples, list(blas.BY_SPEED))
    assert not choice.changed and choice.order == tuple(blas.BY_SPEED)
    assert choice.reason.startswith('mkl stays: the best DGEMM, mkl 173.3 GFLOP/s (median of '
                                    '5); next openblas 129.9')
    # An order whose default was not measured takes the best; one library says nothing.
    assert blas.choose_default(samples, ['atlas', 'blis']).order[0] == 'mkl'
    alone = blas.choose_default({'blis': samples['blis']}, ['mkl', 'blis'])
    assert alone.order == ('mkl', 'blis') and 'fewer than two' in alone.reason


def test_the_default_changes_only_when_the_user_says_and_the_change_is_recorded(
        monkeypatch, tmp_path, capfd):
    """A measurement only suggests (choose_default); `hpcbench blas --default` changes the
    order, recorded with its history, which sessions name in their provenance."""
    monkeypatch.delenv('HPCBENCH_BLAS', raising=False)
    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path / 'no-mirror'))
    assert blas.choice_provenance() == {'blas_default': 'mkl',
                                        'blas_default_from': 'the built-in order'}
    suggested = blas.choose_default(_dgemm_samples('dgemm-four-blas-amd-session.json'),
                                    list(blas.BY_SPEED))
    assert suggested.changed and not blas.order_path().exists()
    assert _names(blas.local_libraries()) == list(blas.BY_SPEED)

    assert blas.set_default('openblas', f'asked ({suggested.reason})') == ('mkl', 'openblas')
    recorded = json.loads(blas.order_path().read_text())
    assert recorded['order'] == ['openblas', 'mkl', 'openblas-spack', 'blis']
    (change,) = recorded['history']
    assert (change['from'], change['to']) == ('mkl', 'openblas')
    assert change['reason'].startswith('asked (openblas: the best DGEMM')
    assert _names(blas.local_libraries()) == ['openblas', 'mkl', 'openblas-spack', 'blis']
    facts = blas.choice_provenance()
    assert facts['blas_default'] == 'openblas'
    assert facts['blas_default_from'] == f'chosen {change["time"]} in place of mkl'
    assert not any(c in v for v in facts.values() for c in ',{}')
    # The same default again changes nothing; another one is a second change.
    assert blas.set_default('openblas', 'again') == ('openblas', 'openblas')
    blas.set_default('blis', 'asked')
    assert [c['to'] for c in blas.choice_history()] == ['openblas', 'blis']
    with pytest.raises(ValueError, match="'atlas' is no BLAS library"):
        blas.set_default('atlas', 'asked')

    # HPCBENCH_BLAS still decides, for one run.
    monkeypatch.setenv('HPCBENCH_BLAS', 'mkl,blis')
    assert _names(blas.local_libraries()) == ['mkl', 'blis']
    assert blas.choice_provenance()['blas_default_from'] == 'HPCBENCH_BLAS'
    monkeypatch.delenv('HPCBENCH_BLAS')
    # A library the record does not name (newer than it) comes last.
    blas.order_path().write_text(json.dumps({'order': ['blis', 'atlas']}))
    assert _names(blas.local_libraries()) == ['blis', 'mkl', 'openblas-spack', 'openblas']
    blas.order_path().write_text('{"order": ["blis"')
    assert _names(blas.local_libraries()) == list(blas.BY_SPEED)
    err = capfd.readouterr().err
    assert err.count('warning:') == 1 and 'is not a BLAS order' in err


def test_hpcbench_blas_shows_and_changes_the_default_and_refuses_an_unknown_one(
        monkeypatch, tmp_path, capsys):
    from hpcbench.cli import main
    monkeypatch.delenv('HPCBENCH_BLAS', raising=False)
    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path / 'no-mirror'))
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    monkeypatch.setattr(blas.paths, 'VAR_DIR', tmp_path / 'var')
    assert main.main(['blas']) == 0
    assert "HPL's default BLAS: mkl (the built-in order)" in capsys.readouterr().out
    assert main.main(['blas', '--default', 'openblas-spack']) == 0
    out = capsys.readouterr().out
    assert "HPL's default BLAS: mkl -> openblas-spack" in out and 'stack changed' in out
    assert main.main(['blas']) == 0
    out = capsys.readouterr().out
    assert "HPL's default BLAS: openblas-spack (chosen " in out
    assert ': mkl -> openblas-spack: asked' in out
    assert main.main(['blas', '--default', 'atlas']) == 2
    assert '--default atlas: the BLAS libraries are mkl, openblas-spack' in capsys.readouterr().err
    assert blas.recorded_order()[0] == 'openblas-spack'


def test_the_blas_mpi_grid_of_a_real_session():
    """A session of the real run below (test_hpl_and_dgemm_run_on_every_blas): HPL and the
    DGEMM ceiling on Open MPI with each BLAS, and on MPICH with the default."""
    data = json.loads((FIXTURES / 'reframe' / 'blas-session.json').read_text())[0]
    groups = stack_comparison.side_by_side(measured.measured_cases(data, fixtures=True))
    grids = {heading.split()[0]: (variable, grid)
             for heading, variable, unit, grid in stack_comparison.blas_mpi_grids(groups)}
    assert set(grids) == {'HplCheck', 'DgemmCeiling'}
    variable, (mpis, rows) = grids['HplCheck']
    assert variable == 'gflops' and set(mpis) == {'openmpi@4.1.4', 'mpich@4.0.2'}
    by_blas = {name: dict(zip(mpis, values)) for name, values in rows}
    assert set(by_blas) == {'intel-oneapi-mkl@2025.3.0', 'openblas@0.3.28', 'openblas@0.3.21',
                            'blis@0.9.0'}
    # Every BLAS on Open MPI; MPICH with the default (MKL) only.
    assert all(len(cells['openmpi@4.1.4']) == 1 and cells['openmpi@4.1.4'][0] > 0
               for cells in by_blas.values())
    assert [b for b, cells in by_blas.items() if cells['mpich@4.0.2'] is not None] == \
        ['intel-oneapi-mkl@2025.3.0']
    _, (dgemm_mpis, dgemm_rows) = grids['DgemmCeiling']
    assert dgemm_mpis == ['-'] and {b for b, _ in dgemm_rows} == set(by_blas)
    # DGEMM uses no MPI: MKL's ceilings measured in the openmpi and mpich environments
    # share a cell, and both are shown.
    mkl_dgemm = dict(dgemm_rows)['intel-oneapi-mkl@2025.3.0'][0]
    assert sorted(mkl_dgemm) == [140.59, 147.833]
    assert ['intel-oneapi-mkl@2025.3.0', '147.8 / 140.6'] in stack_comparison.grid_rows(
        (dgemm_mpis, dgemm_rows))
    # The report shows the same grids.
    tables = contents.blas_mpi_tables(measured.measured_cases(data),
                                      measured.measured_cases(data, fixtures=True))
    assert sorted(heading.split()[0] for heading, _, _ in tables) == ['DgemmCeiling', 'HplCheck']
    text = stack_comparison.grid_table(variable, 'GFLOP/s', (mpis, rows))
    assert text.splitlines()[0].startswith('gflops [GFLOP/s]: BLAS \\ MPI')


def test_which_blas_is_fastest_is_said_with_a_statistic():
    """A real session (HPL at N = 20000 and the DGEMM ceilings, each BLAS on Open MPI):
    each environment against the next one down, over its job's repeats. MKL's DGEMM is
    ahead of both OpenBLAS at p = 0.004 (5 against 5, all apart); the two OpenBLAS are not
    told apart; HPL's three solves each cannot separate MKL from OpenBLAS 0.3.28."""
    data = json.loads((FIXTURES / 'reframe' / 'blas-hpl-n20000-session.json').read_text())
    groups = dict(stack_comparison.side_by_side(measured.measured_cases(data, fixtures=True)))
    dgemm = groups['DgemmCeiling on local:default']
    ranks = changes.rank_environments(dgemm, 'gflops')
    assert [r.environ for r in ranks] == ['openmpi', 'openmpi-openblas',
                                          'openmpi-openblas-spack', 'openmpi-blis']
    assert case_builds.stack_of(dgemm['openmpi'])['blas'] == 'intel-oneapi-mkl@2025.3.0'
    assert all(r.sample.n == 5 and r.what == "its job's 5 repeats" for r in ranks)
    assert [r.ahead.verdict for r in ranks[:3]] == ['improvement', 'no change', 'improvement']
    assert ranks[0].ahead.p_value == pytest.approx(1 / 252) and ranks[-1].ahead is None
    hpl = groups['HplCheck layout_name=per-socket num_nodes=1 on local:default']
    lines = changes.ranking_lines(hpl, 'gflops')
    assert lines[0].startswith('1. openmpi: median 134.8 GFLOP/s (its job\'s 3 repeats, '
                               '111.2 to 136.7); not told apart from openmpi-openblas-spack')
    assert 'ahead of openmpi-blis by 121.0 %, p = 0.05' in lines[2]
    # No better direction (a count), or one value each: no ranking.
    assert changes.rank_environments(hpl, 'time') != [] and \
        changes.rank_environments({e: dataclasses.replace(c, figures={
            n: dataclasses.replace(f, runs=(), samples=()) for n, f in c.figures.items()})
            for e, c in hpl.items()}, 'gflops') == []


def _assert_built_for_its_target(library):
    """Our openblas recipe (packages/spack_repo/hpcbench_host): on a generic x86-64 level
    (the VM as an AMD EPYC: x86_64_v4) one kernel set, the level's, not every x86 one; with
    ~lapack no LAPACK."""
    spec = json.loads((Path(library).parents[1] / '.spack' / 'spec.json').read_text())
    target = spec['spec']['nodes'][0]['arch']['target']
    target = target['name'] if isinstance(target, dict) else target
    openblas = ctypes.CDLL(library)
    openblas.openblas_get_config.restype = ctypes.c_char_p
    config = openblas.openblas_get_config().decode()
    kernels = {'x86_64_v4': 'SKYLAKEX', 'x86_64_v3': 'HASWELL', 'x86_64_v2': 'NEHALEM'}
    if target in kernels:
        assert 'DYNAMIC_ARCH' not in config and kernels[target] in config.split(), config
    # ~lapack: the BLAS alone (LAPACK's LU, dgetrf, is not in the library).
    lapack = spec['spec']['nodes'][0]['parameters'].get('lapack', True)
    assert hasattr(openblas, 'dgemm_') and hasattr(openblas, 'dgetrf_') == lapack
    # ~complex: the real routines alone (zgemm is not there).
    complex_ = spec['spec']['nodes'][0]['parameters'].get('complex', True)
    assert hasattr(openblas, 'sgemm_') and hasattr(openblas, 'zgemm_') == complex_


def _linked(program):
    return subprocess.run(['ldd', program], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.spack
def test_hpl_and_dgemm_run_on_every_blas(installed, tmp_path):
    """HPL (quick, one node, all cores in one rank) and its DGEMM ceiling (in HPL's job) on
    Open MPI with every BLAS of the machine and on MPICH with the default: each build links
    the BLAS its environment names, and compare-stacks shows them as BLAS x MPI."""
    var = tmp_path / 'var'
    env = {'HPCBENCH_VAR': str(var)}
    kept, _ = layout.distinct_layouts(host.processor_info())
    one_rank = next(name for name, chosen in kept.items() if chosen.ranks_per_node == 1)
    proc = run_reframe('-r', '-n', f'HplCheck%layout_name={one_rank}%num_nodes=1',
                       '-p', 'openmpi', '-p', 'mpich$', '-S', 'sizing=quick',
                       '-S', 'HplCheck.solve_seconds=4',
                       '-S', 'HplCheck.repeats=1', '-S', 'HplCheck.dgemm_repeats=2',
                       '--keep-stage-files',
                       env=env, timeout=1800)
    out = ANSI.sub('', proc.stdout)
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    libraries = blas.local_libraries()

    # Each build links its environment's BLAS and MPI, as its spec says (the builtin hpl
    # linked Debian's OpenBLAS whatever the spec, and Open MPI's libmpi beside MKL).
    blas_library = {'mkl': 'libmkl_core', 'openblas': '/lib/x86_64-linux-gnu/libopenblas',
                    'openblas-spack': f'openblas-{blas.SPACK_OPENBLAS_VERSION}',
                    'blis': 'libblis'}
    default, *others = libraries
    builds = [('openmpi', default, 'libmpi.so.40'), ('mpich', default, 'libmpich.so.12'),
              *((f'openmpi-{b.name}', b, 'libmpi.so.40') for b in others)]
    stage = var / 'stage' / 'local' / 'default'
    for environ, library, mpi_library in builds:
        for build, program in (('HplBuild', 'xhpl'), ('DgemmRateBuild', 'dgemm-rate')):
            prefix, = {p.read_text().strip()
                       for p in (stage / environ).glob(f'{build}*/{PREFIX_FILE}')}
            linked = _linked(str(Path(prefix) / 'bin' / program))
            assert 'not found' not in linked
            libraries_linked = [ln.split('=>')[-1] for ln in linked.splitlines()
                                if re.search(r'blas|blis|mkl_core', ln)]
            assert len(libraries_linked) == 1, (environ, program, linked)
            assert blas_library[library.name] in libraries_linked[0], (environ, program, linked)
            if library.name == 'openblas-spack':
                _assert_built_for_its_target(libraries_linked[0].split()[0])
            if program == 'xhpl':
                assert re.search(rf'\b{re.escape(mpi_library)} =>', linked), (environ, linked)

    compared = subprocess.run([str(BIN / 'hpcbench'), 'compare-stacks', '--check',
                               'HplCheck'], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, **env})
    assert compared.returncode == 0, compared.stderr
    text = compared.stdout
    assert 'BLAS x MPI' in text
    grid = text[text.index('BLAS x MPI'):]
    for spec in ('intel-oneapi-mkl@', 'openblas@0.3.21', 'blis@'):
        assert spec in grid
    # HPL's and, measured in its jobs, the DGEMM ceiling's.
    for variable in ('gflops', 'dgemm_ceiling'):
        assert f'{variable} [GFLOP/s]: BLAS \\ MPI' in grid
    # Ranked by the DGEMM ceilings' two calls each (2 against 2 cannot reach p <= 0.05: no
    # environment is said ahead of another; each is 'not told apart' from the next, within
    # 5 % or at p > 0.05, as the libraries' speeds on the machine have it).
    ranked = text[text.index('Ranked'):]
    assert re.search(r"^  1\. \S+: median [\d.]+ GFLOP/s \(its job's 2 repeats", ranked, re.M)
    dgemm = ranked[ranked.index(': dgemm_ceiling\n'):].split('\n\n')[0].splitlines()[1:]
    assert len(dgemm) == len(builds), dgemm     # one line per environment
    assert ' ahead of ' not in ranked
    assert all('; not told apart from ' in line for line in dgemm[:-1]), dgemm
    print(text)

    # `hpcbench setup` reads this session's DGEMM ceilings: it never changes the default
    # itself (nothing is recorded), and with two calls each suggests none.
    cache = tmp_path / 'cache'
    chosen = subprocess.run([str(BIN / 'python'), '-c',
                             'from hpcbench.stack import blas, bootstrap; '
                             'choice, uuid = blas.suggested_default(); '
                             'print(uuid, choice.changed, sorted(choice.medians)); '
                             'bootstrap.suggest_default_blas()'],
                            cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, **env, 'HPCBENCH_CACHE': str(cache),
                                 'HPCBENCH_MIRROR': str(paths.mirror_dir())})
    assert chosen.returncode == 0, chosen.stderr
    uuid, changed, medians = chosen.stdout.split(' ', 2)
    assert uuid in run_reframe('--list-stored-sessions', env=env).stdout
    assert changed == 'False' and medians.strip() == str(sorted(_names(libraries)))
    assert 'suggest' not in chosen.stdout and not (cache / 'blas' / 'order.json').exists()
