"""The watch scheduled by what the site already runs, no daemon of the suite's own
(`hpcbench watch SYSTEM --install sbatch|systemd --every 1h`; `--uninstall`):

- sbatch: a batch job that runs one cycle and submits itself again to begin `every` after
  it began (`sbatch --begin=now+...`), in the partition, QOS and account the site names:
  Slurm keeps the schedule, its accounting keeps each cycle's job. `--uninstall` cancels the
  pending job by its name and removes the script.
- systemd: a service and a timer (every `every`, persistent across reboots) for the login
  node's user manager (`systemctl --user enable --now hpcbench-watch-SYSTEM.timer`);
  `--uninstall` removes them (only files this wrote: they say so on their first line).

Every value that reaches a script is checked here (names as Slurm and systemd take them, a
period as a contract writes it) and quoted where it is written."""
import getpass
import os
import re
import shlex
import subprocess
from pathlib import Path

from hpcbench.acceptance.contract import period_seconds, period_words
from hpcbench.acceptance.state import AcceptanceError

MARK = '# Written by hpcbench watch --install: removed by --uninstall.'
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
KINDS = ('sbatch', 'systemd')


def job_name(system):
    return f'hpcbench-watch-{system}'


def _checked(what, value):
    if value is not None and not _NAME.fullmatch(str(value)):
        raise AcceptanceError(f'--{what} {str(value)[:40]!r} is no {what} name (a letter or '
                              'digit, then letters, digits, . _ -): nothing installed')
    return value


def schedule_seconds(every, periods):
    """The seconds between cycles; AcceptanceError where `every` is no period, or where a
    watched entry's period is shorter than twice it (a node is due once half its period has
    passed: at a cycle every `every`, one of a shorter period would go stale)."""
    try:
        seconds = period_seconds(every)
    except ValueError as err:
        raise AcceptanceError(f'--every: {err}') from None
    short = [p for p in periods if p < 2 * seconds]
    if short:
        raise AcceptanceError(
            f'a watched entry\'s period ({period_words(min(short))}) is shorter than two '
            f'cycles ({period_words(2 * seconds)} at --every {every}): its nodes would go '
            'stale between cycles; run the watch more often, or give the entry a longer '
            'period')
    return seconds


def batch_script(system, command, every, partition=None, qos=None, account=None,
                 time_limit='04:00:00'):
    """The self-resubmitting batch script: one cycle of `command` (argv), then itself again,
    to begin `every` seconds after this one began."""
    options = [f'--job-name={job_name(system)}', '--nodes=1', '--ntasks=1',
               f'--time={time_limit}', '--output=hpcbench-watch-%j.out']
    options += [f'--{k}={_checked(k, v)}' for k, v in
                (('partition', partition), ('qos', qos), ('account', account)) if v]
    lines = ['#!/bin/bash', MARK, *(f'#SBATCH {o}' for o in options),
             '# The next cycle first: a cycle that fails or runs long keeps the schedule.',
             f'sbatch --begin=now+{int(every)} "$0"', 'exec ' + shlex.join(command), '']
    return '\n'.join(lines)


def systemd_units(system, command, every):
    """{file name: text} of the service and its timer."""
    name = job_name(system)
    service = '\n'.join([MARK, '[Unit]', f'Description=hpcbench watch of {system}: one cycle',
                         '', '[Service]', 'Type=oneshot',
                         f'WorkingDirectory={shlex.quote(os.getcwd())}',
                         f'ExecStart={shlex.join(command)}', ''])
    timer = '\n'.join([MARK, '[Unit]', f'Description=hpcbench watch of {system}', '',
                       '[Timer]', 'OnActiveSec=0', f'OnUnitActiveSec={int(every)}s',
                       'Persistent=true', '', '[Install]', 'WantedBy=timers.target', ''])
    return {f'{name}.service': service, f'{name}.timer': timer}


def install(kind, system, command, every, directory, env=None, **slurm):
    """Install the schedule (kind: sbatch or systemd); what was done, in words."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if kind == 'sbatch':
        script = directory / f'{job_name(system)}.sbatch'
        script.write_text(batch_script(system, command, every, **slurm))
        script.chmod(0o755)
        done = subprocess.run(['sbatch', '--parsable', '--begin=now', str(script)],
                              capture_output=True, text=True, env=env, timeout=60)
        if done.returncode != 0:
            script.unlink()
            raise AcceptanceError(f'sbatch refused the watch\'s job: '
                                  f'{(done.stderr or done.stdout).strip()[:300]}')
        return (f'job {done.stdout.strip()} ({job_name(system)}) submitted: one cycle every '
                f'{period_words(every)}, each job submitting the next ({script})')
    for name, text in systemd_units(system, command, every).items():
        (directory / name).write_text(text)
    return (f'{directory / job_name(system)}.timer and .service written: enable with '
            f'`systemctl --user enable --now {job_name(system)}.timer`')


def uninstall(kind, system, directory, env=None):
    """Remove the schedule this installed; what was done, in words."""
    directory = Path(directory)
    removed = []
    suffixes = ('.sbatch',) if kind == 'sbatch' else ('.service', '.timer')
    for suffix in suffixes:
        path = directory / f'{job_name(system)}{suffix}'
        if path.is_file() and not path.is_symlink() and MARK in path.read_text()[:200]:
            path.unlink()
            removed.append(path.name)
    said = f'removed {", ".join(removed)}' if removed else 'no file of the watch\'s to remove'
    if kind == 'sbatch':
        done = subprocess.run(['scancel', f'--name={job_name(system)}',
                               f'--user={getpass.getuser()}'],
                              capture_output=True, text=True, env=env, timeout=60)
        if done.returncode != 0:
            raise AcceptanceError(f'scancel: {(done.stderr or done.stdout).strip()[:300]}')
        said += f'; its pending job ({job_name(system)}) cancelled'
    return said
