"""README's two commands in a clean Debian 12 root: the proof that a fresh machine needs
nothing but what the project installs itself.

A minimal root is made once with debootstrap from the Debian archive apt is configured with
and kept as a tarball in the per-user cache (`<cache>/clean-root/`). Every check starts from a
fresh copy of it, adds only what a fresh machine has (python3 with venv, make, git, gcc, g++,
ca-certificates: the root's packages) and the host's registry settings (apt sources, the CA
bundle, pip's and npm's configuration, the registry variables), so that the same registries
answer the same way; then a clean clone of the commit, alone, as a user clones it (no
`../shared` beside it: the project passes its tests without it). It mounts proc, sys,
dev, run and dev/shm, runs each command as README says, and on exit, failure or interrupt
kills what still runs inside, unmounts and removes the root. Logs and the report of the run
are copied to `var/clean-root/<time>/`.

`--offline` (with `--bundle`) is a machine without internet that has its operating system's
packages: what the suite asks of Debian is installed first, as the site's image would have
it, then every command runs in a network namespace of its own, with a loopback and nothing
else (no registry, no mirror answers).
"""
import argparse
import contextlib
import datetime
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import child_processes, paths
from hpcbench.report import browser
from hpcbench.results import results_db
from hpcbench.stack import bootstrap, debian
from hpcbench.devtools.root_dirs import (MARKER, ROOT_PREFIX, CleanRootError, copy_host_settings,
                                         host_sources, kill_processes_in, mount_system,
                                         process_identity, remove_root, remove_stale_roots, say)

SUITE = 'bookworm'
# What a fresh machine of this kind has before the project installs anything.
ROOT_PACKAGES = ('python3', 'python3-venv', 'make', 'git', 'gcc', 'g++', 'ca-certificates')
# The commands README starts with, in the order a check runs them: the tests first, on a
# root nothing has touched, then the run.
COMMANDS = ('make test', 'make run')
# Variables through which the registries are reached (certificates, indexes, proxies).
REGISTRY_VARIABLES = re.compile(
    r'^(PIP_(CERT|INDEX_URL|EXTRA_INDEX_URL|TRUSTED_HOST|DEFAULT_TIMEOUT)|SSL_CERT_(FILE|DIR)'
    r'|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO'
    r'|(npm|NPM)_config_\w+|(HTTPS?|NO|ALL)_PROXY|(https?|no|all)_proxy)$')
# How ReFrame starts a test case's line (without its colours).
FIRST_CHECK = re.compile(r'^\[ RUN +\] ')
# What the suite asks of Debian (set-up, the registry-only path, the report's browser): an
# offline root (--offline) has them before the network goes, as a site's image would.
SITE_PACKAGES = tuple(dict.fromkeys((*bootstrap.APT_PACKAGES, *bootstrap.REGISTRY_APT_PACKAGES,
                                     *browser.PACKAGES)))
# Where an offline bundle (--bundle) is put inside the root.
BUNDLE_DIR = 'work/bundle'


# --- What the check runs, and how it reads the outcome -------------------------------------

def readme_commands(readme):
    """The commands of README's first ```sh block (what a new user types)."""
    match = re.search(r'^```sh\n(.*?)^```', readme, re.M | re.S)
    if not match:
        raise CleanRootError('README.md has no ```sh block of set-up commands')

    return [ln.strip() for ln in match.group(1).splitlines() if ln.strip()]


def is_first_check(line):
    """Whether `line` is ReFrame's line that starts a test case."""
    return bool(FIRST_CHECK.match(results_db.without_colours(line)))


def commands_to_run(commands, bundle=None):
    """[(README's command, what runs, its log's name)]: `make run` is given the offline
    `bundle` (copied to BUNDLE_DIR inside the root) as BUNDLE=; the logs keep README's
    names (a path has slashes), numbered from the second time a command runs."""
    inside = f'/{BUNDLE_DIR}/{Path(bundle).name}' if bundle else None
    runs = []
    for index, command in enumerate(commands):
        # A command given twice (a second run) keeps both logs.
        again = commands[:index].count(command)
        runs.append((command,
                     f'{command} BUNDLE={shlex.quote(inside)}'
                     if inside and command == 'make run' else command,
                     f'{command.replace(" ", "-")}{f"-{again + 1}" if again else ""}.log'))
    return runs


def debian_archive_uri(sources_files):
    """The URI apt takes Debian's main archive from: the first `deb` source of SUITE with
    component main, in deb822 (.sources) or one-line (.list) form."""
    for text in sources_files:
        for stanza in re.split(r'\n\s*\n', text):
            fields = dict(re.findall(r'^([A-Za-z-]+):\s*(.*)$', stanza, re.M))
            if ('deb' in fields.get('Types', '').split()
                    and SUITE in fields.get('Suites', '').split()
                    and 'main' in fields.get('Components', '').split()):
                return fields['URIs'].split()[0]

        for line in text.splitlines():
            words = re.sub(r'\[[^]]*\]', '', line.split('#')[0]).split()
            if words[:1] == ['deb'] and len(words) >= 4 and words[2] == SUITE \
                    and 'main' in words[3:]:
                return words[1]

    raise CleanRootError(f'no Debian archive for {SUITE} main in apt\'s sources')


def outcome_counts(command, log):
    """'N passed, N failed, ...' read from a command's output: pytest's closing line for the
    tests, ReFrame's run summary for the run; None when the output has neither."""
    pytest_line = re.findall(r'^=+ (.*\d+ (?:passed|failed|error|errors|skipped).*) in '
                             r'[\d.]+s', log, re.M)
    if pytest_line:
        counts = dict((kind.rstrip('s') if kind.startswith('error') else kind, int(n))
                      for n, kind in re.findall(r'(\d+) (\w+)', pytest_line[-1]))
        return {k: counts.get(k, 0) for k in ('passed', 'failed', 'error', 'skipped')}

    ran = re.findall(r'Ran (\d+)/(\d+) test case\(s\) from \d+ check\(s\) \((\d+) failure\(s\), '
                     r'(?:\d+ expected failure\(s\), )?(\d+) skipped, (\d+) aborted\)', log)
    if ran:
        total_ran, _, failed, skipped, aborted = map(int, ran[-1])
        return {'passed': total_ran - failed - aborted, 'failed': failed + aborted,
                'skipped': skipped}

    return None


@dataclass
class Outcome:
    command: str
    status: int
    seconds: float
    counts: dict
    # Seconds from the command's start to ReFrame's first test case (a run's set-up time).
    first_check: float = None

    def line(self):
        minutes, seconds = divmod(round(self.seconds), 60)
        counts = (', '.join(f'{n} {k}' for k, n in self.counts.items())
                  if self.counts else 'no test summary in its output')
        first = (f'; first check after {self.first_check:.0f} s'
                 if self.first_check is not None else '')
        return (f'{self.command}: exit {self.status} in {minutes}m{seconds:02d}s: '
                f'{counts}{first}')


# --- The pristine root --------------------------------------------------------------------

def pristine_tarball(uri):
    """The cached root for `uri`, made with debootstrap when missing."""
    key = hashlib.sha256(f'{SUITE} {uri} {" ".join(ROOT_PACKAGES)}'.encode()).hexdigest()[:16]
    tarball = paths.cache_dir() / 'clean-root' / f'{SUITE}-minbase-{key}.tar'
    if tarball.exists():
        return tarball

    debian.ensure(['debootstrap'], say)
    tarball.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_roots(tarball.parent)
    # Marked as ours like a root (a build killed midway is removed by the next check), and
    # the root made below it, so that the marker stays out of the tarball.
    build = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=tarball.parent))
    try:
        mark_as_ours(build, f'debootstrap for {tarball.name}')
        target = build / 'root'
        target.mkdir()
        target.chmod(0o755)   # the root's `/`
        say(f'debootstrap --variant=minbase {SUITE} from {uri} (once; kept as {tarball})')
        start = time.monotonic()
        subprocess.run(['debootstrap', '--variant=minbase',
                        f'--include={",".join(ROOT_PACKAGES)}', SUITE, str(target), uri],
                       check=True, stdout=subprocess.DEVNULL)
        partial = tarball.with_suffix('.partial')
        subprocess.run(['tar', '-C', str(target), '--numeric-owner', '-cf', str(partial), '.'],
                       check=True)
        partial.rename(tarball)
        say(f'pristine root made in {time.monotonic() - start:.0f} s')
    finally:
        remove_root(build)

    return tarball


def mark_as_ours(directory, what):
    """Write the marker that makes `directory` known as ours, and as stale once the
    process that made it no longer runs (remove_stale_roots)."""
    (directory / MARKER).parent.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text(f'made by hpcbench clean-root: {what}\n'
                                    f'owner {process_identity(os.getpid())}\n')


# --- A root of our own, and its removal ---------------------------------------------------


@contextlib.contextmanager
def clean_root(project, commit, workdir=None, tarball=None, bundle=None):
    """A fresh root (from `tarball`, default: the pristine Debian root) with a clean clone
    of `commit` at /work/main, nothing beside it, and an offline `bundle`
    (hpcbench.stack.bundle) in /work/bundle; removed whatever happens."""
    if tarball is None:
        tarball = pristine_tarball(debian_archive_uri([p.read_text() for p in host_sources()]))
    roots = workdir or tarball.parent
    remove_stale_roots(roots)
    root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=roots))
    try:
        # The marker first: a root this check leaves behind (killed, the machine restarted)
        # is known as ours, and as stale once its owner no longer runs.
        mark_as_ours(root, f'from {tarball.name}')
        subprocess.run(['tar', '-C', str(root), '--numeric-owner', '-xf', str(tarball)],
                       check=True)
        # It is `/` inside, and mkdtemp's 0700 (ours, or the one a tarball's `./` carries)
        # would keep every user but root out: munge's postinst runs `su munge -s /bin/sh`.
        root.chmod(0o755)
        copy_host_settings(root)
        work = root / 'work'
        work.mkdir(exist_ok=True)
        subprocess.run(['git', 'clone', '--quiet', '--no-hardlinks', str(project),
                        str(work / 'main')], check=True)
        subprocess.run(['git', '-C', str(work / 'main'), 'checkout', '--quiet', '--detach',
                        commit], check=True)
        if bundle:
            (root / BUNDLE_DIR).mkdir(parents=True)
            shutil.copyfile(bundle, root / BUNDLE_DIR / bundle.name)
        mount_system(root)
        say(f'root {root}: Debian {SUITE} ({", ".join(ROOT_PACKAGES)}), commit {commit[:12]}')
        yield root
    finally:
        remove_root(root)
        say(f'removed {root}')


def install_site_packages(root, packages=SITE_PACKAGES):
    """Debian's `packages` in the root, from the network (what a site's image has)."""
    say(f'the site\'s Debian packages, before the network goes: {" ".join(packages)}')
    start = time.monotonic()
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'DEBIAN_FRONTEND': 'noninteractive',
           'LANG': 'C.UTF-8'}
    for step in (['apt-get', 'update', '-q'],
                 ['apt-get', 'install', '-y', '-q', '--no-install-recommends', *packages]):
        proc = subprocess.run(['chroot', str(root), *step], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise CleanRootError(f'`{" ".join(step[:2])}` in the root failed (exit '
                                 f'{proc.returncode}): {proc.stderr.strip()[-500:]}')
    say(f'installed in {time.monotonic() - start:.0f} s')


# The command runs in a network namespace of its own with only a loopback: the node's name
# (127.0.0.1 in /etc/hosts, copied from the host) still answers, MPI's launchers still work.
OFFLINE = ['unshare', '--net', '--', 'sh', '-c', 'ip link set lo up && exec "$@"', 'offline']


def run_inside(root, command, log_path, timeout, offline=False):
    """`command` in /work/main of the root, as a new user's login shell would run it: a
    clean environment but for the registry variables; output to the terminal and a log.
    `offline`: with no network but the loopback (OFFLINE)."""
    env = {'HOME': '/root', 'USER': 'root', 'LOGNAME': 'root', 'LANG': 'C.UTF-8',
           'TERM': 'dumb', 'PATH': '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
           **{k: v for k, v in os.environ.items() if REGISTRY_VARIABLES.match(k)}}
    if os.environ.get('CI'):
        env['CI'] = os.environ['CI']
    argv = [*(OFFLINE if offline else []), 'chroot', str(root), '/usr/bin/env', '-i',
            *(f'{k}={v}' for k, v in sorted(env.items())),
            '/bin/bash', '-c', f'cd /work/main && {command}']
    say(f'$ {command}{"   (offline: loopback only)" if offline else ""}')
    start = time.monotonic()
    output = []
    first_check = None
    timed_out = threading.Event()

    def stop():
        timed_out.set()
        say(f'{command}: over {timeout} s, stopping it')
        kill_processes_in(root)

    with open(log_path, 'w') as log:
        # Everything from the start of the command on is inside the try: a signal may come
        # at any moment, also while the child is being started.
        proc = None
        timer = threading.Timer(timeout, stop)
        timer.daemon = True
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, errors='replace')
            timer.start()
            for line in proc.stdout:
                if first_check is None and is_first_check(line):
                    first_check = time.monotonic() - start
                sys.stdout.write(line)
                log.write(line)
                output.append(line)
            status = proc.wait()
        finally:
            timer.cancel()
            if proc is None or proc.poll() is None:
                kill_processes_in(root)
                if proc is not None:
                    proc.wait()

    if timed_out.is_set():
        status = 124
    text = ''.join(output)
    return Outcome(command, status, time.monotonic() - start, outcome_counts(command, text),
                   first_check)


def check(commit='HEAD', commands=COMMANDS, timeout=2400, workdir=None, bundle=None,
          offline=False):
    """Run `commands` (README's) in a clean root; print a summary; return the exit status
    (0 when every command exited 0). `bundle`: an offline bundle that `make run` is given
    (BUNDLE=), as on a machine without internet that received it; `offline`: the commands
    run with no network, on a root that has the site's Debian packages."""
    if os.geteuid() != 0:
        raise CleanRootError('a clean root needs root (debootstrap, chroot, mount)')
    if Path('/', MARKER).exists():
        raise CleanRootError('already inside a clean root')

    project = paths.PROJECT_ROOT
    listed = readme_commands((project / 'README.md').read_text())
    unknown = [c for c in commands if c not in listed]
    if unknown:
        raise CleanRootError(f'not among README\'s set-up commands ({", ".join(listed)}): '
                             f'{", ".join(unknown)}')
    if bundle:
        bundle = Path(bundle).resolve()
        if not bundle.is_file():
            raise CleanRootError(f'--bundle {bundle}: no such file')
    if offline and not bundle:
        raise CleanRootError('--offline needs --bundle: without internet the suite gets its '
                             'stack from an offline bundle (make bundle)')
    runs = commands_to_run(commands, bundle)
    sha = subprocess.run(['git', '-C', str(project), 'rev-parse', '--verify', commit],
                         capture_output=True, text=True, check=True).stdout.strip()
    stamp = datetime.datetime.now().strftime('%Y%m%dT%H%M%S')
    logs = paths.VAR_DIR / 'clean-root' / stamp
    logs.mkdir(parents=True, exist_ok=True)

    child_processes.end_on_signals()    # like Ctrl-C: through the clean-up
    outcomes = []
    start = time.monotonic()
    with clean_root(project, sha, workdir, bundle=bundle) as root:
        if offline:
            install_site_packages(root)
        for _, run, log_name in runs:
            outcomes.append(run_inside(root, run, logs / log_name, timeout, offline))
        report = root / 'work/main/var/report'
        if report.is_dir():
            shutil.copytree(report, logs / 'report', dirs_exist_ok=True)

    say(f'summary (commit {sha[:12]}, Debian {SUITE}{", offline" if offline else ""}, '
        f'{time.monotonic() - start:.0f} s in all; logs in {logs}):')
    for outcome in outcomes:
        print(f'  {outcome.line()}', flush=True)
    failed = [o for o in outcomes if o.status != 0]
    say('PASSED: every command exited 0' if not failed
        else f'FAILED: {", ".join(o.command for o in failed)}')
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog='hpcbench clean-root', description=__doc__.split('\n')[0])
    parser.add_argument('--commit', default='HEAD', help='the commit to clone (default HEAD)')
    parser.add_argument('--command', action='append', dest='commands',
                        help=f'a README command to run (repeatable; default: {", ".join(COMMANDS)})')
    parser.add_argument('--timeout', type=int, default=2400, help='seconds per command')
    parser.add_argument('--bundle', help='an offline bundle (make bundle) for make run: '
                                         'copied into the root, given as BUNDLE=')
    parser.add_argument('--offline', action='store_true',
                        help='with --bundle: the site\'s Debian packages installed first, then '
                             'the commands run with no network but a loopback')
    args = parser.parse_args(argv)
    try:
        return check(args.commit, tuple(args.commands or COMMANDS), args.timeout,
                     bundle=args.bundle, offline=args.offline)
    except (CleanRootError, debian.MissingPackages) as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f'clean-root: interrupted ({err or "SIGINT"}); the root was removed',
              file=sys.stderr)
        return 130


if __name__ == '__main__':
    sys.exit(main())
