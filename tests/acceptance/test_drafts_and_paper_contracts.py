"""Contracts drafted from what the suite knows (hpcbench.acceptance.drafts), and the papers'
six systems' contracts (contracts/<system>.yaml): each validates against its system, each
value is a figure its paper gives (or, where the paper measured none, its nodes' peak at a
share a paper measured), and its acceptance's dry run writes a job for every entry."""
import json
import subprocess

import pytest

from conftest import BIN, FIXTURES, ROOT
from hpcbench.acceptance import contract, drafts
from hpcbench.results import references

PAPERS = ('chic', 'louhi', 'murska', 'oakforest-pacs', 't2k-tsukuba', 'tsubame')


@pytest.mark.parametrize('system', PAPERS)
def test_a_paper_s_contract_validates_and_each_value_is_cited_from_its_paper(system):
    read = contract.load(ROOT / 'contracts' / f'{system}.yaml', system)
    figures = {(f.check, f.variable, f.partition, f.value)
               for f in references.load(system).figures if f.use == 'reference'}
    for entry in read.entries:
        if entry.source.kind == 'paper':
            assert (entry.check, entry.figure, entry.partitions[0],
                    entry.committed.value) in figures, entry.id
        else:
            # No figure measured as a number: the node's peak at the lowest single-node HPL
            # efficiency a paper measured (TSUBAME's 86.83 %, Table 3-6).
            assert not figures and entry.source.kind == 'published'
            assert entry.committed.value == pytest.approx(
                entry.source.figure * entry.source.factor, rel=1e-3)
            assert entry.source.factor == 0.868 and 'tsubame, Table 3-6' in entry.source.cite


def test_the_committed_paper_contracts_are_the_drafts_of_their_references():
    """A figure changed in references/ and not in contracts/ (or the other way) fails here:
    `hpcbench contract init SYSTEM --force` writes them again."""
    import yaml
    for system in PAPERS:
        committed = yaml.safe_load((ROOT / 'contracts' / f'{system}.yaml').read_text())
        assert committed == drafts.draft(system), system


def test_a_draft_from_a_stored_screen_commits_every_node_at_a_share_of_their_median():
    """The testbed's real make screen (one run of n1..n3, g1, g2): single-node HPL as node
    entries, judged on every node, at 0.9 x the median of the partition's nodes."""
    data = json.loads((FIXTURES / 'report' / 'screen-session.json').read_text())
    entries = drafts.from_session('mycluster', data, 0.9)
    by_id = {e['id']: e for e in entries}
    batch = by_id['HplNodeScreen-gflops-batch-openmpi']
    assert (batch['scope'], batch['partitions'], batch['rule']) == ('node', ['batch'],
                                                                    {'every': True})
    assert batch['source']['figure'] == 78.402 and batch['committed']['value'] == round(
        0.9 * 78.402, 2)
    assert batch['committed']['unit'] == 'GFLOP/s'
    # Derived ratios are not committed by a draft.
    assert not [e for e in entries if e['figure'] == 'efficiency']
    contract.from_data({'system': 'mycluster', 'entries': entries}, 'draft', 'mycluster')


def test_a_system_with_nothing_to_draw_from_is_one_message(tmp_path, monkeypatch):
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    # This host as a node without GPUs, whatever it has.
    monkeypatch.setenv('HPCBENCH_NVIDIA_SMI', '/bin/false')
    done = subprocess.run([str(BIN / 'hpcbench'), 'contract', 'init', 'local', '--output',
                           str(tmp_path / 'local.yaml')], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 2
    assert "error: local has no paper's figures, no GPU of a published model and no stored " \
           'session to draw a contract from' in done.stderr, done.stderr
    assert not (tmp_path / 'local.yaml').exists()


def test_a_gpu_node_and_no_baseline_is_drafted_from_what_is_published(tmp_path, monkeypatch):
    """This host described as an 8 x H100 SXM node (its nvidia-smi: the H100 node's real query
    row as GPUs 0 to 7, the published 8 x H100 topology): with no stored session, its draft
    commits it to Azure's ND H100 v5 figures, and its datasheet at 0.75 where Azure commits
    none. The testbed's GPU nodes are stand-ins that run no GPU program: nothing of theirs."""
    from hpcbench.stack import testbed_system
    header, row = (FIXTURES / 'gpu' / 'h100' / 'nvidia-smi-query.csv').read_text().splitlines()
    query = tmp_path / 'query.csv'
    query.write_text('\n'.join([header, *(row.replace('0, ', f'{i}, ', 1) for i in range(8))])
                     + '\n')
    tool = tmp_path / 'nvidia-smi'
    tool.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat "{query}";; '
                    f'topo) cat "{testbed_system.GPU_TOPOLOGY_FILE}";; *) exit 9;; esac\n')
    tool.chmod(0o755)
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    monkeypatch.setenv('HPCBENCH_NVIDIA_SMI', str(tool))
    done = subprocess.run([str(BIN / 'hpcbench'), 'contract', 'init', 'local', '--output',
                           str(tmp_path / 'local.yaml')], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    read = contract.load(tmp_path / 'local.yaml', 'local')
    committed = {(e.check, e.figure): (str(e.scope), e.committed.value, e.source.kind)
                 for e in read.entries}
    assert committed[('NcclTestsCheck', 'busbw')] == ('node', 460.0, 'published')
    assert committed[('DeviceBufferPairCheck', 'bandwidth')] == ('gpu_pair', 335.0, 'published')
    assert committed[('BabelStreamCheck', 'triad_bandwidth')] == ('gpu', 2512.0, 'datasheet')
    monkeypatch.delenv('HPCBENCH_NVIDIA_SMI')
    testbed = subprocess.run([str(BIN / 'hpcbench'), 'contract', 'init', 'testbed', '--output',
                              str(tmp_path / 'testbed.yaml')], capture_output=True, text=True,
                             cwd=ROOT, timeout=300)
    assert testbed.returncode == 2 and 'no GPU of a published model' in testbed.stderr, \
        testbed.stderr


@pytest.mark.parametrize('system', PAPERS)
def test_a_paper_s_acceptance_dry_run_writes_a_job_for_every_entry(system, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv('HPCBENCH_VAR', str(tmp_path / 'var'))
    done = subprocess.run([str(BIN / 'hpcbench'), 'accept', '--system', system, '--dry-run',
                           '--output', str(tmp_path / 'acceptance')], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'dry run: every job written' in done.stdout
    jobs = list((tmp_path / 'var' / 'stage').rglob('rfm_job.sh'))
    read = contract.load(ROOT / 'contracts' / f'{system}.yaml', system)
    assert len(jobs) >= len({(e.check, tuple(sorted(e.parameters.items())))
                             for e in read.entries})
