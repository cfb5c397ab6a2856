"""The project's own CI and verification: what the GitLab pipeline asks beyond make (ci),
running .gitlab-ci.yml here with gitlab-ci-local (gitlab_ci_local), README's two commands
in a clean Debian 12 root (clean_root; the root directories it makes and removes: root_dirs),
histories of stored sessions for the history benchmark and its tests (history), and what
ReFrame makes of every system, listed to compare before and after a change (listings).

May import every layer below it. Nothing but cli imports it.
"""
