"""Rank/thread layouts from processor descriptions, and the binding wrapper run for real."""
import json
import os
import subprocess

import pytest

from hpcbench.core import layout
from conftest import FIXTURES

LOCAL = json.loads((FIXTURES / 'reframe' / 'local-processor.json').read_text())

# Two sockets of two cores with two hardware threads each, Linux numbering (siblings +4),
# one NUMA node per socket.
TWO_SOCKETS_SMT = {
    'num_cpus': 8, 'num_cpus_per_core': 2, 'num_sockets': 2,
    'topology': {
        'cores': ['0x11', '0x22', '0x44', '0x88'],
        'sockets': ['0x33', '0xcc'],
        'numa_nodes': ['0x33', '0xcc'],
    },
}
# A T2K node as the paper describes it, without a topology: 4 sockets x 4 cores.
T2K_NODE = {'num_cpus': 16, 'num_cpus_per_core': 1, 'num_sockets': 4}


def test_this_machine_has_a_flat_and_a_threaded_layout():
    kept, same_as = layout.distinct_layouts(LOCAL)
    assert list(kept) == ['per-core', 'per-socket']
    assert same_as == {'per-numa': 'per-socket', 'per-node': 'per-socket'}
    per_core, per_numa = kept['per-core'], kept['per-socket']
    assert (per_core.ranks_per_node, per_core.threads_per_rank) == (2, 1)
    assert per_core.cpus == ((0,), (1,)) and per_core.numa_nodes == ((0,), (0,))
    assert (per_numa.ranks_per_node, per_numa.threads_per_rank) == (1, 2)


def test_smt_siblings_are_left_out_and_sockets_hold_their_cores():
    kept, same_as = layout.distinct_layouts(TWO_SOCKETS_SMT)
    assert kept['per-core'].cpus == ((0,), (1,), (2,), (3,))
    assert kept['per-socket'].cpus == ((0, 1), (2, 3))
    assert kept['per-socket'].numa_nodes == ((0,), (1,))
    assert same_as == {'per-numa': 'per-socket'}
    node = kept['per-node']
    assert node.cpus == ((0, 1, 2, 3),) and node.numa_nodes == ((0, 1),)


def test_a_description_without_topology_gives_t2ks_three_layouts():
    kept, _ = layout.distinct_layouts(T2K_NODE)
    assert [(k, v.ranks_per_node, v.threads_per_rank) for k, v in kept.items()] == [
        ('per-core', 16, 1), ('per-socket', 4, 4), ('per-node', 1, 16)]
    assert kept['per-socket'].cpus[3] == (12, 13, 14, 15)


def test_a_description_with_nothing_is_an_error():
    with pytest.raises(layout.LayoutError):
        layout.layouts({})


def test_thread_variables_cover_openmp_and_the_blas_libraries():
    env = layout.layouts(T2K_NODE)['per-socket'].thread_environment()
    assert {env[k] for k in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'GOTO_NUM_THREADS',
                             'MKL_NUM_THREADS')} == {'4'}


def _run_wrapped(tmp_path, chosen, env):
    script = tmp_path / 'bind-rank.sh'
    script.write_text(layout.bind_script(chosen))
    script.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in layout.LOCAL_RANK_VARIABLES}
    return subprocess.run([str(script), 'grep', 'Cpus_allowed_list', '/proc/self/status'],
                          capture_output=True, text=True, env={**clean, **env})


@pytest.mark.parametrize('variable', layout.LOCAL_RANK_VARIABLES)
def test_the_wrapper_binds_each_local_rank_to_its_core(tmp_path, variable):
    per_core = layout.layouts(LOCAL)['per-core']
    for rank in (0, 1):
        proc = _run_wrapped(tmp_path, per_core, {variable: str(rank)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ['Cpus_allowed_list:', str(rank)]


def test_mpi_specific_rank_variables_win_over_slurms_inherited_one(tmp_path):
    # Under mpirun in a Slurm job every rank inherits SLURM_LOCALID=0 from the batch step.
    per_core = layout.layouts(LOCAL)['per-core']
    proc = _run_wrapped(tmp_path, per_core, {'SLURM_LOCALID': '0',
                                             'OMPI_COMM_WORLD_LOCAL_RANK': '1'})
    assert proc.stdout.split() == ['Cpus_allowed_list:', '1']


def test_one_rank_per_node_needs_no_launcher_variable(tmp_path):
    proc = _run_wrapped(tmp_path, layout.layouts(LOCAL)['per-node'], {})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['Cpus_allowed_list:', '0-1']


@pytest.mark.parametrize('env', [{}, {'MPI_LOCALRANKID': '2'}])
def test_a_rank_without_cores_fails_loudly(tmp_path, env):
    proc = _run_wrapped(tmp_path, layout.layouts(LOCAL)['per-core'], env)
    assert proc.returncode == 97
    assert 'no cores for local rank' in proc.stderr and proc.stdout == ''


# TSUBAME's X4600 as its site config describes it: 8 sockets x 2 cores, a NUMA node each.
X4600 = {'num_cpus': 16, 'num_cpus_per_core': 1, 'num_sockets': 8}


def test_a_domain_order_puts_rank_i_on_the_ith_socket_of_the_ring():
    ring = layout.layouts(X4600, {'tool': 'taskset', 'domain_order': [2, 4, 6, 7, 5, 3, 1, 0]})
    per_socket = ring['per-socket']
    # The cpulists of TSUBAME's taskset script, in its rank order.
    assert per_socket.cpus == ((4, 5), (8, 9), (12, 13), (14, 15), (10, 11), (6, 7), (2, 3),
                               (0, 1))
    assert per_socket.numa_nodes == ((2,), (4,), (6,), (7,), (5,), (3,), (1,), (0,))
    assert ring['per-core'].cpus[:3] == ((4,), (5,), (8,))
    script = layout.bind_script(per_socket)
    assert 'numactl' not in script and script.rstrip().endswith('exec taskset -c "$cpus" "$@"')


def test_excluded_cores_get_no_rank_and_rank_variables_reach_the_program_only():
    knl = {'num_cpus': 8, 'num_cpus_per_core': 1, 'num_sockets': 1}
    kept, _ = layout.distinct_layouts(knl, {'excluded_cores': [0, 1]})
    assert kept['per-core'].cpus == ((2,), (3,), (4,), (5,), (6,), (7,))
    assert kept['per-socket'].cpus == ((2, 3, 4, 5, 6, 7),)
    script = layout.bind_script(kept['per-core'], {'HUGETLB_MORECORE': 'yes'})
    assert 'export HUGETLB_MORECORE=yes' in script.split('esac')[1]


@pytest.mark.parametrize('binding, message', [
    ({'cores': [1]}, 'unknown setting'),
    ({'tool': 'hwloc-bind'}, 'tool must be one of'),
    ({'domain_order': [0, 1, 2]}, 'not an order of the 8 sockets'),
    ({'excluded_cores': list(range(16))}, 'are all of them'),
    ({'excluded_cores': [99]}, 'not all cores of the node'),
])
def test_a_wrong_binding_gives_one_clear_error(binding, message):
    with pytest.raises(layout.LayoutError, match=message):
        layout.layouts(X4600, binding)
