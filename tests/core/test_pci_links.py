"""A node's GPUs as its PCI bus shows them (hpcbench.core.pci_links), read from real sysfs
outputs (tests/fixtures/health/README.md) and this machine's own."""
import json
import shutil

import pytest

from conftest import FIXTURES
from hpcbench.core import fact_figures, node_facts, pci_links

PCI = FIXTURES / 'health' / 'procfs-pci'


def test_the_gpu_on_the_bus_is_the_amd_one_with_its_link_and_nothing_else_is():
    (gpu,) = pci_links.read_gpus(PCI / 'sys')
    assert (gpu.address, gpu.vendor, gpu.device) == ('0000:09:00.0', 'AMD', '687f')
    assert (gpu.link.generation, gpu.link.width, gpu.link.max_generation,
            gpu.link.max_width, gpu.link.degraded) == (3, 16, 3, 16, False)
    assert gpu.link.words() == 'PCIe Gen3 x16 of Gen3 x16'


def test_this_machine_s_own_bus_reads(tmp_path):
    found = pci_links.read_gpus('/sys')
    assert found is None or all(g.vendor in pci_links.GPU_VENDORS.values() for g in found)
    assert pci_links.read_gpus(tmp_path) is None      # no PCI bus shown: not "no GPUs"


@pytest.fixture
def bus(tmp_path):
    shutil.copytree(PCI / 'sys', tmp_path / 'sys')
    return tmp_path / 'sys' / pci_links.DEVICES / '0000:09:00.0'


def test_a_gpu_trained_at_x8_is_degraded_and_its_node_s_figures_say_so(bus, tmp_path):
    (bus / 'current_link_width').write_text('8\n')
    (bus / 'current_link_speed').write_text('2.5 GT/s PCIe\n')
    (gpu,) = pci_links.read_gpus(tmp_path / 'sys')
    assert gpu.link.degraded and gpu.link.words() == 'PCIe Gen1 x8 of Gen3 x16'
    # Without nvidia-smi (an AMD node), the GPU's figures are the kernel's link.
    facts = node_facts.read(tmp_path, 'n1')
    assert dict(facts.unread)['nvidia-smi -q -x'].startswith('not in the tree')
    found = fact_figures.figures(facts, facts)
    assert found.node['pci_gpus'] == 1 and 'gpus' not in found.node
    # Its Gen1 is not read: the kernel does not say whether the GPU idled (an idle GPU's
    # link drops its generation); its x8 is degraded.
    assert found.devices['n1:gpu0'] == {'pcie_width': 8, 'pcie_max_generation': 3,
                                        'pcie_max_width': 16, 'pcie_degraded': 1}
    (bus / 'current_link_width').write_text('16\n')
    facts = node_facts.read(tmp_path, 'n1')
    assert 'pcie_degraded' not in fact_figures.figures(facts, facts).devices['n1:gpu0']


def test_a_link_the_kernel_cannot_read_is_none_and_a_link_that_is_none_is_refused(bus,
                                                                                  tmp_path):
    (bus / 'current_link_speed').write_text('Unknown speed\n')
    (bus / 'max_link_width').unlink()
    (gpu,) = pci_links.read_gpus(tmp_path / 'sys')
    assert (gpu.link.generation, gpu.link.max_width, gpu.link.degraded) == (None, None, None)
    for name, text, said in (('current_link_speed', '9 GT/s PCIe', 'no PCIe link speed'),
                             ('current_link_width', '3', 'no PCIe link width'),
                             ('class', 'display', 'no PCI ID or class'),
                             ('current_link_width', '16' * 3000, 'more than a kernel file holds')):
        original = (bus / name).read_text() if (bus / name).exists() else None
        (bus / name).write_text(text + '\n')
        with pytest.raises(pci_links.PciLinkError, match=said):
            pci_links.read_gpus(tmp_path / 'sys')
        # Read as a node's facts: said unread, the rest read.
        facts = node_facts.read(tmp_path, 'n1')
        assert said in dict(facts.unread)['PCI bus'] and facts.pci_gpus == ()
        if original is not None:
            (bus / name).write_text(original)


@pytest.mark.parametrize('name, links', [
    # An AMD GPU at its Gen3 x16 (ROCm/tensorflow-upstream issue 92).
    ('lspci-vv-rocm-tensorflow-92.txt', [('', (3, 16, 3, 16, False))]),
    # An RTX 4090 on a riser trained at Gen1 of its Gen4 (janhq/jan issue 183).
    ('lspci-vv-jan-183.txt', [('', (1, 16, 4, 16, True))]),
    # A ConnectX-7 whose capability reads "Speed unknown" (MrBr-github/lshca issue 51).
    ('lspci-vv-lshca-51.txt', [('', (4, 16, None, 16, None))]),
    # A Quadro RTX 8000 at Gen2 x1, its capability not kept (geerlingguy's issue 480).
    ('lspci-vv-rtx8000-pi-480.txt', [('', (2, 1, None, None, None))]),
])
def test_lspci_s_link_lines_read_as_the_kernel_s(name, links):
    found = pci_links.parse_lspci((FIXTURES / 'health' / name).read_text())
    assert [(a, (k.generation, k.width, k.max_generation, k.max_width, k.degraded))
            for a, k in found] == links


def test_lspci_s_functions_are_told_apart_by_their_headers_and_a_wrong_link_is_refused():
    # The A100's header of open-mpi/hwloc issue 653 before the 4090's lines, the AMD GPU's
    # with the header of its address: two functions.
    header = ('da:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 40GB] '
              '[10de:20b0] (rev a1)\n')
    text = (header + (FIXTURES / 'health' / 'lspci-vv-jan-183.txt').read_text() +
            '0000:09:00.0 VGA compatible controller: AMD\n' +
            (FIXTURES / 'health' / 'lspci-vv-rocm-tensorflow-92.txt').read_text())
    found = pci_links.parse_lspci(text)
    assert [(a, k.words()) for a, k in found] == [
        ('da:00.0', 'PCIe Gen1 x16 of Gen4 x16'), ('0000:09:00.0', 'PCIe Gen3 x16 of Gen3 x16')]
    for line, said in (('LnkSta: Speed 9GT/s, Width x16', 'no PCIe speed'),
                       ('LnkSta: Speed 8GT/s, Width x3', 'no PCIe width'),
                       ('LnkSta: fast', 'reads no link')):
        with pytest.raises(pci_links.PciLinkError, match=said):
            pci_links.parse_lspci(line)


def test_nvidia_smi_s_query_of_an_idle_l40s_node_reads_eight_links_at_gen1_of_gen4():
    # MLPerf's Wiwynn submission (tests/fixtures/health/README.md): idle GPUs drop to Gen1.
    found = pci_links.parse_nvidia_query(
        (FIXTURES / 'health' / 'nvidia-smi-query-pcie-l40s-mlperf-wiwynn.csv').read_text())
    assert [g for g, _ in found] == [str(i) for i in range(8)]
    assert {(k.generation, k.width, k.max_generation, k.max_width, k.degraded)
            for _, k in found} == {(1, 16, 4, 16, True)}
    assert found[0][1].words() == 'PCIe Gen1 x16 of Gen4 x16'


def test_nvidia_smi_s_query_names_gpus_by_address_reads_units_and_n_a_and_refuses_the_rest():
    # The same node queried with its PCI addresses, units in the header and a GPU at x8 (a
    # variation of the real output: nvidia-smi's 8-digit domain, its "[N/A]").
    text = ('pci.bus_id, name, pcie.link.gen.max, pcie.link.width.current [lanes], '
            'pcie.link.width.max\n'
            '00000000:1B:00.0, NVIDIA L40S, 4, 16, 16\n'
            '00000000:9A:00.0, NVIDIA L40S, [N/A], 8, 16\n')
    found = pci_links.parse_nvidia_query(text)
    assert [(g, k.max_generation, k.width, k.max_width, k.degraded) for g, k in found] == [
        ('0000:1b:00.0', 4, 16, 16, None), ('0000:9a:00.0', None, 8, 16, None)]
    header = 'index, pcie.link.gen.current, pcie.link.width.current\n'
    for text, said in (('0, 1, 4, 16, 16\n', 'names no link field'),
                       (header + '0, 4\n', 'has 2 fields, its header 3'),
                       (header + '0, 7, 16\n', 'is no PCIe generation'),
                       (header + '0, 4, 6\n', 'is no PCIe width'),
                       (header + '0, 4, x16\n', 'is no number'),
                       ('pci.bus_id, pcie.link.gen.current\nGPU-1, 4\n', 'no PCI address'),
                       ('', 'no line'),
                       (header + '0, 4, 16\n' * 200000, 'more than any node prints')):
        with pytest.raises(pci_links.PciLinkError, match=said):
            pci_links.parse_nvidia_query(text)


def test_amd_smi_s_bus_of_an_mi350x_reads_its_link_s_maxima_as_text_and_as_json():
    text = (FIXTURES / 'health' / 'amd-smi-static-mi350x-rocm-systems-2987.txt').read_text()
    ((address, link),) = pci_links.parse_amd_smi_bus(text)
    assert (address, link.max_generation, link.max_width) == ('0000:05:00.0', 5, 16)
    assert (link.generation, link.width, link.degraded) == (None, None, None)
    # The same GPU as --json prints it (amd-smi's keys), and a second GPU of a node whose
    # values amd-smi could not read.
    data = [{'gpu': 0, 'bus': {'bdf': '0000:05:00.0', 'max_pcie_width': 16,
                               'max_pcie_speed': {'value': 32, 'unit': 'GT/s'},
                               'pcie_interface_version': 'Gen 5', 'slot_type': 'OAM'}},
            {'gpu': 1, 'bus': {'bdf': '0000:15:00.0', 'max_pcie_width': 'N/A',
                               'max_pcie_speed': 'N/A', 'pcie_interface_version': 'N/A'}}]
    found = pci_links.parse_amd_smi_bus(json.dumps(data))
    assert [(a, k.max_generation, k.max_width) for a, k in found] == [
        ('0000:05:00.0', 5, 16), ('0000:15:00.0', None, None)]


def test_amd_smi_s_bus_refuses_what_is_no_link():
    text = (FIXTURES / 'health' / 'amd-smi-static-mi350x-rocm-systems-2987.txt').read_text()
    for old, new, said in (('MAX_PCIE_WIDTH: 16', 'MAX_PCIE_WIDTH: 15', 'no PCIe width'),
                           ('32 GT/s', '33 GT/s', 'no PCIe speed'),
                           ('Gen 5', 'Gen 4', 'no PCIe generation of its MAX_PCIE_SPEED'),
                           ('BDF: 0000:05:00.0', 'BDF: N/A', 'no PCI address'),
                           ('GPU: 0', 'GPU zero', 'no "GPU: N" line')):
        with pytest.raises(pci_links.PciLinkError, match=said):
            pci_links.parse_amd_smi_bus(text.replace(old, new))
    for text, said in (('[{"gpu": 0}]', 'each with its "bus"'), ('{"gpu": ', 'amd-smi static '
                                                                 '--json'),
                       ('GPU: 0\n' * 700000, 'more than any node prints')):
        with pytest.raises(pci_links.PciLinkError, match=said):
            pci_links.parse_amd_smi_bus(text)
