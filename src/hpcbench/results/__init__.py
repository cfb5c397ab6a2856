"""What was measured and what it is judged against: ReFrame's results database read directly
(results_db: its stored sessions), what a stored session measured (measured: the one
reader of ReFrame's records of test cases; each a typed MeasuredCase, its figures with
their references, runs and samples, its GPUs' and GPU pairs' own figures keyed by node and
GPU with the link a pair crossed, its provenance; a figure over runs as a Series, keyed by
session and by stack), a session's time per check
(session_time), test cases side by side per MPI stack and BLAS (stack_comparison); the
references of every system as data (references: the model and its use; reference_schema:
what a file may hold; references_text: the one form files are written in), a machine's own
references (baselines), regression verdicts that treat each figure as a sample (verdicts),
a figure over sessions judged for the trend plots (trends: change points within one
stack), and one picture of what a system measured, built in one pass over the window it needs, that
the report renders and `compare` prints (picture).

May import hpcbench.core, hpcbench.benchmarks (each benchmark declares the variables it
reports) and hpcbench.machine (a figure may match a partition's hardware). Knows nothing of
the software stack: the stack layer above consults it (a BLAS suggested from measured DGEMM
ceilings), never the other way round.
"""
