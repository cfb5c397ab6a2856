"""A GPU's own health (hpcbench.core.gpu_health) read from real `nvidia-smi -q -x` outputs:
the H200 and H100 nodes lent to this project (driver 580, tests/fixtures/gpu/) and a node of
two Tesla P100s (driver 375, tests/fixtures/health/README.md), each layout NVIDIA's drivers
wrote; and from the same outputs broken as a faulty GPU or a hostile file would break them."""
import pytest

from conftest import FIXTURES
from hpcbench.core import gpu_health
from hpcbench.core.gpu_health import GpuHealthError, PcieLink

H200 = FIXTURES / 'gpu' / 'h200' / 'nvidia-smi-q.xml'
H100 = FIXTURES / 'gpu' / 'h100' / 'nvidia-smi-q.xml'
P100 = FIXTURES / 'health' / 'nvidia-smi-q-p100x2.xml'


def test_the_h200_reports_a_healthy_gpu_on_its_full_link():
    (gpu,) = gpu_health.from_smi_xml(H200.read_text())
    assert (gpu.index, gpu.bus_id, gpu.model) == (0, '00000000:00:06.0', 'NVIDIA H200')
    assert gpu.link == PcieLink(5, 16, 5, 16) and gpu.link.degraded is False
    assert gpu.link.words() == 'PCIe Gen5 x16 of Gen5 x16'
    assert (gpu.ecc_enabled, gpu.uncorrected_volatile, gpu.uncorrected_aggregate) == \
        (True, 0, 0)
    # Hopper remaps rows; it retires no pages (N/A: not a zero, not read).
    assert (gpu.row_remap_pending, gpu.row_remap_failed, gpu.retirement_pending) == \
        (False, False, None)
    assert gpu.clock_events == ('gpu_idle',)
    assert dict(gpu.clock_event_us)['hw_power_brake'] == 0
    assert (gpu.vbios, gpu.persistence, gpu.driver, gpu.cuda) == \
        ('96.00.A5.00.1A', True, '580.159.04', '13.0')


def test_the_h100_reads_as_the_h200_does():
    (gpu,) = gpu_health.from_smi_xml(H100.read_bytes())
    assert gpu.model.startswith('NVIDIA H100') and gpu.link.degraded is False
    assert gpu.vbios == '96.00.DA.00.0C' and gpu.uncorrected_volatile == 0


def test_two_p100s_of_driver_375_read_in_its_older_layout():
    first, second = gpu_health.from_smi_xml(P100.read_text())
    assert [g.index for g in (first, second)] == [0, 1]
    assert [g.bus_id for g in (first, second)] == ['0000:04:00.0', '0000:82:00.0']
    assert first.link == PcieLink(3, 16, 3, 16)
    # double_bit totals; pages retired (Pascal), no rows remapped (no such element).
    assert (first.uncorrected_volatile, first.uncorrected_aggregate) == (0, 0)
    assert (first.retirement_pending, first.row_remap_pending) == (False, None)
    assert first.clock_events == ('gpu_idle',) and first.clock_event_us == ()
    assert (first.persistence, first.driver, first.cuda) == (False, '375.66', '')


def _h200(old, new):
    text = H200.read_text()
    assert old in text
    return gpu_health.from_smi_xml(text.replace(old, new, 1))[0]


def test_a_link_trained_at_gen4_x8_is_degraded_and_says_so():
    text = H200.read_text().replace('<current_link_width>16x', '<current_link_width>8x', 1)
    (gpu,) = gpu_health.from_smi_xml(text.replace('<current_link_gen>5',
                                                  '<current_link_gen>4', 1))
    assert gpu.link == PcieLink(4, 8, 5, 16) and gpu.link.degraded is True
    assert gpu.link.words() == 'PCIe Gen4 x8 of Gen5 x16'
    assert PcieLink(None, 16, 5, 16).degraded is None


def test_pending_remaps_uncorrected_errors_and_a_power_brake_are_read():
    assert _h200('<remapped_row_pending>No', '<remapped_row_pending>Yes').row_remap_pending
    assert _h200('<dram_uncorrectable>0', '<dram_uncorrectable>3').uncorrected_volatile == 3
    braked = _h200('<clocks_event_reason_hw_power_brake_slowdown>Not Active',
                   '<clocks_event_reason_hw_power_brake_slowdown>Active')
    assert braked.clock_events == ('gpu_idle', 'hw_power_brake_slowdown')
    counted = _h200('<clocks_event_reasons_counters_hw_power_brake>0 us',
                    '<clocks_event_reasons_counters_hw_power_brake>87000000 us')
    assert dict(counted.clock_event_us)['hw_power_brake'] == 87_000_000


def test_a_gpu_that_cannot_say_a_value_gives_none_never_zero():
    gpu = _h200('<current_link_gen>5</current_link_gen>', '<current_link_gen>N/A</current_link_gen>')
    assert gpu.link.generation is None and gpu.link.degraded is None
    assert _h200('<current_ecc>Enabled', '<current_ecc>N/A').ecc_enabled is None


@pytest.mark.parametrize('old, new, said', [
    ('<current_link_width>16x', '<current_link_width>sixteen', 'PCIe width'),
    ('<current_link_width>16x', '<current_link_width>128x', 'PCIe width'),
    ('<current_link_gen>5', '<current_link_gen>-5', 'PCIe gen'),
    ('<dram_uncorrectable>0', '<dram_uncorrectable>1e400', 'uncorrected ECC'),
    ('<dram_uncorrectable>0', f'<dram_uncorrectable>{1 << 70}', 'uncorrected ECC'),
    ('<remapped_row_pending>No', '<remapped_row_pending>Maybe', 'neither Yes nor No'),
    ('<persistence_mode>Enabled', '<persistence_mode>On', 'neither Enabled'),
    ('<clocks_event_reason_hw_slowdown>Not Active',
     '<clocks_event_reason_hw_slowdown>Sometimes', 'neither Active'),
])
def test_a_value_out_of_shape_is_refused_naming_gpu_and_field(old, new, said):
    with pytest.raises(GpuHealthError, match=f'GPU 0 .*{said}'):
        _h200(old, new)


def test_hostile_files_are_refused_with_one_message():
    text = H200.read_text()
    with pytest.raises(GpuHealthError, match='not XML.*cut short'):
        gpu_health.from_smi_xml(text[:len(text) // 2])
    with pytest.raises(GpuHealthError, match='not UTF-8'):
        gpu_health.from_smi_xml(H200.read_bytes().replace(b'NVIDIA H200', b'NVIDIA \xff200'))
    with pytest.raises(GpuHealthError, match='more than'):
        gpu_health.from_smi_xml(b' ' * (gpu_health.MAX_XML_BYTES + 1))
    with pytest.raises(GpuHealthError, match='root is <html>'):
        gpu_health.from_smi_xml('<html><gpu/></html>')
    # An entity that would expand a billion times is no nvidia-smi output either.
    bomb = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            + ''.join(f'<!ENTITY {chr(98 + k)} "{("&" + chr(97 + k) + ";") * 10}">'
                      for k in range(9))
            + ']><nvidia_smi_log><gpu id="x"><product_name>&j;</product_name></gpu>'
              '</nvidia_smi_log>')
    with pytest.raises(GpuHealthError, match='declares XML entities'):
        gpu_health.from_smi_xml(bomb)
