"""A node's health facts read together (hpcbench.core.node_facts) from a tree standing in
for a node, made of other sites' real outputs (tests/fixtures/health/README.md): two P100s'
nvidia-smi -q -x, a ConnectX-3 and a ConnectX-4's sysfs, an older EDAC layout, an XE9680's
dmesg with five XID 119; read before and after a "job" that raised a port's symbol errors,
an uncorrected memory error and one XID; kept as JSON and read back; run by path with the
system's python3 as a job runs it; and from this machine's own / ."""
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FIXTURES
from hpcbench.core import fact_figures, node_facts

HEALTH = FIXTURES / 'health'


@pytest.fixture
def tree(tmp_path):
    """A node's / : sysfs of real HCAs and EDAC, nvidia-smi's, dmesg's and rasdaemon's real
    outputs."""
    root = tmp_path / 'n7'
    shutil.copytree(HEALTH / 'procfs-sys' / 'class', root / 'sys' / 'class')
    shutil.copytree(HEALTH / 'netdata-1508' / 'sys' / 'devices', root / 'sys' / 'devices')
    shutil.copytree(HEALTH / 'procfs-pci' / 'sys' / 'bus', root / 'sys' / 'bus')
    sources = root / node_facts.SOURCES
    sources.mkdir(parents=True)
    shutil.copy(HEALTH / 'nvidia-smi-q-p100x2.xml', sources / node_facts.SMI_FILE)
    shutil.copy(HEALTH / 'nvlink-s-v100-azhpc-73.txt', sources / node_facts.NVLINK_FILE)
    shutil.copy(HEALTH / 'dmesg-xid-119-xe9680.log', sources / node_facts.DMESG_FILE)
    shutil.copy(HEALTH / 'ras-mc-ctl-summary-rasdaemon-121.txt',
                sources / node_facts.RAS_FILE)
    return root


def test_a_node_s_facts_are_read_together_from_its_tree(tree):
    facts = node_facts.read(tree, 'n7', clock=lambda: 1_800_000_000.0)
    assert facts.node == 'n7' and facts.read_at == 1_800_000_000.0
    assert [g.model for g in facts.gpus] == ['Tesla P100-PCIE-12GB', 'Tesla P100-PCIE-12GB_2']
    assert [p.name for p in facts.ports] == ['mlx4_0/1', 'mlx4_0/2', 'mlx5_0/1']
    assert [x.code for x in facts.xids] == [119] * 5
    assert facts.health.uncorrected == 0 and facts.health.corrected == 0
    assert (facts.ras_corrected, facts.ras_uncorrected) == (0, 0)    # "No Memory errors."
    # Nothing the tree holds is unread (what it lacks, /proc, reads None: not read).
    assert facts.unread == () and facts.health.online_cpus is None
    assert facts.seconds < node_facts.READ_SECONDS


def test_facts_kept_as_json_read_back_equal(tree, tmp_path):
    facts = node_facts.read(tree, 'n7')
    assert [g.address for g in facts.pci_gpus] == ['0000:09:00.0']
    path = tmp_path / 'facts.json'
    path.write_text(json.dumps(facts.to_data()))
    assert node_facts.load(path) == facts


@pytest.mark.parametrize('content, said', [
    ('{"format": 0}', 'format 0'),
    ('[1, 2]', 'no node facts'),
    ('{"format": 1, "node": "n7"}', 'no node facts'),
    ('not json', 'Expecting value'),
    (b'\xff\xfe', 'utf-8'),
])
def test_a_file_that_holds_no_facts_is_refused_naming_it(tmp_path, content, said):
    path = tmp_path / 'facts.json'
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(node_facts.NodeFactsError, match=said) as err:
        node_facts.load(path)
    assert str(path) in str(err.value) or 'facts' in str(err.value)


def test_what_a_job_s_window_raised_is_the_difference_of_the_reads_around_it(tree):
    """During the "job": the ConnectX-4's symbol errors rose by 12 (a marginal cable), the
    memory controller counted an uncorrected error, the driver printed one more XID 119;
    the mlx4_0 port 2's link_downed (5) was reset by another tool: its increase unknown."""
    downed = tree / 'sys/class/infiniband/mlx4_0/ports/2/counters/link_downed'
    downed.write_text('5\n')
    before = node_facts.read(tree, 'n7')
    counters = tree / 'sys/class/infiniband/mlx5_0/ports/1/counters'
    (counters / 'symbol_error').write_text(
        f'{int((counters / "symbol_error").read_text()) + 12}\n')
    downed.write_text('0\n')
    mc = tree / 'sys/devices/system/edac/mc/mc0'
    (mc / 'ue_count').write_text('1\n')
    log = tree / node_facts.SOURCES / node_facts.DMESG_FILE
    lines = log.read_text().splitlines()
    xid = next(line for line in lines if 'Xid' in line)
    log.write_text('\n'.join(lines + [xid.replace(xid.split(']')[0] + ']', '[Tue Jun 18 '
                                                  '10:00:00 2024]', 1)]) + '\n')
    after = node_facts.read(tree, 'n7')
    changed = node_facts.changes(before, after)
    symbol = dict((i.counter, i) for i in changed.ports['mlx5_0/1'])['symbol_error']
    assert symbol.increase == 12
    assert [x.code for x in changed.xids] == [119]
    assert changed.uncorrected == 1
    unchanged = dict((i.counter, i) for i in changed.ports['mlx4_0/1'])
    assert all(i.increase == 0 for i in unchanged.values())
    reset = dict((i.counter, i) for i in changed.ports['mlx4_0/2'])['link_downed']
    assert reset.increase is None and 'reset during the run' in reset.why
    assert changed.ras_uncorrected == 0         # rasdaemon's record unchanged
    with pytest.raises(node_facts.NodeFactsError, match='not one node'):
        node_facts.changes(before, node_facts.read(tree, 'n8'))


def test_an_uncorrected_error_rasdaemon_recorded_during_a_job_is_its_figure_and_evidence(
        tree):
    """rasdaemon's record before the job: no memory error (rasdaemon issue 121's summary);
    after it, an Alibaba server's (linux-acpi, 2025-07-15): one uncorrected error on DIMM
    'SOCKET 1 CHANNEL 1 DIMM 0 DIMM1', besides PCIe, ARM and disk errors that are no
    memory's. EDAC saw none (a node whose EDAC driver is not loaded): rasdaemon's record
    is the evidence."""
    before = node_facts.read(tree, 'n7')
    shutil.copy(HEALTH / 'ras-mc-ctl-summary-lkml-ghes-2025.txt',
                tree / node_facts.SOURCES / node_facts.RAS_FILE)
    after = node_facts.read(tree, 'n7')
    assert (after.ras_corrected, after.ras_uncorrected) == (0, 1) and after.unread == ()
    found = fact_figures.figures(before, after)
    assert (found.node['ras_uncorrected'], found.node['ras_uncorrected_increase']) == (1, 1)
    assert found.node['edac_uncorrected_increase'] == 0
    assert fact_figures.evidence(found.node, {}) == [
        '1 uncorrected memory error(s) rasdaemon recorded during the job']
    # A later job's: the record still holds it, nothing new.
    again = fact_figures.figures(after, node_facts.read(tree, 'n7'))
    assert (again.node['ras_uncorrected'], again.node['ras_uncorrected_increase']) == (1, 0)
    assert fact_figures.evidence(again.node, {}) == [
        "1 uncorrected memory error(s) in rasdaemon's record"]
    (tree / node_facts.SOURCES / node_facts.RAS_FILE).write_text('Memory errors: none\n')
    unread = dict(node_facts.read(tree, 'n7').unread)
    assert unread['ras-mc-ctl --summary'].startswith("ras-mc-ctl --summary: line 1 ('Memory")


def test_what_a_tree_lacks_or_holds_wrongly_is_said_unread_never_taken_for_healthy(tree):
    sources = tree / node_facts.SOURCES
    (sources / node_facts.SMI_FILE).unlink()
    os.mkfifo(sources / node_facts.SMI_FILE)
    (sources / node_facts.DMESG_FILE).write_bytes(b'\xff' * 10)
    facts = node_facts.read(tree, 'n7')
    unread = dict(facts.unread)
    assert facts.gpus == () and 'not a regular file' in unread['nvidia-smi -q -x']
    assert facts.xids == () and 'not UTF-8' in unread['dmesg']
    shutil.rmtree(sources)
    unread = dict(node_facts.read(tree, 'n7').unread)
    assert unread['nvidia-smi -q -x'].startswith('not in the tree (no ')


def test_a_job_runs_it_by_path_with_the_node_s_python3_outside_the_venv(tree, tmp_path):
    python = shutil.which('python3', path='/usr/bin:/bin') or sys.executable
    out = tmp_path / 'before.json'
    done = subprocess.run([python, node_facts.__file__, '--root', str(tree), '--node', 'n7',
                           '--output', str(out)], capture_output=True, text=True, timeout=60,
                          env={'PATH': '/usr/bin:/bin'}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    facts = node_facts.load(out)
    assert (len(facts.gpus), len(facts.ports), len(facts.xids)) == (2, 3, 5)
    assert not list(tmp_path.glob('*.partial'))


def test_this_machine_s_own_facts_read_and_what_it_lacks_is_said():
    facts = node_facts.read('/')
    assert facts.health.online_cpus == os.cpu_count()
    unread = dict(facts.unread)
    if shutil.which('nvidia-smi') is None:
        assert unread['nvidia-smi -q -x'] == 'no nvidia-smi on this node'
    assert facts.node and facts.seconds < 30
    assert Path('/').exists()


def test_a_job_s_figures_of_the_node_its_gpus_and_ports_are_keyed_as_figures_are(tree):
    """The P100s' links (Gen3 x16 of Gen3 x16), the ConnectX-4 at one lane of four, the
    symbol errors the job saw."""
    before = node_facts.read(tree, 'n7', clock=lambda: 1000.0)
    counters = tree / 'sys/class/infiniband/mlx5_0/ports/1/counters'
    (counters / 'symbol_error').write_text(
        f'{int((counters / "symbol_error").read_text()) + 12}\n')
    after = node_facts.read(tree, 'n7', clock=lambda: 1010.0)
    found = fact_figures.figures(before, after)
    assert found.node['gpus'] == 2 and found.node['rdma_ports'] == 3
    assert found.node['xid_increase'] == 0 and found.node['edac_uncorrected_increase'] == 0
    assert 'online_cpus' not in found.node     # not read: no figure, never a 0
    gpu = found.devices['n7:gpu0']
    assert (gpu['pcie_generation'], gpu['pcie_width'], gpu['pcie_degraded']) == (3, 16, 0)
    assert sorted(found.devices) == ['n7:gpu0', 'n7:gpu1', 'n7:nic:mlx4_0/1',
                                     'n7:nic:mlx4_0/2', 'n7:nic:mlx5_0/1']
    port = found.devices['n7:nic:mlx5_0/1']
    assert (port['rate_gbps'], port['width'], port['active']) == (25.0, 1, 1)
    assert port['symbol_error_increase'] == 12
    assert found.devices['n7:nic:mlx4_0/1']['symbol_error_increase'] == 0
    # "5: LinkUp" is up; the ConnectX-4's "4: ACTIVE" is no physical state: not judged.
    assert found.devices['n7:nic:mlx4_0/1']['link_up'] == 1
    assert 'link_up' not in port


def test_an_idle_gpu_s_generation_below_its_most_is_no_evidence_its_lanes_are(tree):
    """The P100s idle (gpu_idle holds their clocks, as in the real output) with GPU 0 at
    Gen1 of Gen3 (an idle L40S node reads so on every GPU): not read, not degraded; GPU 1
    at Gen1 x8: degraded on its lanes, said without the generation."""
    smi = tree / node_facts.SOURCES / node_facts.SMI_FILE
    text = smi.read_text().replace('<current_link_gen>3</current_link_gen>',
                                   '<current_link_gen>1</current_link_gen>')
    second = text.rindex('<current_link_width>16x</current_link_width>')
    smi.write_text(text[:second] + '<current_link_width>8x</current_link_width>' +
                   text[second + len('<current_link_width>16x</current_link_width>'):])
    facts = node_facts.read(tree, 'n7')
    assert all('gpu_idle' in g.clock_events for g in facts.gpus)
    found = fact_figures.figures(facts, facts)
    first, second = found.devices['n7:gpu0'], found.devices['n7:gpu1']
    assert 'pcie_generation' not in first and 'pcie_degraded' not in first
    assert (first['pcie_width'], first['pcie_max_generation']) == (16, 3)
    assert (second['pcie_width'], second['pcie_degraded']) == (8, 1)
    assert fact_figures.evidence({}, found.devices) == ['GPU 1 of n7: PCIe x8 of Gen3 x16']
    # Busy (no idle reason), the same Gen1 is the link's: read, and degraded.
    busy = replace(facts, gpus=tuple(replace(g, clock_events=()) for g in facts.gpus))
    found = fact_figures.figures(busy, busy)
    assert (found.devices['n7:gpu0']['pcie_generation'],
            found.devices['n7:gpu0']['pcie_degraded']) == (1, 1)


@pytest.mark.parametrize('text, bus', [('00000000:9B:00.0', '0000:9b:00'),
                                       ('0000:9b:00', '0000:9b:00'),
                                       ('0000:04:00.0', '0000:04:00'), ('nonsense', '')])
def test_a_gpu_s_bus_reads_as_the_kernel_log_names_it(text, bus):
    assert fact_figures.bus_of(text) == bus


def test_a_power_brake_holding_the_clocks_is_its_share_of_the_job_s_window(tree):
    """The lent H200's own nvidia-smi -q -x (driver 580, every clock event counter 0 us),
    its power-brake counter 8.7 s higher after a 10 s job: 87 % of the window."""
    smi = tree / node_facts.SOURCES / node_facts.SMI_FILE
    real = (FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-q.xml').read_text()
    smi.write_text(real)
    before = node_facts.read(tree, 'h1', clock=lambda: 1000.0)
    tag = 'clocks_event_reasons_counters_hw_power_brake'
    assert f'<{tag}>0 us</{tag}>' in real
    smi.write_text(real.replace(f'<{tag}>0 us</{tag}>', f'<{tag}>8700000 us</{tag}>'))
    after = node_facts.read(tree, 'h1', clock=lambda: 1010.0)
    gpu = fact_figures.figures(before, after).devices['h1:gpu0']
    assert gpu['clock_hw_power_brake_percent'] == pytest.approx(87.0)
    assert gpu['clock_sw_power_cap_percent'] == 0


@pytest.mark.parametrize('launch_status', [0, 3])
def test_the_job_s_lines_read_the_facts_and_leave_the_launch_s_status(tree, tmp_path,
                                                                      launch_status):
    """The lines a job runs around its launch (job_line), in bash: the facts read into the
    stage directory from the tree HPCBENCH_FACTS_ROOT names ({node}: SLURMD_NODENAME), and
    the job's status the launch's (IOR's data errors are its exit status); a read that
    fails says so on stderr and leaves it too."""
    command = f'{shlex.quote(sys.executable)} {shlex.quote(node_facts.__file__)}'
    script = '\n'.join(['true', node_facts.job_line(command, node_facts.BEFORE),
                        f'(exit {launch_status})', node_facts.job_line(command, node_facts.AFTER),
                        node_facts.job_line('false', 'nowhere.json')])
    env = {'PATH': os.environ['PATH'], 'SLURMD_NODENAME': 'n7',
           node_facts.ROOT_ENV: str(tree.parent / '%n')}
    done = subprocess.run(['bash', '-c', script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == launch_status
    assert 'hpcbench facts: not read into nowhere.json (exit 1)' in done.stderr
    found, unread = fact_figures.job_figures(tmp_path)
    assert list(found) == ['n7'] and found['n7'].node['gpus'] == 2 and unread == []
    (tmp_path / node_facts.AFTER.replace('%n', 'n7')).unlink()
    found, unread = fact_figures.job_figures(tmp_path)
    assert found == {} and unread[0].startswith('facts of n7 after the job: ')


def test_a_facts_file_that_is_a_fifo_is_refused_never_waited_on(tmp_path):
    """The stage directory is the job's: a FIFO where its facts should be is refused
    through the shared bounded reader (paths.read_regular), as the health readers' are."""
    os.mkfifo(tmp_path / node_facts.AFTER)
    with pytest.raises(node_facts.NodeFactsError, match='not a regular file'):
        node_facts.load(tmp_path / node_facts.AFTER)


def test_a_job_of_several_nodes_reads_each_and_keeps_each_by_its_own_name(tree, tmp_path):
    """On Slurm, a job of several nodes reads on each (one task a node: SLURM_EVERY_NODE);
    a job of one reads where its script runs. Each node's two reads are its figures."""
    line = node_facts.job_line('python3 node_facts.py', node_facts.BEFORE, slurm=True)
    assert f'then {node_facts.SLURM_EVERY_NODE} env python3 node_facts.py' in line
    assert 'else python3 node_facts.py' in line and node_facts.BEFORE in line
    # Outside a job of several nodes (no SLURM_JOB_NUM_NODES, or 1), read where it runs.
    command = f'{shlex.quote(sys.executable)} {shlex.quote(node_facts.__file__)}'
    for nodes in ({}, {'SLURM_JOB_NUM_NODES': '1'}):
        here = tmp_path / f'here-{len(nodes)}'
        here.mkdir()
        done = subprocess.run(
            ['bash', '-c', node_facts.job_line(command, node_facts.BEFORE, slurm=True)],
            cwd=here, capture_output=True, text=True, timeout=60,
            env={'PATH': os.environ['PATH'], 'SLURMD_NODENAME': 'n7',
                 node_facts.ROOT_ENV: str(tree.parent / '%n'), **nodes})
        assert done.returncode == 0 and done.stderr == '', done.stderr
        assert [p.name for p in here.iterdir()] == [node_facts.BEFORE.replace('%n', 'n7')]
    shutil.copytree(tree, tree.parent / 'n8')
    stage = tmp_path / 'stage'
    stage.mkdir()
    for node in ('n7', 'n8'):
        for output in (node_facts.BEFORE, node_facts.AFTER):
            assert node_facts.main(['--root', str(tree.parent / '%n'), '--node', node,
                                    '--output', str(stage / output)]) == 0
    found, unread = fact_figures.job_figures(stage)
    assert sorted(found) == ['n7', 'n8'] and unread == []
    assert sorted(k for k in found['n8'].devices if k.startswith('n8:gpu')) == [
        'n8:gpu0', 'n8:gpu1']
    # A file that holds another node's facts than its name says is not kept as either.
    (stage / node_facts.AFTER.replace('%n', 'n8')).write_text(
        (stage / node_facts.AFTER.replace('%n', 'n7')).read_text())
    found, unread = fact_figures.job_figures(stage)
    assert sorted(found) == ['n7'] and 'not one node' in unread[-1]



@pytest.mark.parametrize('given, said', [
    ('1', 'no answer within 1 s'),
    ('1m', "HPCBENCH_GPU_TOOL_TIMEOUT='1m' is not a number of seconds above 0 and at most 3600")])
def test_a_job_s_nvidia_smi_gets_the_site_s_bound_and_a_bad_one_is_said_unread(
        tmp_path, monkeypatch, given, said):
    """The bound the host's query takes (HPCBENCH_GPU_TOOL_TIMEOUT), not a second one: a
    node whose nvidia-smi needs longer than 20 s is given it before and after each job."""
    tool = tmp_path / 'nvidia-smi'
    tool.write_text('#!/bin/sh\nexec sleep 600\n')
    tool.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    monkeypatch.setenv('HPCBENCH_GPU_TOOL_TIMEOUT', given)
    facts = node_facts.read('/')
    assert dict(facts.unread)['nvidia-smi -q -x'] == said
    assert facts.gpus == () and facts.seconds < 10
