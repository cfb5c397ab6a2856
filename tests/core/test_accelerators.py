"""A node's GPUs (hpcbench.core.accelerators) read from real nvidia-smi outputs of an H200 and
an H100 node (tests/fixtures/gpu/), and from broken copies of them; the datasheet figures a
check judges against; ReFrame's `devices` entry and the partition's extras."""
import re
import stat

import pytest

from conftest import FIXTURES
from hpcbench.core import gres as gres_text
from hpcbench.machine import gpus as machine_gpus
from hpcbench.core import accelerators
from hpcbench.machine import datasheets

GPU = FIXTURES / 'gpu'


def _csv(node):
    return (GPU / node / 'nvidia-smi-query.csv').read_text()


def _xml(node):
    return (GPU / node / 'nvidia-smi-q.xml').read_text()


def test_the_h200_node_s_query_gives_its_one_gpu():
    (gpu,) = accelerators.from_query_csv(_csv('h200'))
    assert (gpu.vendor, gpu.kind, gpu.model, gpu.arch) == ('nvidia', 'gpu', 'NVIDIA H200', 'sm_90')
    assert gpu.memory_bytes == 143771 << 20
    assert (gpu.max_sm_clock_hz, gpu.max_memory_clock_hz) == (1980e6, 3201e6)
    assert (gpu.power_limit_w, gpu.ecc_enabled, gpu.driver_version) == (700.0, True, '580.159.04')
    assert gpu.uuid.startswith('GPU-e79e4d5e') and gpu.pci_bus_id == '00000000:00:06.0'


@pytest.mark.parametrize('node', ['h100', 'h200'])
def test_the_xml_describes_the_same_gpu_as_the_query(node):
    assert accelerators.from_smi_xml(_xml(node)) == accelerators.from_query_csv(_csv(node))


def test_a_model_without_a_datasheet_has_none():
    gpu = accelerators.Accelerator('nvidia', 'gpu', 'NVIDIA GeForce RTX 4090', 'sm_89', 24 << 30)
    assert datasheets.find(gpu.model) is None
    assert machine_gpus.partition_facts([gpu])['accelerators']['datasheet'] is None


def test_a_partition_describes_its_gpus_for_reframe_and_the_checks():
    gpus = accelerators.from_query_csv(_csv('h200'))
    assert machine_gpus.devices_entry(gpus) == [
        {'type': 'gpu', 'arch': 'sm_90', 'model': 'NVIDIA H200', 'num_devices': 1}]
    assert machine_gpus.features(gpus) == ['gpu', 'cuda']
    extras = machine_gpus.partition_facts(
        gpus, sheet=datasheets.find(gpus[0].model))['accelerators']
    assert (extras['count'], extras['power_limit_w'], extras['ecc_enabled']) == (1, 700.0, True)
    assert extras['datasheet']['memory_bandwidth'] == 4800e9
    # No GPU: nothing changes.
    assert machine_gpus.devices_entry([]) == [] and machine_gpus.features([]) == []
    assert machine_gpus.partition_facts([]) == {}


def test_a_node_of_two_models_is_refused_naming_them():
    gpus = accelerators.from_query_csv(_csv('h200')) + accelerators.from_query_csv(_csv('h100'))
    with pytest.raises(accelerators.AcceleratorError,
                       match=re.escape('(NVIDIA H200 (sm_90): device 0; NVIDIA H100 80GB HBM3 '
                                       '(sm_90): device 0)')):
        machine_gpus.devices_entry(gpus)


def _broken_csv(old, new):
    text = _csv('h200')
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize('text, said', [
    ('', 'nvidia-smi printed nothing'),
    (_broken_csv('compute_cap, ', ''), 'no compute_cap in its header'),
    (_broken_csv(' 9.0,', ' 9,'), "compute capability '9' is not MAJOR.MINOR"),
    (_broken_csv('143771 MiB', '[N/A]'), "GPU 0 memory '[N/A]' is no number"),
    (_broken_csv('700.00 W', '[Not Supported]'), "power limit '[Not Supported]' is no number"),
    (_broken_csv(', 580.159.04', ''), 'line 2 has 10 fields, the header 11'),
    # Issue 51, item 15: numbers no GPU has, and units of another size.
    (_broken_csv('143771 MiB', '1.2.3 MiB'), "GPU 0 memory '1.2.3 MiB' is no number"),
    (_broken_csv('143771 MiB', '1e30 MiB'), "GPU 0 memory '1e30 MiB' is no value a GPU has "
                                            '(from 1 to 1.67772e+07 MiB)'),
    (_broken_csv('143771 MiB', '143771 MB').replace('[MiB]', '[MB]'),
     "GPU 0 memory '143771 MB' is not in MiB (or KiB, GiB, TiB)"),
    (_broken_csv('143771 MiB', '143771 GiB'), "line 2: memory.total '143771 GiB' is not in its "
                                              "header's unit, MiB"),
    (_broken_csv('700.00 W', '-700.00 W'), "GPU 0 power limit '-700.00 W' is no value a GPU "
                                           'has (from 0 to 5000 W)'),
])
def test_a_broken_query_output_is_one_message(text, said):
    with pytest.raises(accelerators.AcceleratorError, match=re.escape(said)):
        accelerators.from_query_csv(text)


def test_a_header_s_unit_is_its_values_unit():
    """nvidia-smi's `--format=csv,nounits` gives units in the header only: a [GiB] header is
    GiB (it was read as MiB), a value in its header's unit is converted."""
    nounits = _csv('h200').replace('143771 MiB', '140.4 ').replace('memory.total [MiB]',
                                                                    'memory.total [GiB]')
    gpu, = accelerators.from_query_csv(nounits)
    assert gpu.memory_bytes == int(140.4 * 1024 * accelerators.MIB)
    scientific = _csv('h200').replace('700.00 W', '7.0000e+02 W')
    assert accelerators.from_query_csv(scientific)[0].power_limit_w == 700.0


def test_a_broken_xml_is_one_message_and_an_ambiguous_architecture_asks_for_the_query():
    with pytest.raises(accelerators.AcceleratorError, match='not XML'):
        accelerators.from_smi_xml(_xml('h200')[:5000])
    ampere = _xml('h200').replace('<product_architecture>Hopper<',
                                  '<product_architecture>Ampere<')
    with pytest.raises(accelerators.AcceleratorError,
                       match='GPU 0 is a Ampere of more than one compute capability: read it '
                             'from nvidia-smi --query-gpu='):
        accelerators.from_smi_xml(ampere)


def _tool(tmp_path, script):
    tool = tmp_path / 'nvidia-smi'
    tool.write_text('#!/bin/sh\n' + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(tool)


def test_detect_asks_the_node_s_tool_and_finds_nothing_without_one(tmp_path):
    fixture = GPU / 'h200' / 'nvidia-smi-query.csv'
    tool = _tool(tmp_path, f'case "$1" in --query-gpu=*) cat "{fixture}";; *) exit 9;; esac\n')
    assert [g.model for g in accelerators.detect(tool)] == ['NVIDIA H200']
    # This machine has no GPU and no nvidia-smi: nothing, and nothing said.
    assert accelerators.detect() == []


def test_a_tool_that_fails_is_said_with_what_it_printed(tmp_path):
    tool = _tool(tmp_path, 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with '
                           'the NVIDIA driver."; exit 9\n')
    with pytest.raises(accelerators.AcceleratorError,
                       match=r'exited with 9: NVIDIA-SMI has failed because it couldn\'t '
                             'communicate with the NVIDIA driver'):
        accelerators.detect(tool)


def test_a_tool_that_hangs_or_prints_no_text_is_one_message(tmp_path):
    hangs = _tool(tmp_path, 'exec sleep 60\n')
    with pytest.raises(accelerators.AcceleratorError, match=r'did not answer within 1 s'):
        accelerators.detect(hangs, timeout=1)
    binary = _tool(tmp_path, "printf 'index, name\\n0, \\377\\376\\n'\n")
    with pytest.raises(accelerators.AcceleratorError, match=r'printed what is not UTF-8 text'):
        accelerators.detect(binary)


def test_a_scheduler_s_typed_gres_describes_the_node_s_gpus():
    gpus = machine_gpus.from_gres('gpu:h200:2(S:0-1),shard:h200:8', datasheets.gres_model())
    assert [(g.model, g.arch, g.memory_bytes, g.index) for g in gpus] == [
        ('NVIDIA H200', 'sm_90', 141 * 10**9, 0), ('NVIDIA H200', 'sm_90', 141 * 10**9, 1)]
    # Its datasheet is the one nvidia-smi's name finds; no limit is known from a GRES.
    described = machine_gpus.partition_facts(
        gpus, sheet=datasheets.find(gpus[0].model))['accelerators']
    assert described['datasheet']['model'] == 'H200 SXM' and described['count'] == 2
    assert (described['power_limit_w'], described['ecc_enabled']) == (0.0, None)
    assert machine_gpus.from_gres('(null)') == [] and machine_gpus.from_gres('') == []


# GRES as real Slurm controllers print them (issue 61): CSC Puhti's V100 and Mahti's A100
# nodes (a Slurm-limits parser's test, code corpus), a GRES with MPS and a consumable
# bandwidth (a Slurm parser's test fixture, code corpus), the untyped `gpu:4` (an OnDemand
# plug-in's recorded `scontrol show node`, Slurm 17.02), the labels of the eight
# records, and nodes of two models (code corpus): a whole A100 beside MIG slices of two
# profiles (`scontrol show node lovelace-01 | grep -i gres` in a university cluster's user
# guide, the same in its `sinfo -o "%P %G %N"`: corpus ids 54631273998, 54600178421), four
# whole H200s beside eight MIG slices and a non-GPU item (node gpu49's record in a cluster
# dashboard's test, 69399707867), an RTX 2080 Ti pair beside an A40 pair (node
# unicorn-compute-01 in a Slurm monitor's test, 70469340725) and two labels of a site's own
# (gpu006 in a detector facility's notes, 68532341933). Each is read; none stops a cluster.
@pytest.mark.parametrize('gres, items', [
    ('gpu:v100:4(S:0-1),nvme:3600', [('v100', 4, '(S:0-1)')]),
    ('gpu:a100:4(S:0-1),nvme:3500', [('a100', 4, '(S:0-1)')]),
    ('gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G',
     [('tesla', 2, ''), ('kepler', 2, '')]),
    ('gpu:4', [('', 4, '')]),
    ('gpu:rtx2080ti:4(S:0)', [('rtx2080ti', 4, '(S:0)')]),
    ('gpu:geforce_rtx_2080_ti:10(S:0)', [('geforce_rtx_2080_ti', 10, '(S:0)')]),
    ('gpu:nvidia-rtx-3090:1', [('nvidia-rtx-3090', 1, '')]),
    ('gpu:rtxproserver6000:1', [('rtxproserver6000', 1, '')]),
    ('gpu:a100:1(S:0),gpu:h100:1(S:1)', [('a100', 1, '(S:0)'), ('h100', 1, '(S:1)')]),
    ('gpu:a100:1(S:0),gpu:1g.20gb:2(S:1),gpu:1g.10gb:3(S:1)',
     [('a100', 1, '(S:0)'), ('1g.20gb', 2, '(S:1)'), ('1g.10gb', 3, '(S:1)')]),
    ('gpu:h200:4(S:1),gpu:h200_3g.71gb:8(S:0),min-vram:no_consume:71G',
     [('h200', 4, '(S:1)'), ('h200_3g.71gb', 8, '(S:0)')]),
    ('gpu:nvidia_geforce_rtx_2080_ti:2(S:0),gpu:nvidia_a40:2(S:1)',
     [('nvidia_geforce_rtx_2080_ti', 2, '(S:0)'), ('nvidia_a40', 2, '(S:1)')]),
    ('gpu:dda1:1(S:1),gpu:ddd5:1(S:1)', [('dda1', 1, '(S:1)'), ('ddd5', 1, '(S:1)')]),
    ('gpu:h200:8(S:0-1),VramPerGpu:no_consume:141G,shard:h200:64', [('h200', 8, '(S:0-1)')]),
    ('gpu:a100:4(IDX:0-3)', [('a100', 4, '(IDX:0-3)')]),
    ('nvme:3600', []), ('(null)', []), ('gpu:0', []),
])
def test_a_gres_as_slurm_prints_it_is_read_whatever_its_labels(gres, items):
    assert [(i.label, i.count, i.binding) for i in gres_text.gres_gpus(gres)] == items
    gpus = machine_gpus.from_gres(gres, datasheets.gres_model())
    assert len(gpus) == sum(count for _, count, _ in items)
    assert [g.index for g in gpus] == list(range(len(gpus)))
    for gpu, label in zip(gpus, [label for label, count, _ in items for _ in range(count)]):
        # A label a datasheet names gives its model; any other is a GPU of unknown model.
        entry = datasheets.by_gres_label(label) if label else None
        if entry:
            assert gpu.vendor == 'nvidia' and gpu.model == entry.examples[0]
            assert datasheets.find(gpu.model) == entry.sheet
        else:
            assert gpu.vendor == accelerators.UNKNOWN_VENDOR and gpu.arch == ''
            assert gpu.model == (f'GPU (GRES gpu:{label})' if label else
                                 'GPU (GRES gpu, untyped)')


@pytest.mark.parametrize('gres, said', [
    ('gpu:h200:x', r"GRES 'gpu:h200:x' is not gpu\[:TYPE\]:COUNT"),
    ('gpu:a:b:c:4', r"GRES 'gpu:a:b:c:4' is not gpu\[:TYPE\]:COUNT"),
    ('gpu:h100:40,gpu:a100:40', r"GRES 'gpu:a100:40': 80 GPUs are not what a node has"),
])
def test_a_gres_that_is_no_node_s_is_one_message(gres, said):
    with pytest.raises(accelerators.AcceleratorError, match=said):
        machine_gpus.from_gres(gres)


def test_rocm_smi_s_cards_are_read_as_the_node_names_them():
    """`rocm-smi -a --json` of an MI250 node (recorded in wandb's AMD monitor, cited in
    tests/fixtures/gpu/rocm-smi/README.md): its `Card series`, PCI bus, unique ID and
    maximum package power; the `system` object is no card. This release prints no GFX
    version or VRAM."""
    text = (FIXTURES / 'gpu' / 'rocm-smi' / 'mi250-all-wandb.json').read_text()
    gpu, = accelerators.from_rocm_smi_json(text)
    assert (gpu.vendor, gpu.model, gpu.arch, gpu.memory_bytes, gpu.pci_bus_id, gpu.uuid,
            gpu.power_limit_w) == ('amd', 'AMD INSTINCT MI250 (MCM) OAM AC MBA', '', 0,
                                   '0000:2F:00.0', '0x719d230578348e8c', 560.0)
    assert datasheets.find(gpu.model).model == 'MI250 (one of its two dies)'
    assert machine_gpus.features([gpu]) == ['gpu', 'rocm']


@pytest.mark.parametrize('text, said', [
    ('{"card0": {"GPU use (%)": "0"}}', r'rocm-smi: card0: no Card series'),
    ('{"card0": {"Card series": "MI250", "VRAM Total Memory (B)": "-1"}}',
     r"rocm-smi: card0 VRAM Total Memory \(B\) '-1' is no memory a GPU has"),
    ('{"card0": {"Card series": "MI250", "Max Graphics Package Power (W)": "5600000"}}',
     r"rocm-smi: card0 power '5600000' is no value a GPU has"),
    ('ERROR: GPU[0]\t\t: Unable to read', r'rocm-smi: not JSON'),
    ('[1, 2]', r'rocm-smi: list where it prints an object'),
])
def test_rocm_smi_output_that_describes_no_gpu_is_one_message(text, said):
    with pytest.raises(accelerators.AcceleratorError, match=said):
        accelerators.from_rocm_smi_json(text)


def test_xpu_smi_s_devices_are_read_as_the_node_names_them():
    """`xpu-smi discovery -j` of a Max 1100 node (a device of its `device_list`, recorded in
    a monitoring tool's code, cited in tests/fixtures/gpu/xpu-smi/README.md)."""
    text = (FIXTURES / 'gpu' / 'xpu-smi' / 'max1100-discovery.json').read_text()
    gpu, = accelerators.from_xpu_smi_json(text)
    assert (gpu.vendor, gpu.model, gpu.index, gpu.pci_bus_id, gpu.uuid) == (
        'intel', 'Intel(R) Data Center GPU Max 1100', 0, '0000:29:00.0',
        '00000000-0000-0029-0000-002f0bda8086')
    assert datasheets.find(gpu.model).memory_bytes == 48e9
    with pytest.raises(accelerators.AcceleratorError, match='no device_list'):
        accelerators.from_xpu_smi_json('{"error": "Level Zero initialization failed"}')
    with pytest.raises(accelerators.AcceleratorError, match='device 0 has no device_name'):
        accelerators.from_xpu_smi_json('{"device_list": [{"device_id": 0}]}')
