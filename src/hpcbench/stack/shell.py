"""`hpcbench shell`: the shell code that gives a user the Spack stack of a system on this
machine, for one MPI stack and one BLAS library:

    eval "$(.venv/bin/hpcbench shell --system local --mpi mpich)"

It exports the variables that isolate the project's Spack (hpcbench.stack.spack), sources
Spack's setup script (the `spack` command), activates the system's environment without a
view (its builds live side by side, one per MPI: no view could hold them) and loads the
benchmarks built against the chosen MPI and BLAS with `spack load`, the MPI's own bin/ right
after them on PATH (its mpirun) and its run-time variables set, as in the checks' ReFrame
environment. POSIX shell code: bash and zsh read it alike.
"""
import os
import shlex
from concurrent.futures import ThreadPoolExecutor

import yaml

from hpcbench.core import child_processes, paths
from hpcbench.stack import machine_systems, spack


class ShellError(RuntimeError):
    pass


def benchmark_specs(stack, library, with_stream=True):
    """The environment's roots built against `stack` (a hpcbench.stack.mpi_stacks stack) and
    `library` (a hpcbench.stack.blas library): the constraints the checks locate them by
    (hpcbench.rfm.build.BenchmarkBuild.full_spec)."""
    mpi, blas = f'^{stack.spack_name}', f'^{library.spack_spec}'
    specs = [f'hpl {mpi} {blas}', f'hpcc {mpi} {blas}', f'intel-mpi-benchmarks {mpi}',
             f'ior {mpi}', f'mpi-startup {mpi}', f'dgemm-rate {blas}']
    return specs + ['stream'] if with_stream else specs


def _choose(kind, name, choices):
    """The item of `choices` (name attribute) called `name`, the first when None."""
    if name is None:
        return choices[0]

    chosen = next((c for c in choices if c.name == name), None)
    if chosen is None:
        raise ShellError(f'--{kind} {name}: this machine has '
                         f'{", ".join(c.name for c in choices) or "none"}')
    return chosen


def export_line(name, value):
    """`export NAME=value`, quoted; a value that ends in `:$NAME` (a search path prepended
    to) keeps the variable's current value, with no empty entry when it is unset (an empty
    entry in LD_LIBRARY_PATH or PATH means the current directory)."""
    suffix = f':${name}'
    if value.endswith(suffix):
        return (f'export {name}={shlex.quote(value[:-len(suffix)])}'
                f'"${{{name}:+:${name}}}"')
    if '$' in value:
        raise ShellError(f'{name}={value!r}: only `:${name}` at the end can refer to a '
                         'variable')
    return f'export {name}={shlex.quote(value)}'


def _stream_built(env_dir):
    """Whether the environment builds STREAM (host.yaml's stream_specs: not on a node too
    small for STREAM's rule)."""
    host = yaml.safe_load((env_dir / 'host.yaml').read_text())
    return any(d.get('stream_specs') for d in host.get('definitions', []))


def _spack_shell_code(found, *args, path=None):
    """What `spack <args> --sh` prints; `path`: the PATH it starts from (its exports are
    absolute values)."""
    env = {**os.environ, **spack.isolated_environment(found), **({'PATH': path} if path else {})}
    proc = child_processes.run([str(found.executable), *args], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        error = next((ln for ln in proc.stderr.splitlines() if 'Error' in ln),
                     proc.stderr.strip() or f'exit {proc.returncode}')
        raise ShellError(f'`spack {" ".join(args)}` failed: {error.strip().removeprefix("==> ")}')
    return proc.stdout


def shell_code(system='local', mpi=None, blas_name=None):
    """The shell code `hpcbench shell` prints."""
    if system not in machine_systems.machine_systems():
        raise ShellError(f'--system {system}: its environment is not installed on this '
                         'machine (the systems here: '
                         f'{", ".join(machine_systems.machine_systems())})')

    found = spack.find()
    if not found:
        raise ShellError(spack.not_found_message())

    env_dir = paths.SPACK_ENVS_DIR / system
    if not (env_dir / 'spack.lock').exists() or not (env_dir / 'host.yaml').exists():
        raise ShellError(f'{env_dir} is not concretized here: run `make run` (or '
                         f'`.venv/bin/hpcbench setup --system {system}`) first')

    stacks = machine_systems.machine_stacks(system)
    libraries = machine_systems.machine_blas(system)
    stack = _choose('mpi', mpi, stacks)
    library = _choose('blas', blas_name, libraries)
    if library is not libraries[0] and stack is not stacks[0]:
        raise ShellError(f'HPL with {library.name} is built on {stacks[0].name} only '
                         f'(the default BLAS, {libraries[0].name}, on every MPI)')

    specs = benchmark_specs(stack, library, _stream_built(env_dir))
    # The PATH `spack load` prepends the benchmarks to: the MPI's bin/ (its mpirun, not
    # another's; its own programs, e.g. Intel MPI's IMB-MPI1, after the Spack builds), then
    # the `spack` command that setup-env.sh puts there, then the shell's.
    path = os.pathsep.join([str(stack.bin_dir), str(found.root / 'bin'),
                            os.environ.get('PATH', '')])
    with ThreadPoolExecutor(2) as pool:
        activate = pool.submit(_spack_shell_code, found, 'env', 'activate', '--sh',
                               '--without-view', str(env_dir))
        load = pool.submit(_spack_shell_code, found, '-e', str(env_dir), 'load', '--sh',
                           *specs, path=path)
        activated, loaded = activate.result(), load.result()

    lines = [f'# hpcbench shell: spack-envs/{system}, {stack.name}, {library.name} '
             f'({", ".join(s.split()[0] for s in specs)})']
    lines += [export_line(k, v) for k, v in spack.isolated_environment(found).items()]
    lines.append(f'. {shlex.quote(str(found.root / "share" / "spack" / "setup-env.sh"))}')
    lines += [activated.strip(), loaded.strip()]
    lines += [export_line(k, v) for k, v in stack.run_env.items()]
    return '\n'.join(lines) + '\n'

