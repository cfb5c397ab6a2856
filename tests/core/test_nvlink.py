"""Each GPU's NVLinks as `nvidia-smi nvlink -s` prints them (hpcbench.core.nvlink), read
from real outputs (tests/fixtures/health/README.md), into a node's facts and figures."""
import shutil

import pytest

from conftest import FIXTURES
from hpcbench.core import fact_figures, node_facts, nvlink

HEALTH = FIXTURES / 'health'


def test_a_v100_with_two_links_down_and_gb200s_with_all_up():
    (v100,) = nvlink.parse((HEALTH / 'nvlink-s-v100-azhpc-73.txt').read_bytes())
    assert (v100.index, v100.model, len(v100.links), v100.inactive) == (
        3, 'Tesla V100-SXM2-32GB', 6, (3, 5))
    assert v100.links[0] == (0, 25.781)
    first, second = nvlink.parse((HEALTH / 'nvlink-s-gb200-k8s-test-infra-371.txt')
                                 .read_text())
    assert (first.index, first.model, len(first.links), first.inactive) == (
        0, 'NVIDIA GB200', 18, ())
    assert {rate for _, rate in first.links} == {53.125}
    assert (second.index, len(second.links)) == (1, 2)     # the thread shows two of its 18


@pytest.mark.parametrize('text, said', [
    ('Link 0: 25.781 GB/s\n', "line 1 \\('Link 0: 25.781 GB/s'\\) is neither"),
    ('GPU 0: X (UUID: GPU-1)\n  Link 0: fast\n', 'line 2'),
    ('GPU 0: X (UUID: GPU-1)\n' + '  Link 1: 1 GB/s\n' * 65, 'more than 64 links'),
    (b'GPU 0: \xff', 'not UTF-8'),
    (b'x' * (2 << 20), 'more than any node prints'),
])
def test_an_output_that_is_none_is_refused(text, said):
    with pytest.raises(nvlink.NvlinkError, match=said):
        nvlink.parse(text)


def test_a_node_s_gpus_figures_count_its_links_down_and_a_failing_unit_says_so(tmp_path):
    """Two P100s (nvidia-smi -q -x) whose nvlink -s the V100's output stands for, renumbered
    GPU 1: GPU 1 has two of six links down."""
    root = tmp_path / 'n7'
    sources = root / node_facts.SOURCES
    sources.mkdir(parents=True)
    shutil.copy(HEALTH / 'nvidia-smi-q-p100x2.xml', sources / node_facts.SMI_FILE)
    text = (HEALTH / 'nvlink-s-v100-azhpc-73.txt').read_text().replace('GPU 3:', 'GPU 1:')
    (sources / node_facts.NVLINK_FILE).write_text(text)
    facts = node_facts.read(root, 'n7')
    assert [(g.index, g.inactive) for g in facts.nvlinks] == [(1, (3, 5))]
    found = fact_figures.figures(facts, facts).devices
    assert (found['n7:gpu1']['nvlinks'], found['n7:gpu1']['nvlinks_inactive']) == (6, 2)
    assert 'nvlinks' not in found['n7:gpu0']          # not listed: not read, never 0
    assert fact_figures.evidence({}, found) == ['GPU 1 of n7: 2 of 6 NVLinks inactive']
    # An output that is none: said unread, the GPUs read all the same.
    (sources / node_facts.NVLINK_FILE).write_text('GPU 1: broken\n')
    facts = node_facts.read(root, 'n7')
    assert 'is neither' in dict(facts.unread)['nvidia-smi nvlink -s'] and len(facts.gpus) == 2
    assert 'nvlinks' not in fact_figures.figures(facts, facts).devices['n7:gpu1']
