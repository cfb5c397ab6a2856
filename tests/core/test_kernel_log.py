"""XID events (hpcbench.core.kernel_log) read from real kernel logs of other sites' GPU nodes
(tests/fixtures/health/README.md): a Dell XE9680 whose GPU's firmware stopped answering
(XID 119) and a node whose GPU fell off the bus without an XID line; which of them a run saw;
and logs no kernel writes."""
import pytest

from conftest import FIXTURES
from hpcbench.core import kernel_log
from hpcbench.core.kernel_log import KernelLogError, Xid

XE9680 = FIXTURES / 'health' / 'dmesg-xid-119-xe9680.log'
FALLEN = FIXTURES / 'health' / 'dmesg-fallen-off-nvsentinel-155.log'


def test_the_xe9680_s_five_xid_119_lines_are_read_with_gpu_process_and_stamp():
    found = kernel_log.xids(XE9680.read_text())
    assert len(found) == 5 and {x.code for x in found} == {119}
    assert {x.bus for x in found} == {'0000:9b:00'}
    first = found[0]
    assert (first.pid, first.process, first.stamp) == \
        ('2024380', 'nvidia-smi', '[Sun Feb 23 16:24:18 2025]')
    assert first.said.startswith('Timeout after 6s of waiting for RPC response from GPU4 GSP!')
    assert [x.process for x in found[-2:]] == ['cache_mgr_main', 'gpud']
    assert first.words().startswith('XID 119 on the GPU at PCI 0000:9b:00 (nvidia-smi): '
                                    'Timeout after 6s')


def test_a_gpu_fallen_off_the_bus_without_an_xid_is_xid_79():
    (fallen,) = kernel_log.xids(FALLEN.read_bytes())
    assert (fallen.code, fallen.bus, fallen.inferred, fallen.stamp) == \
        (79, '0000:b3:00', True, '[ 1843.308145]')
    # A driver that printed its XID 79 too is one event.
    text = FALLEN.read_text() + ('[ 1843.5] NVRM: Xid (PCI:0000:b3:00): 79, pid=\'<unknown>\', '
                                 'name=<unknown>, GPU has fallen off the bus.\n')
    (told,) = kernel_log.xids(text)
    assert (told.code, told.inferred, told.pid) == (79, False, "'<unknown>'")


@pytest.mark.parametrize('line, expected', [
    ('Feb 14 05:03:41 gpu-1 kernel: NVRM: Xid (PCI:0000:ab:00): 79, pid=0, name=x, '
     'GPU has fallen off the bus.',
     Xid('0000:ab:00', 79, 'GPU has fallen off the bus.', '0', 'x',
         'Feb 14 05:03:41 gpu-1 kernel:')),
    ('[ 12.5] NVRM: Xid (0000:03:00): 13, 0003 00000000 0000a1c0 00000144 00000000',
     Xid('0000:03:00', 13, '0003 00000000 0000a1c0 00000144 00000000', stamp='[ 12.5]')),
])
def test_journal_lines_and_old_drivers_lines_are_read(line, expected):
    assert kernel_log.xids(line) == [expected]


def test_a_run_sees_only_the_lines_the_log_gained_during_it():
    lines = XE9680.read_text().splitlines()
    before = '\n'.join(lines[:-3])
    during = kernel_log.xids_during(before, '\n'.join(lines))
    assert [x.process for x in during] == ['cache_mgr_main', 'gpud']
    # The ring dropped its oldest lines meanwhile: nothing old comes back as new.
    assert kernel_log.xids_during(before, '\n'.join(lines[10:])) == during
    # A line printed again during the run is new.
    again = '\n'.join(lines + [lines[2]])
    assert [x.stamp for x in kernel_log.xids_during('\n'.join(lines), again)] == \
        ['[Sun Feb 23 16:24:18 2025]']
    assert kernel_log.xids_during(XE9680.read_text(), XE9680.read_text()) == []


def test_a_log_that_is_no_text_is_refused():
    with pytest.raises(KernelLogError, match='not UTF-8'):
        kernel_log.xids(b'NVRM: Xid \xff')
    with pytest.raises(KernelLogError, match='more than'):
        kernel_log.xids(b'x' * (kernel_log.MAX_LOG_BYTES + 1))
