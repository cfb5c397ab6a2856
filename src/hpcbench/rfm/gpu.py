"""What the GPU checks share: a partition's accelerators (ReFrame's `devices`, their count,
and its description's `accelerators`, hpcbench.core.accelerators), the build of a GPU program
for the partition's architecture, and a run of one rank per GPU (hpcbench.core.gpu_ranks)
whose job asks the scheduler for the node's GPUs through the partition's `gpu` resource
(`--gres=gpu:{num_gpus_per_node}` under Slurm).

GPU checks run once per partition, in its OpenMP environment (feature `openmp`, as STREAM):
their programs use no MPI, and the partition's launcher starts one rank per GPU.
"""
import os
import statistics

from reframe.core.builtins import run_after, variable
from reframe.core.exceptions import ReframeError, SanityError

from hpcbench.benchmarks import dgemm
from hpcbench.core import accelerators, device_keys, gpu_ranks, gpu_topology
from hpcbench.rfm.build import BenchmarkBuild
from hpcbench.machine.from_reframe import partition_description
from hpcbench.rfm.partition import job_output, skip_beyond_partition
from hpcbench.rfm.run import BenchmarkRun


def described_accelerators(partition):
    """The partition's accelerators as its description gives them, with ReFrame's count of
    its devices ({} for none)."""
    return partition_description(partition).accelerators or {}


def misplaced_ranks(topology, output):
    """What is wrong with where each rank of a job's `output` ran (hpcbench.core.gpu_ranks.
    placement), by `topology`: `rank R (GPU G on HOST): its CPUs ... are not all next to GPU
    G, whose CPUs are ...`; [] where every rank is next to its GPU or nothing says which CPUs
    are."""
    said = []
    hosts = {int(m.group(1)): m.group(3) for m in gpu_ranks.RANK_LINE.finditer(output)}
    for rank, (gpu, cpus, _how) in sorted(gpu_ranks.placement(output).items()):
        if not gpu.isdigit():
            # A UUID nvidia-smi -L did not list: where the topology places GPUs, this rank's
            # place cannot be judged, which is no pass.
            why = topology is not None and any(g.cpus for g in topology.gpus) and (
                f'its GPU {gpu} is not one nvidia-smi -L lists, so whether its CPUs are next '
                'to it is not known')
        else:
            why = gpu_topology.misplaced(topology, int(gpu), cpus)
        if why:
            said.append(f'rank {rank} (GPU {gpu} on {hosts[rank]}): {why}')
    return said


def skip_stand_in(test):
    """Skip `test` (a GPU build or run) where the partition's GPUs are stand-ins
    (its description's accelerators.stand_in: why), except in a dry run, which still
    writes its job."""
    why = described_accelerators(test.current_partition).get('stand_in')
    test.skip_if(bool(why) and not test.is_dry_run(),
                 f'{test.current_partition.fullname}: {why}')


def cuda_arch(partition):
    """Spack's cuda_arch of the partition's GPUs (sm_90 -> '90'); None where they are not
    NVIDIA's."""
    described = described_accelerators(partition)
    return accelerators.cuda_arch(described.get('vendor'), described.get('arch', ''))


class GpuProgramBuild(BenchmarkBuild):
    """The build of a GPU program for the partition's architecture."""
    required_attributes = {'spec_of': "a function of Spack's cuda_arch giving the root spec "
                                      'the environment lists '
                                      '(hpcbench.stack.machine_systems.gpu_specs)'}

    @run_after('setup')
    def choose_build(self):
        skip_stand_in(self)
        self.spec = self.spec_for(self.current_partition)

    def spec_for(self, partition):
        arch = cuda_arch(partition)
        self.skip_if(arch is None, f'{partition.fullname}: no CUDA architecture in its '
                                   'description (accelerators.arch)')
        return type(self).spec_of(arch)


class GpuDgemmBuild(GpuProgramBuild):
    """dgemm-rate +cuda for the partition's GPUs (the DGEMM check's and the GPU screen's:
    one build), or the CPU's dgemm-rate through an accelerator's BLAS where its vendor
    drives it so (dgemm.BLAS_OF_ACCELERATOR: TSUBAME's ClearSpeed boards)."""
    spec_of = staticmethod(dgemm.cuda_spack_spec)

    def spec_for(self, partition):
        vendor = described_accelerators(partition).get('vendor')
        if vendor in dgemm.BLAS_OF_ACCELERATOR:
            return dgemm.accelerator_blas_spec(vendor)
        return super().spec_for(partition)


class GpuRun(BenchmarkRun):
    """A run on the GPUs of `num_gpu_nodes` nodes of a GPU partition, one rank per GPU."""
    valid_systems = ['+gpu +cuda']
    valid_prog_environs = ['+openmp +spack-builds']
    #: Nodes the job runs on, every GPU of each.
    num_gpu_nodes = variable(int, value=1)
    input_kinds = {'num_gpu_nodes': 'positive'}
    #: What this run used, for the perflog and the results database.
    inputs = variable(str, value='')

    @run_after('setup')
    def skip_stand_in_gpus(self):
        skip_stand_in(self)

    def depends_on_stack(self):
        # No MPI: one stack's run measures the GPUs (quick mode runs the first only).
        return False

    def gpus(self):
        """The partition's accelerators, refused in setup where it has none."""
        described = described_accelerators(self.current_partition)
        if not described.get('count'):
            raise ReframeError(f'{self.current_partition.fullname}: a GPU partition without '
                               "GPUs in ReFrame's devices")
        return described

    def run_one_rank_per_gpu(self, program, *args, sample=None):
        """The job: `program args` once per GPU of each node, through the rank wrapper;
        `sample`: nvidia-smi's query fields to sample each rank's GPU with during its calls."""
        count = self.gpus()['count']
        self.run_through_rank_wrapper(program, *args, sample=sample, ranks_per_node=count,
                                      nodes=self.num_gpu_nodes)

    def run_through_rank_wrapper(self, program, *args, sample=None, ranks_per_node,
                                 nodes):
        """The job: `ranks_per_node` ranks on each of `nodes` nodes, each on a GPU of its
        own (the rank wrapper), the job given every GPU of its nodes."""
        count = self.gpus()['count']
        skip_beyond_partition(self, nodes)
        self.num_tasks_per_node = ranks_per_node
        self.num_tasks = ranks_per_node * nodes
        self.extra_resources = {'gpu': {'num_gpus_per_node': count}}
        script = os.path.join(self.stagedir, gpu_ranks.SCRIPT)
        with open(script, 'w') as fp:
            fp.write(gpu_ranks.wrapper_script())
        os.chmod(script, 0o755)
        self.executable = f'./{gpu_ranks.SCRIPT}'
        self.executable_opts = [*(['--sample', ','.join(sample)] if sample else []),
                                program, *(str(a) for a in args)]
        # Each rank next to its GPU, where the partition's topology says which CPUs are.
        self.env_vars.update(gpu_ranks.environment(self.gpu_topology()))
        self.postrun_cmds = [*gpu_ranks.print_ranks_commands(), *self.postrun_cmds]
        self.keep_files = [*self.keep_files, gpu_ranks.SCRIPT, gpu_ranks.OUTPUT_GLOB,
                           *(['power-rank-*.csv'] if sample else [])]

    def gpu_topology(self):
        """The partition's GPU topology (hpcbench.core.gpu_topology), None where its
        description has none."""
        return gpu_topology.from_description(described_accelerators(
            self.current_partition).get('topology'))

    def rank_outputs(self):
        """{rank: (gpu, host, its output)}; a rank missing, or one that ran on CPUs not next
        to its GPU (as the partition's topology has them), fails the sanity check."""
        output = job_output(self)
        try:
            sections = gpu_ranks.split(output, self.num_tasks)
        except gpu_ranks.RankOutputError as err:
            raise SanityError(str(err)) from None
        misplaced = misplaced_ranks(self.gpu_topology(), output)
        if misplaced:
            raise SanityError('; '.join(misplaced))
        return sections

    def each_rank(self, parse, *errors):
        """[(rank, gpu, host, parse(rank, its output))] in rank order; a parse that raises
        one of `errors` fails the sanity check naming the rank, its GPU and node."""
        parsed = []
        for rank, (gpu, host, text) in sorted(self.rank_outputs().items()):
            try:
                parsed.append((rank, gpu, host, parse(rank, text)))
            except errors as err:
                raise SanityError(f'rank {rank} (GPU {gpu} on {host}): {err}') from None
        return parsed

    def record_gpu_samples(self, how, gpus, **values):
        """record_samples of figures measured once per GPU, `gpus` ([(gpu, host)], each_rank's)
        naming whose each value is: each GPU's own figures kept under its key."""
        self.record_device_samples(how, [device_keys.gpu_key(host, gpu) for gpu, host in gpus],
                                   **values)

    def median(self, name):
        """A figure: the median over the GPUs of its samples (record_samples)."""
        return statistics.median(self.samples[name])
