"""An offline bundle: one archive with all a machine without internet needs to install and
run a system's Spack stack (`make bundle`, then `make run BUNDLE=<archive>` there).

It holds the pinned Spack and spack-packages as they are (their commits recorded), the
source mirror of every spec of the system's environment (`spack mirror create`), the build
cache of what is installed (`spack buildcache push`), the wheels of everything pip installs
(Intel MPI and MKL, and the suite's own Python packages with their build backend), the
environment's lock under its concretization key (hpcbench.bootstrap: a machine with the
same inputs installs the same specs without concretizing again), the BLAS order it was
concretized with, and MANIFEST.json: every file's SHA-256, the lock's hash and the commits.
The same inputs give the same archive, byte for byte: files in name order, no owners, no
times (MANIFEST.json first, so that a reader meets it before anything it describes).

Unpacking checks every member before it writes anything (names inside the bundle, files,
directories and links only, each link leading inside its own part however the kernel
follows it, the manifest's list), writes links last so that no write passes through one,
verifies every checksum in a scratch directory of the per-user cache, and only then puts
anything in place; a damaged, truncated or crafted archive is refused with one message and
leaves nothing behind. It needs python3 alone (`python3 -m hpcbench.bundle unpack`), so that
a machine without internet unpacks the bundle before it makes the suite's venv from its
wheels.
"""
import argparse
import gzip
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

# Standard library and these alone (no hpcbench.bootstrap, which needs PyYAML): unpacking
# runs before the venv exists.
from hpcbench import blas, paths, spack

FORMAT = 1
TOP = 'hpcbench-bundle'
MANIFEST = 'MANIFEST.json'
# The parts, by their directory in the bundle. Spack's two trees go where hpcbench.spack
# looks for them in the per-user cache (one of each: they must agree); the stores are merged
# file by file into where the suite reads them (stores()).
TREES = ('spack', 'spack-packages')


def stores():
    """{part: the directory the suite reads it from}: HPCBENCH_MIRROR and
    HPCBENCH_BUILDCACHE move the first two."""
    return {'mirror': paths.mirror_dir(), 'buildcache': paths.buildcache_dir(),
            'wheels': paths.wheels_dir(), 'locks': paths.locks_dir(),
            'blas': blas.order_path().parent}
# Not part of a Spack "as it is": git's own store (the commit is recorded instead) and
# Python's byte-code caches (rewritten by every run).
_SKIPPED = {'.git', '__pycache__'}


class BundleError(RuntimeError):
    pass


def say(msg):
    print(f'[bundle] {msg}', flush=True)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def _entries(tree):
    """Every file and symlink under `tree`, relative, in name order (not descending into
    symlinked directories)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED
                             and not os.path.islink(os.path.join(dirpath, d)))
        found += [os.path.relpath(os.path.join(dirpath, d), tree) for d in os.listdir(dirpath)
                  if d not in _SKIPPED and os.path.islink(os.path.join(dirpath, d))
                  and os.path.isdir(os.path.join(dirpath, d))]
        found += [os.path.relpath(os.path.join(dirpath, f), tree) for f in filenames]
    return sorted(found)


def file_digests(tree):
    """{relative path: sha256, or '-> target' for a symlink} of every entry under `tree`."""
    digests = {}
    for rel in _entries(tree):
        path = os.path.join(tree, rel)
        digests[rel] = (f'-> {os.readlink(path)}' if os.path.islink(path) else _sha256(path))
    return digests


def copy_tree(source, target):
    """`source` as it is, without git's store and byte-code caches."""
    shutil.copytree(source, target, symlinks=True,
                    ignore=lambda _dir, names: [n for n in names if n in _SKIPPED])


def _normalized(info):
    """Owners and times out of a member, so that the same files give the same archive."""
    info.uid = info.gid = 0
    info.uname = info.gname = ''
    info.mtime = 0
    if not info.issym():
        info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
    return info


def write_archive(tree, output):
    """`tree` (whose MANIFEST.json is written) as a reproducible .tar.gz at `output`,
    written beside it and renamed when whole."""
    tmp = output.with_name(f'.{output.name}.part')
    try:
        with open(tmp, 'wb') as raw, \
                gzip.GzipFile(filename='', mode='wb', fileobj=raw, mtime=0,
                              compresslevel=6) as compressed, \
                tarfile.open(fileobj=compressed, mode='w', format=tarfile.PAX_FORMAT) as tar:
            tar.add(tree / MANIFEST, f'{TOP}/{MANIFEST}', filter=_normalized)
            directories = set()
            for rel in _entries(tree):
                if rel == MANIFEST:
                    continue
                for parent in reversed(Path(rel).parents[:-1]):
                    if parent not in directories:
                        directories.add(parent)
                        tar.add(tree / parent, f'{TOP}/{parent}', recursive=False,
                                filter=_normalized)
                tar.add(tree / rel, f'{TOP}/{rel}', recursive=False, filter=_normalized)
        tmp.rename(output)
    finally:
        tmp.unlink(missing_ok=True)


def python_tag():
    """The interpreter the suite's wheels are for ('cp311-x86_64'): pip picks compiled
    wheels by version and machine."""
    return f'cp{sys.version_info.major}{sys.version_info.minor}-{platform.machine()}'


def suite_requirements(project=None):
    """What the suite's venv installs (requirements.txt) and what pip needs to install the
    suite itself (pyproject.toml's build backend)."""
    import tomllib   # Python 3.11: making a bundle only; unpacking does without
    project = Path(project or paths.PROJECT_ROOT)
    build = tomllib.loads((project / 'pyproject.toml').read_text())['build-system']['requires']
    return ['-r', str(project / 'requirements.txt'), *build]


def wheel_sets(system='local'):
    """[(what, requirements, pip options)] of what pip installs for `system`: the suite's
    venv, Intel MPI and MKL."""
    from hpcbench import bootstrap
    parts = [*bootstrap.machine_stacks(system), *bootstrap.machine_blas(system)]
    return [('the suite\'s venv', suite_requirements(), ()),
            *((p.name, p.wheel_requirements(), p.wheel_options) for p in parts
              if hasattr(p, 'wheel_requirements'))]


def make(system='local', output_dir=None, binaries=True):
    """Write the bundle of `system` (a system on this machine, installed) and return its
    path and manifest. `binaries=False`: no build cache (for machines whose CPUs the
    binaries do not fit: everything is built there from the mirror's sources)."""
    from hpcbench import bootstrap
    found = spack.find()
    if not found:
        raise BundleError(spack.not_found_message('a bundle carries the Spack of this machine'))
    env_dir = paths.SPACK_ENVS_DIR / system
    lock = env_dir / 'spack.lock'
    if not lock.exists():
        raise BundleError(f'{lock} does not exist: install the environment first (make run)')

    output_dir = Path(output_dir or paths.VAR_DIR / 'bundles')
    output_dir.mkdir(parents=True, exist_ok=True)
    key = bootstrap.concretization_key(bootstrap.concretization_inputs(env_dir), found)
    lock_hash = _sha256(lock)
    output = output_dir / (f'hpcbench-{system}-{lock_hash[:12]}'
                           f'{"" if binaries else "-sources"}.tar.gz')
    staging = Path(tempfile.mkdtemp(prefix='.bundle-make-', dir=output_dir))
    try:
        tree = staging / TOP
        commits = dict(zip(TREES, found.commits()))
        for name, source in zip(TREES, (found.root, found.packages)):
            say(f'{name}: {source}')
            copy_tree(source, tree / name)
            if commits[name]:
                (tree / name / spack.COMMIT_FILE).write_text(commits[name] + '\n')
        say(f'source mirror of every spec of spack-envs/{system}')
        bootstrap.run_spack(found, '-e', str(env_dir), 'mirror', 'create', '--all',
                            '--directory', str(tree / 'mirror'))
        if binaries:
            say(f'build cache of what spack-envs/{system} installed')
            bootstrap.run_spack(found, '-e', str(env_dir), 'buildcache', 'push',
                                '--unsigned', '--update-index', str(tree / 'buildcache'))
        for what, requirements, options in wheel_sets(system):
            say(f'wheels of {what}: {" ".join(requirements)}')
            subprocess.run([sys.executable, '-m', 'pip', 'download', '--quiet',
                            '--disable-pip-version-check', '--dest', str(tree / 'wheels'),
                            *options, *requirements], check=True)
        (tree / 'locks').mkdir()
        shutil.copyfile(lock, tree / 'locks' / f'{key}.lock')
        if blas.order_path().exists():
            (tree / 'blas').mkdir()
            shutil.copyfile(blas.order_path(), tree / 'blas' / blas.order_path().name)

        manifest = {
            'format': FORMAT, 'system': system,
            'spack': {'release': spack.SPACK_RELEASE, 'commit': commits['spack']},
            'spack_packages': {'release': spack.PACKAGES_RELEASE,
                               'commit': commits['spack-packages']},
            'spack_content_key': found.content_key(),
            'lock': {'sha256': lock_hash, 'concretization_key': key},
            'python': python_tag(),
            'files': file_digests(tree),
        }
        manifest['parts'] = _parts(tree, manifest['files'])
        (tree / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + '\n')
        say(f'writing {output}')
        write_archive(tree, output)
    except subprocess.CalledProcessError as err:
        raise BundleError(f'`{" ".join(map(str, err.cmd[:4]))} ...` failed (exit '
                          f'{err.returncode})') from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    return output, manifest


def _parts(tree, files):
    """{part: {'files': n, 'bytes': size}} of the bundle's top directories."""
    parts = {}
    for rel in files:
        part = parts.setdefault(rel.split('/')[0], {'files': 0, 'bytes': 0})
        part['files'] += 1
        part['bytes'] += os.lstat(tree / rel).st_size
    return parts


def describe(output, manifest):
    """What `make bundle` prints: the archive, its size and checksum, and its parts."""
    lines = [f'{output}: {output.stat().st_size / 2**20:.1f} MiB, sha256 {_sha256(output)}',
             f'  spack {manifest["spack"]["release"]} '
             f'(commit {manifest["spack"]["commit"] or "unknown: not a git checkout"}), '
             f'spack-packages {manifest["spack_packages"]["release"]} '
             f'(commit {manifest["spack_packages"]["commit"] or "unknown"})',
             f'  spack-envs/{manifest["system"]}/spack.lock sha256 {manifest["lock"]["sha256"]}',
             f'  wheels for {manifest["python"]} (the suite\'s venv installs from them on '
             'a machine with the same Python version)']
    lines += [f'  {part}/: {n["files"]} files, {n["bytes"] / 2**20:.1f} MiB'
              for part, n in sorted(manifest['parts'].items())]
    return '\n'.join(lines)


# --- Unpacking -------------------------------------------------------------------------------

def _refuse(archive, reason):
    return BundleError(f'{archive}: refused, not a whole hpcbench bundle ({reason}); nothing '
                       'was unpacked')


def _manifest(text):
    """MANIFEST.json's content, once it has the shape this suite writes (a damaged or
    crafted one is refused in the one message, never a traceback)."""
    try:
        manifest = json.loads(text)
    except ValueError as err:
        raise BundleError(f'its {MANIFEST} does not read: {err}') from None
    if not isinstance(manifest, dict):
        raise BundleError(f'its {MANIFEST} is not an object')
    if manifest.get('format') != FORMAT:
        raise BundleError(f'format {manifest.get("format")!r}, this suite reads {FORMAT}')
    files, lock = manifest.get('files'), manifest.get('lock')
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in files.items()):
        raise BundleError(f'its {MANIFEST} has no "files" object of path: checksum')
    if not isinstance(lock, dict) or not isinstance(lock.get('sha256'), str):
        raise BundleError(f'its {MANIFEST} has no "lock" with its "sha256"')
    return manifest


def _differences(listed, present, differ_as):
    """BundleError naming the first paths missing, extra or different between the
    manifest's `listed` and the archive's or tree's `present` ({path: what})."""
    for what, names in (('missing', set(listed) - set(present)),
                        ('not in the manifest', set(present) - set(listed)),
                        (differ_as, {r for r in set(listed) & set(present)
                                     if listed[r] != present[r]})):
        if names:
            names = sorted(names)
            raise BundleError(f'{len(names)} file(s) {what}: {", ".join(names[:3])}'
                              f'{", ..." if len(names) > 3 else ""}')


def verify(tree, manifest):
    """Every file `manifest` lists is under the unpacked `tree` with its checksum, and
    nothing else is."""
    present = file_digests(tree)
    present.pop(MANIFEST, None)
    _differences(manifest['files'], present, 'with another checksum than the manifest')


def _place(tree, cache):
    """Move the verified parts into the cache: a Spack tree where there is none (one that
    is there must have the same content), the stores merged file by file. Conflicts are
    found before anything moves."""
    if all((tree / name).exists() for name in TREES):
        present = [name for name in TREES if (cache / name).exists()]
        if present:
            have = spack.Spack(cache / 'spack', cache / 'spack-packages')
            theirs = spack.Spack(tree / 'spack', tree / 'spack-packages')
            if len(present) < len(TREES) or have.content_key() != theirs.content_key():
                raise BundleError(f'{cache} already has a Spack ({", ".join(present)}) that '
                                  'differs from the bundle\'s: unpack into an empty per-user '
                                  f'cache (HPCBENCH_CACHE=<empty directory>) or remove '
                                  f'{" and ".join(str(cache / n) for n in present)}; '
                                  'nothing was unpacked')
            say(f'{cache}: its Spack and spack-packages are the bundle\'s, kept')
        else:
            for name in TREES:
                (tree / name).rename(cache / name)
                say(f'{cache / name}: unpacked')
    for name, directory in stores().items():
        if not (tree / name).exists():
            continue
        added = 0
        for rel in _entries(tree / name):
            target = directory / rel
            if target.exists() or target.is_symlink():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            # A move within the cache's file system; a copy to another one.
            shutil.move(tree / name / rel, target)
            added += 1
        say(f'{directory}: {added} file(s) added')


# Links a path may pass through before it is refused as a loop (the kernel's own limit).
_MAX_LINKS_FOLLOWED = 40


def _resolved(name, members, followed=0):
    """Where the path `name` (normalized, inside the archive) leads once every link member
    on its way is followed, as the kernel will follow them after unpacking: a tuple of
    components. Raises BundleError when it leaves the archive's tree or loops."""
    resolved = []
    for part in name.split('/'):
        if part in ('', '.'):
            continue
        if part == '..':
            if not resolved:
                raise BundleError('leaves the bundle')
            resolved.pop()
            continue
        resolved.append(part)
        member = members.get('/'.join(resolved))
        if member is not None and member.issym():
            if followed >= _MAX_LINKS_FOLLOWED:
                raise BundleError('is a loop of symlinks')
            if os.path.isabs(member.linkname):
                raise BundleError(f'passes through an absolute symlink ({member.linkname})')
            resolved = list(_resolved('/'.join([*resolved[:-1], member.linkname]), members,
                                      followed + 1))
    return tuple(resolved)


def _checked_members(tar):
    """The archive's members, every one checked before anything is written: a file,
    directory or symlink, named inside TOP/<part>/ once, none below a symlink member (so no
    write ever passes through a link), and every symlink leading, through any links on its
    way, to a path inside its own part (the parts go to different directories). The kernel
    follows links by their targets, not by their names: checking a name by `normpath` alone
    let `x -> .` and `evil -> x/x/../../..` stay 'inside' and point at /."""
    members = {}
    for member in tar.getmembers():
        name = os.path.normpath(member.name)
        parts = name.split(os.sep)
        if os.path.isabs(member.name) or parts[0] != TOP or '..' in parts or len(parts) < 2:
            raise BundleError(f'member {member.name!r} is outside {TOP}/')
        if not (member.isfile() or member.isdir() or member.issym()):
            raise BundleError(f'member {member.name!r} is not a file, directory or symlink')
        if name in members and not (member.isdir() and members[name].isdir()):
            raise BundleError(f'member {member.name!r} is in the archive twice')
        members[name] = member
    for name, member in members.items():
        parents = name.split('/')[:-1]
        for depth in range(2, len(parents) + 1):
            above = members.get('/'.join(parents[:depth]))
            if above is not None and not above.isdir():
                raise BundleError(f'member {member.name!r} lies below {above.name!r}, '
                                  'which is not a directory')
        if member.issym():
            try:
                if os.path.isabs(member.linkname):
                    raise BundleError('is absolute')
                target = _resolved(f'{os.path.dirname(name)}/{member.linkname}', members)
            except BundleError as err:
                raise BundleError(f'symlink {member.name!r} points out of the bundle '
                                  f'({member.linkname}: it {err})') from None
            part = name.split('/')[:2]
            if list(target[:2]) != part:
                raise BundleError(f'symlink {member.name!r} points out of the bundle '
                                  f'({member.linkname}: it leads to {"/".join(target)}, '
                                  f'outside its part {"/".join(part)}/)')
    return members


def _kind(digest):
    """What a manifest entry says a path is: a link to its target, or a file."""
    return digest if digest.startswith('-> ') else 'a file'


def _check_against_manifest(members, manifest):
    """Before anything is written: the archive holds the manifest's files and links, each of
    its kind (a link to the target listed), and nothing else."""
    present = {name[len(TOP) + 1:]: f'-> {m.linkname}' if m.issym() else 'a file'
               for name, m in members.items() if not m.isdir() and name != f'{TOP}/{MANIFEST}'}
    listed = {rel: _kind(digest) for rel, digest in manifest['files'].items()}
    _differences(listed, present, 'of another kind or link target than the manifest says')


def _write_members(tar, members, scratch):
    """The checked members under `scratch`: directories, then files (created, never opened
    through a link: there is none yet), then the links, last."""
    ordered = sorted(members.values(), key=lambda m: (not m.isdir(), m.issym()))
    for member in ordered:
        path = scratch / os.path.normpath(member.name)
        if member.isdir():
            path.mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = 0o755 if member.mode & 0o111 else 0o644
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, 'wb') as out:
                shutil.copyfileobj(tar.extractfile(member), out, 1 << 20)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(member.linkname, path)


def _read(archive, scratch):
    """The archive's manifest, once every member was checked (names, kinds, where its links
    lead, the manifest's list) and only then written under `scratch`."""
    with tarfile.open(archive, 'r:gz') as tar:
        members = _checked_members(tar)
        manifest_member = members.get(f'{TOP}/{MANIFEST}')
        if manifest_member is None or not manifest_member.isfile():
            raise BundleError(f'no {TOP}/{MANIFEST}')
        manifest = _manifest(tar.extractfile(manifest_member).read().decode('utf-8', 'replace'))
        _check_against_manifest(members, manifest)
        _write_members(tar, members, scratch)
    return manifest


def unpack(archive):
    """Unpack `archive` into the per-user cache after verifying all of it; returns its
    manifest. Refused (BundleError) when it is damaged, truncated, crafted or not a bundle:
    then nothing of it is left anywhere."""
    archive = Path(archive)
    if not archive.is_file():
        raise BundleError(f'{archive}: no such file')
    cache = paths.cache_dir()
    created = not cache.exists()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix='.bundle-', dir=cache))
    except OSError as err:
        raise BundleError(f'{cache}: the per-user cache cannot be written ({err.strerror or err}'
                          '): set HPCBENCH_CACHE to a writable directory; nothing was '
                          'unpacked') from None
    try:
        try:
            manifest = _read(archive, scratch)
            verify(scratch / TOP, manifest)
        except (tarfile.TarError, EOFError, zlib.error, OSError, BundleError) as err:
            reason = str(err) if isinstance(err, BundleError) else f'{type(err).__name__}: {err}'
            raise _refuse(archive, reason) from None
        say(f'{archive}: {len(manifest["files"])} files verified against {MANIFEST} '
            f'(spack.lock sha256 {manifest["lock"]["sha256"][:12]})')
        if manifest.get('python', python_tag()) != python_tag():
            say(f'note: its wheels are for {manifest.get("python")}, this python3 is '
                f'{python_tag()}: the suite\'s venv needs PyPI (or a bundle made with this '
                'Python version)')
        _place(scratch / TOP, cache)
        return manifest
    except BaseException:
        if created:
            shutil.rmtree(cache, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv=None):
    """`python3 -m hpcbench.bundle unpack ARCHIVE`: what `make run BUNDLE=` does before the
    venv exists; `... wheels`: the directory the venv then installs from."""
    parser = argparse.ArgumentParser(prog='python3 -m hpcbench.bundle',
                                     description='an offline bundle, before the venv exists')
    sub = parser.add_subparsers(dest='command', required=True)
    sub.add_parser('unpack', help='verify ARCHIVE and unpack it into the per-user cache') \
        .add_argument('archive')
    sub.add_parser('wheels', help='print the directory of the unpacked wheels')
    args = parser.parse_args(argv)
    if args.command == 'wheels':
        print(paths.wheels_dir())
        return 0
    try:
        unpack(args.archive)
    except BundleError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
