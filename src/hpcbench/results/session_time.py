"""Where a session's wall time went (`hpcbench time-per-check`, after every `make run`): per
check, its test cases' job and build seconds, and the builds that ran beside the benchmarks
(a build during a run measures the machine under load)."""
from hpcbench.results.stack_comparison import text_table


def time_per_check(session_data):
    """Where a session's wall time went: ({check: [test cases, seconds of their jobs,
    seconds of their builds]}, seconds of benchmark jobs, wall seconds). A job runs from
    its submission to its completion (benchmarks and the ceilings they divide by); a build
    (a build fixture's compile phase: `spack install`, or only locating an installed
    prefix) has no job. The benchmark time is the union of the jobs' intervals, so that
    jobs that overlap are not counted twice."""
    checks, intervals = {}, []
    for run in session_data['runs']:
        for tc in run['testcases']:
            row = checks.setdefault(tc['name'].split()[0], [0, 0.0, 0.0])
            row[0] += 1
            start, end = tc.get('job_submit_time'), tc.get('job_completion_time_unix')
            if start is not None and end is not None:
                row[1] += end - start
                intervals.append((start, end))
            else:
                row[2] += tc.get('time_compile') or 0.0
    benchmark, reach = 0.0, None
    for start, end in sorted(intervals):
        start = start if reach is None else max(start, reach)
        benchmark += max(end - start, 0.0)
        reach = end if reach is None else max(reach, end)
    return checks, benchmark, session_data['session_info'].get('time_elapsed') or 0.0


def builds_beside_benchmarks(session_data):
    """The builds whose job ran while a benchmark's job ran: [(build test case, benchmark
    test case, seconds they shared)], longest first; None when the session recorded no
    build job's times (builds run outside jobs, or a session stored before
    BenchmarkBuild.build_job_interval)."""
    builds, benchmarks = [], []
    for run in session_data['runs']:
        for tc in run['testcases']:
            if tc.get('build_job_interval'):
                builds.append((tc['name'], *tc['build_job_interval']))
            start, end = tc.get('job_submit_time'), tc.get('job_completion_time_unix')
            if start is not None and end is not None:
                benchmarks.append((tc['name'], start, end))
    if not builds:
        return None

    shared = [(build, bench, min(b_end, end) - max(b_start, start))
              for build, b_start, b_end in builds for bench, start, end in benchmarks]
    return sorted([s for s in shared if s[2] > 0], key=lambda s: -s[2])


def time_table(session_data):
    """time_per_check as text: a row per check (the slowest first), then the share of the
    wall time the benchmark jobs took, and whether a build ran beside a benchmark."""
    checks, benchmark, wall = time_per_check(session_data)
    rows = [[name, str(cases), f'{jobs:.0f}' if jobs else '-', f'{builds:.0f}' if builds else '-']
            for name, (cases, jobs, builds) in sorted(checks.items(),
                                                       key=lambda kv: -kv[1][1] - kv[1][2])]
    share = f' ({100 * benchmark / wall:.0f} %)' if wall else ''
    text = (text_table(['check', 'test cases', 'job seconds', 'build seconds'], rows)
            + f'\nbenchmark jobs {benchmark:.0f} s of {wall:.0f} s wall{share}')
    beside = builds_beside_benchmarks(session_data)
    if beside == []:
        text += '\nno build ran beside a benchmark job'
    elif beside:
        text += f'\nbuilds beside benchmark jobs ({len(beside)}): ' + '; '.join(
            f'{build} beside {bench} for {seconds:.1f} s' for build, bench, seconds in beside)
    return text
