"""`hpcbench` commands of the GitLab pipeline: changed-checks (what a merge request runs),
ci-pipeline (ReFrame's --ci-generate output made runnable from the project)."""


def _changed_checks(args):
    """The check files a merge request changed (hpcbench.devtools.ci), one per line."""
    from hpcbench.devtools import ci
    for check in ci.changed_checks(ci.git_changed_files(args.base), ci.project_checks()):
        print(check)


def _ci_pipeline(args):
    """ReFrame's generated pipeline, made runnable from the project (hpcbench.devtools.ci)."""
    import yaml

    from hpcbench.devtools import ci
    try:
        generated = yaml.safe_load(open(args.generated))
    except (OSError, yaml.YAMLError) as err:
        raise RuntimeError(f'{args.generated}: {err}') from None
    if not isinstance(generated, dict) or 'stages' not in generated:
        raise RuntimeError(f'{args.generated} is not a pipeline written by reframe --ci-generate')

    child = ci.child_pipeline(generated)
    with open(args.output, 'w') as fp:
        yaml.safe_dump(child, fp, sort_keys=False, width=1000)
    tests = [name for name in child if name not in ('stages', ci.TESTBED_STOP_JOB)]
    print(f'{args.output}: {len(tests)} ReFrame job(s) ({", ".join(tests)}), then the testbed '
          'stops')


def register(sub):
    """Add this group's commands to the `hpcbench` parser's subparsers."""
    changed = sub.add_parser('changed-checks',
                             help='the check files changed since a base commit (merge '
                                  'requests run only these)')
    changed.add_argument('--base', required=True, help='the merge request\'s target commit')
    changed.set_defaults(func=_changed_checks)
    child = sub.add_parser('ci-pipeline', help='make the pipeline reframe --ci-generate wrote '
                                               'runnable from the project (GitLab child pipeline)')
    child.add_argument('generated', help='the file reframe --ci-generate wrote')
    child.add_argument('output', help='the child pipeline to write')
    child.set_defaults(func=_ci_pipeline)
