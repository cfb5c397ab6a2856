"""The ReFrame glue. For site configs: site_guards (what is checked and claimed as ReFrame
loads a site config, before it writes anything), site_partitions (a description as
ReFrame's partition, its GPUs as devices), site_environments (ReFrame environments per MPI
stack and BLAS), run_modes (quick and full, runs of their own, execution options),
site_config (the whole configuration: results directories, logs, perflog, modes),
paper_sites (nodes described by hand from a paper), described_site (a system `hpcbench
new-system` described), backends (schedulers and launchers ReFrame lacks). For checks: partition (the node a test
runs on, launch helpers, the skips a partition or node calls for), plugins (the mix-ins
every run has), build (the build fixture), run (the run base classes), gpu (what the GPU
checks share: their builds, one rank per GPU), gpu_to_gpu (what the checks between GPUs
share: device-buffer MPI, nccl-tests), contract (what a base check requires of the checks
deriving from it). What runs inside the jobs is in core (quiet_node, launch_lock).

May import every layer below (core, benchmarks, machine, results, stack) and ReFrame.
"""
