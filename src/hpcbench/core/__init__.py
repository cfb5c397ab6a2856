"""The floor every other layer stands on: where things live (paths), the node a check runs
on (node, layout, its GPUs: accelerators; how they are linked: gpu_topology; one rank per
GPU: gpu_ranks), a Slurm cluster as its controller prints it (slurm_cluster), lines every
job script shares (job_script), one run per results directory (run_lock), the programs a
command starts ending with it (child_processes), what the parsers share (parsing).

Standard library only, and nothing else of the package: `make run` imports some of it
before any venv exists, and job scripts run it on compute nodes.
"""
