"""The ReFrame glue. For site configs: site_config (what every site config shares: results
directories, logging, modes, environments per MPI stack and BLAS), paper_sites (nodes
described by hand from a paper), described_site (a system `hpcbench new-system` described),
backends (schedulers and launchers ReFrame lacks). For checks: partition (the node a test
runs on, launch helpers, the skips a partition or node calls for), plugins (the mix-ins
every run has), build (the build fixture), run (the run base classes), gpu (what the GPU
checks share: their builds, one rank per GPU), gpu_to_gpu (what the checks between GPUs
share: device-buffer MPI, nccl-tests), contract (what a base check requires of the checks
deriving from it). quiet_node runs inside each job, as a script, with the node's launch
lock (launch_lock) and its /proc readers (node_processes): standard library only.

May import every layer below (core, benchmarks, machine, results, stack) and ReFrame.
"""
