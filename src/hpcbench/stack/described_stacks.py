"""A described system's MPI stacks (hpcbench.stack.mpi_stacks): those its description names,
in its order (the login node's own, or the install its `mpi_prefixes` names), and, for
`hpcbench new-system`, those the login node offers to describe."""
from hpcbench.machine.description_schema import DescriptionError
from hpcbench.stack import mpi_stacks


class NewSystemError(RuntimeError):
    """A system that cannot be described: one sentence saying why."""


def stacks_of(system, path):
    """The MPI stacks (hpcbench.stack.mpi_stacks) the description names, in its order: the
    login node's own, or the install its `mpi_prefixes` names; one that is not there is an
    error."""
    known = {s.name: s for s in mpi_stacks.local_stacks()}
    for name, prefix in (system.get('mpi_prefixes') or {}).items():
        try:
            known[name] = mpi_stacks.installed_mpi(prefix)
        except mpi_stacks.InstalledMpiError as err:
            raise DescriptionError(f'{path}: mpi_prefixes.{name}: {err}') from None
        if known[name].name != name:
            raise DescriptionError(f'{path}: mpi_prefixes.{name}: {prefix} holds '
                                   f'{known[name].name}, not {name}')
    missing = [name for name in system['mpi_stacks'] if name not in known]
    if missing:
        raise DescriptionError(f'{path}: mpi_stacks: {", ".join(missing)} not found on this '
                               f'node (it has {", ".join(known) or "none"}; an install of '
                               'its own goes in mpi_prefixes)')
    return [known[name] for name in system['mpi_stacks']]


def login_node_stacks(prefixes=(), environ=None):
    """(the MPI stacks, {name: prefix} of those named, what to ask): those of this login node
    (mpi_stacks.local_stacks) it has or the set-up installs, each replaced by the install of
    the same MPI at one of `prefixes` (the user's `--mpi`); the others named last."""
    named = {}
    for prefix in prefixes:
        try:
            stack = mpi_stacks.installed_mpi(prefix)
        except mpi_stacks.InstalledMpiError as err:
            raise NewSystemError(f'--mpi {err}') from None
        if stack.name in named:
            raise NewSystemError(
                f'--mpi {named[stack.name].prefix} and --mpi {stack.prefix} are both '
                f'{stack.name}: a system builds each benchmark once per MPI package; name one')
        named[stack.name] = stack
    stacks, absent, others = [], [], dict(named)
    for stack in mpi_stacks.local_stacks(*([environ] if environ is not None else [])):
        if stack.name in others:
            stacks.append(others.pop(stack.name))
        elif stack.available():
            stacks.append(stack)
        else:
            absent.append(stack.name)
    asks = [f'mpi_stacks: no {", ".join(absent)} on this login node; name the cluster\'s '
            'own installs with --mpi PREFIX (repeatable: the prefix whose bin/ holds its '
            'mpicc; Open MPI, MPICH, MVAPICH2)'] if absent else []
    return stacks + list(others.values()), {n: s.prefix for n, s in named.items()}, asks
