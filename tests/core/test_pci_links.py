"""A node's GPUs as its PCI bus shows them (hpcbench.core.pci_links), read from real sysfs
outputs (tests/fixtures/health/README.md) and this machine's own."""
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
    assert found.devices['n1:gpu0'] == {'pcie_generation': 1, 'pcie_width': 8,
                                        'pcie_max_generation': 3, 'pcie_max_width': 16,
                                        'pcie_degraded': 1}


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
