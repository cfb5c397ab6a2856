"""An offline bundle: one archive with all a machine without internet needs to install and
run a system's Spack stack (`make bundle`, then `make run BUNDLE=<archive>` there).

It holds the pinned Spack and spack-packages as they are (their commits recorded), the
source mirror of every spec of the system's environment (`spack mirror create`), the build
cache of what is installed (`spack buildcache push`), the wheels of everything pip installs
(Intel MPI and MKL, and the suite's own Python packages with their build backend), the
environment's lock under its concretization key (hpcbench.stack.bootstrap: a machine with
the same inputs installs the same specs without concretizing again), the BLAS order it was
concretized with, and MANIFEST.json: every file's SHA-256, the lock's hash and the commits.
The same inputs give the same archive, byte for byte: files in name order, no owners, no
times (MANIFEST.json first, so that a reader meets it before anything it describes).

Unpacking (hpcbench.stack.bundle_unpack) checks every member before it writes anything
(names inside the bundle, files, directories and links only, each link leading inside its
own part however the kernel follows it, the manifest's list), writes links last so that no
write passes through one, verifies every checksum in a scratch directory of the per-user
cache, and only then puts anything in place; a damaged, truncated or crafted archive is
refused with one message and leaves nothing behind. It needs python3 alone (`python3 -m
hpcbench.stack.bundle_unpack unpack`), so that a machine without internet unpacks the bundle
before it makes the suite's venv from its wheels.
"""
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# Standard library and these alone (no hpcbench.stack.bootstrap, which needs PyYAML): unpacking
# runs before the venv exists.
from hpcbench.core import child_processes, paths
from hpcbench.stack import blas, spack

FORMAT = 1
TOP = 'hpcbench-bundle'
MANIFEST = 'MANIFEST.json'
# The parts, by their directory in the bundle. Spack's two trees go where hpcbench.stack.spack
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


def tree_entries(tree):
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
    for rel in tree_entries(tree):
        path = os.path.join(tree, rel)
        digests[rel] = (f'-> {os.readlink(path)}' if os.path.islink(path) else paths.file_sha256(path))
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
            for rel in tree_entries(tree):
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
    venv, Intel MPI and MKL, and the CUDA toolkit where the environment builds its GPU
    programs with NVIDIA's wheels (hpcbench.stack.cuda), and NCCL where it builds nccl-tests
    over NVIDIA's wheel (hpcbench.stack.nccl)."""
    from hpcbench.stack import cuda, machine_systems, nccl
    parts = [*machine_systems.machine_stacks(system), *machine_systems.machine_blas(system)]
    host_yaml = paths.SPACK_ENVS_DIR / system / 'host.yaml'
    toolkit = ([('the CUDA toolkit', cuda.REQUIREMENTS, cuda.PIP_OPTIONS)]
               if cuda.environment_uses_wheels(host_yaml) else [])
    toolkit += ([('NCCL', [nccl.REQUIREMENT], nccl.PIP_OPTIONS)]
                if nccl.environment_uses_wheel(host_yaml) else [])
    return [('the suite\'s venv', suite_requirements(), ()),
            *((p.name, p.wheel_requirements(), p.wheel_options) for p in parts
              if hasattr(p, 'wheel_requirements')), *toolkit]


def make(system='local', output_dir=None, binaries=True):
    """Write the bundle of `system` (a system on this machine, installed) and return its
    path and manifest. `binaries=False`: no build cache (for machines whose CPUs the
    binaries do not fit: everything is built there from the mirror's sources)."""
    from hpcbench.stack import bootstrap
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
    lock_hash = paths.file_sha256(lock)
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
            child_processes.run([sys.executable, '-m', 'pip', 'download', '--quiet',
                                 '--disable-pip-version-check', '--dest',
                                 str(tree / 'wheels'), *options, *requirements], check=True)
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
    lines = [f'{output}: {output.stat().st_size / 2**20:.1f} MiB, sha256 {paths.file_sha256(output)}',
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

