"""What a machine is, typed: a partition's description (its nodes' processor, clock and
flop per cycle, memory, node counts, binding, huge pages, accelerators, I/O directory,
quiet-node policy, its Spack environment and the papers' settings) and an MPI stack's
(description), with one JSON Schema every route to a system validates against once: a
host detected here (site-configs/local.py, testbed.py), a paper's system
(hpcbench.rfm.paper_sites), a cluster `hpcbench new-system` described
(hpcbench.rfm.described_site); the one reader of a ReFrame partition's description
(described); accelerators' cited datasheets, the project's and a site's own (datasheets);
the facts of the host this runs on (host: /proc, nvidia-smi, rocm-smi, xpu-smi) and of a
Slurm cluster as its controller tells them (slurm_query); whether an MPI sends from GPU
memory (device_buffers); the YAML the descriptions are written in (plain_yaml).

May import core alone (what a machine is depends on no benchmark); results, stack and
everything above import it.
"""
