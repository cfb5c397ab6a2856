"""The offline bundle: written reproducibly, verified whole before anything is unpacked, and
refused cleanly when damaged (real truncated, flipped and altered archives)."""
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import BIN, ROOT, needs_root, signals_as_from_a_terminal
from hpcbench.core import paths
from hpcbench.devtools import clean_root
from hpcbench.stack import bundle, bundle_unpack, spack


def _small_bundle(base, spack_version='1.1.0'):
    """A bundle's tree with a few files of each part (a stand-in Spack: two files are enough
    for the archive's rules; the real one is bundled in the Spack test below)."""
    tree = base / bundle.TOP
    files = {
        'spack/bin/spack': '#!/bin/sh\necho spack\n',
        'spack/lib/spack/spack/__init__.py': f'version = "{spack_version}"\n',
        'spack-packages/repos/spack_repo/builtin/repo.yaml': 'repo:\n  namespace: builtin\n',
        'mirror/_source-cache/archive/ab/abcdef.tar.gz': 'not really a tarball\n',
        'buildcache/v3/layout.json': '{"signing": false}\n',
        'locks/0123.lock': '{"roots": []}\n',
    }
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / 'spack/bin/spack').chmod(0o755)
    (tree / 'mirror/hpl').mkdir()
    (tree / 'mirror/hpl/hpl-2.3.tar.gz').symlink_to('../_source-cache/archive/ab/abcdef.tar.gz')
    manifest = {'format': bundle.FORMAT, 'system': 'local',
                'spack': {'release': 'v1.1.0', 'commit': ''},
                'spack_packages': {'release': 'v2025.11.0', 'commit': ''},
                'lock': {'sha256': '0' * 64, 'concretization_key': '0123'},
                'files': bundle.file_digests(tree)}
    (tree / bundle.MANIFEST).write_text(json.dumps(manifest, sort_keys=True))
    return tree


@pytest.fixture
def archive(tmp_path):
    tree = _small_bundle(tmp_path / 'made')
    output = tmp_path / 'hpcbench-local-test.tar.gz'
    bundle.write_archive(tree, output)
    return output


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty per-user cache that does not exist yet."""
    where = tmp_path / 'cache'
    monkeypatch.setenv('HPCBENCH_CACHE', str(where))
    return where


def test_the_same_files_give_the_same_archive_byte_for_byte(tmp_path, archive):
    again = tmp_path / 'again'
    tree = _small_bundle(again)
    # Other times and permissions of the same files change nothing.
    os.utime(tree / 'locks/0123.lock', (1e9, 1e9))
    (tree / 'locks/0123.lock').chmod(0o600)
    bundle.write_archive(tree, again / 'b.tar.gz')
    assert (again / 'b.tar.gz').read_bytes() == archive.read_bytes()


def test_a_whole_bundle_is_unpacked_into_an_empty_cache(archive, cache):
    manifest = bundle_unpack.unpack(archive)
    assert manifest['lock']['concretization_key'] == '0123'
    assert (cache / 'spack/bin/spack').read_text() == '#!/bin/sh\necho spack\n'
    assert os.access(cache / 'spack/bin/spack', os.X_OK)
    assert (cache / 'mirror/hpl/hpl-2.3.tar.gz').read_text() == 'not really a tarball\n'
    assert sorted(p.name for p in cache.iterdir()) == [
        'buildcache', 'locks', 'mirror', 'spack', 'spack-packages']


def test_the_mirror_and_build_cache_go_where_the_suite_reads_them(archive, cache, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv('HPCBENCH_MIRROR', str(tmp_path / 'site-mirror'))
    monkeypatch.setenv('HPCBENCH_BUILDCACHE', str(tmp_path / 'site-buildcache'))
    bundle_unpack.unpack(archive)
    assert (tmp_path / 'site-mirror/hpl/hpl-2.3.tar.gz').read_text() == 'not really a tarball\n'
    assert (tmp_path / 'site-buildcache/v3/layout.json').exists()
    assert not (cache / 'mirror').exists() and not (cache / 'buildcache').exists()


def _unpack_with_python3_alone(archive, cache):
    """`make run BUNDLE=`'s first step, before any venv: Debian's python3 with no site
    packages at all (-S), the suite's sources on PYTHONPATH."""
    return subprocess.run(['python3', '-S', '-m', 'hpcbench.stack.bundle_unpack', 'unpack',
                           str(archive)],
                          capture_output=True, text=True, timeout=120,
                          env={'PATH': os.environ['PATH'], 'PYTHONPATH': str(ROOT / 'src'),
                               'HPCBENCH_CACHE': str(cache)})


def test_python3_alone_unpacks_a_bundle_and_refuses_a_damaged_one_in_one_line(
        tmp_path, archive, cache):
    proc = _unpack_with_python3_alone(archive, cache)
    assert proc.returncode == 0, proc.stderr
    assert (cache / 'spack/bin/spack').exists() and (cache / 'locks/0123.lock').exists()

    damaged = tmp_path / 'damaged.tar.gz'
    damaged.write_bytes(archive.read_bytes()[:archive.stat().st_size // 2])
    other = tmp_path / 'other-cache'
    proc = _unpack_with_python3_alone(damaged, other)
    assert proc.returncode == 2 and not other.exists()
    assert proc.stderr.count('\n') == 1 and proc.stderr.startswith('error: ') \
        and 'nothing was unpacked' in proc.stderr, proc.stderr


@needs_root
def test_a_cache_on_a_read_only_mount_is_refused_in_one_line(archive, mounted):
    """A real read-only file system as the per-user cache (an NFS home mounted read-only on
    a compute node): one line, no traceback, nothing written."""
    readonly = mounted('-t', 'tmpfs', '-o', 'ro,size=1m', 'hpcbench-test')
    for cache in (readonly, readonly / 'hpcbench'):      # the cache, or its parent
        proc = _unpack_with_python3_alone(archive, cache)
        assert proc.returncode == 2
        assert proc.stderr == (f'error: {cache}: the per-user cache cannot be written '
                               '(Read-only file system): set HPCBENCH_CACHE to a writable '
                               'directory; nothing was unpacked\n'), proc.stderr
    assert not list(readonly.iterdir())


def test_a_copy_records_its_commit_and_never_borrows_a_surrounding_checkout_s(tmp_path):
    subprocess.run(['git', 'init', '-q', str(tmp_path)], check=True)
    subprocess.run(['git', '-C', str(tmp_path), '-c', 'user.name=t', '-c', 'user.email=t@t',
                    'commit', '-q', '--allow-empty', '-m', 'outer'], check=True)
    copy = tmp_path / 'cache' / 'spack'
    copy.mkdir(parents=True)
    assert spack._commit(copy) == ''
    (copy / spack.COMMIT_FILE).write_text('2e907202bcc8209a6a62243aab50c179b524cc3b\n')
    assert spack._commit(copy) == '2e907202bcc8209a6a62243aab50c179b524cc3b'
    outer = subprocess.run(['git', '-C', str(tmp_path), 'rev-parse', 'HEAD'],
                           capture_output=True, text=True).stdout.strip()
    assert spack._commit(tmp_path) == outer


def _refused_and_nothing_left(archive, cache, match):
    before = sorted(str(p.relative_to(cache)) for p in cache.rglob('*')) \
        if cache.exists() else None
    with pytest.raises(bundle.BundleError, match=match) as raised:
        bundle_unpack.unpack(archive)
    after = sorted(str(p.relative_to(cache)) for p in cache.rglob('*')) \
        if cache.exists() else None
    assert after == before
    assert str(raised.value).endswith('; nothing was unpacked')
    return str(raised.value)


def test_a_truncated_archive_is_refused_and_leaves_nothing(archive, cache):
    data = archive.read_bytes()
    archive.write_bytes(data[:len(data) // 2])
    message = _refused_and_nothing_left(archive, cache, 'refused, not a whole hpcbench bundle')
    assert '\n' not in message


def test_a_flipped_byte_is_refused_and_leaves_nothing(archive, cache):
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    _refused_and_nothing_left(archive, cache, 'refused, not a whole hpcbench bundle')


def test_a_file_changed_after_its_manifest_was_written_is_refused(tmp_path, cache):
    tree = _small_bundle(tmp_path / 'made')
    (tree / 'locks/0123.lock').write_text('{"roots": ["changed"]}\n')
    output = tmp_path / 'altered.tar.gz'
    bundle.write_archive(tree, output)
    _refused_and_nothing_left(output, cache, r"1 file\(s\) with another checksum than the "
                                             r"manifest: locks/0123.lock")


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path, cache):
    tree = _small_bundle(tmp_path / 'made')
    (tree / 'spack/bin/intruder').write_text('echo hi\n')
    output = tmp_path / 'extra.tar.gz'
    bundle.write_archive(tree, output)
    _refused_and_nothing_left(output, cache, r'not in the manifest: spack/bin/intruder')


def test_a_file_that_is_not_an_archive_is_refused(tmp_path, cache):
    output = tmp_path / 'notes.tar.gz'
    output.write_text('hello\n')
    _refused_and_nothing_left(output, cache, 'refused')


def _archive_with(tmp_path, name, linkname=None):
    """A gzipped tar with one member `name` (a symlink to `linkname` when given)."""
    output = tmp_path / 'crafted.tar.gz'
    with tarfile.open(output, 'w:gz') as tar:
        info = tarfile.TarInfo(name)
        if linkname:
            info.type, info.linkname = tarfile.SYMTYPE, linkname
            tar.addfile(info)
        else:
            data = b'x\n'
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return output


# Machine-dependent: Debian 12's first python3.11 (a clean root's) lacks the filters.
@pytest.mark.machine_dependent
@pytest.mark.parametrize('python_filters', [True, False], ids=['with', 'without'])
@pytest.mark.parametrize('name, linkname, reason', [
    ('../outside', None, "member '../outside' is outside hpcbench-bundle/"),
    ('/etc/cron.d/x', None, "member '/etc/cron.d/x' is outside hpcbench-bundle/"),
    (f'{bundle.TOP}/../../x', None, 'is outside hpcbench-bundle/'),
    (f'{bundle.TOP}/spack/bin/sh', '/bin/sh', 'points out of the bundle (/bin/sh: it is '
                                              'absolute)'),
    (f'{bundle.TOP}/mirror/up', '../../..', 'points out of the bundle (../../..: it leaves '
                                            'the bundle)'),
    (f'{bundle.TOP}/mirror/spack', '../spack/bin', 'it leads to hpcbench-bundle/spack/bin, '
                                                   'outside its part hpcbench-bundle/mirror/'),
])
def test_members_that_would_land_outside_the_bundle_are_refused(
        tmp_path, cache, monkeypatch, python_filters, name, linkname, reason):
    # Debian 12's first python3.11 (a fresh machine's) has no extraction filters: our own
    # check must hold alone.
    if python_filters and not hasattr(tarfile, 'data_filter'):
        pytest.skip('this python3 has no tar extraction filters (the case without runs)')
    if not python_filters:
        monkeypatch.delattr(tarfile, 'data_filter', raising=False)
    message = _refused_and_nothing_left(_archive_with(tmp_path, name, linkname), cache,
                                        'refused')
    assert reason in message


def _link_chain_archive(tmp_path, outside):
    """A real crafted archive: `x -> .` makes `x/x/x/...` the part's own directory, so
    `evil -> x/x/.../../../..` stays inside the bundle by its name (normpath) while the
    kernel, following the links, reaches /; a later member `evil/<outside>/pwned` would then
    be written at `outside`/pwned."""
    up = '/'.join(['x'] * 30 + ['..'] * 30)  # 30 links: under the kernel's 40
    members = [(f'{bundle.TOP}/mirror', None), (f'{bundle.TOP}/mirror/x', '.'),
               (f'{bundle.TOP}/mirror/evil', up),
               (f'{bundle.TOP}/mirror/evil{outside}/pwned', b'written outside\n')]
    output = tmp_path / 'link-chain.tar.gz'
    with tarfile.open(output, 'w:gz') as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    assert os.path.normpath(f'{bundle.TOP}/mirror/{up}').startswith(bundle.TOP)
    return output


def test_the_crafted_link_chain_really_writes_outside_when_links_are_trusted(tmp_path):
    """The fault is real: tarfile without a filter (Debian 12's python3 3.11.2 has none)
    writes the member outside its target."""
    outside = tmp_path / 'outside'
    outside.mkdir()
    archive = _link_chain_archive(tmp_path, outside)
    with tarfile.open(archive) as tar:
        options = {'filter': 'fully_trusted'} if hasattr(tarfile, 'data_filter') else {}
        tar.extractall(tmp_path / 'target', **options)
    assert (outside / 'pwned').read_text() == 'written outside\n'


@pytest.mark.parametrize('python3_alone', [False, True], ids=['suite', 'debian-python3'])
def test_a_link_chain_that_leads_out_of_the_bundle_is_refused_before_anything_is_written(
        tmp_path, cache, python3_alone):
    outside = tmp_path / 'outside'
    outside.mkdir()
    archive = _link_chain_archive(tmp_path, outside)
    if python3_alone:
        # What make run BUNDLE= runs on a stock Debian 12: its python3, no filters.
        proc = _unpack_with_python3_alone(archive, cache)
        assert proc.returncode == 2 and proc.stderr.count('\n') == 1, proc.stderr
        message = proc.stderr
        assert not cache.exists()
    else:
        message = _refused_and_nothing_left(archive, cache, 'refused')
    assert "symlink 'hpcbench-bundle/mirror/evil' points out of the bundle" in message \
        and 'it leaves the bundle' in message, message
    assert not (outside / 'pwned').exists()


def test_a_member_below_a_link_is_refused(tmp_path, cache):
    """Even a link that stays inside: nothing is ever written through one."""
    output = tmp_path / 'below-link.tar.gz'
    with tarfile.open(output, 'w:gz') as tar:
        link = tarfile.TarInfo(f'{bundle.TOP}/mirror/here')
        link.type, link.linkname = tarfile.SYMTYPE, '.'
        tar.addfile(link)
        info = tarfile.TarInfo(f'{bundle.TOP}/mirror/here/file')
        info.size = 2
        tar.addfile(info, io.BytesIO(b'x\n'))
    message = _refused_and_nothing_left(output, cache, 'refused')
    assert "lies below 'hpcbench-bundle/mirror/here', which is not a directory" in message


@pytest.mark.parametrize('manifest, reason', [
    ([], 'its MANIFEST.json is not an object'),
    ({'format': bundle.FORMAT, 'files': [], 'lock': {'sha256': '0'}},
     'its MANIFEST.json has no "files" object'),
    ({'format': bundle.FORMAT, 'files': {}}, 'its MANIFEST.json has no "lock"'),
    ('{not json', 'its MANIFEST.json does not read'),
])
def test_a_malformed_manifest_is_refused_in_one_message(tmp_path, cache, manifest, reason):
    tree = _small_bundle(tmp_path / 'made')
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (tree / bundle.MANIFEST).write_text(text)
    output = tmp_path / 'malformed.tar.gz'
    bundle.write_archive(tree, output)
    proc = _unpack_with_python3_alone(output, cache)
    assert proc.returncode == 2 and proc.stderr.count('\n') == 1, proc.stderr
    assert reason in proc.stderr and 'nothing was unpacked' in proc.stderr
    assert not cache.exists()


def test_a_link_of_another_target_than_its_manifest_s_is_refused(tmp_path, cache):
    tree = _small_bundle(tmp_path / 'made')
    manifest = json.loads((tree / bundle.MANIFEST).read_text())
    link = tree / 'mirror/hpl/hpl-2.3.tar.gz'
    link.unlink()
    link.symlink_to('../buildcache-like')
    bundle.write_archive(tree, tmp_path / 'relinked.tar.gz')
    assert json.loads((tree / bundle.MANIFEST).read_text()) == manifest
    _refused_and_nothing_left(tmp_path / 'relinked.tar.gz', cache,
                              r'1 file\(s\) of another kind or link target than the manifest says: '
                              r'mirror/hpl/hpl-2.3.tar.gz')


def test_a_cache_with_another_spack_is_left_as_it_is(tmp_path, archive, cache):
    # Another Spack library: another content key (hpcbench.stack.spack.Spack.content_key).
    other = _small_bundle(tmp_path / 'other', spack_version='1.0.2')
    cache.mkdir()
    for name in ('spack', 'spack-packages'):
        shutil.copytree(other / name, cache / name)
    message = _refused_and_nothing_left(archive, cache, 'already has a Spack')
    assert 'HPCBENCH_CACHE' in message


def test_a_second_unpack_of_the_same_bundle_keeps_what_is_there(archive, cache):
    bundle_unpack.unpack(archive)
    (cache / 'locks' / 'mine.lock').write_text('{}\n')
    bundle_unpack.unpack(archive)
    assert (cache / 'locks' / 'mine.lock').read_text() == '{}\n'
    assert not [p for p in cache.iterdir() if p.name.startswith('.bundle-')]


def test_an_interrupted_unpack_leaves_nothing(archive, cache):
    # A real interrupt: SIGINT while the archive is being read.
    script = ('import signal, tarfile\n'
              'from hpcbench.stack import bundle_unpack\n'
              'def interrupted(self, *a, **k):\n'
              '    signal.raise_signal(signal.SIGINT)\n'
              'bundle_unpack._write_members = interrupted\n'
              f'bundle_unpack.unpack({str(archive)!r})\n')
    proc = subprocess.run([str(BIN / 'python'), '-c', script], capture_output=True,
                          text=True, env={**os.environ, 'HPCBENCH_CACHE': str(cache)},
                          preexec_fn=signals_as_from_a_terminal)
    assert proc.returncode != 0 and 'KeyboardInterrupt' in proc.stderr
    assert not cache.exists()


@pytest.mark.spack
def test_make_bundle_carries_this_machine_s_stack_and_is_reproducible(installed, tmp_path,
                                                                     monkeypatch):
    found = spack.find()
    runs = []
    for name in ('first', 'second'):
        proc = subprocess.run([str(BIN / 'hpcbench'), 'bundle', '--output',
                               str(tmp_path / name)], capture_output=True, text=True,
                              cwd=ROOT, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(next((tmp_path / name).glob('hpcbench-local-*.tar.gz')))
    assert runs[0].read_bytes() == runs[1].read_bytes()

    monkeypatch.setenv('HPCBENCH_CACHE', str(tmp_path / 'cache'))
    manifest = bundle_unpack.unpack(runs[0])
    unpacked = spack.find()
    assert unpacked.root == tmp_path / 'cache' / 'spack'
    assert unpacked.content_key() == found.content_key()
    assert unpacked.commits() == found.commits()
    lock = ROOT / 'spack-envs' / 'local' / 'spack.lock'
    key = manifest['lock']['concretization_key']
    assert (tmp_path / 'cache' / 'locks' / f'{key}.lock').read_bytes() == lock.read_bytes()
    # Every non-external spec of the lock is in the build cache; its sources in the mirror.
    concrete = json.loads(lock.read_text())['concrete_specs'].values()
    built = {s['hash'] for s in concrete if 'external' not in s}
    listed = subprocess.run(
        [str(unpacked.executable), 'buildcache', 'list', '--allarch', '--long'],
        capture_output=True, text=True, check=True,
        env={**os.environ, **spack.isolated_environment(unpacked),
             'SPACK_USER_CONFIG_PATH': str(_mirror_only_config(tmp_path, unpacked))}).stdout
    assert {h[:7] for h in built} <= set(listed.split())
    assert any((tmp_path / 'cache' / 'mirror').rglob('hpl-2.3.tar.gz'))
    wheels = tmp_path / 'cache' / 'wheels'
    assert {'impi_devel', 'impi_rt', 'mkl', 'mkl_devel', 'mkl_include', 'reframe_hpc', 'scipy',
            'setuptools'} <= {p.name.split('-')[0] for p in wheels.iterdir()}
    assert manifest['python'] == bundle.python_tag()
    _venv_with_no_network(wheels, tmp_path)


def _venv_with_no_network(wheels, tmp_path):
    """The suite's venv made from the bundle's wheels with no network at all (a namespace
    with a loopback only), as make run BUNDLE= makes it: the packages and the suite itself,
    built by the bundle's setuptools."""
    if os.geteuid() != 0:
        pytest.skip('a network namespace needs root (unshare --net)')
    project = tmp_path / 'project'
    project.mkdir()
    for name in ('pyproject.toml', 'requirements.txt'):
        shutil.copy(ROOT / name, project)
    shutil.copytree(ROOT / 'src', project / 'src',
                    ignore=shutil.ignore_patterns('__pycache__', '*.egg-info'))
    venv = tmp_path / 'venv'
    subprocess.run(['python3', '-m', 'venv', str(venv)], check=True)
    offline = [*clean_root.OFFLINE, str(venv / 'bin' / 'pip'), 'install', '--quiet',
               '--disable-pip-version-check', '--no-index', '--find-links', str(wheels)]
    proc = subprocess.run([*offline, '-r', str(project / 'requirements.txt'), str(project)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run([*clean_root.OFFLINE, str(venv / 'bin' / 'python'), '-c',
                           'import clingo, matplotlib, reframe, scipy, selenium, yaml\n'
                           'from hpcbench.results import changes\n'
                           'from hpcbench.stack import bootstrap; print(reframe.VERSION)'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == '4.10.4'


def _mirror_only_config(tmp_path, unpacked):
    """A user scope whose one mirror is the unpacked build cache."""
    config = tmp_path / 'config'
    config.mkdir()
    (config / 'repos.yaml').write_text(f'repos::\n  builtin: {unpacked.builtin_repo}\n')
    (config / 'mirrors.yaml').write_text(
        f'mirrors::\n  bundle:\n    url: {(paths.cache_dir() / "buildcache").as_uri()}\n'
        '    signed: false\n')
    return config
