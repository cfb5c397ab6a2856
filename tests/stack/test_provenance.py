"""Provenance: what every stored result says about the code, stack, inputs and node."""
import shutil
import subprocess

import pytest

from hpcbench.benchmarks import imb
from hpcbench.core import node
from hpcbench.machine import host
from hpcbench.stack import provenance
from conftest import FIXTURES


def _prefix_with_spec(tmp_path, name):
    prefix = tmp_path / 'prefix'
    (prefix / '.spack').mkdir(parents=True)
    shutil.copy(FIXTURES / 'provenance' / name, prefix / '.spack' / 'spec.json')
    return prefix


def test_build_spec_names_the_build_its_compiler_mpi_and_blas_with_versions(tmp_path):
    # The spec Spack recorded for HPL built here against Intel MPI.
    prefix = _prefix_with_spec(tmp_path, 'hpl-intelmpi-spec.json')
    assert provenance.build_spec(prefix) == (
        'hpl@2.3 +openmp arch=linux-debian12-x86_64_v4 /5vtt4bg ^c=gcc@12.2.0 '
        '^mpi=intel-oneapi-mpi@2021.17.0 ^blas=openblas@0.3.21')


def test_build_spec_is_empty_without_a_recorded_spec(tmp_path):
    assert provenance.build_spec(tmp_path) == ''
    (tmp_path / '.spack').mkdir()
    (tmp_path / '.spack' / 'spec.json').write_text('{"spec": ')
    assert provenance.build_spec(tmp_path) == ''


def test_project_commit_is_marked_dirty_when_tracked_files_changed(tmp_path):
    def git(*args):
        subprocess.run(['git', '-C', str(tmp_path), *args], check=True, capture_output=True)

    git('init', '-q')
    (tmp_path / 'f').write_text('1')
    git('add', 'f')
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'one')
    head = subprocess.run(['git', '-C', str(tmp_path), 'rev-parse', 'HEAD'],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / 'untracked').write_text('results are not code')
    assert provenance.project_commit(tmp_path) == head
    (tmp_path / 'f').write_text('2')
    assert provenance.project_commit(tmp_path) == f'{head}-dirty'
    assert provenance.project_commit(tmp_path / 'f') == ''   # not a checkout


def test_lock_hash_is_the_lock_files_sha256(tmp_path):
    assert provenance.lock_hash(tmp_path) == ''
    (tmp_path / 'spack.lock').write_text('{}')
    assert provenance.lock_hash(tmp_path) == (
        '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a')


def test_session_extras_refuse_values_reframe_would_cut():
    assert provenance.session_extras({'project_commit': 'abc', 'spack_lock': ''}) == \
        'project_commit=abc'
    with pytest.raises(ValueError, match="spack_commit='a,b'"):
        provenance.session_extras({'spack_commit': 'a,b'})
    with pytest.raises(ValueError, match='cannot carry'):
        provenance.session_extras({'host': 'x}'})


def test_topology_describes_this_machine_from_its_processor_description():
    info = host.processor_info()
    described = provenance.topology(info, node.from_partition(info, host.partition_facts()))
    cores = len(info['topology']['cores'])
    assert described.startswith(f'{info["arch"]}: {info["num_sockets"]} socket(s) x ')
    assert f'x {cores // info["num_sockets"]} core(s)' in described
    assert 'GiB' in described and 'flop/cycle/core' in described


def test_imb_curve_keeps_every_measured_row_of_a_real_table(fixture_text):
    runs = imb.parse_runs(fixture_text('imb/openmpi-pingpong-3-runs.out'), 3)
    table = imb.best_of([imb.complete_table(t, 'PingPong', 2, imb.message_sizes('PingPong', 0, 22))
                         for t in runs])
    curve = imb.curve(table)
    assert curve['bytes'] == [float(s) for s in table.sizes]
    assert set(curve) == {'bytes', 't_avg', 'mbytes_per_sec'}     # PingPong: no msg/s
    assert all(t > 0 for t in curve['t_avg'])
    assert max(curve['mbytes_per_sec']) == imb.figures(table)['peak_bandwidth']


def test_imb_curve_of_a_bandwidth_only_table_has_no_time_column(fixture_text):
    tables = imb.parse(fixture_text('imb/openmpi-2-ranks-one-node.out'))
    uniband = tables[('Uniband', 2)]
    curve = imb.curve(uniband)
    assert 't_avg' not in curve
    assert curve['msgs_per_sec'] == [r.msgs_per_sec for r in uniband.rows]
