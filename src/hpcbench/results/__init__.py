"""What was measured and what it is judged against: ReFrame's results database read through
ReFrame's own CLI (results_db), a session's time per check (session_time), test cases side
by side per MPI stack and BLAS (stack_comparison); the references of every system as data
(references: the model and its use; reference_schema: what a file may hold; references_text:
the one form files are written in), a machine's own references (baselines), and regression
verdicts that treat each figure as a sample (verdicts).

May import hpcbench.core and hpcbench.benchmarks (each benchmark declares the variables it
reports). Knows nothing of the software stack: the stack layer above consults it (a BLAS
suggested from measured DGEMM ceilings), never the other way round.
"""
