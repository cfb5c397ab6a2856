"""Lines every benchmark job script shares: what the job made is removed when it ends, fails
or is interrupted (ReFrame's cancel sends SIGTERM to the job), and the MPI library's own
files (Open MPI's session directory, its shared-memory segments) go into a directory of the
job's so that they are removed with it; and what a variable ReFrame exports into a job, and
a scheduler option it writes there, may hold (`exported_variables`, `scheduler_options`)."""
import re
import shlex

from hpcbench.core import paths

# What a variable ReFrame exports (a partition's, an environment's, a test's) may hold.
# ReFrame writes `export NAME=VALUE` into job scripts as given, unquoted, and on loading an
# environment runs the command of any `$(...)` or backquotes in VALUE on the login node
# (reframe.utility.osext.expandvars), quoted or not: so quoting cannot make a value safe, and
# a value is plain characters and references to other variables (`$PATH`, `${HOME}`) alone.
# The characters a path that reaches a shell may hold (hpcbench.core.paths), and `,` (CPU
# lists, `OMPI_MCA_btl=self,tcp`), `^` (`OMPI_MCA_btl=^openib`) and `%`.
VARIABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_PLAIN_CHARACTERS = paths.PLAIN_IN_PATH + ',^%'
VARIABLE_VALUE = re.compile(rf'(?:[{_PLAIN_CHARACTERS}]|\$[A-Za-z_][A-Za-z0-9_]*'
                            rf'|\$\{{[A-Za-z_][A-Za-z0-9_]*\}})*')
# A value longer than this is no setting (the longest real ones are search paths).
MAX_VALUE_LENGTH = 16384


class UnsafeVariableError(ValueError):
    pass


def exported_variables(variables, where):
    """`variables` ({name: value} or [[name, value], ...]) as {name: value}, each value a
    string, or UnsafeVariableError naming `where`, the variable and what is wrong: a name that
    is none, or a value holding anything but letters, digits, `_ . / + @ : ~ = , ^ % -` and
    references to other variables ($NAME, ${NAME})."""
    pairs = variables.items() if isinstance(variables, dict) else variables
    checked = {}
    for name, value in pairs:
        text = str(value)
        if not isinstance(name, str) or not VARIABLE_NAME.fullmatch(name):
            raise UnsafeVariableError(f'{where}: {str(name)[:80]!r} is no variable name '
                                      '(letters, digits and _, not first a digit)')
        if len(text) > MAX_VALUE_LENGTH or not VARIABLE_VALUE.fullmatch(text):
            shown = text if len(text) <= 200 else text[:200] + '...'
            raise UnsafeVariableError(
                f'{where}: {name}={shown!r}: a variable exported into job scripts holds '
                'letters, digits, _ . / + @ : ~ = , ^ % - and $NAME references only (ReFrame '
                'writes it unquoted and runs a $(...) or `...` in it when it loads it)')
        checked[name] = text
    return checked


def scheduler_options(options, where):
    """`options` (a partition's `access`: each written on a line of its own after
    `#SBATCH`, `#PBS`), or UnsafeVariableError naming `where` and the option that holds a
    control character (a newline would start a line the job's shell runs) or is no text."""
    for option in options:
        if not isinstance(option, str) or re.search(r'[\x00-\x1f\x7f]', option) or \
                len(option) > MAX_VALUE_LENGTH:
            raise UnsafeVariableError(
                f'{where}: the scheduler option {str(option)[:200]!r} holds a control character '
                '(a newline would start a command in the job script) or is no text')
    return list(options)

# Directories the job made are added to the bash array `hpcbench_cleanup`; one EXIT trap
# removes them all. A signal becomes an exit, so that the EXIT trap runs. Idempotent: a job
# may take these lines from more than one place.
CLEANUP_TRAPS = [
    'trap \'rm -rf -- "${hpcbench_cleanup[@]}"\' EXIT',
    "trap 'exit 143' TERM",
    "trap 'exit 130' INT",
]


def removed_at_exit(variable, directory, prefix, fallback=None):
    """Lines that make a fresh directory `prefix.XXXXXX` below `directory` (else below
    `fallback`, a shell word, where `directory` cannot be written), hold its path in
    `$variable` and remove it when the job exits."""
    make = f'mktemp -d {shlex.quote(f"{directory}/{prefix}.XXXXXX")}'
    if fallback:
        make += f' 2>/dev/null || mktemp -d "{fallback}/{prefix}.XXXXXX"'
    return [*CLEANUP_TRAPS, f'{variable}=$({make}) || exit 1',
            f'hpcbench_cleanup+=("${variable}")']


# Where a job on one node keeps its MPI's files: shared memory (tmpfs), as the libraries'
# defaults.
MPI_SCRATCH_BASE = '/dev/shm'
# Open MPI 4's shared-memory transport is vader, Open MPI 5's sm; both put their segments
# in /dev/shm by default and the session directory (TMPDIR) elsewhere.
_MPI_SCRATCH_VARIABLES = ('TMPDIR', 'OMPI_MCA_btl_vader_backing_directory',
                          'OMPI_MCA_btl_sm_backing_directory')


def mpi_scratch(base=MPI_SCRATCH_BASE):
    """Lines that give a one-node job's MPI a directory of its own for its session files
    and shared-memory segments, removed when the job exits: below `base`, or the job's
    working directory where `base` cannot be written."""
    return [*removed_at_exit('hpcbench_mpi_tmp', base, 'hpcbench-mpi', fallback='$PWD'),
            'export ' + ' '.join(f'{name}="$hpcbench_mpi_tmp"'
                                 for name in _MPI_SCRATCH_VARIABLES)]


# The job's own word on where it runs, the first line of its output: its scheduler's final
# allocation as the job is given it (Slurm's SLURM_JOB_NODELIST, fixed before the job
# starts), else the host it runs on. ReFrame's `job_nodelist` is a snapshot of its last poll
# of the scheduler, which Slurm may still be filling: a 32-node acceptance recorded `n10` for
# 5 of 48 pinned pair jobs that Slurm's accounting shows ran on n[10-11] (issue 70).
JOB_NODES_MARKER = 'hpcbench job-nodes:'


def job_nodes_line():
    """The job script's line that prints the job's nodes after JOB_NODES_MARKER: `slurm
    <Slurm's node list, abbreviated as Slurm writes it>`, or `host <its host name>`."""
    return (f'if [ -n "${{SLURM_JOB_NODELIST:-}}" ]; then echo "{JOB_NODES_MARKER} slurm '
            f'$SLURM_JOB_NODELIST"; else echo "{JOB_NODES_MARKER} host $(hostname)"; fi')


# A Slurm node list as a job is given it, `n[1-3,7],gpu01`: what may be expanded.
SLURM_NODE_LIST = re.compile(r'[A-Za-z0-9._,\[\]-]{1,4096}')


def job_nodes_said(output):
    """(how, the list as printed) of the job's own word in its `output` (job_nodes_line):
    ('slurm', 'n[10-11]') or ('host', 'vm'); None where it printed none (a dry run, a job
    that never started). ValueError where what it printed is no node list."""
    for line in output.splitlines():
        if line.startswith(JOB_NODES_MARKER):
            how, _, listed = line[len(JOB_NODES_MARKER):].strip().partition(' ')
            if how not in ('slurm', 'host') or not SLURM_NODE_LIST.fullmatch(listed):
                raise ValueError(f'the job printed {line[:200]!r}: no list of its nodes')
            return how, listed
    return None
