"""What lets anyone check later that an acceptance's report is the one its runs produced:
a manifest of the sha256 of every file it stands on (the contract, each result record used,
the Spack lock, the description, the project's commit), in the acceptance's directory,
signed with OpenSSH (`ssh-keygen -Y sign`, on every cluster) where the site gives a key;
verify() recomputes every sum and checks the signature, and says what it checked and what
changed.

What is checked, exactly (Verification.signature says it in words):
- every file the manifest names: a plain path inside the directory (no `..`, no absolute
  path), a regular file there (a link, even to an identical copy, or a FIFO is refused and
  never opened), its sha256 the manifest's; every regular file there named by it;
- with the site's allowed signers and the identity to verify: the signature is required,
  and must be that identity's (`ssh-keygen -Y verify`);
- without them: a signature, where there is one, is intact and made by the key whose
  fingerprint is said; whose key that is was not checked (anybody can sign).
"""
import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MANIFEST = 'MANIFEST.sha256'
SIGNATURE = f'{MANIFEST}.sig'
# The signature's namespace: a signature made for another purpose does not verify here.
NAMESPACE = 'hpcbench-acceptance'
_LINE = re.compile(r'([0-9a-f]{64})  (\S(?:.*\S)?)')
# What OpenSSH says of a good signature: its key's type and fingerprint.
_GOOD = re.compile(r'Good "[^"]*" signature (?:for (?P<identity>.+?) )?with (?P<key>\S+) key '
                   r'(?P<fingerprint>SHA256:[A-Za-z0-9+/=]+)')
# The most a manifest holds: an acceptance of 1,000 nodes has about 60 files.
MAX_MANIFEST_BYTES = 16 << 20


class ManifestError(RuntimeError):
    pass


@dataclass
class Verification:
    """What verify() found: the problems, one line each ([]: none), and what was checked of
    the signature, in words."""
    problems: list = field(default_factory=list)
    signature: str = ''


def _entries(directory):
    """(regular files, other entries) under `directory`, as paths relative to it, sorted;
    links are not followed (a link or a FIFO is among the others, never opened)."""
    files, others = [], []
    for root, dirs, names in os.walk(directory, followlinks=False):
        for name in dirs + names:
            path = Path(root) / name
            mode = os.lstat(path).st_mode
            relative = path.relative_to(directory).as_posix()
            if stat.S_ISREG(mode):
                files.append(relative)
            elif not stat.S_ISDIR(mode):
                others.append((relative, _kind(mode)))
    return sorted(files), sorted(others)


def _kind(mode):
    return ('a link' if stat.S_ISLNK(mode) else 'a FIFO' if stat.S_ISFIFO(mode) else
            'a socket' if stat.S_ISSOCK(mode) else 'a device')


def _sha256(path):
    """The sha256 of the regular file `path`, opened without following a link or blocking."""
    import hashlib
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, 'rb') as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ManifestError(f'{path}: not a regular file')
        digest = hashlib.sha256()
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def write(directory):
    """MANIFEST.sha256 of every file under `directory` but the manifest and its signature,
    `<sha256>  <path relative to it>`, sorted; its path. A signature of an earlier manifest
    is removed (it signs other sums). ManifestError where the directory holds what is not
    a regular file or a name the manifest cannot hold."""
    directory = Path(directory)
    (directory / SIGNATURE).unlink(missing_ok=True)
    files, others = _entries(directory)
    if others:
        name, kind = others[0]
        raise ManifestError(f'{directory / name}: {kind}, where an acceptance holds files '
                            'only: no manifest written')
    names = [n for n in files if n not in (MANIFEST, SIGNATURE)]
    for name in names:
        if name != name.strip() or not name.isprintable():
            raise ManifestError(f'{directory / name!r}: a file name the manifest cannot hold')
    manifest = directory / MANIFEST
    manifest.write_text(''.join(f'{_sha256(directory / n)}  {n}\n' for n in names))
    return manifest


def sign(directory, key):
    """Sign the directory's manifest with the site's SSH key (`ssh-keygen -Y sign`): the
    signature beside it; ManifestError in one sentence where OpenSSH refuses."""
    manifest = Path(directory) / MANIFEST
    signature = Path(directory) / SIGNATURE
    signature.unlink(missing_ok=True)
    done = subprocess.run(['ssh-keygen', '-Y', 'sign', '-f', str(key), '-n', NAMESPACE,
                           str(manifest)], capture_output=True, text=True)
    if done.returncode != 0 or not signature.exists():
        raise ManifestError(f'signing {manifest} with {key} failed: '
                            f'{" ".join(done.stderr.split())[:300]}')
    return signature


def _plain(name):
    """Whether a manifest's `name` is a plain path inside the directory."""
    path = PurePosixPath(name)
    return (not path.is_absolute() and '\\' not in name and
            all(part not in ('', '.', '..') for part in name.split('/')))


def verify(directory, allowed_signers=None, identity=None):
    """What changed since the manifest was written (Verification: a file whose sum differs,
    one missing, one added, one that is not a regular file, a line naming a path outside
    the directory) and what was checked of the signature: against the site's allowed
    signers (`identity` among them; then a signature is required), else that it is intact
    and by which key. ManifestError where allowed signers are given without the identity
    (or the other way round)."""
    if bool(allowed_signers) != bool(identity):
        raise ManifestError('give --allowed-signers FILE and --identity NAME together: the '
                            'signature is checked as the site\'s NAME\'s, named in FILE'
                            if allowed_signers else
                            '--identity needs --allowed-signers FILE, the site\'s list of '
                            'signers and their keys')
    directory = Path(directory)
    manifest = directory / MANIFEST
    found = Verification()
    problems = found.problems
    try:
        mode = os.lstat(manifest).st_mode
    except FileNotFoundError:
        mode = None
    if mode is None or not stat.S_ISREG(mode):
        found.signature = 'nothing: no manifest'
        return Verification([f'{manifest}: ' + ('no manifest' if mode is None else
                                                f'{_kind(mode)}, not a manifest')],
                            found.signature)
    listed = _listed(manifest, problems)
    files, others = _entries(directory)
    others = dict(others)
    for name, digest in sorted(listed.items()):
        if name in others:
            problems.append(f'{name}: {others[name]}, not a regular file: not read')
        elif name not in files:
            problems.append(f'{name}: missing')
        elif (now := _sha256(directory / name)) != digest:
            problems.append(f'{name}: changed (sha256 {now[:16]}..., manifest says '
                            f'{digest[:16]}...)')
    present = set(files) - {MANIFEST, SIGNATURE}
    problems += [f'{name}: not in the manifest' for name in sorted(present - set(listed))]
    problems += [f'{name}: {kind}, where an acceptance holds files only'
                 for name, kind in sorted(others.items()) if name not in listed]
    found.signature = _signature(directory, manifest, allowed_signers, identity, problems)
    return found


def _listed(manifest, problems):
    """{path: sha256} the manifest lists; each line that is none, or names a path outside
    the directory, into `problems` (never hashed)."""
    from hpcbench.core import paths
    listed = {}
    text = paths.read_regular(manifest, MAX_MANIFEST_BYTES, 'a manifest').decode(
        errors='replace')
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if not match:
            problems.append(f'{manifest}:{number}: not a manifest line')
        elif not _plain(match.group(2)):
            problems.append(f'{manifest}:{number}: {match.group(2)[:200]!r} is no path inside '
                            'the directory: not hashed')
        else:
            listed[match.group(2)] = match.group(1)
    return listed


def _signature(directory, manifest, allowed_signers, identity, problems):
    """What was checked of the signature, in words; its problems into `problems`."""
    signature = directory / SIGNATURE
    if not signature.is_file() or signature.is_symlink():
        if allowed_signers:
            problems.append(f'{SIGNATURE}: missing, and a signature by {identity} is required '
                            f'(--allowed-signers {allowed_signers})')
            return f'no signature, where one by {identity} is required'
        return 'not signed'
    if allowed_signers:
        command = ['ssh-keygen', '-Y', 'verify', '-f', str(allowed_signers), '-I', identity,
                   '-n', NAMESPACE, '-s', str(signature)]
    else:
        command = ['ssh-keygen', '-Y', 'check-novalidate', '-n', NAMESPACE, '-s',
                   str(signature)]
    with open(manifest, 'rb') as data:
        done = subprocess.run(command, stdin=data, capture_output=True, text=True)
    said = ' '.join((done.stdout + done.stderr).split())
    good = _GOOD.search(said)
    if done.returncode != 0 or not good:
        problems.append(f'{SIGNATURE}: the signature does not verify: {said[:300]}')
        return 'a signature that does not verify'
    key = f'{good["key"]} key {good["fingerprint"]}'
    if allowed_signers:
        return f'signed by {identity} ({key}), as the allowed signers {allowed_signers} say'
    return (f'signed with {key}; whose key that is was not checked (anybody can sign: give '
            '--allowed-signers and --identity to check the signer)')
