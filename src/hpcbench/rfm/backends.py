"""ReFrame scheduler and launcher backends for the papers' sites, where ReFrame 4.10 has none
or writes the wrong directives (see docs/systems.md).

Importing this module registers them (a site config imports it); Python imports a module
once, so they are registered once per process.

Schedulers (all whole-node: the checks place and bind their ranks themselves):
- `sge-pe`     Sun N1 Grid Engine 6 with a parallel environment (TSUBAME): `-pe <pe> <slots>`,
               the PE named by the partition's access option `-pe <name>`.
- `torque-maui` TORQUE 2 with Maui (CHiC): `-l nodes=N:ppn=C`, and the host file.
- `pbspro-hostfile` PBS Professional (ReFrame's pbspro) with the host file (T2K, assumed).
- `pbs-xt`     PBS on a Cray XT4 (Louhi): ALPS resources mppwidth/mppnppn/mppdepth.
- `lsf-xc`     LSF on HP XC (Murska): `-n` tasks, `-ext "SLURM[nodes=N]"`, exclusive.
- `pjm`        Fujitsu's Technical Computing Suite (Oakforest-PACS): `#PJM -L node=N`,
               `--mpi proc=P`, `-L elapse=`; submitted with pjsub, followed with pjstat.

Schedulers whose nodes a host-file launcher needs (sge-pe, torque-maui, pbspro-hostfile, pjm) write the
job's host file in the preamble: each node once per rank it runs, path in
$HPCBENCH_HOSTFILE.

Launchers:
- `mpirun_rsh`, `mpirun_ssh`  MVAPICH's: `-np`, `-hostfile`, and the run-time variables as
               `NAME=value` words (mpirun_rsh does not pass the job's environment to remote
               ranks). MVAPICH2's mpirun_rsh takes `-ssh` for what MVAPICH1-based MPIs
               (TSUBAME's Voltaire MPI) called mpirun_ssh.
- `mpirun-ppn` Open MPI's mpirun with `--map-by ppr:R:node` (a scheduler's slot list would
               pack several ranks on the first node) and `-x NAME=value`.
- `hpmpi`      HP-MPI on HP XC: `mpirun -e NAME=value ... -srun -n N -N nodes`.
- `mpiexec.hydra` Intel MPI's Hydra: `-n`, `-ppn` (it passes the environment itself).
"""
import re
import shlex
import time

import reframe.utility.osext as osext
from reframe.core.backends import register_launcher, register_scheduler
from reframe.core.exceptions import JobSchedulerError
from reframe.core.launchers import JobLauncher
from reframe.core.schedulers.lsf import LsfJobScheduler
from reframe.core.schedulers.pbs import (PbsJobScheduler, PbsProJobScheduler,
                                         TorqueJobScheduler)
from reframe.core.schedulers.sge import SgeJobScheduler
from reframe.utility import seconds_to_hms

HOSTFILE = 'hpcbench.hosts'
HOSTFILE_VARIABLE = 'HPCBENCH_HOSTFILE'


def _shape(job):
    """(nodes, ranks per node, cpus per rank) of a job."""
    per_node = job.num_tasks_per_node or 1
    cpus = job.num_cpus_per_task or 1
    return max(1, (job.num_tasks or 1) // per_node), per_node, cpus


def _walltime(job):
    h, m, s = seconds_to_hms(job.time_limit)
    return f'{int(h)}:{int(m):02d}:{int(s):02d}'


def hostfile_lines(node_list_command, ranks_per_node):
    """Shell lines writing $HPCBENCH_HOSTFILE: every node of `node_list_command` (one
    name per line, repeats allowed) once per rank it runs."""
    return [
        f'export {HOSTFILE_VARIABLE}="$PWD/{HOSTFILE}"',
        f'{node_list_command} | awk \'!seen[$1]++ {{ for (i = 0; i < {ranks_per_node}; i++) '
        f'print $1 }}\' > "${HOSTFILE_VARIABLE}"',
    ]


@register_scheduler('sge-pe')
class SgeParallelEnvironmentScheduler(SgeJobScheduler):
    """SGE job with a parallel environment sized to the job (TSUBAME's N1 Grid Engine)."""

    def emit_preamble(self, job):
        pe = [opt.split()[1] for opt in job.sched_access if re.match(r'-pe\s+\S+$', opt)]
        if len(pe) != 1:
            raise JobSchedulerError(
                f'sge-pe: the partition access options must name one parallel environment '
                f'(`-pe <name>`), not {job.sched_access!r}')

        nodes, per_node, cpus = _shape(job)
        others = [opt for opt in job.sched_access if not opt.startswith('-pe')]
        return [
            *super().emit_preamble(job),
            *(self._format_option(opt) for opt in others),
            self._format_option(f'-pe {pe[0]} {nodes * per_node * cpus}'),
            *hostfile_lines('awk \'{ print $1 }\' "$PE_HOSTFILE"', per_node),
        ]


@register_scheduler('torque-maui')
class TorqueMauiScheduler(TorqueJobScheduler):
    """TORQUE job (CHiC's TORQUE 2.1 with Maui 3.2); whole nodes come from the partition's
    access option `-l naccesspolicy=singlejob` (Maui's), the host file from $PBS_NODEFILE."""

    def emit_preamble(self, job):
        _, per_node, _ = _shape(job)
        return [*super().emit_preamble(job), *hostfile_lines('cat "$PBS_NODEFILE"', per_node)]


@register_scheduler('pbspro-hostfile')
class PbsProHostFileScheduler(PbsProJobScheduler):
    """PBS Professional (ReFrame's pbspro), plus the host file from $PBS_NODEFILE."""

    def emit_preamble(self, job):
        _, per_node, _ = _shape(job)
        return [*super().emit_preamble(job), *hostfile_lines('cat "$PBS_NODEFILE"', per_node)]


@register_scheduler('pbs-xt')
class PbsCrayXtScheduler(PbsJobScheduler):
    """PBS on a Cray XT: ALPS's mpp resources instead of PBS Pro's select."""

    def _emit_lselect_option(self, job):
        nodes, per_node, cpus = _shape(job)
        opts = [f'-l mppwidth={nodes * per_node}', f'-l mppnppn={per_node}',
                f'-l mppdepth={cpus}']
        opts += [opt for opt in (*job.sched_access, *job.options, *job.cli_options)]
        return [o if o.startswith('#') else self._format_option(o) for o in opts]


@register_scheduler('lsf-xc')
class LsfHpXcScheduler(LsfJobScheduler):
    """LSF-HPC on HP XC: LSF allocates, SLURM places (`-ext "SLURM[nodes=N]"`)."""

    def emit_preamble(self, job):
        nodes, per_node, _ = _shape(job)
        preamble = [f'#BSUB -J {job.name}', f'#BSUB -o {job.stdout}', f'#BSUB -e {job.stderr}',
                    f'#BSUB -n {nodes * per_node}', f'#BSUB -ext "SLURM[nodes={nodes}]"',
                    '#BSUB -x']
        if job.time_limit is not None:
            preamble.append(f'#BSUB -W {max(1, int(job.time_limit // 60))}')

        for opt in (*job.sched_access, *job.options, *job.cli_options):
            preamble.append(opt if opt.startswith('#') else f'#BSUB {opt}')

        return preamble


@register_scheduler('pjm')
class PjmScheduler(PbsJobScheduler):
    """Fujitsu Technical Computing Suite (PJM), as on Oakforest-PACS. The resource group
    comes from the partition's access options (`-L rscgrp=<group>`, `-g <project>`)."""

    def __init__(self):
        self._prefix = '#PJM'
        self._submit_timeout = self.get_option('job_submit_timeout')
        self._sched_access_in_submit = False

    def emit_preamble(self, job):
        nodes, per_node, cpus = _shape(job)
        preamble = [f'#PJM -N {job.name}', f'#PJM -o {job.stdout}', f'#PJM -e {job.stderr}',
                    f'#PJM -L node={nodes}', f'#PJM --mpi proc={nodes * per_node}',
                    f'#PJM --omp thread={cpus}']
        if job.time_limit is not None:
            preamble.append(f'#PJM -L elapse={_walltime(job)}')

        for opt in (*job.sched_access, *job.options, *job.cli_options):
            preamble.append(opt if opt.startswith('#') else f'#PJM {opt}')

        # PJM starts the job where it was submitted; the node list is $PJM_O_NODEINF.
        preamble.append(f'cd {job.workdir}')
        preamble += hostfile_lines('cat "$PJM_O_NODEINF"', per_node)
        return preamble

    def submit(self, job):
        completed = osext.run_command(f'pjsub {job.script_filename}', check=True,
                                      timeout=self._submit_timeout)
        # "[INFO] PJM 0000 pjsub Job 1234567 submitted."
        found = re.search(r'Job (?P<jobid>\d+) submitted', completed.stdout)
        if not found:
            raise JobSchedulerError(f'pjsub printed no job id: {completed.stdout!r}')

        job._jobid = found.group('jobid')
        job._submit_time = time.time()

    def poll(self, *jobs):
        jobs = [job for job in jobs if job is not None]
        if not jobs:
            return

        completed = osext.run_command('pjstat')
        if completed.returncode != 0:
            raise JobSchedulerError(f'pjstat failed: {completed.stderr}')

        # pjstat lists the user's jobs that have not ended, one per line, id first.
        listed = {line.split()[0] for line in completed.stdout.splitlines()
                  if line.split() and line.split()[0].isdigit()}
        for job in jobs:
            if job.jobid not in listed:
                job._state = 'COMPLETED'
                job._completed = True

    def cancel(self, job):
        osext.run_command(f'pjdel {job.jobid}', check=True, timeout=self._submit_timeout)
        job._cancelled = True


def _variables(prefix_words, env_vars):
    return [w for name, value in sorted(env_vars.items()) for w in prefix_words(name, value)]


@register_launcher('mpirun_rsh')
class MpirunRshLauncher(JobLauncher):
    remote_shell = []

    def command(self, job):
        return ['mpirun_rsh', *self.remote_shell, '-np', str(job.num_tasks),
                '-hostfile', f'"${{{HOSTFILE_VARIABLE}:?the scheduler wrote no host file}}"',
                *_variables(lambda k, v: [shlex.quote(f'{k}={v}')], self.env_vars)]


@register_launcher('mpirun_ssh')
class MpirunSshLauncher(MpirunRshLauncher):
    remote_shell = ['-ssh']


@register_launcher('mpirun-ppn')
class MpirunPerNodeLauncher(JobLauncher):
    def command(self, job):
        _, per_node, _ = _shape(job)
        return ['mpirun', '-np', str(job.num_tasks), '--map-by', f'ppr:{per_node}:node',
                *_variables(lambda k, v: ['-x', shlex.quote(f'{k}={v}')], self.env_vars)]


@register_launcher('hpmpi')
class HpMpiLauncher(JobLauncher):
    def command(self, job):
        nodes, _, _ = _shape(job)
        return ['mpirun', *_variables(lambda k, v: ['-e', f'{k}={v}'], self.env_vars),
                '-srun', '-n', str(job.num_tasks), '-N', str(nodes)]


@register_launcher('mpiexec.hydra')
class HydraLauncher(JobLauncher):
    def command(self, job):
        _, per_node, _ = _shape(job)
        return ['mpiexec.hydra', '-n', str(job.num_tasks), '-ppn', str(per_node)]
