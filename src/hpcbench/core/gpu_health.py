"""A GPU's own health, as its driver reports it in `nvidia-smi -q -x`: the PCIe link it
trained at beside the one it can train at, its uncorrected ECC errors, pages waiting to be
retired and rows waiting to be remapped (or that could not be), the reasons its clocks are
held at this moment and for how long they were since the driver loaded, its VBIOS, driver
and CUDA versions and persistence mode (issue 73).

These are the faults that raise no error and pass a short benchmark: a link trained at x8
or Gen3 (a GPU that "trained for 3.5 hours on a PCIe link degraded to about 8 GB/s of its
64"), pending row remaps, a power brake. A value the driver reports as N/A is None (the
GPU cannot say it: a fact NOT_RUN, never a pass); a value that is neither is refused,
naming the GPU and the field.

Both layouts NVIDIA's drivers write are read: ECC errors as `single_bit`/`double_bit`
totals (drivers 375 to 470: tests/fixtures/health/README.md) or per SRAM/DRAM (drivers
510 and later), clock reasons as `clocks_throttle_reasons` or `clocks_event_reasons`.

Standard library only: it runs on compute nodes too."""
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from hpcbench.core.accelerators import AcceleratorError

# An 8-GPU node's `nvidia-smi -q -x` is about 250 kB (30 kB a GPU); more than this is no
# output of it.
MAX_XML_BYTES = 8 << 20
# The most a counter of a GPU counts (an unsigned 64-bit register).
MAX_COUNT = (1 << 64) - 1


class GpuHealthError(AcceleratorError):
    pass


@dataclass(frozen=True)
class PcieLink:
    """A device's PCIe link: its generation and width now, and the most it can train at
    (None where not reported)."""
    generation: int = None
    width: int = None
    max_generation: int = None
    max_width: int = None

    @property
    def degraded(self):
        """Whether it trained below what it can (None where either side is unknown)."""
        pairs = ((self.generation, self.max_generation), (self.width, self.max_width))
        if any(now is None or most is None for now, most in pairs):
            return None
        return any(now < most for now, most in pairs)

    def words(self):
        """`PCIe Gen4 x8 of Gen5 x16`."""
        def link(gen, width):
            return f'Gen{"?" if gen is None else gen} x{"?" if width is None else width}'
        return (f'PCIe {link(self.generation, self.width)} of '
                f'{link(self.max_generation, self.max_width)}')


@dataclass(frozen=True)
class GpuHealth:
    """What one GPU's driver says of its health at one moment."""
    index: int
    bus_id: str
    uuid: str
    model: str
    link: PcieLink
    ecc_enabled: bool = None
    uncorrected_volatile: int = None        # since the driver loaded
    uncorrected_aggregate: int = None       # over the GPU's life
    retirement_pending: bool = None         # pages waiting for a reset to be retired
    row_remap_pending: bool = None          # rows waiting for a reset to be remapped
    row_remap_failed: bool = None           # a remap that could not be made
    clock_events: tuple = ()                # the reasons holding its clocks now
    clock_event_us: tuple = ()              # ((reason, microseconds since load), ...)
    vbios: str = ''
    persistence: bool = None
    driver: str = ''
    cuda: str = ''


def from_smi_xml(text):
    """The GpuHealth of every GPU of `nvidia-smi -q -x` (str, or bytes in UTF-8), in the
    order printed; GpuHealthError where it is no such output or a value is out of shape."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_XML_BYTES:
            raise GpuHealthError(f'nvidia-smi -q -x: {len(text)} bytes, more than the '
                                 f'{MAX_XML_BYTES} any node prints: not its output')
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as err:
            raise GpuHealthError(f'nvidia-smi -q -x: not UTF-8 ({err.reason} at byte '
                                 f'{err.start})') from None
    if len(text) > MAX_XML_BYTES:
        raise GpuHealthError(f'nvidia-smi -q -x: {len(text)} characters, more than the '
                             f'{MAX_XML_BYTES} any node prints: not its output')
    if '<!ENTITY' in text:
        # nvidia-smi names its DTD and declares nothing: entities are how a file makes a
        # parser expand it a billion times.
        raise GpuHealthError('nvidia-smi -q -x: it declares XML entities, which nvidia-smi '
                             'never does: not its output')
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as err:
        raise GpuHealthError(f'nvidia-smi -q -x: not XML ({err}): cut short, or not its '
                             'output') from None
    if root.tag != 'nvidia_smi_log':
        raise GpuHealthError(f'nvidia-smi -q -x: its root is <{root.tag}>, not '
                             '<nvidia_smi_log>')
    driver = _text(root, 'driver_version')
    cuda = _text(root, 'cuda_version')
    return tuple(_gpu(gpu, number, driver, cuda)
                 for number, gpu in enumerate(root.findall('gpu')))


def _gpu(gpu, number, driver, cuda):
    where = f'GPU {number} ({gpu.get("id", "no bus id")})'
    index = _count(gpu.findtext('minor_number'), f'{where} minor_number')
    link = gpu.find('pci/pci_gpu_link_info')
    return GpuHealth(
        index=number if index is None else index,
        bus_id=gpu.get('id', ''), uuid=_text(gpu, 'uuid'), model=_text(gpu, 'product_name'),
        link=PcieLink(
            generation=_count(_find(link, 'pcie_gen/current_link_gen'), f'{where} PCIe gen'),
            width=_width(_find(link, 'link_widths/current_link_width'), where),
            max_generation=_count(_find(link, 'pcie_gen/max_link_gen'),
                                  f'{where} PCIe max gen'),
            max_width=_width(_find(link, 'link_widths/max_link_width'), where)),
        ecc_enabled=_enabled(gpu.findtext('ecc_mode/current_ecc'), f'{where} ECC mode'),
        uncorrected_volatile=_uncorrected(gpu.find('ecc_errors/volatile'), where),
        uncorrected_aggregate=_uncorrected(gpu.find('ecc_errors/aggregate'), where),
        retirement_pending=_yes(gpu.findtext('retired_pages/pending_retirement'),
                                f'{where} pending_retirement'),
        row_remap_pending=_yes(gpu.findtext('remapped_rows/remapped_row_pending'),
                               f'{where} remapped_row_pending'),
        row_remap_failed=_yes(gpu.findtext('remapped_rows/remapped_row_failure'),
                              f'{where} remapped_row_failure'),
        clock_events=_active_reasons(gpu, where),
        clock_event_us=_reason_times(gpu, where),
        vbios=_text(gpu, 'vbios_version'),
        persistence=_enabled(gpu.findtext('persistence_mode'), f'{where} persistence mode'),
        driver=driver, cuda=cuda)


def _find(element, path):
    return None if element is None else element.findtext(path)


def _text(element, path):
    value = (element.findtext(path) or '').strip()
    return '' if value == 'N/A' else value


def _missing(text):
    return text is None or text.strip() in ('', 'N/A', '[N/A]', 'Not Supported',
                                            '[Not Supported]', 'Unknown Error')


def _count(text, what):
    """A whole count (a generation, an error count), None where not reported."""
    if _missing(text):
        return None
    value = text.strip()
    if not value.isdigit() or int(value) > MAX_COUNT:
        raise GpuHealthError(f'nvidia-smi -q -x: {what} {value[:40]!r} is no count')
    return int(value)


def _width(text, where):
    """'16x' -> 16."""
    if _missing(text):
        return None
    value = text.strip()
    digits = value[:-1] if value.endswith('x') else value
    if not digits.isdigit() or not 1 <= int(digits) <= 64:
        raise GpuHealthError(f'nvidia-smi -q -x: {where} PCIe width {value[:40]!r} is no '
                             'link width (1x to 64x)')
    return int(digits)


def _enabled(text, what):
    if _missing(text):
        return None
    value = text.strip()
    if value not in ('Enabled', 'Disabled'):
        raise GpuHealthError(f'nvidia-smi -q -x: {what} {value[:40]!r} is neither Enabled '
                             'nor Disabled')
    return value == 'Enabled'


def _yes(text, what):
    if _missing(text):
        return None
    value = text.strip()
    if value not in ('Yes', 'No'):
        raise GpuHealthError(f'nvidia-smi -q -x: {what} {value[:40]!r} is neither Yes nor '
                             'No')
    return value == 'Yes'


# The uncorrected counts of each layout: drivers 375 to 470 total them per kind of error;
# 510 and later count SRAM (by how it was caught) and DRAM apart.
_LEGACY_UNCORRECTED = 'double_bit/total'
_UNCORRECTED = ('sram_uncorrectable_parity', 'sram_uncorrectable_secded',
                'sram_uncorrectable', 'dram_uncorrectable')


def _uncorrected(errors, where):
    """The uncorrected ECC errors of a `volatile` or `aggregate` element: None where not
    reported (ECC off, or a GPU without it)."""
    if errors is None:
        return None
    what = f'{where} uncorrected ECC errors ({errors.tag})'
    if errors.find('double_bit') is not None:
        return _count(errors.findtext(_LEGACY_UNCORRECTED), what)
    counts = [_count(errors.findtext(name), what) for name in _UNCORRECTED
              if errors.find(name) is not None]
    if not counts or all(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None)


def _reasons_element(gpu):
    for tag in ('clocks_event_reasons', 'clocks_throttle_reasons'):
        found = gpu.find(tag)
        if found is not None:
            return found, tag[:-1] + '_'
    return None, ''


def _active_reasons(gpu, where):
    """The reasons holding the GPU's clocks now ('hw_power_brake_slowdown', 'gpu_idle'),
    by the names of either layout."""
    reasons, prefix = _reasons_element(gpu)
    if reasons is None:
        return ()
    active = []
    for reason in reasons:
        state = (reason.text or '').strip()
        if state not in ('Active', 'Not Active', 'N/A'):
            raise GpuHealthError(f'nvidia-smi -q -x: {where} {reason.tag} {state[:40]!r} is '
                                 'neither Active nor Not Active')
        if state == 'Active':
            active.append(reason.tag[len(prefix):] if reason.tag.startswith(prefix)
                          else reason.tag)
    return tuple(active)


_COUNTER_PREFIX = 'clocks_event_reasons_counters_'


def _reason_times(gpu, where):
    """((reason, microseconds its clocks were held by it since the driver loaded), ...):
    drivers 535 and later count them."""
    counters = gpu.find('clocks_event_reasons_counters')
    if counters is None:
        return ()
    times = []
    for counter in counters:
        text = (counter.text or '').strip()
        if _missing(text):
            continue
        number = text[:-3] if text.endswith(' us') else text
        value = _count(number, f'{where} {counter.tag}')
        name = counter.tag[len(_COUNTER_PREFIX):] if counter.tag.startswith(
            _COUNTER_PREFIX) else counter.tag
        times.append((name, value))
    return tuple(times)
