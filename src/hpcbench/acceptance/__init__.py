"""Acceptance of a cluster against its contract: the use case, one object given a port to
ReFrame (use_case.Acceptance); the contract as data, validated (contract); what a verdict is
about, one object per scope (scopes); every entry judged on every unit of its scope, then
over the scope by its rule, slow units flagged beside their peers, a unit that did not run
never passing (judgement); the directory that keeps and proves it (state, assessment,
directory, outputs, manifest); and the watch after it (watch: each node re-judged on a
schedule against the contract and its own accepted figures, acted on through Slurm:
watch_rules, drift, watch_record, slurm_actions, watch_install).

May import every layer below it (core, benchmarks, machine, results, stack, rfm): it reads
the results layer's typed cases; the report renders its verdicts.
"""
