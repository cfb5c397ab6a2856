"""GPU entries of a draft contract from what is published of the GPUs' model
(hpcbench.acceptance.drafts.from_gpus): Azure's health-check figures for a node of eight,
else a share of the datasheet; each judged on real GPU outputs: the H200 node's three jobs
of each GPU check (tests/fixtures/gpu/h200-jobs) and a real 8 x A100 node's 28 pairs, with
one figure cut: that GPU or pair is named, and nothing else."""
import pytest

from conftest import FIXTURES, a100_node_pair_record, h200_gpu_session
from hpcbench.acceptance import contract, drafts, judgement
from hpcbench.core import gpu_topology
from hpcbench.machine import datasheets
from hpcbench.results import measured
from hpcbench.rfm import reframe_port


def _partition(model, gpus, topology=None):
    """A GPU partition as ReFrame shows it (--show-config, read by hpcbench.rfm.
    reframe_port.seen_partition): its GPUs in `devices`, their datasheet in the
    description's extras."""
    sheet = datasheets.find(model)
    accelerators = {'vendor': 'nvidia', 'kind': 'gpu', 'model': model,
                    'datasheet': sheet.__dict__}
    if topology:
        accelerators['topology'] = gpu_topology.parse(
            (FIXTURES / 'gpu' / topology).read_text()).to_description()
    return reframe_port.seen_partition({
        'name': 'gpu', 'scheduler': 'slurm',
        'extras': {'memory_bytes': 2 << 40, 'clock_hz': 2.0e9, 'flops_per_cycle': 32,
                   'spack_env': 'cluster', 'accelerators': accelerators},
        'devices': [{'type': 'gpu', 'num_devices': gpus}]})


def _entries(partition):
    entries = drafts.from_gpus([partition])
    # A draft is a contract: it validates.
    contract.from_data({'system': 'cluster', 'entries': entries}, 'draft')
    return {(e['check'], e['figure']): e for e in entries}


def test_a_node_of_eight_h200s_gets_azure_s_committed_figures_each_cited():
    entries = _entries(_partition('NVIDIA H200', 8))
    published = {key: (e['scope'], e['committed']['value'], e['fault']['code'])
                 for key, e in entries.items() if e['source']['kind'] == 'published'}
    assert published == {
        ('NcclTestsCheck', 'busbw'): ('node', 431.0, 'NHC2010'),
        ('HostDeviceBandwidthCheck', 'host_to_device_pinned'): ('gpu', 48.0, 'NHC2020'),
        ('HostDeviceBandwidthCheck', 'device_to_host_pinned'): ('gpu', 48.0, 'NHC2020'),
        ('DeviceBufferPairCheck', 'bandwidth'): ('gpu_pair', 335.0, 'NHC2020')}
    nccl = entries['NcclTestsCheck', 'busbw']
    assert nccl['parameters'] == {'collective': 'all_reduce'}
    assert nccl['run_rules']['settings'] == {'min_bytes': 16 << 30, 'max_bytes': 16 << 30}
    assert nccl['source']['cite'].endswith('conf/nd96isr_h200_v5.conf, commit 13fa400b10f5')
    assert nccl['source']['clause'].startswith('`') and nccl['source']['clause'].endswith('`')
    # What Azure does not commit to: the datasheet's figures at 0.75.
    triad = entries['BabelStreamCheck', 'triad_bandwidth']
    assert (triad['source']['kind'], triad['source']['figure'], triad['committed']['value']) \
        == ('datasheet', 4800.0, 3600.0)
    assert entries['GpuDgemmCheck', 'tflops']['committed']['value'] == 50.25


def test_azure_s_share_of_a_link_is_the_share_drawn_from_datasheets():
    """0.75 of PCIe 5's 64 GB/s is Azure's 48 (ND H100 v5), of PCIe 4's 32 GB/s its 24
    (ND A100 v4): a node of four H100s, which Azure publishes nothing for, is drawn at
    the same share."""
    four = _entries(_partition('NVIDIA H100 80GB HBM3', 4))
    assert {e['source']['kind'] for e in four.values()} == {'datasheet'}
    assert four['HostDeviceBandwidthCheck', 'host_to_device_pinned']['committed']['value'] \
        == 48.0
    # Every pair on an NVSwitch: NVLink 4's 450 GB/s each way, at 0.75.
    assert four['DeviceBufferPairCheck', 'bandwidth']['committed']['value'] == 337.5
    a100 = _entries(_partition('NVIDIA A100-SXM4-80GB', 8))
    assert a100['HostDeviceBandwidthCheck', 'device_to_host_pinned']['committed']['value'] \
        == 24.0 == drafts.DATASHEET_SHARE * 32
    # One GPU: no pair, no all_reduce of eight.
    one = _entries(_partition('NVIDIA H200', 1))
    assert ('DeviceBufferPairCheck', 'bandwidth') not in one
    assert ('NcclTestsCheck', 'busbw') not in one


@pytest.mark.parametrize('check, figure', [
    ('BabelStreamCheck', 'triad_bandwidth'),
    ('GpuDgemmCheck', 'tflops'),
    ('HostDeviceBandwidthCheck', 'host_to_device_pinned'),
    ('HostDeviceBandwidthCheck', 'device_to_host_pinned'),
])
def test_the_h200_s_real_jobs_pass_its_drafted_gpu_entries_and_a_cut_figure_fails(
        tmp_path, check, figure):
    """The H200 node's three jobs of each check (triad 3930 to 3946 GB/s, the DGEMM 59.6 to
    60.2 TFLOP/s, pinned copies 55.2 to 55.4 GB/s) against the draft of a one-H200 node:
    its GPU passes; the same jobs with that figure at 70 % (what a GPU with a slow memory,
    clock or slot gives): the GPU fails, its one-sided test's p-value said."""
    entries = _entries(_partition('NVIDIA H200', 1))
    entry = contract.from_data({'system': 'h200', 'entries': [entries[check, figure]]},
                               'draft').entries[0]
    whole = list(measured.measured_runs(h200_gpu_session(tmp_path / 'whole', check)))
    judged = judgement.judge_entry(entry, whole)
    (unit,) = judged.units
    assert (str(unit.unit), unit.verdict, len(unit.values)) == ('GPU 0 of vm', 'PASS', 3), \
        unit.reason
    cut = list(measured.measured_runs(h200_gpu_session(tmp_path / 'cut', check,
                                                       scale={figure: 0.7})))
    judged = judgement.judge_entry(entry, cut)
    (unit,) = judged.units
    assert unit.verdict == 'FAIL' and 'one-sided t-test p = ' in unit.reason, unit.reason
    assert judged.verdict == 'FAIL'


def test_a_real_a100_node_s_pairs_pass_their_drafted_link_and_the_cut_pair_is_named(tmp_path):
    """The real 8 x A100 node's 28 pairs (88 to 92 % of their 12 NVLinks, 300 GB/s each
    way) against the pair entry drawn from its datasheet and topology (0.75 x 300 GB/s),
    its one stored run judged as one (the entry's statistic edited to it): every pair
    passes; GPUs 2 and 5 cut to a third: that pair alone is short, a warning, not a failure
    (one run is no significant test; three are: the H200's above)."""
    entries = _entries(_partition('NVIDIA A100-SXM4-80GB', 8,
                                  'pairs/a100-sxm4-80gb-8gpu-topology.txt'))
    drawn = entries['DeviceBufferPairCheck', 'bandwidth']
    assert drawn['committed']['value'] == 225.0 and '12 x NVLink 3' in drawn['source']['clause']
    assert drawn['source']['cite'].startswith('A100 80GB SXM (NVIDIA A100 Tensor Core GPU ')
    entry = contract.from_data({'system': 'a100', 'entries': [
        {**drawn, 'statistic': {'median_of': 1}}]}, 'draft').entries[0]
    judged = judgement.judge_entry(entry, list(measured.measured_runs(
        a100_node_pair_record(tmp_path))))
    assert len(judged.units) == 28 and judged.verdict == 'PASS'
    (tmp_path / 'cut').mkdir()
    judged = judgement.judge_entry(entry, list(measured.measured_runs(
        a100_node_pair_record(tmp_path / 'cut', cut={(2, 5): 1 / 3}))))
    short = [u for u in judged.units if u.verdict != 'PASS']
    assert [(str(u.unit), u.verdict) for u in short] == [('GPUs 2 and 5 of a100-node', 'WARN')]
    assert 'in one run: no test tells a slow unit from a slow run' in short[0].reason
    assert judged.verdict == 'WARN'


@pytest.mark.parametrize('stored', [float('nan'), 0.0, -268.9, float('inf')])
def test_a_gpu_pair_s_stored_figure_no_run_can_have_is_invalid_not_missing(tmp_path, stored):
    """A GPU's or a pair's own figure is judged by the rule a node's figure is (a value no
    run can have, hpcbench.benchmarks.reports.impossible): the real A100 node's pair of
    GPUs 2 and 5 made NaN, nothing, negative or infinite in the stored record is INVALID,
    saying why (NaN was dropped and the pair said 'no figure measured'; 0 and a negative
    bandwidth were judged as figures), every other pair passes."""
    entries = _entries(_partition('NVIDIA A100-SXM4-80GB', 8,
                                  'pairs/a100-sxm4-80gb-8gpu-topology.txt'))
    entry = contract.from_data({'system': 'a100', 'entries': [
        {**entries['DeviceBufferPairCheck', 'bandwidth'], 'statistic': {'median_of': 1}}]},
        'draft').entries[0]
    record = a100_node_pair_record(tmp_path)
    (case,) = record['runs'][0]['testcases']
    case['device_figures']['a100-node:gpu2-gpu5']['bandwidth'] = stored
    judged = judgement.judge_entry(entry, list(measured.measured_runs(record)))
    bad = [u for u in judged.units if u.verdict != 'PASS']
    assert [(str(u.unit), u.verdict) for u in bad] == [('GPUs 2 and 5 of a100-node',
                                                        'INVALID')]
    assert bad[0].reason.startswith(f'bandwidth withheld: {stored:g} GB/s as stored: ')
    assert len(judged.units) == 28 and judged.verdict == 'FAIL'
