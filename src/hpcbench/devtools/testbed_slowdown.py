"""A testbed node made slow for real: its slurmd moved into a CPU cgroup of its own with a
quota (a share of one CPU's time), so that every job step it starts from then on (they are
its children) gets that share and no more, as a node with a failing fan, a wrong BIOS
setting or a stuck clock would. `restore` moves it back where it was and removes the group
it made (only a group of its own name, that it recorded making).

Control groups v1 (the `cpu` controller's cpu.cfs_quota_us) and v2 (cpu.max) are both
read; where neither can be written (a container without its cgroup file system) the
slowdown is refused, saying so: nothing is faked."""
import math
import re
from pathlib import Path

from hpcbench.devtools.testbed_processes import recorded

CGROUP_ROOT = Path('/sys/fs/cgroup')
# The quota is granted per period, so work shorter than a period that starts on a fresh one
# runs at full speed: HPCC's HPL at N = 1152 (25 ms on two cores) escaped 100 ms periods in
# one run of three on a node given half a CPU, and a slow node passed; at 10 ms, six runs of
# six slowed. Shorter periods cost more than the share: at 1 ms, a node given 1.99 of its
# two CPUs ran HPL 50 % slower, 1.2 of them 60 % (2026-12-05), and no share made it 20 %.
PERIOD_US = 10_000
# The kernel's least quota (1 ms) and greatest period (1 s): a smaller share, a longer period.
MIN_QUOTA_US = 1_000
MAX_PERIOD_US = 1_000_000
MIN_SHARE = MIN_QUOTA_US / MAX_PERIOD_US
_PREFIX = 'hpcbench-testbed-'


class SlowdownError(RuntimeError):
    pass


def _controller():
    """(the cpu controller's mount, 'v1' or 'v2'); SlowdownError where there is none."""
    v1 = CGROUP_ROOT / 'cpu'
    if (v1 / 'cpu.cfs_quota_us').exists():
        return v1, 'v1'
    controllers = CGROUP_ROOT / 'cgroup.controllers'
    if controllers.exists() and 'cpu' in controllers.read_text().split():
        return CGROUP_ROOT, 'v2'
    raise SlowdownError(f'no CPU cgroup controller under {CGROUP_ROOT} (neither cgroup v1\'s '
                        '`cpu` nor v2\'s): a node cannot be made slow here')


def _marker(layout, node):
    return layout.run / f'slowed-{node}'


def _slurmd(layout, node):
    pid = recorded(layout).get(f'slurmd-{node}')
    if pid is None:
        raise SlowdownError(f'the testbed in {layout.root} runs no slurmd of node {node!r}')
    return pid


def _cgroup_of(pid, kind):
    """The pid's cgroup path under the cpu controller (v1) or the unified tree (v2)."""
    for line in Path(f'/proc/{pid}/cgroup').read_text().splitlines():
        number, controllers, path = line.split(':', 2)
        if (kind == 'v1' and 'cpu' in controllers.split(',')) or (kind == 'v2' and
                                                                  number == '0'):
            return path
    return '/'


def quota(cpu_share):
    """(period, quota) in microseconds for `cpu_share` of one CPU: PERIOD_US, or the period
    that gives the kernel's least quota to a smaller share."""
    period = max(PERIOD_US, math.ceil(MIN_QUOTA_US / cpu_share))
    return period, round(cpu_share * period)


def slow(layout, node, cpu_share):
    """Give node `node`'s jobs `cpu_share` of one CPU (MIN_SHARE <= share <= 8) from now on;
    the group's path."""
    if not re.fullmatch(r'[A-Za-z][A-Za-z0-9-]*', node):
        raise SlowdownError(f'{node!r} is no testbed node name')
    if not MIN_SHARE <= cpu_share <= 8:
        raise SlowdownError(f'a CPU share of {cpu_share:g}: give one from {MIN_SHARE:g} to 8 '
                            '(0.25: a quarter of one CPU)')
    mount, kind = _controller()
    pid = _slurmd(layout, node)
    marker = _marker(layout, node)
    group = mount / f'{_PREFIX}{node}'
    if not marker.exists():
        marker.write_text(_cgroup_of(pid, kind) + '\n')
    group.mkdir(exist_ok=True)
    period, granted = quota(cpu_share)
    if kind == 'v1':
        (group / 'cpu.cfs_period_us').write_text(f'{period}\n')
        (group / 'cpu.cfs_quota_us').write_text(f'{granted}\n')
    else:
        (group / 'cpu.max').write_text(f'{granted} {period}\n')
    (group / 'cgroup.procs').write_text(f'{pid}\n')
    return group


def restore(layout, node):
    """Node `node` back to the CPU it had: its slurmd moved back to the group it was in, the
    group `slow` made removed (its jobs' processes moved out with it). False where it was
    not slowed."""
    marker = _marker(layout, node)
    if not marker.exists():
        return False
    mount, kind = _controller()
    before = mount / marker.read_text().strip().lstrip('/')
    group = mount / f'{_PREFIX}{node}'
    if group.exists():
        for pid in (group / 'cgroup.procs').read_text().split():
            try:
                (before / 'cgroup.procs').write_text(f'{pid}\n')
            except (ProcessLookupError, OSError):
                pass
        group.rmdir()
    marker.unlink()
    return True
