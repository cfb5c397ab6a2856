"""A partition's description and an MPI stack's (hpcbench.machine.description): one JSON
Schema, checked once per route to a system, one message naming the file and field; read
back through the one reader of ReFrame's extras (hpcbench.machine.described), with
ReFrame's `devices` the one count of GPUs."""
import subprocess
import types

import jsonschema
import pytest

from conftest import ROOT
from hpcbench.machine import described, description

GIB = 1 << 30
FIELDS = {'memory_bytes': 4 * GIB, 'clock_hz': 2.6e9, 'flops_per_cycle': 2,
          'spack_env': '/spack-envs/chic', 'num_nodes': 530, 'node_counts': [1, 2, 530],
          'hugepages': {'pages': 3800, 'page_kib': 2048}, 'io_directory': '/lustre/x',
          'accelerators': {'vendor': 'nvidia', 'kind': 'gpu', 'model': 'NVIDIA H200',
                           'arch': 'sm_90', 'count': 2, 'memory_bytes': 150 * GIB,
                           'max_sm_clock_hz': 1.98e9, 'power_limit_w': 700.0,
                           'ecc_enabled': True, 'driver_version': '580', 'datasheet': None}}


def test_the_schema_is_a_valid_json_schema_and_covers_every_field():
    jsonschema.Draft202012Validator.check_schema(description.SCHEMA)
    jsonschema.Draft202012Validator.check_schema(description.STACK_SCHEMA)
    fields = {f.name for f in description.dataclasses.fields(description.PartitionDescription)}
    assert fields == set(description.SCHEMA['properties'])


def test_a_description_goes_into_extras_and_back_with_the_count_in_devices_alone():
    made = description.partition(FIELDS, 'chic.py: partitions[compute]')
    extras = made.to_extras()
    assert 'count' not in extras['accelerators']
    partition = types.SimpleNamespace(
        extras={**extras, 'scheduler': 'slurm', 'launcher': 'srun'},    # ReFrame's own
        select_devices=lambda kind: [types.SimpleNamespace(num_devices=2)] if kind == 'gpu'
        else [])
    back = described.partition_description(partition)
    assert back == made and back.gpus_per_node == 2
    assert back.node_counts == (1, 2, 530) and back.hugepages['pages'] == 3800


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
    (dict(clock_hz=float('nan')), 'partitions[compute].clock_hz: nan is not a finite figure'),
])
def test_a_wrong_description_is_one_message_naming_the_file_and_field(change, said):
    fields = {k: v for k, v in {**FIELDS, **change}.items() if v is not None}
    with pytest.raises(description.DescriptionError) as raised:
        description.partition(fields, 'site-configs/chic.py: partitions[compute]')
    assert str(raised.value).startswith(f'site-configs/chic.py: {said}'), str(raised.value)
    assert '\n' not in str(raised.value)


def test_a_stack_of_a_wrong_field_is_one_message():
    with pytest.raises(description.DescriptionError,
                       match=r"^env openmpi\.known_failures\.IMB: 3 is not of type 'string'$"):
        description.stack({'spack_mpi': 'openmpi', 'known_failures': {'IMB': 3}},
                          'env openmpi')


PAPER_SITE = '''\
from hpcbench.rfm import site_config
from hpcbench.rfm.paper_sites import GIB, partition, processor

site_configuration = site_config.site(
    systems=[{'name': 'mini', 'descr': 'a paper system', 'hostnames': ['^mini'],
              'modules_system': 'nomod', 'partitions': [
        partition('compute', 'nodes', 'slurm', 'srun',
                  processor(arch='x86_64', model='m', sockets=1, cores_per_socket=2,
                            caches=[]),
                  num_nodes=4, memory_bytes=GIB, clock_hz=2e9, flops_per_cycle=4,
                  environs=['builtin'], system='mini', io_directory='/x', {extra})]}],
    environments=[])
'''


@pytest.mark.parametrize('extra, said', [
    ("hugepages={'pages': 'many', 'page_kib': 2048}",
     "partitions[compute].hugepages.pages: 'many' is not of type 'integer'"),
    ("binding={'tool': 'hwloc'}",
     "partitions[compute].binding.tool: 'hwloc' is not one of ['numactl', 'taskset']"),
])
def test_a_paper_site_config_of_a_wrong_field_stops_reframe_in_one_message(
        tmp_path, extra, said):
    config = tmp_path / 'mini.py'
    config.write_text(PAPER_SITE.replace('{extra}', extra))
    done = subprocess.run([str(ROOT / '.venv' / 'bin' / 'reframe'), '-C', str(config),
                           '--system', 'mini', '-c', str(ROOT / 'reframe-checks'), '-l'],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={'PATH': '/usr/bin:/bin', 'HPCBENCH_VAR': str(tmp_path / 'var')})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == f'error: site-configs/mini.py: {said}'
