"""IOR options, sizes, the free-space guard and parsing (hpcbench.benchmarks.ior) on real
outputs captured here: IOR 4.0.0 built by Spack against Open MPI, 2 tasks, 64 MiB per task,
1 MiB transfers, 2 repetitions (the command line is in each output), and broken copies of
them."""
import re
import signal
import subprocess

import pytest

from conftest import FIXTURES, signals_as_from_a_terminal
from hpcbench.benchmarks import ior

OUTPUTS = {name: (FIXTURES / 'ior' / f'openmpi-2-tasks-{name}.out').read_text()
           for name in ('file-per-process-posix', 'shared-segmented-mpiio',
                        'shared-strided-mpiio-collective', 'file-per-process-posix-odirect')}
FAILED = (FIXTURES / 'ior' / 'openmpi-2-tasks-missing-directory.out').read_text()


def _mutations(text):
    return {
        'no summary': text[:text.index('Summary of all tests')],
        'no read phase': text[:text.index('Summary')] + re.sub(
            r'^read  .*\n', '', text[text.index('Summary'):], flags=re.M),
        'NaN in a result': re.sub(r'^(write +)\S+', r'\1nan', text, 1, re.M),
        'NaN in the summary': text.replace('write        1864.15', 'write            nan'),
        'a repetition missing': re.sub(r'^read .* 1   \n', '', text, 1, re.M),
        'truncated row': re.sub(r'^(read .*) +\S+ +\S+$', r'\1', text, 1, re.M),
        'not finished': re.sub(r'^Finished .*\n?', '', text, flags=re.M),
        'fewer repetitions': re.sub(r'^((?:write|read)(?: +\S+){14}) +2 ', r'\1    1 ',
                                    text, flags=re.M),
    }


MUTATIONS = list(_mutations(OUTPUTS['file-per-process-posix']))


@pytest.mark.parametrize('name', OUTPUTS)
def test_real_outputs_parse(name):
    phases = ior.parse(OUTPUTS[name], tasks=2, repetitions=2)
    assert set(phases) == {'write', 'read'}
    for phase in phases.values():
        assert phase.min_mib_s <= phase.mean_mib_s <= phase.max_mib_s


def test_figures_are_iors_summary():
    phases = ior.parse(OUTPUTS['file-per-process-posix'], 2, 2)
    assert (phases['write'].max_mib_s, phases['write'].mean_mib_s) == (1864.15, 1259.07)
    assert phases['read'].max_mib_s == 28679.00
    # The reads of a 128 MiB file just written came from the page cache (28 GiB/s); with
    # O_DIRECT they reached the disk.
    direct = ior.parse(OUTPUTS['file-per-process-posix-odirect'], 2, 2)
    assert direct['read'].max_mib_s < phases['read'].max_mib_s / 10


@pytest.mark.parametrize('mutation', MUTATIONS)
def test_broken_real_outputs_fail(mutation):
    with pytest.raises(ior.IorOutputError):
        ior.parse(_mutations(OUTPUTS['file-per-process-posix'])[mutation], 2, 2)


def test_a_real_failure_is_reported_with_iors_message():
    with pytest.raises(ior.IorOutputError, match=r'IOR reported: ERROR: open64\("/tmp/iortest/'
                                                 r'nodir/testfile.00000000", 66, 0664\) failed'):
        ior.parse(FAILED, 2, 2)


def test_data_that_did_not_verify_fails():
    # IOR 4.0.0 with -W/-R prints this (CountErrors) and then its figures as usual.
    text = OUTPUTS['file-per-process-posix']
    first_read = text.index('read      28101')
    broken = (text[:first_read] + 'WARNING: Incorrect data on read (3 errors found).\n\n'
              'Used Time Stamp 20070101 (0x1323ea5) for Data Signature\n' + text[first_read:])
    with pytest.raises(ior.IorOutputError, match=r'IOR reported: WARNING: Incorrect data on '
                                                 r'read \(3 errors found\)'):
        ior.parse(broken, 2, 2)


def test_task_count_must_be_the_jobs():
    with pytest.raises(ior.IorOutputError, match='2 tasks x 2 repetitions, the job asked for '
                                                 '4 x 2'):
        ior.parse(OUTPUTS['shared-segmented-mpiio'], 4, 2)


def test_options_reproduce_the_captured_runs():
    block, transfer = 64 * ior.MIB, ior.MIB
    assert ior.ior_options('file-per-process', 'posix', block, transfer) == [
        '-a', 'POSIX', '-F', '-b', str(block), '-s', '1', '-t', str(transfer)]
    assert ior.phase_options('reorder', 2) == ([['-w', '-r', '-e', '-C', '-i', '2']], 1)
    assert ior.phase_options('drop-caches', 3) == (
        [['-w', '-e', '-k', '-i', '1'], ['-r', '-i', '1']], 3)
    strided = ior.ior_options('shared-strided', 'mpiio-collective', block, transfer)
    assert strided[:7] == ['-a', 'MPIIO', '-c', '-b', str(transfer), '-s', '64']
    with pytest.raises(ior.IorInputError, match='whole number'):
        ior.ior_options('shared-strided', 'posix', block + 1, transfer)
    with pytest.raises(ior.IorInputError, match='pattern'):
        ior.ior_options('random', 'posix', block, transfer)


def test_block_size_outgrows_the_page_cache():
    block = ior.block_size(24 * ior.GIB, 2, ior.MIB)
    assert block % ior.MIB == 0 and 2 * block >= 1.5 * 24 * ior.GIB
    assert block - ior.MIB < 1.5 * 24 * ior.GIB / 2


def test_space_guard_refuses_what_does_not_fit():
    ior.check_space('/scratch', 10 * ior.GIB, 12 * ior.GIB)
    with pytest.raises(ior.IorInputError, match=r'IOR would write 36\.0 GiB to /scratch, which '
                                                r'has 20\.0 GiB free'):
        ior.check_space('/scratch', 36 * ior.GIB, 20 * ior.GIB)
    # The margin: 10 % of the data, at least 1 GiB.
    with pytest.raises(ior.IorInputError):
        ior.check_space('/scratch', 10 * ior.GIB, 10.5 * ior.GIB)
    # Small sizes in a unit that shows them.
    with pytest.raises(ior.IorInputError, match=r'would write 600\.0 MiB to /s, which has '
                                                r'100\.0 MiB free; .* needs 1\.6 GiB'):
        ior.check_space('/s', 600 * ior.MIB, 100 * ior.MIB)


DROP_CACHES_OUTPUT = (FIXTURES / 'ior' /
                      'mpich-2-tasks-shared-strided-mpiio-collective-drop-caches-3.out').read_text()


def test_a_drop_caches_job_combines_its_write_and_read_runs():
    """IorCheck through the suite on MPICH: three write runs and three read runs of one
    repetition each, the page cache dropped before each read."""
    phases = ior.parse(DROP_CACHES_OUTPUT, tasks=2, repetitions=3, runs=3)
    # Each run's result line (11 columns; the summary rows have 27).
    results = [line.split() for line in DROP_CACHES_OUTPUT.splitlines()
               if line.startswith(('write ', 'read ')) and len(line.split()) == 11]
    writes = [float(r[1]) for r in results if r[0] == 'write']
    assert len(writes) == 3 and len(results) == 6
    assert phases['write'].max_mib_s == max(writes)
    assert phases['write'].mean_mib_s == pytest.approx(sum(writes) / 3)
    # Read from the disk, not from the page cache (28 GiB/s in the cached run above).
    assert phases['read'].max_mib_s < 5000
    with pytest.raises(ior.IorOutputError, match='2 IOR run.s. measured read, the job made 3'):
        last_read = DROP_CACHES_OUTPUT.rindex('IOR-4.0.0: MPI Coordinated Test')
        ior.parse(DROP_CACHES_OUTPUT[:last_read], 2, 3, runs=3)


def _prologue_then(tmp_path, body):
    """Run the job's own prologue (hpcbench.benchmarks.ior.job_prologue) then `body` in bash."""
    script = '\n'.join([*ior.job_prologue(tmp_path, -1, ior.MIB), body])
    return subprocess.Popen(['bash', '-c', script], stdout=subprocess.PIPE, text=True,
                            preexec_fn=signals_as_from_a_terminal)


def test_no_file_is_left_behind_after_a_failed_run(tmp_path):
    proc = _prologue_then(tmp_path, 'head -c 1048576 /dev/zero > "$workdir/ior.00000000"; '
                                    'echo "$workdir"; exit 1')
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert 'not Lustre: no striping set' in out
    assert out.split()[-1].startswith(str(tmp_path / 'hpcbench-ior.'))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('signal_name', ['TERM', 'INT'])
def test_no_file_is_left_behind_after_an_interrupted_run(tmp_path, signal_name):
    proc = _prologue_then(tmp_path, 'head -c 1048576 /dev/zero > "$workdir/ior"; '
                                    'echo written; sleep 30 & wait')
    assert proc.stdout.readline().strip().endswith('striping set')
    assert proc.stdout.readline().strip() == 'written'
    assert len(list(tmp_path.iterdir())) == 1
    proc.send_signal(getattr(signal, f'SIG{signal_name}'))
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []


def test_verification_checks_each_runs_own_phases_against_one_signature():
    assert ior.verify_options(['-w', '-e', '-k', '-i', '1']) == ['-W', '-G', '20070101']
    assert ior.verify_options(['-r', '-i', '1']) == ['-R', '-G', '20070101']
    assert ior.verify_options(['-w', '-r', '-e', '-i', '3']) == ['-W', '-R', '-G', '20070101']


def test_policies_that_cannot_work_are_refused():
    ior.check_policy('drop-caches', 'mpiio', 1, is_root=True)
    for policy, api, nodes, root, message in [
            ('reorder', 'posix', 1, True, 'two or more nodes'),
            ('direct', 'mpiio-collective', 2, True, 'O_DIRECT for POSIX only'),
            ('drop-caches', 'posix', 1, False, 'needs root'),
            ('cold', 'posix', 1, True, 'one of size, reorder')]:
        with pytest.raises(ior.IorInputError, match=message):
            ior.check_policy(policy, api, nodes, root)
