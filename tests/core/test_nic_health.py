"""A node's InfiniBand ports (hpcbench.core.nic_health) read from a sysfs tree of real values
(two Mellanox HCAs of prometheus/procfs's fixture, tests/fixtures/health/README.md), from
this machine's own /sys, and from copies broken as a failing port or a hostile file would
break them; counters read before and after a run."""
import shutil

import pytest

from conftest import FIXTURES
from hpcbench.core import nic_health
from hpcbench.core.nic_health import NicHealthError

PROCFS = FIXTURES / 'health' / 'procfs-sys'


def test_the_ports_of_two_hcas_are_read_with_their_rate_width_and_state():
    ports = nic_health.read_ports(PROCFS)
    assert [p.name for p in ports] == ['mlx4_0/1', 'mlx4_0/2', 'mlx5_0/1']
    qdr = ports[0]
    assert (qdr.state, qdr.physical_state, qdr.link_layer) == ('ACTIVE', 'LinkUp', 'InfiniBand')
    assert (qdr.rate_gbps, qdr.width, qdr.speed) == (40.0, 4, 'QDR')
    assert qdr.rate_words() == '40 Gb/s (4X QDR)'
    assert (qdr.firmware, qdr.model) == ('2.31.5050', 'MT4099')
    assert qdr.counter('symbol_error') == 0 and qdr.counter('link_downed') == 0
    # mlx4_0's second port ends its link_layer with an empty line, as that node's did.
    assert ports[1].link_layer == 'InfiniBand'
    # The ConnectX-4 trained one lane of four: 25 Gb/s (1X EDR).
    assert (ports[2].rate_gbps, ports[2].width, ports[2].speed) == (25.0, 1, 'EDR')


def test_this_machine_s_own_sys_reads_without_error():
    for port in nic_health.read_ports('/sys'):
        assert port.device and port.port >= 1


def test_a_node_without_rdma_devices_has_no_ports(tmp_path):
    assert nic_health.read_ports(tmp_path) == ()


@pytest.mark.parametrize('text, expected', [
    ('400 Gb/sec (4X NDR)', (400.0, 4, 'NDR')), ('200 Gb/sec (2X NDR)', (200.0, 2, 'NDR')),
    ('56 Gb/sec (4X FDR)', (56.0, 4, 'FDR')), ('40 Gb/sec (4X FDR10)', (40.0, 4, 'FDR10')),
    ('2.5 Gb/sec (1X SDR)', (2.5, 1, 'SDR')), ('10 Gb/sec (4X)', (10.0, 4, None)),
    ('100 Gb/sec', (100.0, None, None)),
])
def test_every_rate_the_kernel_writes_is_read(text, expected):
    assert nic_health.parse_rate(text) == expected


@pytest.mark.parametrize('text', ['fast', '400 Gb/s (4X NDR)', '0 Gb/sec (4X NDR)',
                                  '400 Gb/sec (64X NDR)', '1e9 Gb/sec'])
def test_a_rate_that_is_no_rate_is_refused(text):
    with pytest.raises(NicHealthError, match='no port'):
        nic_health.parse_rate(text, 'n1 rate')


def _copy(tmp_path):
    root = tmp_path / 'sys'
    shutil.copytree(PROCFS, root)
    return root, root / 'class' / 'infiniband' / 'mlx5_0' / 'ports' / '1'


def test_symbol_errors_rising_over_a_run_are_its_increase(tmp_path):
    root, port = _copy(tmp_path)
    before = nic_health.read_ports(root)[2]
    (port / 'counters' / 'symbol_error').write_text('1730\n')
    (port / 'counters' / 'link_downed').write_text('2\n')
    after = nic_health.read_ports(root)[2]
    rose = {i.counter: i.increase for i in nic_health.increase(before, after)}
    assert (rose['symbol_error'], rose['link_downed'], rose['port_rcv_errors']) == (1730, 2, 0)


def test_a_counter_reset_or_missing_is_unknown_never_zero(tmp_path):
    root, port = _copy(tmp_path)
    (port / 'counters' / 'symbol_error').write_text('50\n')
    before = nic_health.read_ports(root)[2]
    (port / 'counters' / 'symbol_error').write_text('3\n')
    (port / 'counters' / 'link_downed').unlink()
    after = nic_health.read_ports(root)[2]
    said = {i.counter: i for i in nic_health.increase(before, after)}
    assert said['symbol_error'].increase is None and 'reset' in said['symbol_error'].why
    assert said['link_downed'].increase is None
    assert said['link_downed'].why == 'not read after the run'
    with pytest.raises(NicHealthError, match='not the same port'):
        nic_health.increase(before, nic_health.read_ports(root)[0])


def test_a_fifo_where_a_counter_should_be_is_refused_never_waited_on(tmp_path):
    import os
    root, port = _copy(tmp_path)
    (port / 'counters' / 'symbol_error').unlink()
    os.mkfifo(port / 'counters' / 'symbol_error')
    with pytest.raises(NicHealthError, match='symbol_error: not a regular file'):
        nic_health.read_ports(root)


def test_a_port_down_and_polling_reads_so(tmp_path):
    root, port = _copy(tmp_path)
    (port / 'state').write_text('1: DOWN\n')
    (port / 'phys_state').write_text('2: Polling\n')
    down = nic_health.read_ports(root)[2]
    assert (down.state, down.physical_state) == ('DOWN', 'Polling')


@pytest.mark.parametrize('name, data, said', [
    ('state', b'ACTIVE\n', 'no port state'),
    ('rate', b'lots\n', 'no port rate'),
    ('counters/symbol_error', b'-4\n', "'-4' is no count"),
    ('counters/symbol_error', b'\xff\xfe\n', 'not UTF-8'),
    ('counters/symbol_error', b'1' * 5000, 'more than a kernel file holds'),
])
def test_a_file_out_of_shape_is_refused_naming_it(tmp_path, name, data, said):
    root, port = _copy(tmp_path)
    (port / name).write_bytes(data)
    with pytest.raises(NicHealthError, match=f'mlx5_0/ports/1/{name}: .*{said}|'
                                             f'mlx5_0/ports/1/{name}: {said}'):
        nic_health.read_ports(root)


def test_ibstat_of_two_roce_ports_reads_their_state_rate_and_firmware():
    ports = nic_health.parse_ibstat((FIXTURES / 'health' / 'ibstat-l2fwd-nv-6.txt').read_text())
    assert [p.name for p in ports] == ['mlx5_0/1', 'mlx5_1/1']
    first = ports[0]
    assert (first.state, first.physical_state, first.link_layer) == ('ACTIVE', 'LinkUp',
                                                                     'Ethernet')
    assert (first.rate_gbps, first.width, first.firmware, first.model) == \
        (100.0, None, '22.32.2004', 'MT4125')
    assert first.counters == ()


def test_ibstat_of_a_port_down_and_disabled_and_cut_short_keeps_what_it_said():
    ports = nic_health.parse_ibstat(
        (FIXTURES / 'health' / 'ibstat-mooncake-1999.txt').read_text())
    assert [(p.name, p.state, p.rate_gbps) for p in ports] == [
        ('mlx5_0/1', 'ACTIVE', 200.0), ('mlx5_1/1', 'ACTIVE', 200.0),
        ('mlx5_10/1', 'DOWN', None)]
    assert ports[2].physical_state == 'Disabled' and ports[2].link_layer is None
    assert ports[2].model == 'MT4125' and ports[0].model == 'MT4129'


@pytest.mark.parametrize('text, said', [
    ('Port 1:\n State: Active\n', 'before any "CA" line'),
    ("CA 'mlx5_0'\n Port 1:\n  Rate: fast\n", 'no port rate'),
    ("CA 'mlx5_0'\n Port 1:\n  ???\n", 'no "name: value"'),
    ('x' * (nic_health.MAX_IBSTAT_BYTES + 1), 'more than any node prints'),
])
def test_text_that_is_no_ibstat_output_is_refused(text, said):
    with pytest.raises(NicHealthError, match=said):
        nic_health.parse_ibstat(text)
