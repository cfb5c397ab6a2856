"""Unpacking an offline bundle (`make run BUNDLE=<archive>`, before the venv exists:
`python3 -m hpcbench.stack.bundle_unpack unpack ARCHIVE`), refused whole when anything is
wrong and nothing written until everything is checked: every member a file, directory or
link inside its part, each link resolved as the kernel would follow it and leading inside
its part (_resolved, _checked_members), the archive's list and digests the manifest's
(_check_against_manifest, verify); then files created exclusively, links last
(_write_members), each part moved into the per-user cache whole (_place).

Standard library and hpcbench.core, hpcbench.stack.bundle (no PyYAML)."""
import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

# Standard library and these alone (no hpcbench.stack.bootstrap, which needs PyYAML): unpacking
# runs before the venv exists.
from hpcbench.core import paths
from hpcbench.stack import spack
from hpcbench.stack.bundle import (BundleError, FORMAT, MANIFEST, TOP, TREES, tree_entries,
                                   file_digests, python_tag, say, stores)


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
        for rel in tree_entries(tree / name):
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
    """`python3 -m hpcbench.stack.bundle_unpack unpack ARCHIVE`: what `make run BUNDLE=`
    does before the venv exists; `... wheels`: the directory the venv then installs from."""
    parser = argparse.ArgumentParser(prog='python3 -m hpcbench.stack.bundle_unpack',
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
