"""The benchmark suite's Python package, in layers; each imports only from the layers below
it (tests/test_layers.py holds them to it):

    core        where things live, the node and its layouts, job-script lines  (stdlib only)
    benchmarks  each benchmark's inputs, output parsing and math               (pure)
    machine     what a partition and an MPI stack are: typed, one JSON Schema, one reader
    results     ReFrame's results database, references, verdicts
    stack       the machine's software: Spack, Debian, MPI stacks, BLAS, set-up
    rfm         the ReFrame glue: site-config helpers, the checks' base classes and plugins
    acceptance  a cluster against its contract: the contract as data, verdicts per unit
    report      the HTML report, its plots, the headless browser that checks it
    devtools    the project's own CI: pipelines, gitlab-ci-local, the clean root, the testbed
    cli         `hpcbench`: one module per command group

The ReFrame checks (reframe-checks/) and the site configs (site-configs/) sit above rfm.
"""
