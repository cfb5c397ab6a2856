"""`eval "$(.venv/bin/hpcbench shell --mpi X)"`: a new bash or zsh gets the environment's
builds for MPI X on PATH and X's mpirun, and runs one of them."""
import os
import shutil
import subprocess

import pytest

from conftest import BIN, ROOT
from hpcbench.core import paths
from hpcbench.stack import debian, machine_systems, shell, spack

HPCBENCH = BIN / 'hpcbench'


def _new_shell(program, script, **extra):
    """`program -c script` started as a login would start it: no SPACK_* or MPI variables
    of ours, only HOME (the per-user cache) and a system PATH."""
    env = {'HOME': os.environ['HOME'], 'PATH': '/usr/local/bin:/usr/bin:/bin',
           **{k: os.environ[k] for k in ('HPCBENCH_CACHE', 'HPCBENCH_MVAPICH2_PREFIX')
              if k in os.environ}, **extra}
    return subprocess.run([program, '-c', script], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


@pytest.mark.parametrize('value, current, expected', [
    ('/opt/x/lib:$LD_LIBRARY_PATH', None, '/opt/x/lib'),
    ('/opt/x/lib:$LD_LIBRARY_PATH', '/usr/lib/y', '/opt/x/lib:/usr/lib/y'),
    ("/opt/it's here/lib:$LD_LIBRARY_PATH", '', "/opt/it's here/lib"),
])
def test_a_prepended_search_path_keeps_the_old_value_and_adds_no_empty_entry(
        value, current, expected):
    # An empty entry (a trailing colon) would make the dynamic linker search the current
    # directory.
    line = shell.export_line('LD_LIBRARY_PATH', value)
    env = {'PATH': '/usr/bin:/bin', **({'LD_LIBRARY_PATH': current} if current is not None
                                       else {})}
    out = subprocess.run(['bash', '-c', f'{line}; printf %s "$LD_LIBRARY_PATH"'],
                         capture_output=True, text=True, env=env).stdout
    assert out == expected


def test_a_value_that_refers_to_another_variable_is_refused():
    with pytest.raises(shell.ShellError, match='only `:\\$PATH` at the end'):
        shell.export_line('PATH', '$HOME/bin')


def test_a_system_not_installed_here_is_refused_with_one_message():
    proc = subprocess.run([str(HPCBENCH), 'shell', '--system', 'tsubame'],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ''
    assert "invalid choice: 'tsubame'" in proc.stderr


@pytest.mark.spack
def test_an_mpi_the_machine_lacks_is_refused_with_one_message_and_no_code():
    proc = subprocess.run([str(HPCBENCH), 'shell', '--mpi', 'mpt'], capture_output=True,
                          text=True)
    names = ', '.join(s.name for s in machine_systems.machine_stacks())
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr == f'error: --mpi mpt: this machine has {names}\n'


def _zsh():
    if not shutil.which('zsh'):
        if os.geteuid() != 0:
            pytest.skip('zsh is not installed (as root: apt-get install zsh)')
        debian.ensure(['zsh'])
    return 'zsh'


@pytest.mark.spack
@pytest.mark.parametrize('program', ['bash', 'zsh'])
def test_one_line_gives_a_new_shell_the_builds_of_the_chosen_mpi(installed, program):
    if program == 'zsh':
        program = _zsh()
    found = spack.find()
    stacks = machine_systems.machine_stacks()
    # Not the first stack: the one a default would give by accident.
    stack = stacks[1]
    env_dir = ROOT / 'spack-envs' / 'local'
    where = {}
    for name, spec in (('xhpl', f'hpl ^{stack.spack_name} '
                                f'^{machine_systems.machine_blas()[0].spack_spec}'),
                       ('IMB-MPI1', f'intel-mpi-benchmarks ^{stack.spack_name}'),
                       ('ior', f'ior ^{stack.spack_name}')):
        proc = subprocess.run([str(found.executable), '-e', str(env_dir), 'location', '-i',
                               spec], capture_output=True, text=True, check=True,
                              env={**os.environ, **spack.isolated_environment(found)})
        where[name] = f'{proc.stdout.strip()}/bin/{name}'
    script = (f'eval "$({HPCBENCH} shell --mpi {stack.name})" || exit 9\n'
              'for p in xhpl IMB-MPI1 ior stream_c.exe mpirun; do '
              'echo "$p=$(command -v $p)"; done\n'
              'echo "SPACK_ENV=$SPACK_ENV"\n'
              # One benchmark binary, launched by the stack's mpirun.
              'mpirun -np 2 IMB-MPI1 PingPong -msglog 0:2 -iter 100')
    proc = _new_shell(program, script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found_at = dict(line.split('=', 1) for line in proc.stdout.splitlines()
                    if line.split('=', 1)[0] in ('xhpl', 'IMB-MPI1', 'ior', 'stream_c.exe',
                                                 'mpirun', 'SPACK_ENV'))
    for name, path in where.items():
        assert found_at[name] == path
    assert found_at['stream_c.exe'].startswith(str(paths.cache_dir() / 'spack-install'))
    assert found_at['mpirun'] == str(stack.bin_dir / 'mpirun')
    assert found_at['SPACK_ENV'] == str(env_dir)
    assert '# All processes entering MPI_Finalize' in proc.stdout


@pytest.mark.spack
def test_a_build_that_is_not_installed_is_named_in_one_message(installed):
    stacks, libraries = machine_systems.machine_stacks(), machine_systems.machine_blas()
    if len(stacks) < 2 or len(libraries) < 2:
        pytest.skip('one MPI stack or one BLAS library here: every pair is built')
    proc = subprocess.run([str(HPCBENCH), 'shell', '--mpi', stacks[1].name, '--blas',
                           libraries[1].name], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr == (f'error: HPL with {libraries[1].name} is built on '
                           f'{stacks[0].name} only (the default BLAS, {libraries[0].name}, '
                           'on every MPI)\n')


@pytest.mark.spack
def test_what_spack_cannot_load_is_one_message_with_spack_s_reason():
    with pytest.raises(shell.ShellError) as raised:
        shell._spack_shell_code(spack.find(), '-e', str(ROOT / 'spack-envs' / 'local'),
                                'load', '--sh', 'hpl ^no-such-mpi')
    message = str(raised.value)
    assert message.startswith('`spack -e ') and 'load --sh hpl ^no-such-mpi` failed: ' in message
    assert '\n' not in message
