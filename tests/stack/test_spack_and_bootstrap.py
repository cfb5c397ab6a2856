import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpcbench.core import node, paths
from hpcbench.stack import bootstrap, machine_systems, mpi_stacks, spack
from conftest import ROOT, needs_root, run_reframe


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """No Spack anywhere and a clone that cannot succeed (no network needed to fail)."""
    cache = tmp_path / 'cache'
    monkeypatch.setenv('HPCBENCH_CACHE', str(cache))
    monkeypatch.delenv('SPACK_ROOT', raising=False)
    monkeypatch.delenv('HPCBENCH_SPACK_PACKAGES', raising=False)
    monkeypatch.setenv('HPCBENCH_SPACK_URL', f'file://{tmp_path}/no-such-repo')
    monkeypatch.setenv('HPCBENCH_SPACK_PACKAGES_URL', f'file://{tmp_path}/no-such-repo')
    return cache


@pytest.mark.machine_dependent
def test_spack_is_found_from_spack_root(tmp_path, monkeypatch):
    (tmp_path / 'spack' / 'bin').mkdir(parents=True)
    (tmp_path / 'spack' / 'bin' / 'spack').write_text('')
    builtin = tmp_path / 'pkgs' / 'repos' / 'spack_repo' / 'builtin'
    builtin.mkdir(parents=True)
    (builtin / 'repo.yaml').write_text('')
    monkeypatch.setenv('SPACK_ROOT', str(tmp_path / 'spack'))
    monkeypatch.setenv('HPCBENCH_SPACK_PACKAGES', str(tmp_path / 'pkgs'))
    assert spack.find() == spack.Spack(tmp_path / 'spack', tmp_path / 'pkgs')


def test_no_spack_gives_one_message_and_leaves_nothing(empty_cache):
    proc = subprocess.run([sys.executable, '-m', 'hpcbench.stack.spack', 'locate'],
                          capture_output=True, text=True, env=os.environ.copy())
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: No Spack found')
    assert 'export SPACK_ROOT=' in lines[0]
    assert not empty_cache.exists()


def test_make_install_fails_fast_without_spack(empty_cache):
    proc = subprocess.run(['make', '--no-print-directory', 'install'], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, 'PYTHON': sys.executable})
    assert proc.returncode != 0
    assert 'error: No Spack found' in proc.stderr and 'SPACK_ROOT' in proc.stderr
    assert not empty_cache.exists()


def test_no_spack_setup_says_so_and_prepares_the_registry_only_path(empty_cache):
    if bootstrap.missing_apt_packages(bootstrap.REGISTRY_APT_PACKAGES) and os.geteuid() != 0:
        pytest.skip('the registry-only Debian packages are missing and we are not root')

    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'hpcbench'),
                           'setup'], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'No Spack found' in proc.stdout and 'registry-only path' in proc.stdout
    openmpi = next(s for s in mpi_stacks.local_stacks() if s.name == 'openmpi')
    assert (openmpi.bin_dir / 'mpirun').resolve() == Path('/usr/bin/mpirun.openmpi').resolve()
    assert not (empty_cache / 'spack').exists()


@pytest.mark.machine_dependent
def test_hpcbench_no_spack_hides_an_existing_spack(tmp_path, monkeypatch):
    test_spack_is_found_from_spack_root(tmp_path, monkeypatch)
    monkeypatch.setenv('HPCBENCH_NO_SPACK', '1')
    assert spack.find() is None
    with pytest.raises(spack.SpackNotFound, match='HPCBENCH_NO_SPACK'):
        spack.locate_or_clone()


def test_isolated_environment_replaces_user_and_system_scopes(empty_cache):
    env = spack.isolated_environment(spack.Spack(empty_cache / 's', empty_cache / 'p'),
                                     python='/venv/bin/python')
    assert env['SPACK_USER_CONFIG_PATH'].startswith(str(empty_cache))
    assert env['SPACK_SYSTEM_CONFIG_PATH'].startswith(str(empty_cache))
    assert env['SPACK_PYTHON'] == '/venv/bin/python'
    assert 'SPACK_DISABLE_LOCAL_CONFIG' not in env


def test_spack_config_pins_builtin_repo_and_uses_mirror_when_present(tmp_path):
    found = spack.Spack(tmp_path / 'spack', tmp_path / 'pkgs')
    files = bootstrap.spack_config_files(found, tmp_path / 'mirror')
    assert files['repos.yaml'] == f'repos::\n  builtin: {found.builtin_repo}\n'
    assert files['mirrors.yaml'] == 'mirrors: {}\n'
    assert 'github-actions-v2: false' in files['bootstrap.yaml']
    (tmp_path / 'mirror').mkdir()
    files = bootstrap.spack_config_files(found, tmp_path / 'mirror', tmp_path / 'buildcache')
    mirrors = yaml.safe_load(files['mirrors.yaml'].replace('mirrors::', 'mirrors:'))['mirrors']
    assert mirrors == {'local': {'url': f'file://{tmp_path}/mirror', 'binary': False}}
    # The pipeline's build cache, once a build job has created it: binaries only, unsigned.
    (tmp_path / 'buildcache').mkdir()
    files = bootstrap.spack_config_files(found, tmp_path / 'mirror', tmp_path / 'buildcache')
    mirrors = yaml.safe_load(files['mirrors.yaml'].replace('mirrors::', 'mirrors:'))['mirrors']
    assert mirrors['buildcache'] == {'url': f'file://{tmp_path}/buildcache', 'source': False,
                                     'signed': False}


def test_a_spack_without_a_mirror_or_network_is_said_to_fetch_nothing(empty_cache,
                                                                      monkeypatch):
    """Spack present, no source mirror, no network (this machine's CI as it was): the tests
    that build with Spack skip saying so rather than fail at the first fetch; a mirror, a
    proxy or a resolvable upstream each make the sources reachable. A resolver that never
    answers is given up on within the bound."""
    import socket
    import time
    for name in spack._PROXIES:
        monkeypatch.delenv(name, raising=False)

    def unknown(host, port):
        raise socket.gaierror(-2, 'Name or service not known')

    monkeypatch.setattr(socket, 'getaddrinfo', unknown)
    why = spack.sources_unavailable()
    assert why.startswith(f'no source mirror ({empty_cache / "mirror"}) and mirror.spack.io '
                          'cannot be reached from here')
    monkeypatch.setattr(socket, 'getaddrinfo', lambda host, port: time.sleep(30))
    started = time.monotonic()
    assert spack.sources_unavailable(resolve_within=0.5) is not None
    assert time.monotonic() - started < 5
    monkeypatch.setattr(socket, 'getaddrinfo', lambda host, port: [('an address',)])
    assert spack.sources_unavailable() is None
    monkeypatch.setattr(socket, 'getaddrinfo', unknown)
    monkeypatch.setenv('https_proxy', 'http://proxy.example:3128')
    assert spack.sources_unavailable() is None
    monkeypatch.delenv('https_proxy')
    (empty_cache / 'mirror').mkdir(parents=True)
    assert spack.sources_unavailable() is None


def test_each_mpi_prefix_is_its_own(empty_cache):
    stacks = {s.name: s for s in mpi_stacks.local_stacks()}
    # and an installed MVAPICH2, when this machine has one (test_mvapich2.py)
    assert list(stacks)[:3] == ['openmpi', 'mpich', 'intelmpi']
    ompi = stacks['openmpi'].links()
    assert ompi['bin/mpicc'] == '/usr/bin/mpicc.openmpi'
    assert ompi['include'].endswith('/openmpi/include')
    mpich = stacks['mpich'].links()
    assert mpich['bin/mpicc'] == '/usr/bin/mpicc.mpich'
    assert mpich['lib/libmpi.so'].endswith('/libmpich.so')
    impi = stacks['intelmpi']
    assert impi.bin_dir == impi.prefix / 'mpi' / '2021.17' / 'bin'
    assert set(impi.links()) >= {'mpi/2021.17/lib/release', 'mpi/2021.17/libfabric/lib'}
    assert impi.run_env['I_MPI_ROOT'] == str(impi.bin_dir.parent)


@pytest.mark.parametrize('debian_version, upstream', [('0.3.21+ds-4', '0.3.21'),
                                              ('20220903-3', '20220903'),
                                              ('1:2.4.7-5', '2.4.7')])
def test_debian_versions_become_upstream_versions(debian_version, upstream):
    from hpcbench.stack import debian
    assert debian.upstream_version(debian_version) == upstream


@pytest.mark.parametrize('recipe, pattern', [
    ('dgemm_rate', r'^    source_file = "(.+)"\n    source_sha256 = "([0-9a-f]{64})"$'),
    ('mpi_startup', r'^    source_file = "(.+)"\n    source_sha256 = "([0-9a-f]{64})"$'),
    ('host_device_bandwidth', r'^    source_file = "(.+)"\n    source_sha256 = "([0-9a-f]{64})"$'),
    ('dgemm_rate', r'^    common_header = \(\n        "(.+)",\n        "([0-9a-f]{64})",\n'),
    ('dgemm_rate', r'^    cuda_source = \(\n        "(.+)",\n        "([0-9a-f]{64})",\n'),
    ('stream', r'^    streaming_stores = \(\n        "(.+)",\n        "([0-9a-f]{64})",\n'),
])
def test_own_sources_beside_a_recipe_have_the_checksum_it_records(recipe, pattern):
    """Spack would refuse to install them otherwise (own_source.verified_own_source)."""
    import hashlib
    import re
    directory = ROOT / 'packages' / 'spack_repo' / 'hpcbench' / 'packages' / recipe
    source, recorded = re.search(pattern, (directory / 'package.py').read_text(), re.M).groups()
    assert hashlib.sha256((directory / source).read_bytes()).hexdigest() == recorded


def test_the_two_systems_on_this_machine_concretize_from_the_same_inputs(tmp_path):
    """local and testbed differ only in comments and in their node's host.yaml: the same
    host.yaml means the same concretization key (one concretization serves both, and any
    later clone); another host.yaml, another key."""
    found = spack.Spack(tmp_path / 'spack', tmp_path / 'pkgs')   # no git: no commits
    keys = {}
    for system, ntimes in (('local', 20), ('testbed', 20), ('other', 10)):
        env = tmp_path / system
        env.mkdir()
        source = 'local' if system == 'other' else system
        (env / 'spack.yaml').write_text((paths.SPACK_ENVS_DIR / source / 'spack.yaml').read_text())
        (env / 'host.yaml').write_text(
            f'definitions:\n- stream_specs: [stream stream_array_size=16777216 ntimes={ntimes}]\n')
        keys[system] = bootstrap.concretization_key(bootstrap.concretization_inputs(env), found)
    assert keys['local'] == keys['testbed'] != keys['other']


def _spack_copy(directory, recipe='class Zlib(Package):\n    version("1.3.1")\n'):
    """A Spack and spack-packages as files (not git checkouts): the version, the
    concretizer, the default configuration and one recipe."""
    spack_dir, packages = directory / 'spack', directory / 'spack-packages'
    files = {spack_dir / 'lib/spack/spack/__init__.py': '__version__ = "1.1.0"\n',
             spack_dir / 'lib/spack/spack/solver/concretize.lp': '% rules\n',
             spack_dir / 'etc/spack/defaults/concretizer.yaml': 'concretizer: {}\n',
             packages / 'repos/spack_repo/builtin/packages/zlib/package.py': recipe}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return spack.Spack(spack_dir, packages)


def test_a_concretization_is_keyed_by_spacks_files_not_its_commits(tmp_path):
    """Two copies that are not git checkouts have no commit: the key is their content.
    The same files share a lock; a changed recipe or concretizer does not (issue 22)."""
    env = tmp_path / 'env'
    env.mkdir()
    (env / 'spack.yaml').write_text((paths.SPACK_ENVS_DIR / 'local' / 'spack.yaml').read_text())
    (env / 'host.yaml').write_text('definitions: []\n')
    inputs = bootstrap.concretization_inputs(env)

    def key(found):
        return bootstrap.concretization_key(inputs, found)

    first = _spack_copy(tmp_path / 'a')
    assert first.commits() == ('', '')
    same = _spack_copy(tmp_path / 'b')
    # Python's byte-code caches and Spack's own tests are not inputs.
    cache = same.root / 'lib/spack/spack/__pycache__/solver.cpython-311.pyc'
    cache.parent.mkdir()
    cache.write_bytes(b'\0')
    assert key(first) == key(same)
    newer_recipe = _spack_copy(tmp_path / 'c', 'class Zlib(Package):\n    version("1.3.2")\n')
    assert key(newer_recipe) != key(first)
    other_rules = _spack_copy(tmp_path / 'd')
    (other_rules.root / 'lib/spack/spack/solver/concretize.lp').write_text('% other rules\n')
    assert key(other_rules) != key(first)


def test_a_comment_in_an_included_yaml_keeps_the_lock_and_a_value_does_not(tmp_path,
                                                                         monkeypatch):
    """Issue 22: a changed comment in this-machine.yaml or host.yaml is no new input (it
    cost a 13-minute concretization); a changed setting is."""
    for name, where in (('PROJECT_ROOT', ''), ('SPACK_ENVS_DIR', 'spack-envs'),
                        ('PACKAGES_REPO_DIR', 'packages/a'),
                        ('HOST_PACKAGES_REPO_DIR', 'packages/b')):
        monkeypatch.setattr(paths, name, tmp_path / where)
    env = tmp_path / 'spack-envs' / 'local'
    env.mkdir(parents=True)
    (tmp_path / 'packages').mkdir()
    (env / 'spack.yaml').write_text((ROOT / 'spack-envs' / 'local' / 'spack.yaml').read_text())
    (env / 'host.yaml').write_text('definitions: []\n')
    shared = (ROOT / 'spack-envs' / 'this-machine.yaml').read_text()
    machine = tmp_path / 'spack-envs' / 'this-machine.yaml'
    machine.write_text(shared)
    found = _spack_copy(tmp_path / 'spack')
    inputs = bootstrap.concretization_inputs(env)
    before = bootstrap.concretization_key(inputs, found)
    machine.write_text('# a note\n' + shared.replace('unify: false', 'unify: false  # why'))
    (env / 'host.yaml').write_text('# written by hpcbench\ndefinitions:   []\n')
    assert bootstrap.concretization_key(inputs, found) == before
    machine.write_text(shared.replace('unify: false', 'unify: true'))
    assert bootstrap.concretization_key(inputs, found) != before
    machine.write_text('concretizer: [unclosed\n')
    with pytest.raises(machine_systems.BootstrapError,
                       match=r'this-machine\.yaml is not valid YAML'):
        bootstrap.concretization_key(inputs, found)


def test_a_spack_yaml_with_a_syntax_error_is_named_in_one_message(tmp_path):
    env = tmp_path / 'local'
    env.mkdir()
    text = (paths.SPACK_ENVS_DIR / 'local' / 'spack.yaml').read_text()
    (env / 'spack.yaml').write_text(text.replace('specs:', 'specs: [unclosed', 1))
    (env / 'host.yaml').write_text('definitions: []\n')
    found = spack.Spack(tmp_path / 'spack', tmp_path / 'pkgs')
    with pytest.raises(machine_systems.BootstrapError,
                       match=rf'^{re.escape(str(env / "spack.yaml"))} is not valid YAML: '):
        bootstrap.concretization_key(bootstrap.concretization_inputs(env), found)


def test_missing_debian_packages_are_named_and_not_root_gets_the_command(monkeypatch):
    from hpcbench.stack import debian
    assert debian.missing(['coreutils', 'no-such-package-hpcbench']) == \
        ['no-such-package-hpcbench']
    assert debian.missing([]) == []
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    with pytest.raises(debian.MissingPackages,
                       match=r'as root run: apt-get update && apt-get install -y '
                             r'--no-install-recommends no-such-package-hpcbench$'):
        debian.ensure(['coreutils', 'no-such-package-hpcbench'])


def test_a_node_too_small_for_streams_rule_loses_stream_not_the_set_up(capsys):
    # This VM reports its host's 480 MiB L3: 4x that in three arrays is 5.6 GiB, more than
    # half of an emulated testbed node's 7.8 GiB.
    small = node.Node(num_cores=2, num_sockets=1, num_numa_nodes=1, llc_bytes_total=480 * 2**20,
                      memory_bytes=int(7.8 * 2**30), clock_hz=2.6e9, flops_per_cycle=32)
    config = machine_systems.host_config([], {}, [small], 'testbed')
    assert config['definitions'][:2] == [{'stream_specs': []}, {'mpis': []}]
    assert 'testbed: STREAM is not built: STREAM needs 3 arrays of 251658240 elements' \
        in capsys.readouterr().out
    roomy = dataclasses.replace(small, memory_bytes=24 * 2**30)
    assert machine_systems.host_config([], {}, [roomy])['definitions'][:2] == [
        {'stream_specs': ['stream stream_array_size=251658240 ntimes=20']}, {'mpis': []}]


@pytest.mark.skipif(os.geteuid() != 0, reason='holding the dpkg lock and running apt need root')
def test_apt_waits_a_bounded_time_for_a_held_dpkg_lock_then_says_why(monkeypatch, tmp_path):
    """Another apt (unattended upgrades) holds the dpkg lock: a package the report's browser
    needs cannot be installed. One clear error, after a bounded wait; the report goes on
    without a browser."""
    import time
    from hpcbench.report import browser
    from hpcbench.stack import debian
    # Held by another process, as apt holds it (fcntl locks of one process do not block
    # that process's children; apt runs as a child of this one).
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import fcntl, sys, time\n'
         'fps = [open(p, "w") for p in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")]\n'
         '[fcntl.lockf(fp, fcntl.LOCK_EX) for fp in fps]\nprint("held", flush=True)\n'
         'time.sleep(120)'], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        monkeypatch.setattr(browser, 'PACKAGES', ('hpcbench-no-such-package',))
        monkeypatch.setattr(debian, 'LOCK_TIMEOUT', 3)
        start = time.monotonic()
        with pytest.raises(browser.BrowserUnavailable, match='could not install '
                                                             'hpcbench-no-such-package: '):
            browser.ensure()
        assert time.monotonic() - start < 60
    finally:
        holder.kill()
        holder.wait()


def _installed_hash(found, spec):
    done = subprocess.run([str(found.executable), '-e', str(paths.SPACK_ENVS_DIR / 'local'),
                           'find', '--format', '{hash}', spec], capture_output=True, text=True,
                          env={**os.environ, **spack.isolated_environment(found)}, check=True)
    return done.stdout.split()


@pytest.mark.spack
def test_imb_is_built_on_every_mpi_stack_as_the_one_program_the_checks_run(installed):
    """Our recipe (packages/spack_repo/hpcbench_host): make is asked for IMB-MPI1 alone and
    that is all the prefix holds; the builtin recipe made all seven programs."""
    found = spack.find()
    done = subprocess.run([str(found.executable), '-e', str(paths.SPACK_ENVS_DIR / 'local'),
                           'find', '--format', '{prefix}', 'intel-mpi-benchmarks'],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, **spack.isolated_environment(found)})
    prefixes = [Path(line) for line in done.stdout.split()]
    lock = json.loads((paths.SPACK_ENVS_DIR / 'local' / 'spack.lock').read_text())
    roots = [r['spec'] for r in lock['roots'] if r['spec'].startswith('intel-mpi-benchmarks')]
    assert roots and len(prefixes) == len(roots), (roots, done.stdout)
    for prefix in prefixes:
        assert sorted(p.name for p in (prefix / 'bin').iterdir()) == ['IMB-MPI1']
        with gzip.open(prefix / '.spack' / 'spack-build-out.txt.gz', 'rt') as log:
            # Spack's make call, whichever make (Debian's, Spack's gmake) and options.
            make = [line for line in log if re.match(r"==> \[[^]]*\] '\S*/g?make'", line)]
        assert len(make) == 1 and make[0].rstrip().endswith("'IMB-MPI1'"), make


@pytest.mark.spack
def test_what_an_install_builds_is_kept_as_binaries_and_nothing_else_pushes(
        installed, tmp_path, monkeypatch):
    """A real build (one of the environment's, removed first) is pushed to the build cache
    by the install that made it; an install with nothing to do pushes nothing."""
    found = spack.find()
    buildcache = tmp_path / 'buildcache'
    monkeypatch.setenv('HPCBENCH_BUILDCACHE', str(buildcache))
    try:
        bootstrap.install_environment(found)
        assert not buildcache.exists()

        [removed] = _installed_hash(found, 'mpi-startup ^openmpi')
        bootstrap.run_spack(found, 'uninstall', '-y', f'/{removed}', quiet=True)
        bootstrap.install_environment(found)
        assert _installed_hash(found, 'mpi-startup ^openmpi') == [removed]
        pushed = {p.name for p in buildcache.rglob('*.spec.manifest.json')}
        assert any(removed in name for name in pushed), sorted(pushed)
        # Every build of the environment, not only the one just made (OpenBLAS among them).
        assert any(name.startswith('openblas-') for name in pushed), sorted(pushed)
    finally:
        monkeypatch.delenv('HPCBENCH_BUILDCACHE')
        bootstrap.write_spack_config(found)


@pytest.mark.spack
@needs_root
def test_a_build_cache_that_cannot_be_written_is_said_and_the_set_up_goes_on(
        installed, tmp_path, monkeypatch, mounted, capsys):
    found = spack.find()
    source = tmp_path / 'source'
    source.mkdir()
    readonly = mounted('--bind', '-o', 'ro', str(source))
    monkeypatch.setenv('HPCBENCH_BUILDCACHE', str(readonly))
    try:
        bootstrap.keep_as_binaries(found, 'local')
    finally:
        monkeypatch.delenv('HPCBENCH_BUILDCACHE')
        bootstrap.write_spack_config(found)
    said = capsys.readouterr().out
    assert f'builds not kept as binaries ({readonly})' in said
    assert not list(source.iterdir())


def _startup_build_script(var):
    script, = (var / 'output' / 'local' / 'default' / 'openmpi').glob(
        'MpiStartupBuild_*/rfm_build.sh')
    return script.read_text()


@pytest.mark.spack
def test_a_build_located_once_is_taken_from_there_while_it_is_installed(installed, tmp_path):
    """Issue 22: each build fixture started Spack to locate its build, every run (84 s of a
    warm make run). Spack's answer is remembered per lock; a second run does not start
    Spack for it; a remembered prefix that is gone, or a store that is not JSON, is asked
    of Spack again."""
    var = tmp_path / 'var'
    env = {'HPCBENCH_VAR': str(var)}

    def run():
        proc = run_reframe('-r', '-n', 'MpiStartupCheck', '-p', 'openmpi$', env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        return _startup_build_script(var)

    assert ' location -i ' in run()
    store, = (var / 'spack-locations').glob('*.json')
    prefix, = json.loads(store.read_text()).values()
    remembered = run()
    assert 'spack -e' not in remembered and f'echo {prefix} > ' in remembered

    store.write_text(json.dumps({spec: str(tmp_path / 'gone') for spec in
                                 json.loads(store.read_text())}))
    assert ' location -i ' in run()
    assert list(json.loads(store.read_text()).values()) == [prefix]
    store.write_text('{not json')
    assert ' location -i ' in run()
    assert list(json.loads(store.read_text()).values()) == [prefix]


def test_a_remembered_prefix_counts_only_once_its_install_is_whole(tmp_path, monkeypatch):
    """Issue 51, item 18: a prefix holding only .spack/ (Spack writes the spec there when an
    install starts) was taken for an installed build."""
    monkeypatch.setattr(paths, 'VAR_DIR', tmp_path / 'var')
    env = tmp_path / 'env'
    env.mkdir()
    (env / 'spack.lock').write_text('{"roots": []}')
    prefix = tmp_path / 'install' / 'hpl-2.3-abcdef'
    (prefix / '.spack').mkdir(parents=True)
    (prefix / '.spack' / 'spec.json').write_text('{}')
    spack.remember_prefix(env, 'hpl ^openmpi', str(prefix))
    assert spack.remembered_prefix(env, 'hpl ^openmpi') is None
    (prefix / '.spack' / 'install_manifest.json').write_text('{}')
    assert spack.remembered_prefix(env, 'hpl ^openmpi') == str(prefix)


@pytest.fixture
def bootstrapped():
    """This machine's host.yaml (bootstrap: seconds when it is there)."""
    return bootstrap.bootstrap()


def _one_root_environment(tmp_path, root, without=()):
    """A copy of the local environment's layout (spack-envs/<name>, this-machine.yaml, the
    project's package repositories) holding `root` alone, on this machine's host.yaml less
    the externals `without`."""
    envs = tmp_path / 'spack-envs'
    env = envs / 'one-root'
    env.mkdir(parents=True)
    (tmp_path / 'packages').symlink_to(paths.PACKAGES_REPO_DIR.parent.parent)
    (envs / 'this-machine.yaml').write_text(
        (paths.SPACK_ENVS_DIR / 'this-machine.yaml').read_text())
    host = yaml.safe_load((paths.SPACK_ENVS_DIR / 'local' / 'host.yaml').read_text())
    for name in without:
        del host['packages'][name]
    (env / 'host.yaml').write_text(yaml.safe_dump(host))
    (env / 'spack.yaml').write_text(yaml.safe_dump({'spack': {
        'include': [{'path': 'host.yaml'}, {'path': '../this-machine.yaml'}],
        'specs': [root], 'view': False}}))
    return env


def _root_hash(env):
    return json.loads((env / 'spack.lock').read_text())['roots'][0]['hash']


@pytest.mark.spack
def test_the_solver_leaves_out_what_the_environment_never_builds_and_solves_the_same(
        bootstrapped, tmp_path, capsys):
    """Issue 52: `hpl ^openmpi` grounded 538 packages (every MPI, compiler and GPU stack),
    20 s a root. The packages a machine environment never builds are marked so for the
    concretization alone; its solution is the one of the whole repository."""
    found = bootstrapped
    env = _one_root_environment(tmp_path, 'mpi-startup ^openmpi')
    scope = tmp_path / 'scope'
    scope.mkdir()
    bootstrap.run_spack(found, '-e', str(env), 'python',
                        str(Path(bootstrap.__file__).parent / 'spack_never_built.py'),
                        str(scope / 'packages.yaml'), quiet=True)
    never = yaml.safe_load((scope / 'packages.yaml').read_text())['packages']
    assert all(entry == {'buildable': False} for entry in never.values())
    # Other MPIs and compilers are out; what the environment uses is in.
    assert {'mvapich2', 'llvm', 'nvhpc'} <= set(never), sorted(never)
    assert not {'openmpi', 'mpich', 'gcc', 'mpi-startup', 'gcc-runtime'} & set(never)
    bootstrap.concretize(found, env)
    pruned = _root_hash(env)
    bootstrap.run_spack(found, '-e', str(env), 'concretize', '--force', quiet=True)
    assert _root_hash(env) == pruned
    assert 'whole Spack repository' not in capsys.readouterr().out


@pytest.mark.spack
def test_an_environment_that_must_build_a_tool_is_solved_against_the_whole_repository(
        bootstrapped, tmp_path, capsys):
    """Without m4 among the machine's externals, IOR's build needs m4 built: the problem
    without the packages it never builds has no solution, and the whole one is solved,
    saying so."""
    found = bootstrapped
    env = _one_root_environment(tmp_path, 'ior ^openmpi', without=('m4',))
    bootstrap.concretize(found, env)
    said = capsys.readouterr().out
    assert 'concretizing against the whole Spack repository' in said, said
    lock = json.loads((env / 'spack.lock').read_text())
    built = {spec['name'] for spec in lock['concrete_specs'].values()
             if not spec.get('external')}
    assert 'm4' in built, sorted(built)


def test_a_set_up_says_the_seconds_of_each_phase_on_one_line():
    """perf/setup_phases.py reads this line; a phase that fails still counts its time."""
    import time
    phases = bootstrap.Phases()
    with phases('concretize'):
        time.sleep(0.2)
    with pytest.raises(machine_systems.BootstrapError):
        with phases('install'):
            time.sleep(0.1)
            raise machine_systems.BootstrapError('a build failed')
    with phases('install'):
        time.sleep(0.1)
    line = phases.line()
    assert re.fullmatch(r'set-up phases \(s\): packages 0\.0, wheels 0\.0, externals 0\.0, '
                        r'concretize 0\.2, install 0\.2, push 0\.0; total 0\.4', line), line


def test_detecting_externals_builds_spacks_index_where_the_concretization_reads_it(
        empty_cache, monkeypatch):
    """Spack builds its package index on its first run (83 to 93 s on 2 cores) in the misc
    cache of its config.yaml; the detection's scratch scope without it had Spack build the
    index twice on a new machine, once for the detection and once for the concretization."""
    found = spack.Spack(empty_cache / 'spack', empty_cache / 'spack-packages')
    bootstrap.write_spack_config(found)
    real_scope = Path(spack.isolated_environment(found)['SPACK_USER_CONFIG_PATH'])
    seen = {}

    def scratch_spack(found, *args, env=None, **_):
        scope = Path(env['SPACK_USER_CONFIG_PATH'])
        assert scope != real_scope and args[:2] == ('external', 'find')
        seen.update(yaml.safe_load((scope / 'config.yaml').read_text())['config'])
        seen['files'] = sorted(p.name for p in scope.iterdir())
        (scope / 'packages.yaml').write_text('packages:\n  gmake:\n    externals: []\n')

    monkeypatch.setattr(bootstrap, 'run_spack', scratch_spack)
    assert bootstrap.spack_external_find(found, 'gmake') == {'gmake': {'externals': []}}
    used = yaml.safe_load((real_scope / 'config.yaml').read_text())['config']
    assert seen['misc_cache'] == used['misc_cache'] == str(empty_cache / 'spack-misc-cache')
    # Every file of the user scope, whichever the set-up writes (mirrors.yaml here too).
    assert seen['files'] == sorted(p.name for p in real_scope.iterdir()), seen['files']
    assert 'mirrors.yaml' in seen['files']
    assert not (real_scope / 'packages.yaml').exists()
