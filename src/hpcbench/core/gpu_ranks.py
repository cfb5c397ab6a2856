"""One rank per GPU: the wrapper a GPU job launches its program through, and its ranks'
outputs read back apart.

Each rank takes the GPU of its local rank among those the job was given
(`CUDA_VISIBLE_DEVICES` as Slurm sets it for a `--gres=gpu:N` job, else all the node's:
0, 1, ...) and sees only that one; a launcher that already gave each task one GPU
(`srun --gpus-per-task=1`) leaves it as it is. A local rank beyond the GPUs given (more ranks
than GPUs: a wrong request) stops the rank with one message. Each rank writes its output to
`rank-<rank>.out` headed by `== rank R: GPU G on HOST` (and, sampled, the calls' start and
end as nvidia-smi stamps its samples), and the job prints them in rank order, so that the
output is the same under every launcher.

Where the node's GPU topology says which CPUs and NUMA node are next to each GPU
(hpcbench.core.gpu_topology; the job gives them as GPU_CPUS_VARIABLE and GPU_NUMA_VARIABLE,
`:`-separated by GPU index: a word the shell leaves as it is), each rank is bound to its
GPU's CPUs among those it may run on, and its memory to its GPU's NUMA node (numactl;
taskset binds the CPUs alone where there is no numactl). Its header then says where it ran: `== rank R: GPU G on HOST, CPUs LIST (how)`;
`placement` reads that back, and hpcbench.core.gpu_topology.misplaced judges it: a rank
whose CPUs are none of its GPU's (a job given the far socket) is not bound, and says so.

Standard library only: jobs run it on compute nodes.
"""
import re

SCRIPT = 'gpu-rank.sh'
OUTPUT_GLOB = 'rank-*.out'
# The variable a job script sets to give one launch some of the job's GPUs (by index).
LAUNCH_GPUS_VARIABLE = 'HPCBENCH_RANK_GPUS'
# What starts a rank's section of the job's output (where it ran: from placed jobs only).
RANK_LINE = re.compile(r'^== rank (\d+): GPU (\S+) on ([^,\s]+)(?:, CPUs (\S+) \((.*)\))?$',
                       re.M)
# The job's variables giving each GPU's CPUs and NUMA node, `:`-separated by GPU index (a
# separator the job script's unquoted `export` keeps: CPU lists hold commas).
GPU_CPUS_VARIABLE = 'HPCBENCH_GPU_CPUS'
GPU_NUMA_VARIABLE = 'HPCBENCH_GPU_NUMA'
# nvidia-smi's timestamp format, for the calls' window in a power trace.
STAMP = '%Y/%m/%d %H:%M:%S.%3N'
# How often a sampled rank's nvidia-smi samples its GPU (milliseconds).
SAMPLE_MS = 200

_WRAPPER = r'''#!/bin/sh
# One rank per GPU (hpcbench.core.gpu_ranks): this rank's GPU is its local rank's among the
# GPUs the job was given. Usage: gpu-rank.sh [--sample QUERY] PROGRAM ARGS...
local=${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PMI_LOCAL_RANK:-${MV2_COMM_WORLD_LOCAL_RANK:-0}}}}}
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${MV2_COMM_WORLD_RANK:-0}}}}
# Numbers only, before any arithmetic: bash's $((...)) runs the command of an `a[$(...)]` in a
# variable's value.
case "$local:$rank" in
    *[!0-9:]*|:*|*:) echo "the launcher's local rank '$local' or rank '$rank' is no number" >&2; exit 3 ;;
esac
query=
if [ "$1" = --sample ]; then query=$2; shift 2; fi
# The GPUs of this launch: those the job script chose (a pair of a node's: Slurm sets each
# step's CUDA_VISIBLE_DEVICES itself), else the job's, as Slurm or a container runtime set
# CUDA_VISIBLE_DEVICES (indexes, GPU-<uuid> or MIG-<uuid>; set and empty, CUDA shows no
# GPU), else every GPU of the node (0, 1, ...). One entry is this task's GPU.
if [ -n "${HPCBENCH_RANK_GPUS-}" ]; then
    given=$HPCBENCH_RANK_GPUS
elif [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    given=$CUDA_VISIBLE_DEVICES
    if [ -z "$given" ]; then
        echo "rank $rank: the job was given no GPU (CUDA_VISIBLE_DEVICES is set and empty on $(hostname))" >&2
        exit 3
    fi
else
    given=$local
fi
case "$given" in
    *,*) gpu=$(printf '%s\n' "$given" | cut -d, -f$((local + 1))) ;;
    *) gpu=$given ;;
esac
if [ -z "$gpu" ]; then
    echo "rank $rank: local rank $local has no GPU of CUDA_VISIBLE_DEVICES=$given (more ranks than GPUs on $(hostname))" >&2
    exit 3
fi
# The GPU's index, by which the job's topology variables name it: a UUID's from nvidia-smi
# -L (a MIG instance's: its GPU's); none where the tool does not list it.
case "$gpu" in
    [0-9]|[0-9][0-9]|[0-9][0-9][0-9]) index=$gpu ;;
    GPU-*[!0-9A-Za-z/-]*|MIG-*[!0-9A-Za-z/-]*|GPU-|MIG-) index=bad ;;
    GPU-*|MIG-*) index=$(nvidia-smi -L 2>/dev/null | awk -v id="$gpu" '
        /^GPU [0-9]+:/ { g = $2; sub(/:$/, "", g) }
        index($0, "(UUID: " id ")") { print g; exit }') ;;
    *) index=bad ;;
esac
if [ "$index" = bad ]; then
    echo "rank $rank: '$gpu' of CUDA_VISIBLE_DEVICES=$given is no GPU (an index, GPU-<uuid> or MIG-<uuid>; -1 hides every GPU) on $(hostname)" >&2
    exit 3
fi
export CUDA_VISIBLE_DEVICES=$gpu
# The GPU as the rank's header names it: its index, else what it was given as.
name=${index:-$gpu}
given_as=
if [ "$name" != "$gpu" ]; then given_as="; given as $gpu"; fi
out=rank-$rank.out
# Where the job says which CPUs and NUMA node are next to each GPU: this rank on its GPU's
# CPUs among those it may run on, its memory on its GPU's NUMA node.
allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
near= numa=
if [ -n "$index" ]; then
    near=$(printf '%s:\n' "${HPCBENCH_GPU_CPUS-}" | cut -d: -f$((index + 1)))
    numa=$(printf '%s:\n' "${HPCBENCH_GPU_NUMA-}" | cut -d: -f$((index + 1)))
fi
placed="CPUs $allowed (not bound: no GPU topology)"
if [ -z "$index" ]; then
    placed="CPUs $allowed (not bound: nvidia-smi -L does not list $gpu, so its index is not known)"
elif [ -n "$near" ]; then
    both=$(awk -v a="$near" -v b="$allowed" '
        function expand(list, set,   n, i, part, range, c) {
            n = split(list, part, ",")
            for (i = 1; i <= n; i++) {
                if (split(part[i], range, "-") == 2) { for (c = range[1]; c <= range[2]; c++) set[c] = 1 }
                else if (part[i] != "") set[part[i] + 0] = 1
            }
        }
        BEGIN { expand(a, A); expand(b, B); out = ""
                for (c = 0; c < 65536; c++) if ((c in A) && (c in B)) out = out (out == "" ? "" : ",") c
                print out }')
    if [ -z "$both" ]; then
        placed="CPUs $allowed (not bound: none is next to GPU $name, whose CPUs are $near$given_as)"
    elif command -v numactl >/dev/null 2>&1; then
        set -- numactl --physcpubind="$both" ${numa:+--membind="$numa"} "$@"
        placed="CPUs $(numactl --physcpubind="$both" sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status) (numactl: GPU $name's CPUs${numa:+, memory on NUMA node $numa}$given_as)"
    elif command -v taskset >/dev/null 2>&1; then
        set -- taskset -c "$both" "$@"
        placed="CPUs $(taskset -c "$both" sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status) (taskset: GPU $name's CPUs$given_as)"
    else
        placed="CPUs $allowed (not bound: no numactl or taskset$given_as)"
    fi
fi
echo "== rank $rank: GPU $name on $(hostname), $placed" > "$out"
if [ -n "$query" ]; then
    nvidia-smi -i "$name" --query-gpu="$query" --format=csv -lms SAMPLE_MS -f "power-rank-$rank.csv" &
    sampler=$!
    sleep 1
    echo "calls from $(date +'STAMP')" >> "$out"
fi
"$@" >> "$out" 2>&1
status=$?
if [ -n "$query" ]; then
    echo "calls to $(date +'STAMP')" >> "$out"
    sleep 1
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
fi
exit $status
'''.replace('STAMP', STAMP).replace('SAMPLE_MS', str(SAMPLE_MS))


class RankOutputError(ValueError):
    pass


def wrapper_script():
    return _WRAPPER


def print_ranks_commands():
    """The job script lines right after the launch: every rank's output, in rank order,
    then the job ends with the launch's status when it failed."""
    return ['status=$?',
            'for f in $(ls rank-*.out 2>/dev/null | sort -t- -k2 -n); do cat "$f"; done',
            '[ "$status" -eq 0 ] || exit "$status"']


def split(text, ranks):
    """{rank: (gpu, host, its output)} of a job's output of `ranks` ranks; a rank missing,
    given twice or beyond those asked is one message."""
    marks = list(RANK_LINE.finditer(text))
    sections = {}
    for mark, following in zip(marks, [*marks[1:], None]):
        rank = int(mark.group(1))
        if rank in sections:
            raise RankOutputError(f'rank {rank} printed twice')
        end = following.start() if following else len(text)
        sections[rank] = (mark.group(2), mark.group(3), text[mark.end():end])
    beyond = sorted(set(sections) - set(range(ranks)))
    if beyond:
        raise RankOutputError(f'output of rank(s) {", ".join(map(str, beyond))}, beyond the '
                              f'{ranks} asked: it is not this job\'s')
    missing = sorted(set(range(ranks)) - set(sections))
    if missing:
        raise RankOutputError(f'no output of rank(s) {", ".join(map(str, missing))} of '
                              f'{ranks}: the job ran fewer ranks than GPUs were asked')
    return sections


def placement(text):
    """{rank: (its GPU, its CPUs as Linux lists them, how it was placed)} of the ranks of a
    job's output that said where they ran (placed jobs; others are left out)."""
    return {int(m.group(1)): (m.group(2), m.group(4), m.group(5))
            for m in RANK_LINE.finditer(text) if m.group(4)}


def environment(topology):
    """The job's variables that place each rank by `topology` (hpcbench.core.gpu_topology:
    each GPU's CPUs and NUMA node); {} where it says none."""
    if topology is None or not any(g.cpus for g in topology.gpus):
        return {}
    return {GPU_CPUS_VARIABLE: ':'.join(g.cpus for g in topology.gpus),
            GPU_NUMA_VARIABLE: ':'.join('' if g.numa is None else str(g.numa)
                                        for g in topology.gpus)}


def calls_window(section):
    """The (start, end) stamps a sampled rank printed around its calls, as nvidia-smi's
    timestamp strings; None where it printed none."""
    start = re.search(r'^calls from (.+)$', section, re.M)
    end = re.search(r'^calls to (.+)$', section, re.M)
    return (start.group(1), end.group(1)) if start and end else None
