"""ReFrame from outside: everything the suite asks of ReFrame as a command (the partitions a
system has as ReFrame configures them, the checks it describes, the nodes its --distribute
would run a check on, a run with options, and the sessions its results database stores),
behind one port, `ReFrame`. `command_line` is the one place a `reframe` command line is
built: `make run` (`hpcbench reframe-command`) and the acceptance take theirs from it.

Whatever is given a port takes any object of the same methods: the tests of the acceptance's
run loop give one that stores sessions of real records' shape instead of running ReFrame
(tests/acceptance/test_resume.py)."""
import json
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from hpcbench.core import child_processes, paths, slurm_cluster
from hpcbench.machine import description as descriptions
from hpcbench.results import results_db

# A test case's node, as ReFrame's --distribute names it in its listing (-l).
_NID = re.compile(r'%[.$]nid=([^\s%/]+)')
# A parameter of a check, as its display name shows it (--describe).
_PARAMETER = re.compile(r'%([A-Za-z_]\w*)=')
# Schedulers whose partitions ReFrame's --distribute places one test on each node of.
DISTRIBUTING_SCHEDULERS = ('slurm', 'squeue')


class ReFrameError(RuntimeError):
    """ReFrame did not answer what it was asked: one sentence saying what and why."""


def command_line(system, partition=None, options=(), root=None, config=None):
    """`reframe` of this venv on `system`'s site config (or `config`, a site config file
    elsewhere) and the suite's checks, on the system (or one of its partitions), with
    `options`: the command `make run` runs and the acceptance runs. Its paths relative to
    `root` where given (make runs in the project's root: `.venv/bin/reframe -C
    site-configs/local.py ...`)."""
    def shown(path):
        path = Path(path)
        return str(path.relative_to(root) if root and path.is_relative_to(root) else path)
    where = f'{system}:{partition}' if partition else system
    return [shown(Path(sys.executable).parent / 'reframe'), '-C',
            shown(config or paths.SITE_CONFIGS_DIR / f'{system}.py'), '--system', where, '-c',
            shown(paths.CHECKS_DIR), *options]


@dataclass(frozen=True)
class SeenPartition:
    """A partition as ReFrame configures it: its name, its scheduler, each node's GPUs
    (its `devices` of type gpu), its description (hpcbench.machine.description, read back
    from its extras by the machine layer), each node's cores and CPUs (its processor's, where
    ReFrame knows them) and, on a partition of one host (a local scheduler), that host."""
    name: str
    scheduler: str
    gpus_per_node: int = 0
    host: str = ''
    description: Optional[descriptions.PartitionDescription] = None
    cores: Optional[int] = None
    cpus: Optional[int] = None      # logical CPUs of a node (its processor's num_cpus)

    @property
    def distributes(self):
        """Whether --distribute places one test on each of its nodes (a Slurm partition)."""
        return self.scheduler in DISTRIBUTING_SCHEDULERS


def seen_partition(configured):
    """The SeenPartition of one partition of ReFrame's --show-config."""
    gpus = sum(d.get('num_devices', 1) for d in configured.get('devices', [])
               if d.get('type') == 'gpu')
    processor = configured.get('processor') or {}
    cores = len((processor.get('topology') or {}).get('cores') or []) or \
        processor.get('num_cpus')
    return SeenPartition(
        configured['name'], configured['scheduler'], gpus,
        '' if configured['scheduler'] in DISTRIBUTING_SCHEDULERS else socket.gethostname(),
        descriptions.from_extras(configured.get('extras') or {}, gpus), cores or None,
        processor.get('num_cpus') or None)


@dataclass(frozen=True)
class Finished:
    """What a ReFrame run left: its exit status and what it printed."""
    returncode: int
    stdout: str
    stderr: str


class ReFrame:
    """The port to ReFrame on one system, run as a command of this venv. Each run is in a
    process group of its own and ended by SIGTERM when the caller is interrupted
    (hpcbench.core.child_processes), so that ReFrame cancels its jobs."""

    def __init__(self, system):
        self.system = system
        self._config = None

    def _run(self, partition=None, options=(), timeout=None):
        done = child_processes.run(command_line(self.system, partition, options),
                                   capture_output=True, text=True, errors='replace',
                                   timeout=timeout)
        return Finished(done.returncode, done.stdout or '', done.stderr or '')

    @staticmethod
    def _json_list(done):
        """The JSON list ReFrame printed (indented: it opens on a line of its own), whatever
        it printed before it (a warning may hold a '['); ValueError where it printed none."""
        lines = done.stdout.splitlines(keepends=True)
        start = next((i for i, line in enumerate(lines) if line.strip() == '['), None)
        if start is None:
            raise ValueError('no JSON list in what ReFrame printed')
        return json.loads(''.join(lines[start:]))

    def partitions(self):
        """The system's partitions (SeenPartition) as ReFrame configures them (its
        --show-config); ReFrameError where it shows none."""
        done = self._run(options=['--show-config=systems/0/partitions'], timeout=300)
        try:
            configured = self._json_list(done)
        except ValueError:
            raise ReFrameError(f'ReFrame does not show the partitions of {self.system} (exit '
                               f'{done.returncode}): {(done.stderr or done.stdout)[-400:]}') \
                from None
        return [seen_partition(p) for p in configured]

    def check_kinds(self, checks):
        """{check: (its parameters' names, its variables' names)} as ReFrame describes
        `checks` (--describe: each variant's display name shows its parameters, its
        attributes are its variables); a check it does not describe is left out."""
        if not checks:
            return {}
        names = '|'.join(re.escape(c) for c in sorted(checks))
        done = self._run(options=['-n', f'^({names})(?=%|$)', '--describe'], timeout=600)
        try:
            described = self._json_list(done)
        except ValueError:
            return {}
        kinds = {}
        for variant in described:
            check = variant.get('@class') or variant['display_name'].split()[0]
            parameters = set(_PARAMETER.findall(variant['display_name'].replace(' ', '')))
            found = kinds.setdefault(check, (set(), set()))
            found[0].update(parameters)
            found[1].update(k for k in variant if not k.startswith(('@', '_')))
        return {check: (frozenset(p), frozenset(v - p)) for check, (p, v) in kinds.items()}

    def distributed_nodes(self, partition, check, job_options=()):
        """The nodes ReFrame's --distribute runs `check` on in `partition` (every state), in
        Slurm's order, with the jobs' `job_options` (a reservation: ReFrame lists a reserved
        node only where its reservation is named); () where its scheduler cannot be asked
        (a paper's system here)."""
        done = self._run(partition, ['-n', f'^{re.escape(check)}(?=%|$)',
                                     '--distribute=all', *(f'-J{o}' for o in job_options),
                                     '-l'], timeout=300)
        if done.returncode != 0:
            return ()
        return tuple(sorted(set(_NID.findall(done.stdout)), key=slurm_cluster.natural_key))

    def run(self, partition, options):
        """A ReFrame run on `partition` with `options`, to its end: Finished.
        KeyboardInterrupt where the caller is interrupted, once ReFrame has ended."""
        return self._run(partition, options)

    def _site_config(self):
        if self._config is None:
            self._config = results_db.site_config(self.system)
        return self._config

    def stored_run(self, report):
        """The UUID of the session a run's report (--report-file) says it stored, once the
        results database holds it; RuntimeError in one sentence where it does not."""
        return results_db.this_run(self._site_config(), report)

    def stored_session(self, uuid):
        """The record ReFrame's results database holds of session `uuid` (its report)."""
        data = results_db.session(self._site_config(), uuid)
        return data if isinstance(data, dict) else \
            results_db.Store(self._site_config()).decoded(uuid)
