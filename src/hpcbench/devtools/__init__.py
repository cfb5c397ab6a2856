"""The project's own CI and verification: what the GitLab pipeline asks beyond make (ci),
running .gitlab-ci.yml here with gitlab-ci-local (gitlab_ci_local), README's two commands
in a clean Debian 12 root (clean_root; the root directories it makes and removes: root_dirs),
histories of stored sessions for the history benchmark and its tests (history), what
ReFrame makes of every system, listed to compare before and after a change (listings), and
the testbed: a real Slurm cluster (slurmctld, slurmdbd with MariaDB, a slurmd per emulated
node) on this one machine that the `testbed` system runs on (testbed; its daemons started
and stopped: testbed_daemons; their processes: testbed_processes).

May import every layer below it. In the package only cli imports it; of the site configs,
the testbed's (site-configs/testbed.py).
"""
