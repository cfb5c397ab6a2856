"""A contract judged over what an acceptance stored: every entry on the units its state
expects (its partitions, nodes out of service, node pairs) from the sessions' records, and
the nodes the node pairs blame. What `hpcbench accept` writes and what `--verify` judges
again are this, once each."""
from dataclasses import dataclass

from hpcbench.acceptance import judgement, plan
from hpcbench.results import measured


@dataclass(frozen=True)
class Assessment:
    """The contract's EntryVerdicts and the nodes its node pairs blame ({node: why})."""
    verdicts: tuple
    blame: dict

    @property
    def verdict(self):
        return judgement.system_verdict(self.verdicts)


def runs_of(records):
    """(measured runs, failed runs) of the sessions' records ({uuid: record}), in order."""
    runs, failed = [], []
    for data in records.values():
        runs += list(measured.measured_runs(data))
        failed += list(measured.failed_runs(data))
    return runs, failed


def judge(the_contract, state, records):
    """The EntryVerdicts of the contract on the sessions `records` ({uuid: record}) and
    what the state says of the system (its partitions, nodes out of service, pairs)."""
    runs, failed = runs_of(records)
    pairs = state.all_pairs()
    verdicts = []
    for entry in the_contract.entries:
        expected = plan.expected_units(entry, state.partitions, state.system, pairs)
        not_run = {}
        for unit in expected:
            down = [n for n in unit.nodes if n in state.out_of_service]
            if down:
                # One node: the controller's reason; several: which of them.
                not_run[unit] = 'out of service: ' + (
                    state.out_of_service[down[0]] if len(unit.nodes) == 1
                    else ', '.join(sorted(down)))
        verdicts.append(judgement.judge_entry(entry, runs, expected, not_run,
                                              judgement.invalid_units(entry, failed),
                                              failed=failed))
    return verdicts


def assess(the_contract, state, records):
    """The Assessment: the contract judged (judge) and the node pairs' blame (pair_blame)."""
    verdicts = judge(the_contract, state, records)
    return Assessment(tuple(verdicts), pair_blame(verdicts, state))


def _pair_passed(unit_verdict):
    return unit_verdict.verdict in ('PASS', 'WARN') and not unit_verdict.slow


def pair_outcomes(verdicts):
    """{Unit of a node pair: passed} over every node-pair entry: a pair passed where each
    entry's verdict of it is PASS or WARN and none flags it slow. A pair not run (a node
    out of service) is left out: no evidence against either node."""
    passed = {}
    for e in verdicts:
        if not e.entry.scope.blamed_in_pairs:
            continue
        for u in e.units:
            if u.verdict != 'NOT_RUN':
                passed[u.unit] = passed.get(u.unit, True) and _pair_passed(u)
    return passed


def first_round_outcomes(the_contract, state, records, partition):
    """{(a, b): passed} of the first round's pairs on `partition` (pair_outcomes)."""
    first = {tuple(sorted(p)) for p in state.node_pairs.get(partition, [])}
    return {unit.key: ok for unit, ok in pair_outcomes(judge(the_contract, state,
                                                             records)).items()
            if unit.partition == partition and unit.key in first}


def pair_blame(verdicts, state):
    """{node: why} of the nodes to blame for failing node pairs: of the first round's
    disjoint pairs, a node whose pair failed and whose second pair, beside a node that
    passed, failed again (plan.blamed); where no second round ran, both of a failing pair.
    A pair not run is evidence against neither node, and a node out of service is named
    as such, not blamed."""
    second = {tuple(sorted(p)) for pairs in state.second_pairs.values() for p in pairs}
    rounds = ({}, {})
    for unit, ok in pair_outcomes(verdicts).items():
        rounds[unit.key in second][unit.key] = ok
    entries = {}
    for e in verdicts:
        for u in e.units:
            if e.entry.scope.blamed_in_pairs and u.verdict != 'NOT_RUN' and not \
                    _pair_passed(u):
                entries.setdefault(u.unit.key, set()).add(e.entry.fault_code)
    how = 'failed again beside a node that passed' if rounds[1] else 'of a failing pair'
    blame = {}
    for node in (n for n in plan.blamed(*rounds) if n not in state.out_of_service):
        codes = sorted({code for pair, found in entries.items() if node in pair
                        for code in found})
        blame[node] = f'{"/".join(codes)} (node pairs: {how})'
    return blame
