"""The watch's schedule (hpcbench.acceptance.watch_install): a self-resubmitting batch job or
a systemd timer, what they run, and the values that reach them checked where they enter.
Submitted to a real Slurm: tests/devtools/test_testbed_watch.py."""
import pytest

from hpcbench.acceptance import watch_install
from hpcbench.acceptance.state import AcceptanceError

COMMAND = ['/opt/hpcbench/.venv/bin/hpcbench', 'watch', 'testbed', '--act', '--contract',
           '/opt/site contracts/testbed.yaml']


def test_the_batch_job_runs_one_cycle_and_submits_the_next_first():
    script = watch_install.batch_script('testbed', COMMAND, 3600, partition='maint',
                                        qos='checks', account='ops')
    lines = script.splitlines()
    assert script.endswith('\n') and lines[:2] == ['#!/bin/bash', watch_install.MARK]
    assert '#SBATCH --job-name=hpcbench-watch-testbed' in lines
    assert {'#SBATCH --partition=maint', '#SBATCH --qos=checks', '#SBATCH --account=ops'} <= \
        set(lines)
    assert lines[-2] == 'sbatch --begin=now+3600 "$0"'
    assert lines[-1] == "exec /opt/hpcbench/.venv/bin/hpcbench watch testbed --act " \
                        "--contract '/opt/site contracts/testbed.yaml'"


def test_the_timer_runs_the_service_every_period_across_reboots():
    units = watch_install.systemd_units('testbed', COMMAND, 86400)
    timer = units['hpcbench-watch-testbed.timer'].splitlines()
    assert 'OnUnitActiveSec=86400s' in timer and 'Persistent=true' in timer
    service = units['hpcbench-watch-testbed.service'].splitlines()
    assert "ExecStart=/opt/hpcbench/.venv/bin/hpcbench watch testbed --act --contract " \
           "'/opt/site contracts/testbed.yaml'" in service


@pytest.mark.parametrize('given, says', [
    ({'partition': 'maint; rm -rf /'}, "--partition 'maint; rm -rf /' is no partition name"),
    ({'qos': '$(id)'}, "--qos '$(id)' is no qos name"),
    ({'account': ''}, None)])
def test_a_name_that_is_none_is_refused_before_anything_is_written(given, says):
    if says is None:
        assert '--account' not in watch_install.batch_script('testbed', COMMAND, 60, **given)
        return
    with pytest.raises(AcceptanceError, match=says.replace('$', r'\$').replace('(', r'\(')
                       .replace(')', r'\)')):
        watch_install.batch_script('testbed', COMMAND, 60, **given)


def test_a_period_shorter_than_two_cycles_is_refused():
    assert watch_install.schedule_seconds('1h', [86400, 7200]) == 3600
    with pytest.raises(AcceptanceError, match=r"period \(90m\) is shorter than two cycles "
                                              r"\(2h at --every 1h\)"):
        watch_install.schedule_seconds('1h', [86400, 5400])
    with pytest.raises(AcceptanceError, match="--every: '1 hour' is no period"):
        watch_install.schedule_seconds('1 hour', [86400])


def test_uninstall_removes_only_what_install_wrote(tmp_path):
    said = watch_install.install('systemd', 'testbed', COMMAND, 3600, tmp_path)
    assert 'systemctl --user enable --now hpcbench-watch-testbed.timer' in said
    theirs = tmp_path / 'hpcbench-watch-testbed.service'
    theirs.write_text('[Unit]\nDescription=the site\'s own\n')
    said = watch_install.uninstall('systemd', 'testbed', tmp_path)
    assert said == 'removed hpcbench-watch-testbed.timer'
    assert theirs.read_text().startswith('[Unit]')
