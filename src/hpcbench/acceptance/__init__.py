"""Acceptance of a cluster against its contract: the contract as data, validated (contract),
and every entry judged on every node, GPU and GPU pair of its scope, then over the scope by
its rule, slow units flagged beside their peers, a unit that did not run never passing
(judgement).

May import every layer below it (core, benchmarks, machine, results, stack, rfm): it reads
the results layer's typed cases; the report renders its verdicts.
"""
