"""Which build a measured case ran with (its provenance's Spack spec): its MPI and BLAS
providers, what changed between two builds in words, and a session's DGEMM ceilings per
BLAS."""
import re

from hpcbench.results.measured import case_figure, measured_cases


def _stack_parts(stack):
    """A build spec's parts by what they are: {'build': name@version, 'variants', 'target',
    'hash', and each named virtual (mpi, blas, c, ...): its provider}."""
    parts = {}
    for token in stack.split():
        if token.startswith('^') and '=' in token:
            virtuals, provider = token[1:].split('=', 1)
            parts[virtuals] = provider
        elif token.startswith('/'):
            parts['hash'] = token
        elif token.startswith('arch='):
            parts['target'] = token[5:]
        elif token[0] in '+~':
            parts['variants'] = f'{parts.get("variants", "")} {token}'.strip()
        else:
            parts['build'] = f'{parts.get("build", "")} {token}'.strip()
    return parts


def stack_change(old, new):
    """What changed from stack `old` to `new`, in words: `blas intel-oneapi-mkl@2025.3.0 ->
    openblas@0.3.28, hash /5vtt4bg -> /kq2x7fa`; the whole stacks where either was not
    recorded."""
    if not old or not new:
        return f'{old or "(not recorded)"} -> {new or "(not recorded)"}'
    before, after = _stack_parts(old), _stack_parts(new)
    changed = [f'{key} {before.get(key, "(none)")} -> {after.get(key, "(none)")}'
               for key in dict.fromkeys([*before, *after]) if before.get(key) != after.get(key)]
    return ', '.join(changed) or 'the same'


# A build spec's virtual providers: ^mpi=openmpi@4.1.4.
_PROVIDER = re.compile(r'\^([\w,]+)=(\S+)')


def stack_of(case):
    """{'mpi': 'openmpi@4.1.4', 'blas': 'intel-oneapi-mkl@2025.3.0'} of a case's build, as its
    provenance names them ({} for a build Spack did not make)."""
    stack = {}
    for virtuals, provider in _PROVIDER.findall(case.stack):
        for virtual in virtuals.split(','):
            stack[virtual] = provider
    return stack


# Where a session holds DGEMM ceilings: HPL's jobs measure theirs just before HPL; sessions
# stored before that have them as a check of their own.
DGEMM_FIGURES = {'HplCheck': 'dgemm_ceiling', 'DgemmCeiling': 'gflops'}


def dgemm_by_blas(session_data):
    """The DGEMM ceilings of a session per BLAS its build used: {provider (`openblas@0.3.28`):
    [GFLOP/s of every call]}, each case's calls (its job's repeats) pooled across the
    cases that share a BLAS (HPL's layouts, the MPI stacks with the default one)."""
    rates = {}
    for case in measured_cases(session_data, fixtures=True):
        provider = stack_of(case).get('blas')
        variable = DGEMM_FIGURES.get(case.check)
        if provider and variable in case.figures:
            calls = list(case.figures[variable].samples) or [case_figure(case, variable)]
            rates.setdefault(provider, []).extend(calls)
    return rates
