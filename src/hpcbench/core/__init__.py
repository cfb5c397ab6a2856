"""The floor every other layer stands on: where things live (paths), the node a check runs
on (node, layout, its GPUs: accelerators; one rank per GPU: gpu_ranks), lines every job
script shares (job_script), one run per results directory (run_lock), what the parsers share
(parsing).

Standard library only, and nothing else of the package: `make run` imports some of it
before any venv exists, and job scripts run it on compute nodes.
"""
