"""The port to ReFrame from outside (hpcbench.rfm.reframe_port): the one command line, and
what the real ReFrame of this venv says of the suite's systems through it."""
import shlex
import subprocess

import pytest

from conftest import BIN, ROOT
from hpcbench.core import paths
from hpcbench.rfm import reframe_port


def test_make_and_the_acceptance_run_the_one_command_line():
    line = reframe_port.command_line('testbed', 'srun', ['-l'])
    assert line == [str(BIN / 'reframe'), '-C', str(paths.SITE_CONFIGS_DIR / 'testbed.py'),
                    '--system', 'testbed:srun', '-c', str(paths.CHECKS_DIR), '-l']
    # make's REFRAME is the same, its paths relative to the project's root.
    printed = subprocess.run(['make', '-n', 'run', 'SYSTEM=local'], cwd=ROOT,
                             capture_output=True, text=True, timeout=300).stdout
    shown = shlex.join(reframe_port.command_line('local', root=paths.PROJECT_ROOT))
    assert shown == '.venv/bin/reframe -C site-configs/local.py --system local -c reframe-checks'
    assert f'forwarding {shown} ' in printed.replace('\\\n', ' '), printed[-2000:]


def test_the_partitions_are_read_by_the_machine_layer_as_reframe_configures_them():
    """The testbed's GPU partition: eight stand-in GPUs, its datasheet in the description
    the machine layer reads back (never a raw `extras`); a local partition is this host."""
    seen = {p.name: p for p in reframe_port.ReFrame('testbed').partitions()}
    assert set(seen) == {'srun', 'mpirun', 'gpu'}
    gpu = seen['gpu']
    assert gpu.distributes and gpu.gpus_per_node == 8 and gpu.host == ''
    assert gpu.description.accelerators['datasheet']['model'] == 'H100 SXM'
    assert gpu.description.gpus_per_node == 8 and gpu.cores and gpu.description.clock_hz
    (local,) = reframe_port.ReFrame('local').partitions()
    assert not local.distributes and local.host and local.gpus_per_node == 0


def test_the_checks_are_described_with_their_parameters_and_variables():
    kinds = reframe_port.ReFrame('testbed').check_kinds({'ImbPairCheck'})
    parameters, variables = kinds['ImbPairCheck']
    assert 'benchmark' in parameters and 'benchmark' not in variables
    assert 'windowed_volume_mb' in variables
    assert reframe_port.ReFrame('testbed').check_kinds(set()) == {}


def test_a_partition_a_scheduler_cannot_be_asked_of_has_no_nodes():
    """A paper's system here: its scheduler (SGE) is not on this machine."""
    (first, *_) = reframe_port.ReFrame('tsubame').partitions()
    assert reframe_port.ReFrame('tsubame').distributed_nodes(first.name, 'HpccCheck') == ()


def test_what_reframe_prints_before_its_json_is_not_taken_for_it():
    """A warning before the list (`WARNING: ... [x]`) was parsed from its '[' on."""
    shown = subprocess.run(reframe_port.command_line(
        'local', options=['--show-config=systems/0/partitions']), capture_output=True,
        text=True, timeout=300).stdout
    done = reframe_port.Finished(0, "WARNING: a setting [ignored] here\n" + shown, '')
    assert [p['name'] for p in reframe_port.ReFrame._json_list(done)] == ['default']
    with pytest.raises(ValueError, match='no JSON list'):
        reframe_port.ReFrame._json_list(reframe_port.Finished(1, 'ERROR: [x] no config', ''))
