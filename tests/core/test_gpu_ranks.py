"""One rank per GPU (hpcbench.core.gpu_ranks): a job's output read back rank by rank, and a
rank missing or printed twice refused in one message."""
import pytest

from hpcbench.core import gpu_ranks

JOB = ('== rank 1: GPU 6 on n2\ncalls from 2026/11/26 11:22:24.339\nsecond\n'
       'calls to 2026/11/26 11:22:31.000\n== rank 0: GPU 4 on n1\nfirst\n')


def test_each_rank_s_section_is_its_own_whatever_the_order_printed():
    sections = gpu_ranks.split(JOB, 2)
    assert sections[0] == ('4', 'n1', '\nfirst\n')
    assert sections[1][:2] == ('6', 'n2') and 'second' in sections[1][2]
    assert gpu_ranks.calls_window(sections[1][2]) == ('2026/11/26 11:22:24.339',
                                                      '2026/11/26 11:22:31.000')
    assert gpu_ranks.calls_window(sections[0][2]) is None


def test_a_rank_missing_or_printed_twice_is_one_message():
    with pytest.raises(gpu_ranks.RankOutputError, match=r'^no output of rank\(s\) 2, 3 of 4'):
        gpu_ranks.split(JOB, 4)
    with pytest.raises(gpu_ranks.RankOutputError, match=r'^rank 0 printed twice$'):
        gpu_ranks.split(JOB + '== rank 0: GPU 4 on n1\nagain\n', 2)


def test_the_job_prints_the_ranks_in_order_and_keeps_a_failed_launch_s_status():
    first, show, end = gpu_ranks.print_ranks_commands()
    assert first == 'status=$?' and 'sort -t- -k2 -n' in show
    assert end == '[ "$status" -eq 0 ] || exit "$status"'
