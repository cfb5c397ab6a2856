"""What ReFrame makes of every system, to compare before and after a change to how systems
are described: `reframe --list=C` (every test case, concretized on each partition and
environment) and `reframe --describe` (every variable of every test) of each site config,
and of a system `hpcbench new-system` describes from the testbed's controller outputs
(tests/fixtures/slurm/testbed). Paths of the run are replaced by placeholders, so two
listings made from two checkouts compare byte for byte.

    python -m hpcbench.devtools.listings OUT_DIR     # OUT_DIR/<system>.list, .describe.json
    diff -r BEFORE AFTER
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hpcbench.core import paths, slurm_cluster
from hpcbench.rfm import reframe_port

TESTBED_OUTPUTS = paths.PROJECT_ROOT / 'tests' / 'fixtures' / 'slurm' / 'testbed'
DESCRIBED = 'described'


def _described_site_config(root):
    """A project root `root` holding a system new-system describes from the testbed's
    controller outputs and this host's facts; its site config's path."""
    from hpcbench.machine import node_facts
    from hpcbench.stack import new_system
    config, partitions, nodes, mpi = ((TESTBED_OUTPUTS / name).read_text() for name in (
        'scontrol-show-config.txt', 'scontrol-show-partition.txt', 'scontrol-show-node.txt',
        'srun-mpi-list.txt'))
    cluster = slurm_cluster.cluster_from(config, partitions, nodes, mpi)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        node_facts.print_node_facts()
    facts = json.loads(printed.getvalue().strip()[len(node_facts.NODE_FACTS_MARK):])
    facts['gpus_seen'] = 0
    (root / 'spack-envs' / 'testbed').mkdir(parents=True)
    shutil.copy(paths.SPACK_ENVS_DIR / 'testbed' / 'spack.yaml', root / 'spack-envs' / 'testbed')
    description, asks = new_system.describe(
        DESCRIBED, cluster, {p.name: facts for p in cluster.partitions}, 'login1',
        ['openmpi', 'mpich'], io_directory='/scratch/hpcbench')
    written = new_system.write(DESCRIBED, description, asks, root)
    return Path(written[1])


def _reframe(config, system, var, option):
    done = subprocess.run(
        reframe_port.command_line(system, options=[option], config=config),
        capture_output=True, text=True, cwd=paths.PROJECT_ROOT,
        env=dict(os.environ, HPCBENCH_VAR=str(var)))
    if done.returncode:
        raise SystemExit(f'{system}: reframe {option} exited {done.returncode}:\n'
                         f'{done.stdout[-2000:]}{done.stderr[-2000:]}')
    return done.stdout


def _plain(text, replacements):
    for path, placeholder in replacements:
        text = text.replace(str(path), placeholder)
    return text


def write_listings(out):
    out.mkdir(parents=True, exist_ok=True)
    systems = sorted(p.stem for p in paths.SITE_CONFIGS_DIR.glob('*.py'))
    with tempfile.TemporaryDirectory(prefix='hpcbench-listings-') as scratch:
        scratch = Path(scratch)
        configs = [(s, paths.SITE_CONFIGS_DIR / f'{s}.py') for s in systems]
        configs.append((DESCRIBED, _described_site_config(scratch / 'root')))
        for system, config in configs:
            var = scratch / f'var-{system}'
            replacements = [(var, '<var>'), (scratch / 'root', '<described-root>'),
                            (paths.PROJECT_ROOT, '<project>')]
            listing = _reframe(config, system, var, '--list=C')
            # The setup banner names the command and its paths; the listing is what follows.
            listing = listing[listing.index('[List of matched checks]'):]
            listing = listing[:listing.index('Log file(s)')]
            (out / f'{system}.list').write_text(_plain(listing, replacements))
            described = json.loads(_reframe(config, system, var, '--describe'))
            for case in described:      # a set in ReFrame: its order varies between runs
                case['tags'] = sorted(case['tags'])
            (out / f'{system}.describe.json').write_text(
                _plain(json.dumps(described, indent=1, sort_keys=True), replacements))
            print(f'{system}: {listing.strip().splitlines()[-1]}')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    write_listings(Path(sys.argv[1]))
