"""The six systems of the papers: references that map onto the checks, dry-runs of every
check on every partition with their job scripts asserted, and Spack environments whose
committed locks agree with them."""
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from conftest import BIN
from hpcbench.benchmarks import hpl, hpl_sweep, imb, imb_variability, ior
from hpcbench.core import node, paths
from hpcbench.results import references
from hpcbench.rfm import run_modes
from hpcbench.stack import spack

# The paper systems' checks are described and dry-run, never built here: the same with or
# without this machine's Spack (but for the re-concretization test, marked `spack`).

PAPER_SYSTEMS = ('tsubame', 'chic', 't2k-tsukuba', 'louhi', 'murska', 'oakforest-pacs')
# Checks whose node counts are the partition's list
# (hpcbench.rfm.partition.skip_unless_node_count).
NODE_COUNT_CHECKS = {'HplCheck', 'MpiStartupCheck'}


def site_configuration(system):
    spec = importlib.util.spec_from_file_location(
        f'site_{system.replace("-", "_")}', paths.SITE_CONFIGS_DIR / f'{system}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def partitions(system):
    (config,) = site_configuration(system)['systems']
    return {p['name']: p for p in config['partitions']}


def _reframe(system, var, *args):
    env = dict(os.environ, HPCBENCH_VAR=str(var))
    return subprocess.run([str(BIN / 'reframe'), '-C', str(paths.SITE_CONFIGS_DIR / f'{system}.py'),
                           '--system', system, '-c', str(paths.CHECKS_DIR), *args],
                          capture_output=True, text=True, env=env, cwd=paths.PROJECT_ROOT)


@pytest.fixture(scope='session')
def described(tmp_path_factory):
    """`reframe --describe` of every check on each system: its test cases."""
    result = {}
    for system in PAPER_SYSTEMS:
        done = _reframe(system, tmp_path_factory.mktemp(f'describe-{system}'), '--describe')
        assert done.returncode == 0, done.stderr[-2000:]
        result[system] = json.loads(done.stdout)

    return result


@pytest.fixture(scope='session')
def dry_runs(tmp_path_factory):
    """`make dry-run` of every system (two at a time), with exactly the options it gives
    ReFrame (its paper's run: the mode's), serially: {system: (completed process, stage
    directory)}."""
    def run(system):
        var = tmp_path_factory.mktemp(f'dry-{system}')
        done = subprocess.run(['make', '-s', '--no-print-directory', 'dry-run',
                               f'SYSTEM={system}', 'RFM_OPTS=--exec-policy=serial'],
                              capture_output=True, text=True, cwd=paths.PROJECT_ROOT,
                              env=dict(os.environ, HPCBENCH_VAR=str(var)))
        return system, (done, var / 'stage' / system)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, PAPER_SYSTEMS))


# --- references --------------------------------------------------------------------------------

def _dynamic_variables(check, match):
    """Performance variables a check names at setup, from the same functions it uses."""
    if check in ('ImbPairCheck', 'ImbGroupCheck'):
        sizes = imb.message_sizes(match['benchmark'], 0, 22)
        return {*imb.performance_units(match['benchmark'], sizes), 'switch_size'}
    if check == 'ImbVariability':
        return set(imb_variability.VARIABILITY_VARIABLES)
    if check == 'IorCheck':
        return set(ior.PERFORMANCE_VARIABLES)
    if check == 'HplTuningSweep':
        setting = str(match['sweep']).split('-')[0]
        return set(hpl_sweep.sweep_variables(setting))
    return set()


def _parameters(case):
    return set(re.findall(r'%(\w+)=', case['display_name']))


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_every_figure_maps_onto_a_configured_partition_and_a_real_test_case(system, described):
    refs = references.load(system)
    parts = partitions(system)
    assert refs.figures or refs.qualitative, f'{system}: no references at all'
    for fig in refs.figures:
        where = f'{system}: {fig.check} {fig.variable} ({fig.where})'
        if fig.partition in refs.comparison_machines:
            # A paper's other machine: its figures are comparisons of a check's variables.
            assert fig.use == 'comparison', where
            assert any(fig.variable in c['perf_variables'] for c in described[system]
                       if c['@class'] == fig.check), where
            continue
        assert fig.partition in parts, f'{where}: no partition {fig.partition}'
        part = parts[fig.partition]
        assert fig.environ in (None, *part['environs']), f'{where}: environ {fig.environ}'
        cases = [c for c in described[system] if c['@class'] == fig.check]
        assert cases, f'{where}: no such check'
        static = {v for c in cases for v in c['perf_variables']}
        assert fig.variable in static | _dynamic_variables(fig.check, fig.match), where
        hardware = {k for k in fig.match if k not in cases[0]}
        assert hardware <= set(part['extras']), f'{where}: match keys {hardware} unknown'

        # Some test case has every matched parameter at the figure's value; variables
        # (settable with -S) only need to exist.
        def fits(case):
            return all(references.match_value(case[k]) == v for k, v in fig.match.items()
                       if k in _parameters(case))
        assert any(fits(c) for c in cases), f'{where}: no test case with {fig.match}'
        nodes = fig.match.get('num_nodes')
        if nodes:
            assert nodes <= part['extras']['num_nodes'], where
            if fig.check in NODE_COUNT_CHECKS and 'node_counts' in part['extras']:
                assert nodes in part['extras']['node_counts'], where


_UNITS = {  # printed unit -> factor to the check's unit
    'tflops': 1e3, 'pflops': 1e6, 'gflop/s': 1, 'gflops': 1, 'gib/s': 1024,
    'gb/s': 1e9 / 2**20, 'mb/s': 1, '%': 1, 'kb': 1024,
}


# Flop rates in flop/s, to convert a printed rate to the check's unit (GFLOP/s, TFLOP/s).
_FLOP_RATES = {'gflop/s': 1e9, 'gflops': 1e9, 'tflop/s': 1e12, 'tflops': 1e12, 'pflops': 1e15}


def _cited_values(fig):
    """The values a figure's `cited` text gives, in the figure's unit: each printed number
    converted, or the arithmetic it names (`50 of 96 GFlops`: a percentage; `50 GFlops per
    25 Watts`)."""
    share = re.fullmatch(r'([\d.]+) of ([\d.]+) \S+', fig.cited)
    if share:
        return [100 * float(share.group(1)) / float(share.group(2))]
    per_watt = re.fullmatch(r'([\d.]+) GFlops per ([\d.]+) Watts', fig.cited)
    if per_watt:
        return [float(per_watt.group(1)) / float(per_watt.group(2))]
    printed = re.findall(r'([\d.,]+)\s*(TFlops|PFLOPS|GFlop/s|GFlops|GiB/s|GB/s|MB/s|%|KB)',
                         fig.cited, re.I)
    unit = fig.unit.lower()
    return [float(n.replace(',', '')) * (_FLOP_RATES[u.lower()] / _FLOP_RATES[unit]
                                         if unit in _FLOP_RATES else _UNITS[u.lower()])
            for n, u in printed]


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_cited_figures_agree_with_the_values_kept(system):
    for fig in references.load(system).figures:
        if not fig.cited:
            continue
        values = _cited_values(fig)
        assert values, f'{system}: {fig.variable}: cannot read {fig.cited!r}'
        assert any(abs(v - fig.value) <= max(0.05, 1e-4 * fig.value) for v in values), (
            f'{system}: {fig.check} {fig.variable} = {fig.value} {fig.unit}, cited '
            f'{fig.cited!r}')


def test_reference_counts_cover_every_system_and_refuse_an_unknown_one(capsys):
    from hpcbench.cli import main
    assert main.main(['references']) == 0
    out = capsys.readouterr().out
    for system in PAPER_SYSTEMS:
        assert re.search(rf'^{re.escape(system)}\s+\S', out, re.M), system
    tsubame_hpl = re.search(r'^tsubame\s+HPL\s+(\d+)\s+(\d+)\s+(\d+)', out, re.M)
    assert tsubame_hpl.groups() == ('36', '0', '7')   # Table 3-6: 18 rows x 2 figures
    # A name no system has is refused before anything is read, as every --system is.
    with pytest.raises(SystemExit) as exited:
        main.main(['references', '--system', 'nowhere'])
    assert exited.value.code == 2
    assert "'nowhere' is not a system (the systems: " in capsys.readouterr().err
    # A system with no references file (the testbed) is said so.
    assert main.main(['references', '--system', 'testbed']) == 2
    assert 'no references for testbed' in capsys.readouterr().err


# --- dry-runs ----------------------------------------------------------------------------------

def _one(stage, partition, environ, test, *contains):
    """The job script of `test` (a stage directory glob) that contains every `contains`."""
    for script in sorted(stage.glob(f'{partition}/{environ}/{test}/rfm_job.sh')):
        text = script.read_text()
        if all(c in text for c in contains):
            return text, script.parent

    raise AssertionError(f'no {test} job on {partition}/{environ} with {contains!r}')


# Per system: the scheduler's directive, and per environment the launch line's start.
EXPECTED_JOBS = {
    'tsubame': (r'^#\$ -pe mpi \d+$', {'mvapich2': r'^mpirun_rsh -ssh -np \d+ -hostfile ',
                                       'openmpi': r'^mpirun -np \d+ --map-by ppr:\d+:node'}),
    'chic': (r'^#PBS -l nodes=\d+:ppn=\d+$', {'openmpi': r'^mpirun -np \d+ --map-by ppr',
                                             'mvapich2': r'^mpirun_rsh -np \d+ -hostfile '}),
    't2k-tsukuba': (r'^#PBS -l select=\d+:mpiprocs=\d+:ncpus=\d+$',
                    {'openmpi': r'^mpirun -np \d+ --map-by ppr',
                     'mvapich2': r'^mpirun_rsh -np \d+ -hostfile '}),
    'louhi': (r'^#PBS -l mppwidth=\d+$', {'cray-mpich': r'^aprun -n \d+ -N \d+'}),
    'murska': (r'^#BSUB -ext "SLURM\[nodes=\d+\]"$',
               {'hpmpi-rdma': r'^mpirun .*-srun -n \d+ -N \d+ ',
                'hpmpi-srq': r'^mpirun .*-srun -n \d+ -N \d+ '}),
    'oakforest-pacs': (r'^#PJM -L node=\d+$',
                       {'intelmpi': r'^mpiexec.hydra -n \d+ -ppn \d+ ',
                        'mvapich2': r'^mpirun_rsh -np \d+ -hostfile ',
                        'mvapich2-hydra': r'^mpiexec.hydra -n \d+ -ppn \d+ '}),
}
# Checks that launch MPI ranks through the site's launcher (the others start one process).
MPI_CHECKS = ('HplCheck', 'HplTuningSweep', 'HplNodeScreen', 'ImbPairCheck', 'ImbGroupCheck',
              'ImbVariability', 'IorCheck', 'MpiStartupCheck')


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_every_check_on_every_partition_writes_its_job(system, dry_runs):
    done, stage = dry_runs[system]
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r'\(0 failure\(s\)', done.stdout), done.stdout[-3000:]
    directive, launchers = EXPECTED_JOBS[system]
    seen = set()
    for script in stage.glob('*/*/*/rfm_job.sh'):
        partition, environ, test = script.parts[-4:-1]
        text = script.read_text()
        assert re.search(directive, text, re.M), f'{script}: no {directive}'
        if test.split('_')[0] in MPI_CHECKS:
            assert re.search(launchers[environ], text, re.M), f'{script}: {launchers[environ]}'
            seen.add((partition, environ, test.split('_')[0]))

    # Every MPI check ran on every partition in every environment; node screening where
    # the paper's run screened nodes (T2K), and nowhere else.
    screens = 'screen' in run_modes.paper_run_tags(system)
    assert screens == (system == 't2k-tsukuba')
    assert any(check == 'HplNodeScreen' for _, _, check in seen) == screens
    for partition, part in partitions(system).items():
        for environ in part['environs']:
            for check in ('HplCheck', 'ImbPairCheck', 'ImbVariability', 'IorCheck',
                          'MpiStartupCheck', *(['HplNodeScreen'] if screens else [])):
                if check == 'ImbPairCheck' and part['extras']['num_nodes'] < 2:
                    continue
                assert (partition, environ, check) in seen, (system, partition, environ, check)


def test_tsubame_jobs_carry_its_pe_voltaire_variables_and_taskset_ring(dry_runs):
    _, stage = dry_runs['tsubame']
    job, where = _one(stage, 'x4600-24', 'mvapich2', 'HplCheck_*', '-np 16 ')
    assert '#$ -pe mpi 32' in job                     # 2 nodes x 16 cores
    assert "for (i = 0; i < 8; i++) print $1" in job   # 8 ranks per node in the host file
    launch = next(ln for ln in job.splitlines() if ln.startswith('mpirun_rsh'))
    for setting in ('VIADEV_USE_SHM_RNDV=1', 'SMPI_LENGTH_QUEUE=2', 'SMP_EAGERSIZE=650',
                    'VIADEV_HCA_DISTRIBUTE=2', 'VIADEV_MAX_TOTAL_REG_MEM_SIZE=2000',
                    'VIADEV_NDREG_ENTRIES=16000', 'GOTO_NUM_THREADS=2'):
        assert f' {setting} ' in launch, setting
    binder = (where / 'bind-rank.sh').read_text()
    assert re.findall(r'cpus=([\d,]+);', binder) == [
        '4,5', '8,9', '12,13', '14,15', '10,11', '6,7', '2,3', '0,1']
    assert 'numactl' not in binder and 'exec taskset -c "$cpus" "$@"' in binder
    job, _ = _one(stage, 'grid', 'openmpi', 'HplCheck_*', '-np 5184 ')
    assert '--map-by ppr:8:node -x ' in job and '#$ -pe mpi 10368' in job


def test_tsubame_grid_rpeak_counts_its_16_nodes_at_2_6_ghz():
    """Table 3-6: the 648-node run's Rpeak, 49,868.8 GFLOPS = 16 x 83.2 + 632 x 76.8 (not
    648 x 76.8 = 49,766.4); its efficiency, 76.56 %, is against it."""
    grid = partitions('tsubame')['grid']
    described = node.from_partition(grid['processor'], grid['extras'], 'tsubame:grid')
    rpeak = hpl.plan(described, 648, 8, grids=[(36, 144)], n=1334160).rpeak_flops
    assert rpeak == pytest.approx(49868.8e9)
    assert 100 * 38180e9 / rpeak == pytest.approx(76.56, abs=0.005)
    assert described.peak_flops_of(4) == pytest.approx(4 * 83.2e9)


def test_t2k_runs_its_table_5_hpl_by_default(dry_runs):
    """T2K's 625-node run as the paper made it (Table 5, §4.5), with no -S: one rank per
    socket (P x Q = 50 x 50), NB 232, PFACT left, depth 0, N from the huge pages."""
    _, stage = dry_runs['t2k-tsukuba']
    for environ in ('openmpi', 'mvapich2'):
        _, where = _one(stage, 'compute', environ, 'HplCheck_*', ' -np 2500 ')
        dat = (where / 'HPL.dat').read_text().splitlines()
        settings = {line.split(None, 1)[1].split()[0]: line.split()[0] for line in dat[5:31]}
        assert dat[5].split()[0] == '1508000'
        assert (settings['NBs'], settings['Ps'], settings['Qs']) == ('232', '50', '50')
        assert (settings['PFACTs'], settings['DEPTHs'], settings['BCASTs']) == ('0', '0', '3')
        assert (settings['NBMINs'], settings['RFACTs'], settings['SWAP']) == ('4', '2', '2')


def test_given_settings_win_over_the_papers(tmp_path):
    """-S wins over extras.hpl_tuning; the paper's other settings stay."""
    done = _reframe('t2k-tsukuba', tmp_path, '--dry-run', '-n', 'HplCheck', '-p', 'openmpi',
                    '-S', 'nb=192', '-S', 'pfact=2')
    assert done.returncode == 0, done.stdout[-2000:]
    _, where = _one(tmp_path / 'stage' / 't2k-tsukuba', 'compute', 'openmpi', 'HplCheck_*',
                    ' -np 2500 ')
    dat = (where / 'HPL.dat').read_text().splitlines()
    settings = {line.split(None, 1)[1].split()[0]: line.split()[0] for line in dat[5:31]}
    assert (settings['NBs'], settings['PFACTs'], settings['DEPTHs']) == ('192', '2', '0')


def test_tsubame_runs_table_3_6_by_default(dry_runs):
    """TSUBAME's HPL.dat as the paper tuned it, with no -S: NB 240 (Figure 3-1), Table 3-5,
    and per node count Table 3-6's grid and Nmax, 2rM up to 512 nodes and 1rg at 648
    (Figures 3-6, 3-7)."""
    _, stage = dry_runs['tsubame']
    for part, ranks, n, grid, bcast in (('grid', 5184, '1334160', ('36', '144'), '0'),
                                        ('x4600-24', 768, '556080', ('16', '48'), '3'),
                                        ('x4600-24', 4624, '995520', ('34', '136'), '3'),
                                        ('x4600-26', 8, '58320', ('2', '4'), '3')):
        for environ in ('mvapich2', 'openmpi'):
            # The 8-ranks-per-node layout's job: 16 CPUs per node from the parallel environment.
            _, where = _one(stage, part, environ, 'HplCheck_*', f' -np {ranks} ',
                            f'#$ -pe mpi {ranks * 2}\n')
            dat = (where / 'HPL.dat').read_text().splitlines()
            settings = {line.split(None, 1)[1].split()[0]: line.split()[0] for line in dat[5:31]}
            assert (dat[5].split()[0], settings['NBs']) == (n, '240'), where
            assert (settings['Ps'], settings['Qs'], settings['BCASTs']) == (*grid, bcast), where
            assert (settings['swapping'], settings['PFACTs'], settings['DEPTHs']) == ('240', '2', '1')


def _testcases(dry_runs, system):
    _, stage = dry_runs[system]
    report = json.loads((stage.parent.parent / 'dry-run-report.json').read_text())
    return [tc for run in report['runs'] for tc in run['testcases'] if not tc['fixture']]


def _carries(tc, fig, system):
    """Whether test case `tc` of a dry-run report was given `fig` as its reference: its
    check, partition and environment, its parameters and variables at the figure's values,
    and ReFrame's reference for the variable is the figure's value and bounds."""
    if (tc['name'].split()[0], tc['partition']) != (fig.check, fig.partition):
        return False
    if fig.environ not in (None, tc['environ']):
        return False
    attrs = {k: tc[k] for k in fig.match if k in tc}
    if any(references.match_value(v) != fig.match[k] for k, v in attrs.items()):
        return False
    ref = tc['perfvalues'].get(f'{system}:{fig.partition}:{fig.variable}')
    return bool(ref) and (ref[1], ref[2], ref[3]) == (fig.value, *fig.tolerance)


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_every_reference_figure_attaches_to_a_default_test_case(system, dry_runs):
    """The default run (no -S) compares with every figure kept as a reference: the papers'
    configurations are the default parameterization (issue 18)."""
    cases = _testcases(dry_runs, system)
    figures = [f for f in references.load(system).figures if f.use == 'reference']
    missing = [f'{f.check} {f.variable} {f.match} ({f.where})' for f in figures
               if not any(_carries(tc, f, system) for tc in cases)]
    print(f'{system}: {len(figures) - len(missing)} / {len(figures)} reference figures attach')
    assert not missing, missing


def test_chic_runs_ior_and_imb_collectives_as_its_paper(dry_runs):
    """§3.1: IOR on 96 nodes, one 2.5 GB process per node, file per process on 1 OST (shared
    files on all 20); the IMB collectives on 32 nodes, one rank per node."""
    _, stage = dry_runs['chic']
    job, _ = _one(stage, 'compute', 'openmpi', 'IorCheck_*', '-a POSIX -F ')
    assert '#PBS -l nodes=96:ppn=1' in job and ' -b 2684354560 -s 1 -t 1048576 ' in job
    assert 'lfs setstripe -c 1 -S 1048576' in job
    job, _ = _one(stage, 'compute', 'openmpi', 'IorCheck_*', '-a POSIX -b 1048576 -s 2560 ')
    assert 'lfs setstripe -c 20 -S 1048576' in job
    for ranks in (32, 128):      # one rank per node, and per core
        _one(stage, 'compute', 'mvapich2', 'ImbGroupCheck_*', f'mpirun_rsh -np {ranks} ',
             ' Allreduce', '#PBS -l nodes=32:')


def test_ofp_start_up_runs_at_its_64_ranks_per_node_and_its_figures_attach(dry_runs):
    """Oakforest-PACS measured MPI start-up at 64 processes per node: the default run does
    too (66 cores are free), so its figures are the references of the default test cases."""
    _, stage = dry_runs['oakforest-pacs']
    job, _ = _one(stage, 'knl', 'intelmpi', 'MpiStartupCheck_*', ' -n 8192 ')
    assert ' -ppn 64 ' in job
    report = json.loads((stage.parent.parent / 'dry-run-report.json').read_text())
    case = next(tc for run in report['runs'] for tc in run['testcases']
                if tc['name'] == 'MpiStartupCheck %num_nodes=128' and tc['environ'] == 'intelmpi')
    assert case['perfvalues']['oakforest-pacs:knl:mpi_init'][1] == 8.799
    assert case['perfvalues']['oakforest-pacs:knl:hello_world'][1] == 6.69


def test_chic_jobs_ask_maui_for_whole_nodes_and_place_pairs_on_two(dry_runs):
    _, stage = dry_runs['chic']
    job, _ = _one(stage, 'compute', 'mvapich2', 'ImbPairCheck_*', 'PingPong')
    assert '#PBS -l nodes=2:ppn=4' in job and '#PBS -l naccesspolicy=singlejob' in job
    assert 'mpirun_rsh -np 2 -hostfile' in job
    assert 'cat "$PBS_NODEFILE" | awk \'!seen[$1]++ { for (i = 0; i < 1; i++)' in job
    # Where the paper is silent (the I/O nodes), IOR runs one rank per core on every node,
    # striped over the site's 20 OSTs.
    job, _ = _one(stage, 'io', 'openmpi', 'IorCheck_*', '-np 32 ')  # 8 x 4
    assert 'lfs setstripe' in job and '-c 20' in job


def test_t2k_binds_ranks_to_sockets_and_checks_its_huge_pages(dry_runs):
    _, stage = dry_runs['t2k-tsukuba']
    job, where = _one(stage, 'compute', 'openmpi', 'HplCheck_*', '-np 2500 ')
    assert '#PBS -l select=625:mpiprocs=4:ncpus=16' in job
    assert 'awk -v need=14400 -v kib=2048' in job
    binder = (where / 'bind-rank.sh').read_text()
    assert re.findall(r'cpus=([\d,]+); memory=([^ ]+) ;;', binder) == [
        ('0,1,2,3', '--membind=0'), ('4,5,6,7', '--membind=1'), ('8,9,10,11', '--membind=2'),
        ('12,13,14,15', '--membind=3')]
    assert 'export HUGETLB_MORECORE=yes' in binder and 'export LD_PRELOAD=libhugetlbfs.so' in binder
    assert 'numactl --physcpubind="$cpus" "$memory" "$@"' in binder


def test_louhi_asks_alps_for_width_per_node_and_depth(dry_runs):
    _, stage = dry_runs['louhi']
    job, _ = _one(stage, 'xt4-quadcore', 'cray-mpich', 'HplCheck_*', 'aprun -n 4 -N 4 ')
    assert '#PBS -l mppwidth=4' in job and '#PBS -l mppnppn=4' in job
    assert '#PBS -l mppdepth=1' in job and 'aprun -n 4 -N 4 -d 1 ' in job
    job, _ = _one(stage, 'xt4-quadcore', 'cray-mpich', 'HplCheck_*', 'aprun -n 8 -N 1 ')
    assert '#PBS -l mppwidth=8' in job and '#PBS -l mppdepth=4' in job


def test_murska_passes_the_hpmpi_mode_and_variables_on_its_launch_line(dry_runs):
    _, stage = dry_runs['murska']
    job, _ = _one(stage, 'compute', 'hpmpi-srq', 'ImbPairCheck_*', 'PingPong')
    assert '#BSUB -n 2' in job and '#BSUB -ext "SLURM[nodes=2]"' in job and '#BSUB -x' in job
    assert 'export MPIRUN_OPTIONS=-srq' in job
    assert re.search(r'^mpirun .*-e MPIRUN_OPTIONS=-srq .*-srun -n 2 -N 2 ', job, re.M)


def test_oakforest_pacs_keeps_tile_zero_free_and_spins(dry_runs):
    _, stage = dry_runs['oakforest-pacs']
    job, where = _one(stage, 'knl', 'intelmpi', 'MpiStartupCheck_*', '-n 64 ')
    assert '#PJM -L node=1' in job and '#PJM -L rscgrp=regular-cache' in job
    assert 'export PSM2_YIELD_SPIN_COUNT=10000' in job
    assert 'export I_MPI_COLL_SHM_PROGRESS_SPIN_COUNT=100000' in job
    job, where = _one(stage, 'knl', 'mvapich2', 'HplCheck_*', 'mpirun_rsh -np 66 ')
    binder = (where / 'bind-rank.sh').read_text()
    cpus = re.findall(r'cpus=([\d,]+);', binder)
    assert len(cpus) == 66 and cpus[0] == '2' and '0' not in cpus and '1' not in cpus
    assert ' MV2_ENABLE_AFFINITY=0 ' in job and ' PSM2_YIELD_SPIN_COUNT=10000 ' in job


# --- Spack environments ------------------------------------------------------------------------

def _env_file(system):
    return paths.SPACK_ENVS_DIR / system / 'spack.yaml'


def _expanded_roots(system):
    """The root specs a spack.yaml lists (definitions and matrices expanded)."""
    env = yaml.safe_load(_env_file(system).read_text())['spack']
    defs = {}
    for item in env.get('definitions', []):
        defs.update(item)

    def expand(values):
        out = []
        for v in values:
            if isinstance(v, str) and v.startswith('$^'):
                out += [f'^{x}' for x in defs[v[2:]]]
            elif isinstance(v, str) and v.startswith('$'):
                out += defs[v[1:]]
            else:
                out.append(v)
        return out

    roots = []
    for item in env['specs']:
        if isinstance(item, dict):
            rows = [[]]
            for column in item['matrix']:
                rows = [r + [v] for r in rows for v in expand(column)]
            roots += [' '.join(r) for r in rows]
        else:
            roots += expand([item])
    return roots


def _tokens(spec):
    return sorted(spec.split())


def _lock(system):
    return json.loads((paths.SPACK_ENVS_DIR / system / 'spack.lock').read_text())


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_each_lock_holds_exactly_the_roots_of_its_spack_yaml(system):
    lock = _lock(system)
    assert sorted(map(_tokens, (r['spec'] for r in lock['roots']))) == \
        sorted(map(_tokens, _expanded_roots(system)))
    target = yaml.safe_load(_env_file(system).read_text())['spack']['packages']['all']
    wanted = target['require'][0].split('=')[1]
    # A lock writes a generic target as a string, a microarchitecture as a dict.
    targets = {t['name'] if isinstance(t, dict) else t
               for t in (s['arch']['target'] for s in lock['concrete_specs'].values()
                         if 'arch' in s)}
    assert targets == {wanted}


def _has_variant(concrete, variant):
    """Whether a concrete spec (a lock's) has `variant` as a spec string gives it: `~cuda`,
    `+openmp`, `ntimes=20`."""
    parameters = concrete['parameters']
    if variant[0] in '~+':
        return parameters.get(variant[1:]) is (variant[0] == '+')
    name, value = variant.split('=', 1)
    given = parameters.get(name)
    return value in map(str, given) if isinstance(given, list) else str(given) == value


def _resolves(spec, lock):
    """The roots of `lock` that `spack location -i 'spec'` can mean: same package, every
    variant given, and the `^dependency` among its dependencies."""
    name, *rest = spec.split()
    deps = {t[1:] for t in rest if t.startswith('^')}
    variants = {t for t in rest if not t.startswith('^')}
    specs = lock['concrete_specs']
    return [r for r in lock['roots']
            if specs[r['hash']]['name'] == name
            and all(_has_variant(specs[r['hash']], v) for v in variants)
            and deps <= {d['name'] for d in specs[r['hash']]['dependencies']}]


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_every_build_a_check_asks_for_is_one_root_of_the_lock(system, dry_runs):
    """What the checks' BenchmarkBuild fixtures ask `spack location -i` for in the dry-run's
    build scripts (every benchmark with each environment's MPI, STREAM at each partition's
    array size, dgemm-rate) is exactly one root of the committed lock."""
    _, stage = dry_runs[system]
    asked = {m for script in stage.glob('*/*/*/rfm_build.sh')
             for m in (q or w for q, w in re.findall(r"location -i (?:'([^']+)'|(\S+))",
                                                    script.read_text()))}
    assert {spec.split()[0] for spec in asked} >= {
        'hpl', 'hpcc', 'intel-mpi-benchmarks', 'ior', 'mpi-startup', 'stream', 'dgemm-rate'}
    lock = _lock(system)
    for spec in sorted(asked):
        assert len(_resolves(spec, lock)) == 1, (system, spec, len(_resolves(spec, lock)))


# The keys of the inputs each committed lock was last found to re-concretize from
# (_concretized_key): written by the test below when it concretized afresh and the lock
# held, committed with the change that made it, so that a new machine or a fresh cache does
# not concretize the six again (23 min on 2 cores, 2026-11-26) until an input changes.
VERIFIED_LOCKS = paths.SPACK_ENVS_DIR / 'paper-locks-verified.json'


def _concretized_key(system, found):
    """What a concretization of the environment depends on: its files, our package repo
    (the one the paper systems include; not this machine's, hpcbench_host), the pinned Spack
    and packages by content, Spack's configuration scopes that can change a solution, and
    the host's operating system and architecture (Spack's `os` in every spec). Nothing
    that names this machine's paths: any machine with the same inputs shares the key."""
    digest = hashlib.sha256()
    project = [_env_file(system), paths.SPACK_ENVS_DIR / 'paper-systems.yaml',
               paths.SPACK_ENVS_DIR / system / 'spack.lock',
               *sorted(paths.PACKAGES_REPO_DIR.rglob('*.py'))]
    config = paths.cache_dir() / 'spack-config'
    # Not these: mirrors (sources, build cache) and the install tree, stage, build jobs
    # (config.yaml) do not change a `reuse: false` solution; bootstrap.yaml says which
    # bootstrap sources to trust; repos.yaml is a path to the builtin repo, whose files
    # found.content_key() covers.
    scopes = sorted(p for p in config.glob('*.yaml') if p.name not in (
        'mirrors.yaml', 'config.yaml', 'bootstrap.yaml', 'repos.yaml'))
    # Names relative to the checkout and the config scope: any clone shares the result.
    for base, files in ((paths.PROJECT_ROOT, project), (config, scopes)):
        for path in files:
            digest.update(str(path.relative_to(base)).encode() + path.read_bytes())
    os_release = platform.freedesktop_os_release()
    digest.update(f'{os_release["ID"]} {os_release.get("VERSION_ID")} {platform.machine()}'
                  .encode())
    digest.update(found.content_key().encode())
    return digest.hexdigest()


def _verified_locks():
    return json.loads(VERIFIED_LOCKS.read_text()) if VERIFIED_LOCKS.exists() else {}


@pytest.mark.spack
@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_each_environment_reconcretizes_to_its_committed_lock(system, tmp_path):
    """Concretizes a copy of the environment afresh and compares every root's hash with the
    lock's. Two to five minutes each here, one at a time (with `unify: false` Spack
    already solves an environment's specs in a process per core: spack.concretize.
    concretize_separately; two environments at once would only share the cores). A lock
    is concretized again only when its inputs changed since it was last found to hold
    (_concretized_key): in the committed VERIFIED_LOCKS, or in this machine's per-user
    cache; a fresh success is recorded in both (commit the file with the change)."""
    found = spack.find()

    key = _concretized_key(system, found)
    stamp = paths.cache_dir() / 'concretized' / f'{system}.{key}'
    if stamp.exists() or _verified_locks().get(system, {}).get('key') == key:
        return

    env_dir = tmp_path / 'spack-envs' / system
    env_dir.mkdir(parents=True)
    (env_dir / 'spack.yaml').write_text(_env_file(system).read_text())
    (tmp_path / 'spack-envs' / 'paper-systems.yaml').write_text(
        (paths.SPACK_ENVS_DIR / 'paper-systems.yaml').read_text())
    (tmp_path / 'packages').symlink_to(paths.PROJECT_ROOT / 'packages')
    env = dict(os.environ, **spack.isolated_environment(found))
    started = time.monotonic()
    done = subprocess.run([str(found.executable), '-e', str(env_dir), 'concretize', '-f'],
                          capture_output=True, text=True, env=env)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = json.loads((env_dir / 'spack.lock').read_text())
    assert {r['spec']: r['hash'] for r in fresh['roots']} == \
        {r['spec']: r['hash'] for r in _lock(system)['roots']}
    stamp.parent.mkdir(parents=True, exist_ok=True)
    for older in stamp.parent.glob(f'{system}.*'):
        older.unlink()
    stamp.write_text(f'concretized in {elapsed:.0f} s\n')
    _record_verified(system, key, round(elapsed))


def _record_verified(system, key, seconds):
    verified = _verified_locks()
    verified[system] = {'key': key, 'concretized_in_s': seconds}
    VERIFIED_LOCKS.write_text(json.dumps(dict(sorted(verified.items())), indent=2) + '\n')


def _paper_hpl(system, extras, nodes):
    """A partition's paper HPL settings at a node count (their names are checked by the
    dry runs)."""
    entries = extras.get('hpl_tuning') or []
    entries = entries if isinstance(entries, list) else [entries]
    known = {name for entry in entries for name in entry['settings']}
    return references.paper_settings(system, 'hpl_tuning', entries, known,
                                     {'num_nodes': nodes})


@pytest.mark.parametrize('system', PAPER_SYSTEMS)
def test_hpl_n_is_within_one_granule_and_one_percent_of_its_target_everywhere(system):
    """Every partition, layout and node count of the system, at both sizings: N comes within
    one granule of the N its memory fraction allows (hpcbench.benchmarks.hpl.block_granule),
    so within 1 % of it (it was 0.516 of it at 16 Oakforest-PACS nodes per core)."""
    from hpcbench.core import layout
    from hpcbench.rfm.partition import node_counts
    worst = 1.0
    for name, part in partitions(system).items():
        extras = part['extras']
        kept, _ = layout.distinct_layouts(part['processor'], extras.get('binding'))
        counts = extras.get('node_counts') or node_counts(extras['num_nodes'])
        for nodes in counts:
            nb = _paper_hpl(system, extras, nodes).get('nb', max(hpl.Tuning().nbs))
            for chosen in kept.values():
                p, q = hpl.process_grid(nodes * chosen.ranks_per_node)
                for sizing in hpl.SIZINGS:
                    fraction = hpl.memory_fraction(sizing, nodes)
                    memory = nodes * extras['memory_bytes']
                    target = math.isqrt(int(fraction * memory / 8))
                    n = hpl.problem_size(memory, nb, p, q, fraction)
                    where = (system, name, nodes, chosen.name, sizing, p, q, n, target)
                    assert target - hpl.block_granule(target, nb, p, q) < n <= target, where
                    # Within 1 % unless the target is under a hundred blocks.
                    if target >= 100 * nb:
                        assert n >= 0.99 * target, where
                        worst = min(worst, n / target)
    print(f'{system}: N / target >= {worst:.4f} wherever the target is 100 blocks or more')
    assert worst >= 0.99
