"""The floor every other layer stands on: where things live (paths), the node a check runs
on (node, layout, its GPUs: accelerators; how they are linked: gpu_topology; one rank per
GPU: gpu_ranks), a Slurm cluster as its controller prints it (slurm_cluster), lines every
job script shares (job_script), what runs inside each job before its launch (quiet_node:
the node quiet, under the node's launch lock, launch_lock; its /proc readers,
node_processes), one run per results directory (run_lock), the programs a command starts
ending with it (child_processes), what the parsers share (parsing), the keys of a GPU's or a
GPU pair's figures (device_keys).

Standard library only, and nothing else of the package: `make run` imports some of it
before any venv exists, and job scripts run it on compute nodes.
"""
