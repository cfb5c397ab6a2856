"""Lines every benchmark job script shares: what the job made is removed when it ends, fails
or is interrupted (ReFrame's cancel sends SIGTERM to the job), and the MPI library's own
files (Open MPI's session directory, its shared-memory segments) go into a directory of the
job's so that they are removed with it."""
import shlex

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
