"""What lets anyone check later that an acceptance's report is the one its runs produced:
a manifest of the sha256 of every file it stands on (the contract, each result record used,
the Spack lock, the description, the project's commit), in the acceptance's directory,
signed with OpenSSH (`ssh-keygen -Y sign`, on every cluster) where the site gives a key;
verify() recomputes every sum and checks the signature, and says what changed."""
import re
import subprocess
from pathlib import Path

from hpcbench.core import paths

MANIFEST = 'MANIFEST.sha256'
SIGNATURE = f'{MANIFEST}.sig'
# The signature's namespace: a signature made for another purpose does not verify here.
NAMESPACE = 'hpcbench-acceptance'
_LINE = re.compile(r'([0-9a-f]{64})  (\S(?:.*\S)?)')


class ManifestError(RuntimeError):
    pass


def write(directory):
    """MANIFEST.sha256 of every file under `directory` but the manifest and its signature,
    `<sha256>  <path relative to it>`, sorted; its path."""
    directory = Path(directory)
    names = sorted(str(p.relative_to(directory)) for p in directory.rglob('*')
                   if p.is_file() and p.name not in (MANIFEST, SIGNATURE))
    for name in names:
        if name != name.strip() or '\n' in name:
            raise ManifestError(f'{directory / name}: a file name the manifest cannot hold')
    manifest = directory / MANIFEST
    manifest.write_text(''.join(f'{paths.file_sha256(directory / n)}  {n}\n' for n in names))
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


def verify(directory, allowed_signers=None, identity=None):
    """What changed since the manifest was written, one line each ([] : nothing): a file
    whose sum differs, one missing, one added; and the signature where there is one: checked
    against the site's allowed signers (`identity` among them), else against the key it
    carries (that it is intact; who signed is the site's allowed signers' to say)."""
    directory = Path(directory)
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return [f'{manifest}: no manifest']
    listed, problems = {}, []
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        found = _LINE.fullmatch(line)
        if not found:
            problems.append(f'{manifest}:{number}: not a manifest line')
            continue
        listed[found.group(2)] = found.group(1)
    for name, digest in sorted(listed.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f'{name}: missing')
        elif (now := paths.file_sha256(path)) != digest:
            problems.append(f'{name}: changed (sha256 {now[:16]}..., manifest says '
                            f'{digest[:16]}...)')
    present = {str(p.relative_to(directory)) for p in directory.rglob('*')
               if p.is_file() and p.name not in (MANIFEST, SIGNATURE)}
    problems += [f'{name}: not in the manifest' for name in sorted(present - set(listed))]
    signature = directory / SIGNATURE
    if signature.exists():
        if allowed_signers:
            command = ['ssh-keygen', '-Y', 'verify', '-f', str(allowed_signers), '-I',
                       identity or '', '-n', NAMESPACE, '-s', str(signature)]
        else:
            command = ['ssh-keygen', '-Y', 'check-novalidate', '-n', NAMESPACE, '-s',
                       str(signature)]
        with open(manifest, 'rb') as data:
            done = subprocess.run(command, stdin=data, capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f'{SIGNATURE}: the signature does not verify: '
                            f'{" ".join((done.stderr or done.stdout).split())[:300]}')
    return problems
