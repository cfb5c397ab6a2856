"""Process/thread layouts of one node and the wrapper that binds each rank to its cores.

The T2K paper (§3.2) ran HPL three ways: one rank per core (flat MPI), one rank per socket
with OpenMP/BLAS threads, one rank per node; we add one rank per NUMA domain, which differs
from the socket on current CPUs. Each rank is bound to its cores and their memory with
numactl, as T2K (§4.3, Figure 6) and TSUBAME (§3, taskset script) did: the wrapper reads the
rank's node-local index from whatever variable the launcher sets and execs the program under
numactl (taskset when numactl is missing). The MPI libraries' own binding is switched off so
that it cannot undo ours.

Layouts come from ReFrame's processor description (``partition.processor.info``): its
topology lists the CPU sets of cores, NUMA nodes and sockets as hex masks.
"""
import shlex
from dataclasses import dataclass

# Node-local rank index, most specific first: under mpirun inside a Slurm job, SLURM_LOCALID
# is inherited from the batch step (0 for every rank), so it comes last.
LOCAL_RANK_VARIABLES = (
    'OMPI_COMM_WORLD_LOCAL_RANK',   # Open MPI
    'MPI_LOCALRANKID',              # MPICH (Hydra), Intel MPI
    'MV2_COMM_WORLD_LOCAL_RANK',    # MVAPICH2
    'PALS_LOCAL_RANKID',            # Cray PALS
    'SLURM_LOCALID',                # srun
)

# MPI libraries that bind by themselves, switched off so that numactl's binding holds
# (Intel MPI and MVAPICH2 pin inside MPI_Init, after our wrapper ran).
MPI_BINDING_OFF = {
    'OMPI_MCA_hwloc_base_binding_policy': 'none',
    'I_MPI_PIN': 'off',
    'MV2_ENABLE_AFFINITY': '0',
}

# In this order: a layout equal to an earlier one is dropped, so where a socket is one NUMA
# node the papers' name, per-socket, is the one kept.
LAYOUT_NAMES = ('per-core', 'per-socket', 'per-numa', 'per-node')

# How a site binds (partition extras `binding`, all optional):
#   tool:           numactl (cores and memory; taskset when numactl is missing) or taskset
#                   (cores only, memory by first touch: TSUBAME's script)
#   domain_order:   sockets (and their NUMA nodes) in the order local ranks fill them, e.g.
#                   TSUBAME's HyperTransport ring on the X4600 (socket 2, 4, 6, 7, 5, 3, 1, 0)
#   excluded_cores: cores no rank runs on, e.g. Oakforest-PACS's tile 0 (cores 0 and 1),
#                   which takes the OS's interrupts
BINDING_KEYS = ('tool', 'domain_order', 'excluded_cores')
BINDING_TOOLS = ('numactl', 'taskset')


class LayoutError(ValueError):
    pass


def cpus_of_mask(mask):
    """CPU numbers in a hex cpuset mask ('0x3' -> [0, 1])."""
    value = int(mask, 16)
    return [cpu for cpu in range(value.bit_length()) if value >> cpu & 1]


@dataclass(frozen=True)
class Layout:
    name: str
    ranks_per_node: int
    threads_per_rank: int
    cpus: tuple          # per local rank: the CPUs (one per core) it is bound to
    numa_nodes: tuple    # per local rank: the NUMA nodes its memory comes from
    tool: str = 'numactl'

    def describe(self):
        return (f'{self.name}: {self.ranks_per_node} rank(s) per node x '
                f'{self.threads_per_rank} thread(s)')

    def thread_environment(self):
        """Threads of every rank: OpenMP, and the BLAS libraries' own variables
        (GOTO_NUM_THREADS as TSUBAME set it for GotoBLAS)."""
        n = str(self.threads_per_rank)
        return {'OMP_NUM_THREADS': n, 'OPENBLAS_NUM_THREADS': n, 'GOTO_NUM_THREADS': n,
                'MKL_NUM_THREADS': n, 'OMP_PROC_BIND': 'close', 'OMP_PLACES': 'cores'}


def _domains(processor):
    """(cores, numa_nodes, sockets): each a list of CPU lists, cores as their first CPU.

    Without a topology (a hand-written description), cores are numbered 0..n-1, sockets
    hold consecutive cores, and each socket is a NUMA node.
    """
    topology = (processor or {}).get('topology') or {}
    if topology.get('cores'):
        core_cpus = [cpus_of_mask(m) for m in topology['cores']]
        first = {cpu: cpus[0] for cpus in core_cpus for cpu in cpus}

        def group(masks):
            groups = [sorted({first[c] for c in cpus_of_mask(m) if c in first})
                      for m in masks or []]
            return [g for g in groups if g]

        cores = sorted([c[0]] for c in core_cpus)
        all_cores = [c[0] for c in cores]
        sockets = group(topology.get('sockets')) or [all_cores]
        numa = group(topology.get('numa_nodes')) or sockets
        return cores, numa, sockets

    num_cpus = (processor or {}).get('num_cpus')
    if not num_cpus:
        raise LayoutError('the processor description has neither a topology nor num_cpus')

    num_cores = num_cpus // processor.get('num_cpus_per_core', 1)
    num_sockets = processor.get('num_sockets') or 1
    per_socket = num_cores // num_sockets
    sockets = [list(range(s * per_socket, (s + 1) * per_socket)) for s in range(num_sockets)]
    return [[c] for c in range(num_cores)], sockets, sockets


def check_binding(binding):
    """The site's binding settings, checked; one clear error for a wrong one."""
    binding = dict(binding or {})
    unknown = set(binding) - set(BINDING_KEYS)
    if unknown:
        raise LayoutError(f'binding: unknown setting(s) {", ".join(sorted(unknown))}; '
                          f'known: {", ".join(BINDING_KEYS)}')

    if binding.get('tool', 'numactl') not in BINDING_TOOLS:
        raise LayoutError(f'binding: tool must be one of {", ".join(BINDING_TOOLS)}, '
                          f'not {binding["tool"]!r}')

    return binding


def _apply_binding(cores, numa, sockets, binding):
    order = binding.get('domain_order')
    if order is not None:
        if sorted(order) != list(range(len(sockets))):
            raise LayoutError(f'binding: domain_order {order} is not an order of the '
                              f'{len(sockets)} sockets')

        sockets = [sockets[i] for i in order]
        if len(numa) == len(order):
            numa = [numa[i] for i in order]

        position = {c: i for i, cpus in enumerate(sockets) for c in cpus}
        cores = sorted(cores, key=lambda c: (position[c[0]], c[0]))

    excluded = set(binding.get('excluded_cores') or ())
    if excluded:
        all_cores = {c[0] for c in cores}
        if not excluded < all_cores:
            raise LayoutError(f'binding: excluded_cores {sorted(excluded)} are not all '
                              f'cores of the node, or are all of them')

        cores = [c for c in cores if c[0] not in excluded]
        numa = [[c for c in g if c not in excluded] for g in numa]
        sockets = [[c for c in g if c not in excluded] for g in sockets]

    return cores, numa, sockets


def layouts(processor, binding=None):
    """The distinct layouts of a node, in LAYOUT_NAMES order: {name: Layout}.

    A layout identical to an earlier one (one socket that is one NUMA node is also the
    whole node) is left out; `same_as` says which one it equals. `binding`: the site's
    settings (BINDING_KEYS).
    """
    binding = check_binding(binding)
    domains = _domains(processor)
    # NUMA node numbers as the OS has them, before the site's order changes the lists.
    numa_of = {cpu: i for i, cpus in enumerate(domains[1]) for cpu in cpus}
    cores, numa, sockets = _apply_binding(*domains, binding)
    every = sorted(c[0] for c in cores)
    groups = {'per-core': cores, 'per-socket': sockets, 'per-numa': numa,
              'per-node': [every]}
    result = {}
    for name in LAYOUT_NAMES:
        ranks = groups[name]
        threads = {len(cpus) for cpus in ranks}
        if len(threads) != 1:
            # Unequal domains would give ranks unequal work: HPL runs at the slowest.
            continue

        result[name] = Layout(
            name, len(ranks), threads.pop(), tuple(tuple(cpus) for cpus in ranks),
            tuple(tuple(sorted({numa_of[c] for c in cpus})) for cpus in ranks),
            binding.get('tool', 'numactl'))

    return result


def distinct_layouts(processor, binding=None):
    """{name: Layout} without duplicates, and {dropped name: the name it equals}."""
    kept, same_as = {}, {}
    for name, layout in layouts(processor, binding).items():
        twin = next((k for k, v in kept.items() if v.cpus == layout.cpus), None)
        if twin:
            same_as[name] = twin
        else:
            kept[name] = layout

    return kept, same_as


def _cpu_list(cpus):
    return ','.join(str(c) for c in cpus)


def bind_script(layout, rank_env=None):
    """A POSIX shell wrapper, `bind-rank.sh PROGRAM ARGS...`, that runs the program on the
    cores and memory of its node-local rank in `layout`, with `rank_env` (variables for the
    program only, e.g. huge pages through libhugetlbfs) in its environment."""
    cases = []
    for rank, (cpus, nodes) in enumerate(zip(layout.cpus, layout.numa_nodes)):
        # One NUMA node: memory from it only; several (a rank spanning the node):
        # interleaved, so that no thread's memory is all remote.
        memory = (f'--membind={_cpu_list(nodes)}' if len(nodes) == 1
                  else f'--interleave={_cpu_list(nodes)}')
        cases.append(f'  {rank}) cpus={_cpu_list(cpus)}; memory={memory} ;;')

    # With one rank per node, a launcher that sets none of the variables still means rank 0.
    rank_expr = '0' if layout.ranks_per_node == 1 else ''
    for variable in reversed(LOCAL_RANK_VARIABLES):
        rank_expr = f'${{{variable}:-{rank_expr}}}'

    lines = [
        '#!/bin/sh',
        f'# {layout.describe()}: rank i runs on the cores and memory of entry i.',
        '# Written by hpcbench.core.layout; the local rank comes from the launcher.',
        f'rank={rank_expr}',
        'case "$rank" in',
        *cases,
        f'  *) echo "bind-rank.sh: no cores for local rank \'$rank\' in layout {layout.name} '
        f'({layout.ranks_per_node} per node); launcher variables: '
        f'{" ".join(LOCAL_RANK_VARIABLES)}" >&2; exit 97 ;;',
        'esac',
        *(f'export {name}={shlex.quote(str(value))}'
          for name, value in sorted((rank_env or {}).items())),
    ]
    if layout.tool == 'numactl':
        lines += ['if command -v numactl >/dev/null 2>&1; then',
                  '  exec numactl --physcpubind="$cpus" "$memory" "$@"',
                  'fi']

    lines.append('exec taskset -c "$cpus" "$@"')
    return '\n'.join(lines) + '\n'

