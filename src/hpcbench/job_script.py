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


def removed_at_exit(variable, directory, prefix):
    """Lines that make a fresh directory `prefix.XXXXXX` below `directory`, hold its path in
    `$variable` and remove it when the job exits."""
    template = shlex.quote(f'{directory}/{prefix}.XXXXXX')
    return [*CLEANUP_TRAPS, f'{variable}=$(mktemp -d {template}) || exit 1',
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
    template = shlex.quote(f'{base}/hpcbench-mpi.XXXXXX')
    return [*CLEANUP_TRAPS,
            f'hpcbench_mpi_tmp=$(mktemp -d {template} 2>/dev/null || '
            'mktemp -d "$PWD/hpcbench-mpi.XXXXXX") || exit 1',
            'hpcbench_cleanup+=("$hpcbench_mpi_tmp")',
            'export ' + ' '.join(f'{name}="$hpcbench_mpi_tmp"'
                                 for name in _MPI_SCRATCH_VARIABLES)]
