"""HPL.dat, the file HPL reads its inputs from (hpcbench.benchmarks.hpl.Inputs): every line
in HPL's order, and the same file at another problem size (what a job that sizes N itself
writes)."""


def _line(value, comment):
    # HPL reads the leading tokens; two spaces at least keep a long list apart from the
    # comment (HPL would read '4608Ns' as 4608, but a person should not have to).
    text = str(value)
    return text + ' ' * max(14 - len(text), 2) + comment


def _list(values):
    return ' '.join(str(v) for v in values)


def hpl_dat(inputs, device_out=6):
    """The complete HPL.dat: every line HPL reads, in its order."""
    t = inputs.tuning
    ps = [p for p, _ in inputs.grids]
    qs = [q for _, q in inputs.grids]
    lines = [
        'HPLinpack benchmark input file',
        'Written by hpcbench (reframe-checks/hpl.py); defaults documented in '
        'hpcbench.benchmarks.hpl',
        _line('HPL.out', 'output file name (if any)'),
        _line(device_out, 'device out (6=stdout,7=stderr,file)'),
        _line(len(inputs.ns), '# of problems sizes (N)'),
        _line(_list(inputs.ns), 'Ns'),
        _line(len(t.nbs), '# of NBs'),
        _line(_list(t.nbs), 'NBs'),
        _line(t.pmap, 'PMAP process mapping (0=Row-,1=Column-major)'),
        _line(len(inputs.grids), '# of process grids (P x Q)'),
        _line(_list(ps), 'Ps'),
        _line(_list(qs), 'Qs'),
        _line(t.threshold, 'threshold'),
        _line(len(t.pfacts), '# of panel fact'),
        _line(_list(t.pfacts), 'PFACTs (0=left, 1=Crout, 2=Right)'),
        _line(len(t.nbmins), '# of recursive stopping criterium'),
        _line(_list(t.nbmins), 'NBMINs (>= 1)'),
        _line(len(t.ndivs), '# of panels in recursion'),
        _line(_list(t.ndivs), 'NDIVs'),
        _line(len(t.rfacts), '# of recursive panel fact.'),
        _line(_list(t.rfacts), 'RFACTs (0=left, 1=Crout, 2=Right)'),
        _line(len(t.bcasts), '# of broadcast'),
        _line(_list(t.bcasts), 'BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)'),
        _line(len(t.depths), '# of lookahead depth'),
        _line(_list(t.depths), 'DEPTHs (>=0)'),
        _line(t.swap, 'SWAP (0=bin-exch,1=long,2=mix)'),
        _line(t.swap_threshold, 'swapping threshold'),
        _line(0 if t.l1_transposed else 1, 'L1 in (0=transposed,1=no-transposed) form'),
        _line(0 if t.u_transposed else 1, 'U  in (0=transposed,1=no-transposed) form'),
        _line(1 if t.equilibration else 0, 'Equilibration (0=no,1=yes)'),
        _line(t.alignment, 'memory alignment in double (> 0)'),
    ]
    return '\n'.join(lines) + '\n'


def with_size(hpl_dat_text, n):
    """The HPL.dat text `hpl_dat_text` with every problem size of its Ns line set to `n`."""
    lines = hpl_dat_text.splitlines()
    lines[5] = _line(_list((n,) * int(lines[4].split()[0])), 'Ns')
    return '\n'.join(lines) + '\n'
