"""The clean-root check (hpcbench.devtools.clean_root): what it reads (README's commands, apt's
sources, the commands' outcomes) and, for real as root, that a root with a mount and an
orphaned process inside is removed completely, also when the check is interrupted."""
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, signals_as_from_a_terminal
from hpcbench.devtools import clean_root, root_dirs

OUTCOMES = FIXTURES / 'clean-root'

as_root = pytest.mark.skipif(os.geteuid() != 0, reason='a root needs root (chroot, mount)')


def not_nested(test):
    """A test that makes clean roots: skipped inside one, so run on the machine itself."""
    inside = pytest.mark.skipif(Path('/', clean_root.MARKER).exists(),
                                reason='already inside a clean root')
    return pytest.mark.machine_dependent(inside(test))


def test_readme_starts_with_the_commands_the_check_runs():
    listed = clean_root.readme_commands((ROOT / 'README.md').read_text())
    assert set(clean_root.COMMANDS) <= set(listed)
    with pytest.raises(clean_root.CleanRootError, match='no ```sh block'):
        clean_root.readme_commands('# a README without commands\n')


def test_the_first_test_case_is_found_in_reframe_s_real_output():
    # Lines captured from a run in the clean root (ReFrame colours them in a pipe too).
    assert clean_root.is_first_check(
        '[ \x1b[32mRUN     \x1b[0m ] HpccBuild ~local:default+openmpi /af4e0494 '
        '@local:default+openmpi\n')
    assert clean_root.is_first_check('[ RUN      ] StreamCheck /1b2c3d4e @local:default\n')
    assert not clean_root.is_first_check('[==========] Running 61 check(s)\n')
    assert not clean_root.is_first_check(
        '[ \x1b[32m      OK\x1b[0m ] ( 66/118) ImbGroupCheck /26c3c5ab\n')


def test_make_run_is_given_the_bundle_and_the_logs_keep_readme_s_names(tmp_path):
    # A second run is its own command and log (the bundle's path has slashes: a log named
    # after it could not be opened).
    runs = clean_root.commands_to_run(('make test', 'make run', 'make run'),
                                      tmp_path / "it's.tar.gz")
    bundled = "make run BUNDLE='/work/bundle/it'\"'\"'s.tar.gz'"
    assert runs == [('make test', 'make test', 'make-test.log'),
                    ('make run', bundled, 'make-run.log'),
                    ('make run', bundled, 'make-run-2.log')]
    assert clean_root.commands_to_run(('make run',)) == [('make run', 'make run',
                                                           'make-run.log')]


DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_debian_archive_is_the_one_apt_uses():
    assert clean_root.debian_archive_uri([DEB822]) == 'http://deb.debian.org/debian'
    one_line = ('# comment\ndeb-src http://src.example/debian bookworm main\n'
                'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main '
                'contrib\n')
    assert clean_root.debian_archive_uri([one_line]) == 'http://mirror.example/debian'
    with pytest.raises(clean_root.CleanRootError, match='no Debian archive for bookworm'):
        clean_root.debian_archive_uri(['deb http://x/debian trixie main\n'])
    # This machine's own sources name one.
    assert clean_root.debian_archive_uri([p.read_text() for p in clean_root.host_sources()])


def test_outcomes_are_read_from_real_pytest_and_reframe_outputs():
    pytest_log = (OUTCOMES / 'make-test-tail.log').read_text()
    assert clean_root.outcome_counts('make test', pytest_log) == {
        'passed': 14, 'failed': 1, 'error': 0, 'skipped': 3}
    run_log = (OUTCOMES / 'make-run-tail.log').read_text()
    assert clean_root.outcome_counts('make run', run_log) == {
        'passed': 3, 'failed': 11, 'skipped': 0}
    assert clean_root.outcome_counts('make run', 'make: *** [run] Error 2\n') is None
    line = clean_root.Outcome('make run', 2, 75.4, None).line()
    assert line == 'make run: exit 2 in 1m15s: no test summary in its output'


def _mini_root(directory, programs=('/bin/bash', '/usr/bin/env', '/bin/sleep')):
    """A root with just these programs and the libraries they load."""
    for program in programs:
        libs = subprocess.run(['ldd', program], capture_output=True, text=True).stdout
        needed = [program] + [w for w in libs.split() if w.startswith('/')]
        for path in needed:
            target = directory / path.lstrip('/')
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(path), target)
    return directory


def _alive(pid):
    """A process that still runs (a zombie waiting for init to reap it does not)."""
    try:
        return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, IndexError):
        return False


def _orphan_inside(root):
    """A real orphan: a process started inside `root` whose parent has exited."""
    subprocess.run(['setsid', 'sh', '-c', f'chroot {root} /bin/sleep 600 &'], check=True)
    for _ in range(50):
        if root_dirs.processes_in(root):
            return root_dirs.processes_in(root)
        time.sleep(0.1)
    raise AssertionError('the orphan did not start')


@as_root
def test_a_root_with_mounts_and_an_orphan_inside_is_removed_and_the_host_untouched(tmp_path):
    root = Path(tmp_path / f'{clean_root.ROOT_PREFIX}x')
    _mini_root(root)
    root_dirs.mount_system(root)
    orphans = _orphan_inside(root)
    assert len(root_dirs.mounts_under(root)) >= 5

    root_dirs.remove_root(root)
    assert not root.exists()
    assert not root_dirs.mounts_under(tmp_path)
    assert not any(_alive(pid) for pid in orphans)
    # The host's /dev and /sys were bound, never removed or unmounted.
    assert Path('/dev/null').exists() and Path('/sys/kernel').is_dir()
    assert os.path.ismount('/proc')


def test_a_directory_not_made_by_the_check_is_never_removed(tmp_path):
    mine = tmp_path / 'results'
    mine.mkdir()
    (mine / 'keep.txt').write_text('a user file\n')
    with pytest.raises(clean_root.CleanRootError, match='not a clean root made by this check'):
        root_dirs.remove_root(mine)
    assert (mine / 'keep.txt').exists()


INTERRUPTED_CHECK = """
import sys
from pathlib import Path
from hpcbench.core import child_processes
from hpcbench.devtools import clean_root, root_dirs
child_processes.end_on_signals()
tarball, workdir = map(Path, sys.argv[1:3])
command, offline = sys.argv[3], sys.argv[4] == 'offline'
with clean_root.clean_root(clean_root.paths.PROJECT_ROOT, 'HEAD', workdir, tarball) as root:
    print(root, flush=True)
    clean_root.run_inside(root, command, workdir / 'inside.log', 900, offline)
"""


def _mini_tarball(tmp_path):
    """A small root as a tarball and a workdir for roots."""
    tarball = tmp_path / 'mini.tar'
    mini = _mini_root(tmp_path / 'mini')
    mini.chmod(0o700)   # as debootstrap's temporary directory: the tarball's `./` is 0700
    with tarfile.open(tarball, 'w') as tar:
        tar.add(mini, arcname='.')
    workdir = tmp_path / 'roots'
    workdir.mkdir()
    return tarball, workdir


def _start_check(tarball, workdir, command='sleep 600', offline=False):
    """A real check in a process of its own, running `command` in its root; returns the
    process, its root and the processes inside it."""
    check = subprocess.Popen([sys.executable, '-c', INTERRUPTED_CHECK, str(tarball),
                              str(workdir), command,
                              'offline' if offline else 'online'],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=signals_as_from_a_terminal)
    root = Path(next(ln for ln in check.stdout if not ln.startswith('[')).strip())
    deadline = time.monotonic() + 60
    while not root_dirs.processes_in(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    return check, root, root_dirs.processes_in(root)


def _stop(check):
    if check.poll() is None:
        check.terminate()   # through the check's own clean-up
        check.wait(timeout=60)


@as_root
@not_nested
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_check_leaves_no_root_mount_or_process(tmp_path, sig):
    check, root, inside = _start_check(*_mini_tarball(tmp_path))
    try:
        _interrupt(check, sig, root, inside)
    finally:
        _stop(check)


def _interrupt(check, sig, root, inside):
    workdir = root.parent
    # The clone alone, as a user has it: nothing beside it (no ../shared).
    assert (root / 'work/main/README.md').exists() and sorted(os.listdir(root / 'work')) == ['main']
    # `/` inside is open to every user, as on a machine (munge's postinst runs as munge).
    assert root.stat().st_mode & 0o777 == 0o755
    assert inside, 'the command never started inside the root'

    check.send_signal(sig)
    check.wait(timeout=60)
    assert check.returncode != 0
    assert not root.exists()
    assert not root_dirs.mounts_under(workdir)
    assert not any(_alive(pid) for pid in inside)


@as_root
@not_nested
def test_a_root_left_by_a_killed_check_is_removed_by_the_next_one_a_running_one_s_kept(
        tmp_path):
    tarball, workdir = _mini_tarball(tmp_path)
    # A check killed outright cleans nothing up: its root, mounts and command stay.
    killed, stale, orphans = _start_check(tarball, workdir)
    killed.kill()
    killed.wait(timeout=60)
    assert orphans and all(_alive(pid) for pid in orphans) and root_dirs.mounts_under(stale)
    running, live, inside = _start_check(tarball, workdir)
    try:
        root_dirs.remove_stale_roots(workdir)
        assert not stale.exists() and not root_dirs.mounts_under(stale)
        assert not any(_alive(pid) for pid in orphans)
        assert live.exists() and root_dirs.processes_in(live) == inside
    finally:
        _stop(running)
    assert not live.exists()


@as_root
@not_nested
def test_an_offline_command_has_the_loopback_and_no_other_network(tmp_path):
    tarball, workdir = _mini_tarball(tmp_path)
    check, root, _ = _start_check(
        tarball, workdir, offline=True,
        command='echo "$(</proc/net/dev)" > /work/net.txt; '
                'echo "$(</proc/net/route)" > /work/route.txt; sleep 600')
    route = root / 'work/route.txt'
    try:
        deadline = time.monotonic() + 30
        while not (route.exists() and route.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        interfaces = {ln.split(':')[0].strip()
                      for ln in (root / 'work/net.txt').read_text().splitlines() if ':' in ln}
        assert interfaces == {'lo'}
        # No route: nothing beyond the node answers (the host has its default route).
        assert len((root / 'work/route.txt').read_text().splitlines()) == 1
        assert len(Path('/proc/net/route').read_text().splitlines()) > 1
    finally:
        _stop(check)


PRISTINE_BUILD = """
from hpcbench.devtools import clean_root, root_dirs
clean_root.pristine_tarball(clean_root.debian_archive_uri(
    [p.read_text() for p in clean_root.host_sources()]))
"""


@as_root
@not_nested
def test_a_pristine_root_s_build_killed_midway_is_removed_by_the_next_check(
        tmp_path, monkeypatch):
    """debootstrap killed outright (with the check that ran it) leaves its half-made root;
    the next check removes it, with what debootstrap had mounted inside."""
    cache = tmp_path / 'cache'
    monkeypatch.setenv('HPCBENCH_CACHE', str(cache))
    build = subprocess.Popen([sys.executable, '-c', PRISTINE_BUILD], cwd=ROOT,
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             env={**os.environ, 'PYTHONPATH': str(ROOT / 'src')})
    roots = cache / 'clean-root'
    # Midway: installing the base system, with /proc (and more) mounted inside.
    deadline = time.monotonic() + 300
    while not (roots.is_dir() and root_dirs.mounts_under(roots)) and \
            time.monotonic() < deadline and build.poll() is None:
        time.sleep(0.2)
    os.killpg(build.pid, signal.SIGKILL)
    build.wait(timeout=60)
    [left] = roots.glob(f'{clean_root.ROOT_PREFIX}*')
    assert (left / 'root' / 'debootstrap').is_dir() and (left / clean_root.MARKER).is_file()
    assert root_dirs.mounts_under(left)

    root_dirs.remove_stale_roots(roots)
    assert not left.exists() and not root_dirs.mounts_under(roots)
    assert not list(roots.glob('*.tar')) and not list(roots.glob('*.partial'))
