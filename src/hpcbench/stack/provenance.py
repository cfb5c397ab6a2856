"""What exactly ran: the facts every stored result carries, so that a figure can be traced
back to the code, the software stack, the inputs and the hardware that produced it.

Two levels, both kept by ReFrame itself (no store of our own):
- the session's: project commit, Spack commits, the system's spack.lock hash, host; as
  ReFrame session extras (`reframe --session-extras "$(hpcbench provenance --system X)"`,
  which `make run` passes) and, so that a bare `reframe -r` keeps them too, as variables of
  every test (hpcbench.rfm.plugins.Provenance);
- the test's: the build's full spec (compiler, MPI, BLAS with versions), the input files
  it wrote, the node's topology; loggable variables, hence in perflogs and the results
  database like every variable the check set.
"""
import functools
import hashlib
import json
import os
import re
import socket
import subprocess
from pathlib import Path

from hpcbench.core import paths
from hpcbench.stack import spack

# Virtual dependencies worth naming in a build's summary, in this order.
_NAMED_VIRTUALS = ('c', 'cxx', 'fortran', 'mpi', 'blas', 'lapack')
# Characters ReFrame's --session-extras cannot carry in a value (it splits on ','; a '}'
# on a reframe command line corrupts its results database in 4.10.4).
_UNSAFE_IN_EXTRAS = ',{}'


def _git(root, *args):
    proc = subprocess.run(['git', '-C', str(root), *args], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ''


def project_commit(root=None):
    """The project's commit, with `-dirty` when tracked files differ from it; '' outside a
    git checkout."""
    root = root or paths.PROJECT_ROOT
    commit = _git(root, 'rev-parse', 'HEAD')
    if commit and _git(root, 'status', '--porcelain', '--untracked-files=no'):
        commit += '-dirty'

    return commit


def _spack_version(root):
    match = re.search(r'^__version__ = "([^"]+)"',
                      (Path(root) / 'lib' / 'spack' / 'spack' / '__init__.py').read_text(),
                      re.MULTILINE)
    return f'v{match.group(1)}' if match else 'unknown'


def spack_commits(found=None):
    """'spack@<commit> packages@<commit>' of the Spack in use; '' without one. A copy that
    is not a git checkout (an exported archive) is named by what it says of itself: Spack
    by its version, spack-packages as unknown."""
    found = found or spack.find()
    if not found:
        return ''

    spack_id, packages_id = found.commits()
    try:
        spack_id = spack_id or f'{_spack_version(found.root)}(no-git)'
    except OSError:
        spack_id = 'unknown'

    return f'spack@{spack_id} packages@{packages_id or "unknown(no-git)"}'


def lock_hash(env_dir):
    """sha256 of an environment's spack.lock; '' when it has none."""
    lock = Path(env_dir) / 'spack.lock'
    if not lock.is_file():
        return ''

    return hashlib.sha256(lock.read_bytes()).hexdigest()


@functools.cache
def session_facts(env_dir):
    """The session-level facts of a run on the system whose Spack environment is env_dir
    (computed once per process: every test of a session shares them)."""
    return {
        'project_commit': project_commit(),
        'spack_commit': spack_commits(),
        'spack_lock': lock_hash(env_dir) if env_dir else '',
        'host': socket.gethostname(),
    }


def session_extras(facts):
    """facts as ReFrame's --session-extras argument (k=v,k=v); a value it cannot carry is
    an error rather than a silently cut annotation."""
    for key, value in facts.items():
        if any(c in str(value) for c in _UNSAFE_IN_EXTRAS):
            raise ValueError(f'{key}={value!r}: ReFrame session extras cannot carry '
                             f'any of {_UNSAFE_IN_EXTRAS!r}')

    return ','.join(f'{k}={v}' for k, v in facts.items() if v)


def build_spec(prefix):
    """One line naming a Spack install and what it was built with, from the spec Spack
    recorded in the prefix:

        hpl@2.3 +openmp arch=linux-debian12-x86_64_v4 /5vtt4bg ^c=gcc@12.2.0
        ^mpi=intel-oneapi-mpi@2021.17.0 ^blas=openblas@0.3.21

    '' when the prefix holds no Spack spec (a dry run, a distribution binary)."""
    try:
        with open(os.path.join(prefix, '.spack', 'spec.json')) as fp:
            nodes = json.load(fp)['spec']['nodes']
    except (OSError, ValueError, KeyError, TypeError):
        return ''

    by_hash = {n['hash']: n for n in nodes}
    root = nodes[0]
    flags = [('+' if v else '~') + k for k, v in sorted(root.get('parameters', {}).items())
             if isinstance(v, bool)]
    arch = root.get('arch') or {}
    target = arch.get('target')
    target = target.get('name') if isinstance(target, dict) else target
    parts = [f'{root["name"]}@{root["version"]}', *flags,
             f'arch={arch.get("platform")}-{arch.get("platform_os")}-{target}',
             f'/{root["hash"][:7]}']

    providers = {}
    for dep in root.get('dependencies', []):
        node = by_hash.get(dep['hash'])
        for virtual in (dep.get('parameters') or {}).get('virtuals', []):
            if node and virtual in _NAMED_VIRTUALS:
                providers.setdefault(f'{node["name"]}@{node["version"]}', []).append(virtual)

    order = {v: i for i, v in enumerate(_NAMED_VIRTUALS)}
    for provider, virtuals in sorted(providers.items(),
                                     key=lambda item: min(order[v] for v in item[1])):
        parts.append(f'^{",".join(sorted(virtuals, key=order.get))}={provider}')

    return ' '.join(parts)


def debian_package(path):
    """'<package> <version> (Debian)' of the package that installed `path`; '' when dpkg
    does not know it."""
    try:
        real = os.path.realpath(path)
        owner = subprocess.run(['dpkg-query', '-S', real], capture_output=True, text=True)
    except OSError:
        return ''

    if owner.returncode != 0 or ':' not in owner.stdout:
        return ''

    package = owner.stdout.split(':', 1)[0].split(',')[0].strip()
    version = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', package],
                             capture_output=True, text=True).stdout.strip()
    return f'{package} {version} (Debian)'


def pypi_package(path):
    """'<distribution> <version> (PyPI)' of the installed wheel whose RECORD lists `path`
    (a program pip installed under a prefix); '' when none does."""
    real = Path(os.path.realpath(path))
    for prefix in real.parents:
        for record in prefix.glob('lib/python3*/site-packages/*.dist-info/RECORD'):
            site = record.parent.parent
            for line in record.read_text().splitlines():
                listed = line.split(',', 1)[0]
                if listed and os.path.realpath(site / listed) == str(real):
                    # The distribution's own name (the directory's is normalised: impi_rt).
                    meta = dict(re.findall(r'^(Name|Version): (.+)$',
                                           (record.parent / 'METADATA').read_text(), re.M))
                    return f"{meta['Name']} {meta['Version']} (PyPI)"

    return ''


def registry_package(path):
    """What provides a registry binary: its Debian package, else its PyPI wheel."""
    return debian_package(path) or pypi_package(path)


def topology(processor, node):
    """The node a result was measured on, in one line: ReFrame's processor description
    (detected or from the site config) and the hpcbench.core.node.Node derived from it."""
    arch = processor.get('arch') or 'unknown arch'
    sockets = processor.get('num_sockets') or node.num_sockets
    threads = processor.get('num_cpus_per_core') or 1
    return (f'{arch}: {sockets} socket(s) x {node.num_cores // max(sockets, 1)} core(s) x '
            f'{threads} thread(s), {node.num_numa_nodes} NUMA node(s), '
            f'LLC {node.llc_bytes_total / 2**20:g} MiB, memory {node.memory_bytes / 2**30:.1f} GiB, '
            f'{node.clock_hz / 1e9:g} GHz x {node.flops_per_cycle} flop/cycle/core')

