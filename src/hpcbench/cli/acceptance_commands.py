"""`hpcbench accept` (a system's acceptance against its contract: run, judge, report, sign;
or --verify an acceptance's directory) and `hpcbench contract init` (a draft contract from
what the suite knows)."""
import argparse
from pathlib import Path

from hpcbench.cli import Worse, system_name


def _contract_path(args):
    from hpcbench.core import paths
    return Path(args.contract) if args.contract else paths.CONTRACTS_DIR / f'{args.system}.yaml'


def verified(verify, directory, allowed_signers, identity, judged_again):
    """`--verify DIR` of accept or watch: `verify` (hpcbench.acceptance.directory.verify or
    watch_record.verify) of DIR; what does not hold, one line each, and exit 1; else what
    was checked: the manifest, the signature as checked, and `judged_again` (in words)."""
    from hpcbench.acceptance import manifest
    try:
        checked = verify(directory, allowed_signers, identity)
    except manifest.ManifestError as err:
        raise RuntimeError(str(err)) from None
    for line in checked.problems:
        print(line)
    if checked.problems:
        raise Worse(f'{directory}: {len(checked.problems)} thing(s) do not hold: the '
                    'record is not the one its runs produced, or its files changed since '
                    f'(signature: {checked.signature})')
    print(f'{directory}: every file as the manifest says; {checked.signature}; '
          f'{judged_again}')


def _verify(args):
    """`hpcbench accept --verify DIR` (hpcbench.acceptance.directory.verify)."""
    from hpcbench.acceptance import directory as directories
    verified(directories.verify, args.verify, args.allowed_signers, args.identity,
             'the verdicts are what its sessions give')


def _accept(args):
    from hpcbench.acceptance import contract, directory as directories, manifest, use_case
    from hpcbench.acceptance.state import DRAIN_LIST, JUNIT_XML
    from hpcbench.core import paths
    from hpcbench.report import acceptance_page
    if args.verify:
        return _verify(args)
    if not args.system:
        raise RuntimeError('give --system SYSTEM (or --verify DIR)')
    path = _contract_path(args)
    if not path.is_file():
        raise RuntimeError(f'{path}: no contract of {args.system} (write a draft with '
                           f'`hpcbench contract init {args.system}`, then edit it)')
    directory = Path(args.output) if args.output else \
        paths.VAR_DIR / use_case.ACCEPTANCE_DIR / args.system
    # The contract read before the directory is made: a contract that is none leaves none.
    try:
        contract.load(path, args.system)
    except contract.ContractError as err:
        raise RuntimeError(str(err)) from None
    acceptance = use_case.Acceptance(args.system, path, directory,
                                     batch_nodes=args.batch_nodes, mode=args.mode,
                                     page=acceptance_page.files)
    try:
        with directories.claimed(directory, args.dry_run):
            if args.dry_run:
                acceptance.dry_run()
                print(f'dry run: every job written (under {paths.VAR_DIR / "stage"}); '
                      'nothing ran')
                return
            assessed = acceptance.run().finish(args.key)
    except (contract.ContractError, manifest.ManifestError) as err:
        raise RuntimeError(str(err)) from None
    for line in summary_lines(assessed.verdicts):
        print(line)
    print(f'\n{args.system}: {assessed.verdict}. Report: {directory / acceptance_page.HTML}; '
          f'drain list: {directory / DRAIN_LIST}; JUnit: {directory / JUNIT_XML}')
    if assessed.verdict == 'FAIL':
        raise Worse(f'{args.system} does not meet its contract')


def summary_lines(verdicts):
    """One line per entry of the EntryVerdicts: its id, verdict, counts and reason; the ids
    padded to the longest (a drafted id names check, figure, partition, stack and case), so
    that a verdict never runs into its id."""
    width = max((len(e.entry.id) for e in verdicts), default=0) + 2
    return [f'{e.entry.id:<{width}}{e.verdict:<8}'
            f'{", ".join(f"{n} {v}" for v, n in e.counts().items() if n)}: {e.reason}'
            for e in verdicts]


def _contract_init(args):
    from hpcbench.acceptance import contract, drafts
    from hpcbench.core import paths
    target = Path(args.output) if args.output else paths.CONTRACTS_DIR / f'{args.system}.yaml'
    if target.exists() and not args.force:
        raise RuntimeError(f'{target} exists: edit it, or give --force to write a new draft '
                           'over it')
    try:
        text = drafts.draft_text(args.system, baseline=args.baseline, factor=args.factor,
                                 checks=args.checks.split(',') if args.checks else None,
                                 settings=args.setting or ())
    except contract.ContractError as err:
        raise RuntimeError(str(err)) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(f'{target}: a draft contract of {args.system}, every value with its source: edit '
          'it to what was committed')


def _share(text):
    """A share of a figure, as --factor takes it: a finite number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f'{text!r} is no share of a figure (a number in '
                                         '(0, 1], e.g. 0.9)')
    return value


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    from hpcbench.acceptance import drafts, plan    # the defaults, where they are kept
    accept = sub.add_parser('accept', help="run a system's acceptance against its contract "
                            '(contracts/SYSTEM.yaml): every node, GPU and pair judged; or '
                            '--verify an acceptance directory')
    accept.add_argument('--system', type=system_name)
    accept.add_argument('--contract', help='the contract (default: contracts/SYSTEM.yaml)')
    accept.add_argument('--output', help='the acceptance directory (default: '
                        'var/acceptance/SYSTEM); run again to resume it')
    accept.add_argument('--dry-run', action='store_true',
                        help='write every job the acceptance runs, run none')
    accept.add_argument('--batch-nodes', type=int, default=None,
                        help=f'nodes per ReFrame run (default {plan.DEFAULT_BATCH_NODES})')
    accept.add_argument('--mode', choices=('quick', 'full'),
                        help="the run's sizes (default: quick here, full on a paper's system)")
    accept.add_argument('--key', help='an SSH private key to sign the manifest with '
                        '(ssh-keygen -Y sign)')
    accept.add_argument('--verify', metavar='DIR',
                        help="check an acceptance directory: every file's sha256, the "
                        'signature, and its verdicts judged again')
    accept.add_argument('--allowed-signers', help="with --verify: the site's allowed "
                        'signers file (ssh-keygen -Y verify)')
    accept.add_argument('--identity', help='with --allowed-signers: the signer to verify')
    accept.set_defaults(func=_accept)

    contract = sub.add_parser('contract', help='acceptance contracts')
    contract_sub = contract.add_subparsers(dest='contract_command', required=True)
    init = contract_sub.add_parser('init', help='write a draft contract of SYSTEM from what '
                                   'the suite knows (its papers\' figures, a stored '
                                   'baseline, the GPU datasheets), every value with its source')
    init.add_argument('system', type=system_name)
    init.add_argument('--output', help='where (default: contracts/SYSTEM.yaml)')
    init.add_argument('--baseline', action='append', help='a stored session UUID to draw '
                      'from, given once per session (default: the newest stored session)')
    init.add_argument('--factor', type=_share, default=drafts.DEFAULT_FACTOR,
                      help='the share of a stored baseline\'s medians committed (default '
                           f'{drafts.DEFAULT_FACTOR:g}; a GPU datasheet\'s figures are '
                           f'committed at {drafts.DATASHEET_SHARE:g} of them, Azure\'s '
                           'published ones whole)')
    init.add_argument('--checks', help='from a stored session: these checks only '
                      '(comma-separated, e.g. HpccCheck)')
    init.add_argument('--setting', action='append', metavar='CHECK.VARIABLE=VALUE',
                      help='what the baseline ran with (its sizes), into the run rules of '
                      'that check\'s entries, e.g. HpccCheck.memory_fraction=0.002')
    init.add_argument('--force', action='store_true', help='write over an existing contract')
    init.set_defaults(func=_contract_init)
