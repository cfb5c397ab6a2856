"""A partition's description and an MPI stack's (hpcbench.machine.description): one JSON
Schema, checked once per route to a system, one message naming the file and field; read
back through the one reader of ReFrame's extras (hpcbench.machine.from_reframe), with
ReFrame's `devices` the one count of GPUs."""
import re
import subprocess
import types

import jsonschema
import pytest
import yaml

from conftest import ROOT
from hpcbench.machine import description, description_schema, from_reframe

GIB = 1 << 30
FIELDS = {'memory_bytes': 4 * GIB, 'clock_hz': 2.6e9, 'flops_per_cycle': 2,
          'spack_env': '/spack-envs/chic', 'num_nodes': 530, 'node_counts': [1, 2, 530],
          'os_reserve_bytes': GIB // 2,
          'hugepages': {'pages': 3800, 'page_kib': 2048}, 'io_directory': '/lustre/x',
          'accelerators': {'vendor': 'nvidia', 'kind': 'gpu', 'model': 'NVIDIA H200',
                           'arch': 'sm_90', 'count': 2, 'memory_bytes': 150 * GIB,
                           'max_sm_clock_hz': 1.98e9, 'power_limit_w': 700.0,
                           'ecc_enabled': True, 'driver_version': '580', 'datasheet': None}}


def test_the_schema_is_a_valid_json_schema_and_covers_every_field():
    jsonschema.Draft202012Validator.check_schema(description_schema.SCHEMA)
    jsonschema.Draft202012Validator.check_schema(description_schema.STACK_SCHEMA)
    fields = {f.name for f in description.dataclasses.fields(description.PartitionDescription)}
    assert fields == set(description_schema.SCHEMA['properties'])


def test_a_description_goes_into_extras_and_back_with_the_count_in_devices_alone():
    made = description.partition(FIELDS, 'chic.py: partitions[compute]')
    extras = made.to_extras()
    assert 'count' not in extras['accelerators']
    partition = types.SimpleNamespace(
        extras={**extras, 'scheduler': 'slurm', 'launcher': 'srun'},    # ReFrame's own
        select_devices=lambda kind: [types.SimpleNamespace(num_devices=2)] if kind == 'gpu'
        else [])
    back = from_reframe.partition_description(partition)
    assert back == made and back.gpus_per_node == 2
    assert back.node_counts == (1, 2, 530) and back.hugepages['pages'] == 3800
    assert back.os_reserve_bytes == GIB // 2


@pytest.mark.parametrize('change, said', [
    (dict(memory_bytes='4 GiB'), "partitions[compute].memory_bytes: '4 GiB' is not of type "
                                 "'integer'"),
    (dict(memory_bytes=None), "partitions[compute]: 'memory_bytes' is a required property"),
    (dict(clock_hz=0), 'partitions[compute].clock_hz: 0 is less than or equal to the '
                       'minimum of 0'),
    (dict(hugepages={'pages': 10}), "partitions[compute].hugepages: 'page_kib' is a required "
                                    'property'),
    (dict(node_counts=[1, 0]), 'partitions[compute].node_counts[1]: 0 is less than the '
                               'minimum of 1'),
    (dict(memory_dimm=4), 'partitions[compute]: no such field memory_dimm (the fields: '),
    (dict(os_reserve_bytes=0), 'partitions[compute].os_reserve_bytes: 0 is less than the '
                               'minimum of 1'),
    (dict(clock_hz=float('nan')), 'partitions[compute].clock_hz: nan is not a finite number'),
])
def test_a_wrong_description_is_one_message_naming_the_file_and_field(change, said):
    fields = {k: v for k, v in {**FIELDS, **change}.items() if v is not None}
    with pytest.raises(description_schema.DescriptionError) as raised:
        description.partition(fields, 'site-configs/chic.py: partitions[compute]')
    assert str(raised.value).startswith(f'site-configs/chic.py: {said}'), str(raised.value)
    assert '\n' not in str(raised.value)


def test_a_stack_of_a_wrong_field_is_one_message():
    with pytest.raises(description_schema.DescriptionError,
                       match=r"^env openmpi\.known_failures\.IMB: 3 is not of type 'string'$"):
        description.stack({'spack_mpi': 'openmpi', 'known_failures': {'IMB': 3}},
                          'env openmpi')


def _paper_system(tmp_path, change):
    """chic's description, changed, as a system of its own beside its three-line site
    config; `reframe -l` of it."""
    described = yaml.safe_load((ROOT / 'site-configs' / 'chic.yaml').read_text())
    change(described)
    return _paper_text(tmp_path, yaml.safe_dump(described))


def _paper_text(tmp_path, text):
    """The description `text` (None: a link to /etc/passwd) as chic's, beside its three-line
    site config; `reframe -l` of it."""
    if text is None:
        (tmp_path / 'chic.yaml').symlink_to('/etc/passwd')
    else:
        (tmp_path / 'chic.yaml').write_text(text)
    (tmp_path / 'chic.py').write_text((ROOT / 'site-configs' / 'chic.py').read_text())
    return subprocess.run([str(ROOT / '.venv' / 'bin' / 'reframe'), '-C',
                           str(tmp_path / 'chic.py'), '--system', 'chic', '-c',
                           str(ROOT / 'reframe-checks'), '-l'],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={'PATH': '/usr/bin:/bin', 'HPCBENCH_VAR': str(tmp_path / 'var')})


def test_a_described_system_s_site_config_is_three_lines_reading_its_description():
    """Every system with a description file (the papers', a cluster new-system described)
    has a site config of three lines that reads it, and nothing else."""
    described = [p for p in (ROOT / 'site-configs').glob('*.py')
                 if p.with_suffix('.yaml').exists()]
    assert len(described) >= 6
    for config in described:
        lines = config.read_text().splitlines()
        assert len(lines) == 3 and lines[2].endswith('.site_configuration(__file__)'), config


@pytest.mark.parametrize('change, said', [
    (lambda d: d['partitions'][0].update(num_nodes='530'),
     "partitions[compute].num_nodes: '530' is not of type 'integer'"),
    (lambda d: d['partitions'][0].update(memory_bytes='4 GB'),
     "partitions[compute].memory_bytes: '4 GB' is not valid under any of the given schemas"),
    (lambda d: d['partitions'][1].pop('processor'),
     "partitions[visualization]: 'processor' is a required property"),
    (lambda d: d['partitions'][2].update(processor='x3650'),
     "partitions[io].processor: no processor 'x3650' (the processors: intellistation, "
     'x3455)'),
    (lambda d: d['partitions'][0].update(hugepages={'pages': 'many', 'page_kib': 2048}),
     "partitions[compute].hugepages.pages: 'many' is not of type 'integer'"),
    (lambda d: d['partition_defaults'].update(binding={'tool': 'hwloc'}),
     "partitions[compute].binding.tool: 'hwloc' is not one of ['numactl', 'taskset']"),
    (lambda d: d['partitions'][0].update(memory_dimm=4),
     'partitions[compute]: no such field memory_dimm (the fields: '),
    (lambda d: d.pop('about'), "'about' is a required property"),
])
def test_a_paper_s_description_of_a_wrong_field_stops_reframe_in_one_message(
        tmp_path, change, said):
    done = _paper_system(tmp_path, change)
    assert done.returncode == 1 and 'Traceback' not in done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f'error: {tmp_path}/chic.yaml: {said}'), last


# Issue 60, items 11, 12, 17 and 18: descriptions that took gigabytes or never ended, gave a
# traceback, took a key given twice, or named a generated file instead of theirs.
_BOMB = ('partition_defaults:\n  a: &a [x, x, x, x, x, x, x, x, x]\n'
         '  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n'
         '  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n'
         '  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n'
         '  e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n')


_CHIC = (ROOT / 'site-configs' / 'chic.yaml').read_text()


@pytest.mark.parametrize('text, said', [
    (_CHIC.replace('partition_defaults:\n', _BOMB, 1),
     r'not valid YAML: line \d+, column \d+: an alias \(\*a\): this file is plain data'),
    (_CHIC.replace('    sockets: 2\n', '    sockets: 1000\n', 1),
     r'processors.x3455.sockets: 1000 is greater than the maximum of 16'),
    (_CHIC.replace('    cores_per_socket: 2\n', '    cores_per_socket: 512\n    '
                   'threads_per_core: 8\n', 1),
     r'processors.x3455: 8192 CPUs a node \(sockets x cores_per_socket x threads_per_core\), '
     r'more than 2048'),
    (_CHIC.replace('  clock_hz: 2.6 GHz\n', '  clock_hz: 2.6 Ghz\n', 1),
     r"partition_defaults.clock_hz: '2.6 Ghz' is not valid under any of the given schemas"),
    (_CHIC.replace('  clock_hz: 2.6 GHz\n', '  clock_hz: 2.6 GHz\n  clock_hz: 26 GHz\n', 1),
     r"not valid YAML: line \d+, column 3: the key 'clock_hz' is given twice in one mapping"),
    (_CHIC.replace('  io_stripe_size: 1 MiB\n', '  io_stripe_size: \u0661 MiB\n', 1),
     r"partition_defaults.io_stripe_size: '\u0661 MiB' is not valid under any of the given"),
    (_CHIC.replace('- name: compute\n', '- name: ../../etc\n', 1),
     r"partitions\[\.\./\.\./etc\]\.name: '\.\./\.\./etc' does not match "),
    # Issue 70, item 6: each a traceback (every ReFrame command stopped), and a number that
    # is none (item 4); variations beside them.
    (_CHIC.replace('    sockets: 2\n', f'    sockets: {"9" * 5000}\n', 1),
     r'not valid YAML: line \d+, column \d+: an integer of 5000 digits'),
    (_CHIC.replace('  clock_hz: 2.6 GHz\n', f'  clock_hz: {"[" * 5000}{"]" * 5000}\n', 1),
     r'not valid YAML: line \d+, column \d+: nested more than 64 levels deep'),
    (_CHIC.replace('  clock_hz: 2.6 GHz\n', '  ? [clock_hz, x]\n  : 2.6 GHz\n', 1),
     r'not valid YAML: line \d+, column \d+: a key that is a list or a mapping'),
    (_CHIC.replace('  clock_hz: 2.6 GHz\n', '  clock_hz: {[a]: 1}\n', 1),
     r'not valid YAML: line \d+, column \d+: a key that is a list or a mapping'),
    (_CHIC.replace('    sockets: 2\n', '    sockets: .nan\n', 1),
     r"not valid YAML: line \d+, column \d+: '.nan' is not a finite number"),
    (_CHIC.replace('    sockets: 2\n', '    sockets: 1.0e+400\n', 1),
     r"not valid YAML: line \d+, column \d+: '1.0e\+400' is not a finite number"),
])
def test_a_hostile_paper_description_is_one_message_in_bounded_time(tmp_path, text, said):
    import time
    started = time.monotonic()
    done = _paper_text(tmp_path, text)
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and 'Traceback' not in done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert re.match(rf'error: {re.escape(str(tmp_path))}/chic.yaml: {said}', last), last
    assert not (tmp_path / 'var' / 'stage').exists()


def test_a_description_that_is_a_link_to_another_file_shows_a_line_of_it(tmp_path):
    done = _paper_text(tmp_path, None)
    assert done.returncode == 1 and 'Traceback' not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f'error: {tmp_path}/chic.yaml: ') and len(last) < 600, last
    assert 'is no mapping of fields' in last


@pytest.mark.parametrize('config', ['local', 'testbed'])
def test_a_host_fact_given_wrong_stops_the_site_config_in_one_message(tmp_path, config):
    """The route of this host (local, and the testbed's nodes): a clock given that is no
    clock is one message naming the site config, and nothing else runs."""
    done = subprocess.run([str(ROOT / '.venv' / 'bin' / 'reframe'), '-C',
                           f'site-configs/{config}.py', '-c', 'reframe-checks', '-l'],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={'PATH': '/usr/bin:/bin', 'HPCBENCH_VAR': str(tmp_path / 'var'),
                               'HPCBENCH_CLOCK_HZ': '-5'})
    assert done.returncode == 1 and 'Traceback' not in done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {ROOT}/site-configs/{config}.py: HPCBENCH_CLOCK_HZ='-5': the core clock in "
        'Hz, e.g. 3.5e9')
