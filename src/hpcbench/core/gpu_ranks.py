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

Standard library only: jobs run it on compute nodes.
"""
import re

SCRIPT = 'gpu-rank.sh'
OUTPUT_GLOB = 'rank-*.out'
# What starts a rank's section of the job's output.
RANK_LINE = re.compile(r'^== rank (\d+): GPU (\S+) on (\S+)$', re.M)
# nvidia-smi's timestamp format, for the calls' window in a power trace.
STAMP = '%Y/%m/%d %H:%M:%S.%3N'
# How often a sampled rank's nvidia-smi samples its GPU (milliseconds).
SAMPLE_MS = 200

_WRAPPER = r'''#!/bin/sh
# One rank per GPU (hpcbench.core.gpu_ranks): this rank's GPU is its local rank's among the
# GPUs the job was given. Usage: gpu-rank.sh [--sample QUERY] PROGRAM ARGS...
local=${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PMI_LOCAL_RANK:-${MV2_COMM_WORLD_LOCAL_RANK:-0}}}}}
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${MV2_COMM_WORLD_RANK:-0}}}}
query=
if [ "$1" = --sample ]; then query=$2; shift 2; fi
given=${CUDA_VISIBLE_DEVICES-}
case "$given" in
    *,*) gpu=$(printf '%s\n' "$given" | cut -d, -f$((local + 1))) ;;
    '') gpu=$local ;;
    *) gpu=$given ;;
esac
if [ -z "$gpu" ]; then
    echo "rank $rank: local rank $local has no GPU of CUDA_VISIBLE_DEVICES=$given (more ranks than GPUs on $(hostname))" >&2
    exit 3
fi
export CUDA_VISIBLE_DEVICES=$gpu
out=rank-$rank.out
echo "== rank $rank: GPU $gpu on $(hostname)" > "$out"
if [ -n "$query" ]; then
    nvidia-smi -i "$gpu" --query-gpu="$query" --format=csv -lms SAMPLE_MS -f "power-rank-$rank.csv" &
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


def calls_window(section):
    """The (start, end) stamps a sampled rank printed around its calls, as nvidia-smi's
    timestamp strings; None where it printed none."""
    start = re.search(r'^calls from (.+)$', section, re.M)
    end = re.search(r'^calls to (.+)$', section, re.M)
    return (start.group(1), end.group(1)) if start and end else None
