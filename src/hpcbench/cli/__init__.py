"""`hpcbench`, the command line (hpcbench.cli.main): one module per command group. The top
layer: it may import every other, and nothing imports it.
"""
