"""A node's history under the watch (hpcbench.report.watch_history, `hpcbench watch
--history NODE`): cycles of the watch on the 32-node acceptance's real runs
(tests/watch_fakes.py), n5 20 % slower from the second: its lines and its plot."""
import os
import subprocess

from conftest import BIN, ROOT
from hpcbench.acceptance import watch
from hpcbench.report import watch_history
from watch_fakes import Clock, FakeReFrame, FakeSlurm, accept


def _watched(tmp_path):
    contract, acceptance = accept(tmp_path)
    port, slurm, clock = FakeReFrame(), FakeSlurm(), Clock()
    for turn in range(5):
        if turn == 1:
            port.slow['n5'] = 0.2
        watch.Watch('testbed', contract, acceptance, tmp_path / 'watch', reframe=port,
                    slurm=slurm, clock=clock, say=lambda text: None, act=True,
                    max_drain=0.25).cycle()
        clock.now += 3600
    return tmp_path / 'watch'


def test_a_node_s_history_is_each_cycle_beside_its_accepted_median_and_a_plot(tmp_path):
    directory = _watched(tmp_path)
    points, not_run = watch_history.history(directory, 'n5')
    # Its first slow cycle beside six accepted and steady runs: p = 1/84 at best, short of
    # 0.05 over nine nodes; then pooled with the next, drift; drained after two.
    assert [p.entry for p in points] == ['hpl'] * 4
    assert [p.drift for p in points] == ['OK', 'OK', 'DRIFT', 'DRIFT']
    assert [round(p.effect, 2) for p in points[1:]] == [0.2, 0.2, 0.2]
    assert list(not_run.values()) and all(why.startswith('drained by the watch')
                                          for why in not_run.values())
    said = watch_history.lines(points, not_run)
    assert said[2].split()[1:3] == ['hpl', 'PASS'] and said[2].endswith('DRIFT')
    picture = watch_history.plot(points, 'n5', tmp_path / 'n5.png')
    assert picture.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and picture.stat().st_size > 10_000


def test_the_command_prints_and_plots_it_and_refuses_another_user_s_watch(tmp_path):
    directory = _watched(tmp_path)
    env = dict(os.environ, HPCBENCH_VAR=str(tmp_path / 'var'))
    done = subprocess.run([str(BIN / 'hpcbench'), 'watch', 'testbed', '--output',
                           str(directory), '--history', 'n5'], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f'plot: {directory / "history-n5.png"}'
    os.chown(directory, 65534, 65534)
    done = subprocess.run([str(BIN / 'hpcbench'), 'watch', 'testbed', '--output',
                           str(directory), '--history', 'n5'], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 2 and 'belongs to another user' in done.stderr, done.stderr
    assert done.stderr.count('\n') == 1


def test_the_watch_s_page_shows_the_newest_cycle_its_drifts_the_cycles_and_the_histories(
        tmp_path):
    from hpcbench.report import watch_page
    directory = _watched(tmp_path)
    page = watch_page.write('testbed', directory)
    html = page.read_text()
    assert '<img src="plots/history-n5.png"' in html
    assert (page.parent / 'plots' / 'history-n5.png').stat().st_size > 10_000
    assert watch_page.noted(watch_page.records(directory)) == ['n5']
    summary = (page.parent / watch_page.MARKDOWN).read_text()
    # The newest cycle: n5 drained by the watch (not run), n7 never accepted.
    assert 'drained by the watch: hpcbench watch: HPCC-NODE hpl drift' in summary
    assert 'never accepted' in summary
    # Five cycles, the fourth's action a drain of n5, run.
    assert summary.count('n5 drain') == 1 and '(not run)' not in summary
