"""`hpcbench` commands on the software stack: bootstrap, install and setup (what `make run`
runs first), buildcache, bundle (an offline archive), blas (show or change HPL's default
BLAS: the one way the stack changes), shell (a system's stack in a shell), provenance
(the session's facts for `reframe --session-extras`), new-system (a site's own Slurm cluster
described from its controller)."""
import datetime

from hpcbench.cli import system_name
from hpcbench.stack import spack
from hpcbench.stack.machine_systems import machine_systems


def _bootstrap(args):
    from hpcbench.stack import bootstrap
    if args.command == 'setup':
        if args.registry_only:
            bootstrap.registry_only()
        else:
            if args.bundle:
                from hpcbench.stack import bundle_unpack
                bundle_unpack.unpack(args.bundle)
            bootstrap.setup(refresh=args.refresh, system=args.system)
        return

    found = bootstrap.bootstrap(refresh=args.refresh)
    if args.command == 'install':
        bootstrap.install_environment(found, args.system)


def _provenance(args):
    """The session's provenance as ReFrame --session-extras (what `make run` passes)."""
    from hpcbench.stack.machine_systems import session_extras
    print(session_extras(args.system))


def _blas(args):
    """HPL's default BLAS on this machine: shown (where it came from, its changes, what the
    newest measurement suggests), or changed by the user (--default): the one way the stack
    a run measures changes."""
    from hpcbench.stack import blas
    if args.default:
        if args.default not in blas.BY_SPEED:
            raise RuntimeError(f'--default {args.default}: the BLAS libraries are '
                               f'{", ".join(blas.BY_SPEED)}')
        try:
            choice, uuid = blas.suggested_default()
        except RuntimeError:        # a results database that cannot be read: still the user's
            choice = None
        why = 'asked: hpcbench blas --default' + (
            f' (session {uuid} measured: {choice.reason})'
            if choice and choice.order[0] == args.default else '')
        old, new = blas.set_default(args.default, why)
        if old == new:
            print(f"HPL's default BLAS is {new} already: nothing changes")
            return
        print(f"HPL's default BLAS: {old} -> {new} (recorded in {blas.order_path()}). The "
              'next make run concretizes spack-envs/local again and builds HPL and HPCC with '
              f'{new} on every MPI stack; its sessions name the change in their provenance, '
              "and compare reports figures across it as 'stack changed', not as the "
              "machine's. HPCBENCH_BLAS still overrides it for one run.")
        return

    order = blas.recorded_order()
    history = blas.choice_history()
    print(f"HPL's default BLAS: {order[0]} ({blas.choice_provenance()['blas_default_from']}); "
          f'the others, each on the first MPI stack: {", ".join(order[1:])}')
    for change in history:
        print(f'  {change["time"]}: {change["from"]} -> {change["to"]}: {change["reason"]}')
    choice, uuid = blas.suggested_default()
    if choice:
        print(f'DGEMM ceilings of session {uuid}: {choice.reason}'
              + (f' (to make it the default: hpcbench blas --default {choice.order[0]})'
                 if choice.changed else ''))


def _shell(args):
    from hpcbench.stack import shell
    print(shell.shell_code(args.system, args.mpi, args.blas), end='')


def _bundle(args):
    from hpcbench.stack import bundle
    start = datetime.datetime.now()
    output, manifest = bundle.make(args.system, args.output, binaries=not args.sources_only)
    print(bundle.describe(output, manifest))
    print(f'made in {(datetime.datetime.now() - start).total_seconds():.0f} s; on a machine '
          f'without internet: make run BUNDLE={output}')


def _new_system(args):
    from hpcbench.stack import new_system
    written, asks = new_system.from_slurm(
        args.name, force=args.force, access=args.access, io_directory=args.io_directory,
        timeout=args.job_timeout, mpi_prefixes=args.mpi)
    print(f'described {args.name}; wrote, for review:')
    for path in written:
        print(f'  {path}')
    if asks:
        print(f'to set by hand in site-configs/{args.name}.yaml (the same list heads it):')
        for ask in asks:
            print(f'  - {ask}')
    print(f'then: make dry-run SYSTEM={args.name}; make run SYSTEM={args.name}')


def _push_buildcache(args):
    from hpcbench.stack import bootstrap
    bootstrap.push_buildcache(spack.locate_or_clone(), args.system)


def _register_bundles(sub, systems):
    """The build cache's and the offline bundle's parsers."""
    cache = sub.add_parser('buildcache', help="push an environment's builds to the Spack "
                                              'build cache directory (kept between pipelines)')
    cache.add_argument('--system', default='local', choices=systems)
    cache.set_defaults(func=_push_buildcache)
    offline = sub.add_parser('bundle', help="write one archive with all a machine without "
                                            "internet needs for a system's Spack stack "
                                            '(make run BUNDLE=<it> there)')
    offline.add_argument('--system', default='local', choices=systems)
    offline.add_argument('--output', help='directory (default: var/bundles)')
    offline.add_argument('--sources-only', action='store_true',
                         help='no build cache: the receiving machine builds everything from '
                              "the mirror's sources (binaries that do not fit its CPUs)")
    offline.set_defaults(func=_bundle)


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    systems = machine_systems()
    for name, text in (('bootstrap', 'set up this machine for Spack (idempotent)'),
                       ('install', 'bootstrap, then concretize and install '
                                   'spack-envs/<system>'),
                       ('setup', 'install when a Spack is found or can be cloned, else set '
                                 'up the registry-only path (what `make run` does)')):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument('--refresh', action='store_true',
                         help='detect compilers and build tools again')
        if name != 'bootstrap':
            cmd.add_argument('--system', default='local', choices=systems,
                             help='the system on this machine whose environment to install')
        if name == 'setup':
            cmd.add_argument('--registry-only', action='store_true',
                             help='only the registry-only path (Debian HPCC), no Spack')
            cmd.add_argument('--bundle', metavar='ARCHIVE',
                             help='first unpack this offline bundle (make bundle) into the '
                                  'per-user cache: Spack, sources, build cache, wheels')
        cmd.set_defaults(func=_bootstrap)

    _register_bundles(sub, systems)
    choose = sub.add_parser('blas', help="show HPL's default BLAS on this machine, or change "
                                         'it (--default): the one way the stack changes')
    choose.add_argument('--default', metavar='NAME',
                        help='make this library the default (mkl, openblas-spack, openblas, '
                             'blis): the next make run builds HPL with it')
    choose.set_defaults(func=_blas)
    env_shell = sub.add_parser('shell', help="print the shell code that puts a system's "
                                             'Spack-built benchmarks and one MPI on PATH: '
                                             'eval "$(.venv/bin/hpcbench shell)"')
    env_shell.add_argument('--system', default='local', choices=systems)
    env_shell.add_argument('--mpi', help='the MPI stack (default: the first of this '
                                         'machine: openmpi, mpich, intelmpi, mvapich2)')
    env_shell.add_argument('--blas', help="HPL's and HPCC's BLAS (default: the system's "
                                          'default; another one is built on the first MPI)')
    env_shell.set_defaults(func=_shell)
    facts = sub.add_parser('provenance', help="print the session's provenance (project and "
                                              'Spack commits, spack.lock hash, host) as '
                                              'reframe --session-extras')
    facts.add_argument('--system', type=system_name, default='local')
    facts.set_defaults(func=_provenance)
    _register_new_system(sub)


def _register_new_system(sub):
    """`hpcbench new-system`'s parser."""
    describe = sub.add_parser('new-system', help="describe the Slurm cluster this login node "
                                                 'reaches as a system of the suite: '
                                                 'site-configs/NAME.yaml and .py, '
                                                 'spack-envs/NAME, references/NAME.yaml')
    describe.add_argument('name', help='the system name (lower case, digits, -)')
    describe.add_argument('--io-directory', metavar='DIR',
                          help='where IOR writes: a directory on the parallel file system '
                               'every node mounts')
    describe.add_argument('--access', action='append', default=[], metavar='OPTION',
                          help='an sbatch option every job needs, e.g. --access=--account=me '
                               '(repeatable)')
    describe.add_argument('--mpi', action='append', default=[], metavar='PREFIX',
                          help="an MPI the cluster installed (Open MPI, MPICH, MVAPICH2: the "
                               "prefix whose bin/ holds its mpicc), used instead of the login "
                               "node's own of that MPI (repeatable)")
    describe.add_argument('--job-timeout', type=int, default=600, metavar='SECONDS',
                          help='how long the short job on each partition may wait and run')
    describe.add_argument('--force', action='store_true',
                          help='describe again a system this command wrote')
    describe.set_defaults(func=_new_system)
