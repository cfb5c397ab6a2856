"""A kernel file of a node (a sysfs attribute, a /proc file) read for the health readers
(hpcbench.core.nic_health, hpcbench.core.node_health): through paths.read_regular, so that
a FIFO or a device planted where an attribute should be is refused, never waited on, and a
file larger than the kernel writes is refused; None where the kernel will not give it (absent,
or EINVAL: a counter a driver lacks), never a default.

Standard library only: it runs on compute nodes too."""
from hpcbench.core import paths

MAX_COUNT = (1 << 64) - 1


def text(path, max_bytes, error):
    """The file's text, stripped (None where it cannot be read or is empty); `error` (an
    exception class) naming it where it is no kernel file: not regular, too large, not UTF-8."""
    try:
        data = paths.read_regular(path, max_bytes, 'a kernel file')
    except paths.UnreadableFileError as err:
        raise error(str(err)) from None
    except OSError:
        return None
    try:
        return data.decode('utf-8').strip() or None
    except UnicodeDecodeError:
        raise error(f'{path}: not UTF-8 text: not a kernel file') from None


def count(path, max_bytes, error):
    """The file's whole count (a counter is 64 bits), None where not read."""
    value = text(path, max_bytes, error)
    if value is None:
        return None
    if not value.isdigit() or int(value) > MAX_COUNT:
        raise error(f'{path}: {value[:60]!r} is no count')
    return int(value)
