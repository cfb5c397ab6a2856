"""Accelerator datasheets as cited data (hpcbench.machine.datasheets, issue 61): the
project's file (references/datasheets/accelerators.yaml) read and checked whole, each model
found by the name its tool prints and by the labels sites give it in GRES; a site's own file
read first; a file that is not one is one message naming file, entry and field."""
import re

import pytest
import yaml

from conftest import FIXTURES
from hpcbench.machine import gpus as machine_gpus
from hpcbench.core import accelerators
from hpcbench.machine import datasheets

TABLE = datasheets.table()


def _csv(node):
    return (FIXTURES / 'gpu' / node / 'nvidia-smi-query.csv').read_text()


@pytest.mark.parametrize('node, model, bandwidth, tensor_peak', [
    ('h200', 'H200 SXM', 4800e9, 67e12),
    ('h100', 'H100 SXM', 3350e9, 67e12),
])
def test_each_gpu_has_its_datasheet_figures_cited(node, model, bandwidth, tensor_peak):
    (gpu,) = accelerators.from_query_csv(_csv(node))
    sheet = datasheets.find(gpu.model)
    assert (sheet.model, sheet.memory_bandwidth, sheet.fp64_tensor_flops) == \
        (model, bandwidth, tensor_peak)
    assert sheet.fp64_flops == 34e12 and sheet.host_link == 'PCIe 5.0 x16'
    assert sheet.host_link_bandwidth == 64e9        # each direction
    assert 'datasheet' in sheet.source and 'Technical Specifications' in sheet.source
    assert (sheet.nvlink, sheet.nvlink_links, sheet.nvlink_bandwidth) == ('NVLink 4', 18, 450e9)


@pytest.mark.parametrize('name, model', [
    ('NVIDIA A100-SXM4-80GB', 'A100 80GB SXM'), ('NVIDIA A100-SXM4-40GB', 'A100 40GB SXM'),
    ('NVIDIA A100 80GB PCIe', 'A100 80GB PCIe'), ('NVIDIA A100-PCIE-40GB', 'A100 40GB PCIe'),
    ('NVIDIA H100 NVL', 'H100 NVL'), ('NVIDIA H200 NVL', 'H200 NVL'),
    ('Tesla V100-SXM2-32GB', 'V100 SXM2 32GB'), ('Tesla V100-PCIE-16GB', 'V100 PCIe 16GB'),
    ('NVIDIA A30', 'A30'), ('NVIDIA A40', 'A40'), ('NVIDIA A10', 'A10'), ('NVIDIA L4', 'L4'),
    ('NVIDIA L40', 'L40'), ('NVIDIA L40S', 'L40S'),
    ('NVIDIA RTX 6000 Ada Generation', 'RTX 6000 Ada'),
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', 'RTX PRO 6000 Blackwell Server'),
    ('NVIDIA H100 PCIe', 'H100 PCIe'), ('NVIDIA GH200 480GB', 'GH200 (H100 with 96 GB HBM3)'),
    ('NVIDIA B200', 'B200 (HGX, 1000 W)'), ('NVIDIA GB200', 'GB200 (B200 at 1200 W)'),
    ('AMD Instinct MI210', 'MI210'), ('AMD INSTINCT MI250X', 'MI250X (one of its two dies)'),
    ('AMD Instinct MI300A', 'MI300A'), ('AMD Instinct MI300X VF', 'MI300X'),
    ('Intel(R) Data Center GPU Max 1550', 'Data Center GPU Max 1550'),
    ('ClearSpeed Advance', 'ClearSpeed Advance (2 x CSX600)'),
])
def test_the_gpus_of_the_top500_s_accelerated_systems_have_datasheets(name, model):
    sheet = datasheets.find(name)
    assert sheet.model == model and sheet.source
    # A ratio above 100 % means a wrong peak: the matrix peak is never below the vector one.
    if sheet.fp64_flops:
        assert sheet.fp64_tensor_flops >= sheet.fp64_flops


def test_a_package_of_two_dies_is_two_devices_of_half_its_figures():
    sheet = datasheets.find('AMD Instinct MI250X')
    assert sheet.devices_per_package == 2
    assert (sheet.fp64_flops, sheet.fp64_tensor_flops, sheet.memory_bandwidth,
            sheet.memory_bytes) == (23.95e12, 47.85e12, 1638.4e9, 64e9)


def test_a_figure_not_published_is_no_figure():
    sheet = datasheets.find('NVIDIA L40S')
    assert sheet.fp64_flops is None and sheet.memory_bandwidth == 864e9


@pytest.mark.parametrize('label, model', [
    ('h100', 'H100 SXM'), ('H100', 'H100 SXM'), ('nvidia_h100_80gb_hbm3', 'H100 SXM'),
    ('a100', 'A100 80GB SXM'), ('a100_40g', 'A100 40GB SXM'), ('mi250x', 'MI250X (one of its two dies)'),
    ('rtxproserver6000', 'RTX PRO 6000 Blackwell Server'), ('l40s', 'L40S'),
])
def test_a_gres_label_names_its_model(label, model):
    assert datasheets.by_gres_label(label).sheet.model == model


@pytest.mark.parametrize('label', ['v100', 'tesla', 'kepler', 'rtx2080ti', 'mig1g.10gb'])
def test_a_label_that_names_no_one_model_names_none(label):
    # `v100` is any of four V100s: the node's own tool says which.
    assert datasheets.by_gres_label(label) is None


def _file(tmp_path, change):
    data = yaml.safe_load(datasheets.PROJECT_FILE.read_text())
    change(data)
    path = tmp_path / 'mine.datasheets.yaml'
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _at(data, model):
    return next(e for e in data['datasheets'] if e['model'] == model)


@pytest.mark.parametrize('change, said', [
    (lambda d: _at(d, 'H100 SXM').update(fp64='34 TB/s'),
     r"datasheets\[H100 SXM\]\.fp64: '34 TB/s' is not a figure in GFLOP/s, TFLOP/s"),
    (lambda d: _at(d, 'H100 SXM').update(memory_bandwidth='-3350 GB/s'),
     r"datasheets\[H100 SXM\]\.memory_bandwidth: '-3350 GB/s' is not a figure"),
    (lambda d: _at(d, 'H100 SXM').update(power='0 W'),
     r"datasheets\[H100 SXM\]\.power: '0 W' is no device's"),
    (lambda d: _at(d, 'H100 SXM').pop('fp64'),
     r"datasheets\[H100 SXM\]: 'fp64' is a required property"),
    (lambda d: _at(d, 'H100 SXM').update(fp64_matrix='17 TFLOP/s'),
     r"datasheets\[H100 SXM\]\.fp64_matrix: 17 TFLOP/s is below the vector peak 34 TFLOP/s"),
    (lambda d: _at(d, 'H100 PCIe').update(names=['NVIDIA H100.*']),
     r"datasheets\[H100 SXM\]\.names: 'NVIDIA H100 80GB HBM3' is claimed by H100 PCIe too"),
    (lambda d: _at(d, 'A30').update(gres_labels=['h100']),
     r"datasheets\[A30\]\.gres_labels: 'h100' is H100 SXM's too"),
    (lambda d: _at(d, 'A30').update(examples=['NVIDIA A30X']),
     r"datasheets\[A30\]\.examples: 'NVIDIA A30X' is not matched by its names"),
    (lambda d: _at(d, 'A30').update(names=['NVIDIA A30(']),
     r"datasheets\[A30\]\.names\[0\]: 'NVIDIA A30\(' is no regular expression"),
    # Issue 70, item 18: a pattern that backtracks without bound on a name that almost
    # matches (minutes), and variations: an alternation repeated, a nested repeat of a
    # bounded one.
    (lambda d: _at(d, 'A30').update(names=['(a+)+b']),
     r"datasheets\[A30\]\.names\[0\]: '\(a\+\)\+b' is no regular expression a name is "
     r'matched by \(it repeats what repeats or branches'),
    (lambda d: _at(d, 'A30').update(gres_labels=['(a30|a30x?)*']),
     r"datasheets\[A30\]\.gres_labels\[0\]: .*\(it repeats what repeats or branches"),
    (lambda d: _at(d, 'A30').update(names=['NVIDIA A(3{1,2}0*)+']),
     r'datasheets\[A30\]\.names\[0\]: .*\(it repeats what repeats or branches'),
    (lambda d: _at(d, 'A30').update(names=['NVIDIA A30' + '.?' * 200]),
     r'datasheets\[A30\]: names\[0\]: .* is too long'),
    (lambda d: _at(d, 'A30').update(gpu_links=4),
     r'datasheets\[A30\]: gpu_links without gpu_link, gpu_link_bandwidth'),
    (lambda d: _at(d, 'A30').update(fp64_tflops=5.2),
     r'datasheets\[A30\]: no such field fp64_tflops'),
])
def test_a_datasheets_file_that_is_not_one_is_one_message(tmp_path, change, said):
    path = _file(tmp_path, change)
    with pytest.raises(datasheets.DatasheetError, match=f'^{re.escape(str(path))}: .*{said}'):
        datasheets.load(path)


def test_a_site_s_own_datasheet_is_read_first(tmp_path, monkeypatch):
    """A procurement's figures for its H100s (a lower power cap), and a GPU the project
    has none of, in the site's file beside its description: they win over the project's."""
    monkeypatch.setattr(datasheets.paths, 'SITE_CONFIGS_DIR', tmp_path)
    (tmp_path / 'mycluster.datasheets.yaml').write_text(yaml.safe_dump({'datasheets': [
        {'model': 'H100 SXM at 500 W', 'vendor': 'nvidia', 'names': ['NVIDIA H100 80GB HBM3'],
         'examples': ['NVIDIA H100 80GB HBM3'], 'arch': 'sm_90', 'memory': '80 GB',
         'fp64': '34 TFLOP/s', 'fp64_matrix': '67 TFLOP/s', 'memory_bandwidth': '3.35 TB/s',
         'host_link': 'PCIe 5.0 x16', 'host_link_bandwidth': '64 GB/s', 'power': '500 W',
         'source': 'our procurement, annex 3'},
        {'model': 'GeForce RTX 2080 Ti', 'vendor': 'nvidia',
         'names': ['NVIDIA GeForce RTX 2080 Ti'], 'examples': ['NVIDIA GeForce RTX 2080 Ti'],
         'gres_labels': ['rtx2080ti', 'geforcertx2080ti'], 'arch': 'sm_75', 'memory': '11 GB',
         'fp64': 'not published', 'fp64_matrix': 'not published',
         'memory_bandwidth': '616 GB/s', 'host_link': 'PCIe 3.0 x16',
         'host_link_bandwidth': '16 GB/s', 'power': '250 W', 'source': 'NVIDIA, 2018'}]}))
    table = datasheets.table('mycluster')
    assert datasheets.find('NVIDIA H100 80GB HBM3', table).power_w == 500
    assert datasheets.find('NVIDIA H100 80GB HBM3').power_w == 700
    gpus = machine_gpus.from_gres('gpu:geforce_rtx_2080_ti:10(S:0)',
                                  datasheets.gres_model(table))
    assert {(g.model, g.arch) for g in gpus} == {('NVIDIA GeForce RTX 2080 Ti', 'sm_75')}
