"""What was measured and what it is judged against: ReFrame's results database read directly
(results_db: its stored sessions), what a stored session measured (measured: each case's
runs and figures, keyed by session and by stack), a session's time per check
(session_time), test cases side by side per MPI stack and BLAS (stack_comparison); the
references of every system as data (references: the model and its use; reference_schema:
what a file may hold; references_text: the one form files are written in), a machine's own
references (baselines), regression verdicts that treat each figure as a sample (verdicts),
and one picture of what a system measured, built in one pass over the window it needs, that
the report renders and `compare` prints (picture).

May import hpcbench.core, hpcbench.benchmarks (each benchmark declares the variables it
reports) and hpcbench.machine (a figure may match a partition's hardware). Knows nothing of
the software stack: the stack layer above consults it (a BLAS suggested from measured DGEMM
ceilings), never the other way round.
"""
