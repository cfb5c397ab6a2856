"""Run by Spack's own interpreter in a machine environment (`spack -e ENV python THIS OUT`):
writes to OUT a packages.yaml marking `buildable: false` every package the environment
could reach but never builds, so that Spack's static analysis leaves it out of the problem.

A machine environment builds only the benchmarks (its roots and the recipes of the
project's repositories), the compiler's runtimes and what its config marks buildable;
everything else is an external (host.yaml). Spack still takes every dependency of an
external and every provider of a virtual into the solver's problem: `hpl ^openmpi` grounds
538 packages (CUDA, ROCm, LLVM, Qt, every MPI and BLAS) in 20 s per root. Marked here, those
are pruned before grounding, and the solution is the same one (it never used them).

One level is enough: a package marked not buildable, with no external and nothing installed,
is not expanded by the analysis, so its own dependencies never enter the problem.
Standard library and Spack only (it runs in Spack's interpreter, not the project's venv).
"""
import sys

import spack.config
import spack.environment
import spack.repo

# Packages Spack adds to every compiled spec itself: the compiler's runtime libraries and
# the wrapper that injects its flags.
RUNTIMES = ('compiler-wrapper', 'gcc-runtime')


def _is_package(repo, name):
    try:
        repo.get_pkg_class(name)
        return True
    except spack.repo.UnknownPackageError:
        return False


def allowed_packages(env, packages, repo):
    """What the environment may use: its roots and every package their specs name, the
    project's recipes, the runtimes, the externals and whatever its config marks
    buildable."""
    allowed = set(RUNTIMES)
    for spec in env.user_specs:
        allowed.update(node.name for node in spec.traverse() if node.name)
    for each in repo.repos:
        if each.namespace != 'builtin':
            allowed.update(each.all_package_names())
    allowed.update(name for name, entry in packages.items()
                   if entry.get('externals') or entry.get('buildable') is True)
    return {name for name in allowed if _is_package(repo, name)}


def never_built(env, packages, repo):
    """The direct dependencies and virtual providers of the allowed packages that are not
    allowed themselves, sorted."""
    allowed = allowed_packages(env, packages, repo)
    reached = set()
    for name in allowed:
        for dependency in repo.get_pkg_class(name).dependencies_by_name(when=True):
            if repo.is_virtual(dependency):
                reached.update(p.name for p in repo.providers_for(dependency))
            else:
                reached.add(dependency)
    return sorted(reached - allowed)


def main(out):
    env = spack.environment.active_environment()
    if env is None:
        sys.exit('spack_never_built: run it in an environment (spack -e ENV python ...)')
    repo = spack.repo.PATH
    names = never_built(env, spack.config.get('packages'), repo)
    with open(out, 'w') as handle:
        handle.write('packages:\n')
        handle.writelines(f'  {name}:\n    buildable: false\n' for name in names)
    print(len(names))


if __name__ == '__main__':
    main(sys.argv[1])
