"""What an acceptance runs, planned before anything runs: the contract's entries grouped
into the ReFrame runs that measure them (RunGroup: one check, its parameters and
environment, how its units are reached), each run cut into batches of nodes the scheduler
takes (Batch: ReFrame's --distribute over the batch's nodes; a round of node pairs, each
test pinned to its pair), the units every entry expects
a verdict of (each node of its partitions, each GPU and GPU pair of each node, each pair of
nodes, the partition, the system), and node pairs: disjoint pairs first, then each node of
a failing pair paired again with a node that passed (Google's cluster health scanner), so
that the slow node is named and not its partner.

Pure: the acceptance (hpcbench.acceptance.use_case) says what the system has (its partitions,
their nodes and GPUs, the nodes out of service) and what was measured already; this says
what is left to run.
"""
import re
from dataclasses import dataclass


# Nodes in one ReFrame run: --distribute makes a test per node and stalls with many busy
# nodes (reframe-hpc/reframe issue 3586); Azure's health checks split into 110-node jobs.
DEFAULT_BATCH_NODES = 32


@dataclass(frozen=True)
class RunGroup:
    """The entries one ReFrame run measures: one check with its parameters, on one
    environment ('' : every one the check runs on), reached per node, per node pair or
    once; the repeats the most demanding entry needs and the check's settings."""
    check: str
    parameters: tuple       # ((name, value), ...), sorted: the entries' case, as given
    environ: str
    kind: str               # how its units are reached: one of hpcbench.acceptance.scopes.RUNS
    partitions: tuple       # () : every partition the check runs on
    entries: tuple          # the entry ids it measures
    repeats: int
    settings: tuple = ()    # ((variable, value), ...), sorted
    # The names among `parameters` that are ReFrame parameters of the check (its display
    # name shows them); None: all of them. The others are its variables, set with -S, or
    # facts of the partition (the DIMMs of a node), which select no test case.
    parameter_names: frozenset = None
    variable_names: frozenset = frozenset()

    @property
    def selectors(self):
        """The parameters that select the test case by name (-n)."""
        return tuple((k, v) for k, v in self.parameters
                     if self.parameter_names is None or k in self.parameter_names)

    @property
    def all_settings(self):
        """The -S of its runs: the entries' run rules, and the variables among its case."""
        return tuple(sorted({*self.settings, *((k, v) for k, v in self.parameters
                                               if k in self.variable_names)}))

    @property
    def label(self):
        params = ''.join(f'%{k}={v}' for k, v in self.parameters)
        return f'{self.check}{params}' + (f'@{self.environ}' if self.environ else '') + \
            f' ({self.kind.replace("_", " ")})'

    def name_filter(self):
        """ReFrame's -n of this check with these parameters, in any order: a regular
        expression on the test's display name with its spaces taken out
        (`HplCheck%num_nodes=1%layout_name=per-socket`). No braces: ReFrame 4.10's session
        listing breaks on a `}` on its command line."""
        ahead = ''.join(f'(?=.*%{re.escape(k)}={re.escape(str(v))}(%|$))'
                        for k, v in self.selectors)
        return f'^{re.escape(self.check)}(?=%|$){ahead}'


def run_groups(contract, kinds=None):
    """The contract's entries grouped into the runs that measure them, in entry order.
    `kinds`: {check: (its parameters' names, its variables' names)}, as ReFrame describes
    the checks (hpcbench.rfm.reframe_port.ReFrame.check_kinds); without, every name of an
    entry's case is taken for a parameter. A fact's entry runs nothing: facts are read
    around every job (hpcbench.rfm.plugins.HardwareFacts)."""
    groups = {}
    for entry in (e for e in contract.entries if not e.fact):
        key = (entry.check, tuple(sorted(entry.parameters.items())), entry.environ,
               entry.scope.runs, entry.partitions,
               tuple(sorted((entry.run_rules.get('settings') or {}).items())))
        repeats = max(entry.median_of, entry.run_rules.get('repeats', 0))
        names = (kinds or {}).get(entry.check)
        named = dict(parameter_names=frozenset(names[0]),
                     variable_names=frozenset(names[1])) if names else {}
        if key in groups:
            group = groups[key]
            groups[key] = RunGroup(*key[:5], group.entries + (entry.id,),
                                   max(group.repeats, repeats), key[5], **named)
        else:
            groups[key] = RunGroup(*key[:5], (entry.id,), repeats, key[5], **named)
    return list(groups.values())


@dataclass(frozen=True)
class PartitionNodes:
    """What an acceptance knows of a partition of the system: its nodes (() where its
    scheduler cannot be asked: a dry run of a paper's system) and each node's GPUs."""
    name: str
    nodes: tuple
    gpus_per_node: int = 0
    # Whether its scheduler places one test on each node (Slurm: --distribute); a local
    # partition is its one node.
    distributes: bool = True


# ReFrame's -P splits a variable's values at this; a node list's own separator is the comma.
PAIRS_DELIMITER = ';'


@dataclass(frozen=True)
class Batch:
    """One ReFrame run of a group on one partition: on each of its nodes (per node), on
    each of its node pairs (a test pinned to each pair: all of them at once where the
    partition takes several jobs), or once."""
    group: RunGroup
    partition: str
    nodes: tuple = ()
    distribute: bool = False
    pairs: tuple = ()       # ((a, b), ...): node pairs, each its own test
    # The runs of each unit in this ReFrame run: one (batches), so that a unit's runs are
    # one pass of the batch apart, not back to back (hpcbench.acceptance.use_case).
    runs: int = 1

    def reframe_options(self):
        """Its ReFrame options on its partition (after the mode's and the system's own)."""
        options = ['-n', self.group.name_filter(), '--repeat', str(self.runs)]
        if self.group.environ:
            options += ['-p', f'^{re.escape(self.group.environ)}$']
        options += [f'-S{self.group.check}.{k}={v}' for k, v in self.group.all_settings]
        if self.distribute:
            # The batch's nodes: ReFrame's --distribute takes the nodes a job's options
            # allow and drops the option from the jobs themselves.
            options += ['--distribute=all', f'-J--nodelist={",".join(self.nodes)}']
        elif self.pairs:
            # One test per pair (hpcbench.rfm.plugins.PinnedNodes), each job on its two.
            listed = PAIRS_DELIMITER.join(",".join(pair) for pair in self.pairs)
            options += ['-P', f'{self.group.check}.pinned_nodes={listed}',
                        f'--param-values-delim={PAIRS_DELIMITER}']
        return options

    @property
    def label(self):
        where = (f'{len(self.nodes)} node(s)' if self.distribute else
                 f'{len(self.pairs)} node pair(s): {", ".join("-".join(p) for p in self.pairs)}'
                 if self.pairs else 'once')
        return f'{self.group.label} on {self.partition}, {where}'


@dataclass(frozen=True)
class DryRun:
    """Every group of a partition in one ReFrame dry run (it writes jobs, runs none): their
    name filters together, the most repeats any needs, each check's settings."""
    partition: str
    groups: tuple

    def reframe_options(self):
        environs = {g.environ for g in self.groups}
        options = [*(o for g in self.groups for o in ('-n', g.name_filter())),
                   '--repeat', str(max(g.repeats for g in self.groups))]
        if len(environs) == 1 and '' not in environs:
            options += ['-p', f'^{re.escape(environs.pop())}$']
        options += sorted({f'-S{g.check}.{k}={v}' for g in self.groups
                           for k, v in g.all_settings})
        return options

    @property
    def label(self):
        return f'{len(self.groups)} run(s) of the contract on {self.partition}'


def dry_runs(groups, partitions):
    """The DryRuns of `groups` on `partitions`: per partition, as few as hold its groups
    with no variable set two ways (-S applies to every test of the check)."""
    runs = []
    for partition in partitions:
        bins = []
        for group in (g for g in groups
                      if not g.partitions or partition.name in g.partitions):
            wanted = {(group.check, k): v for k, v in group.all_settings}
            for held in bins:
                if all(held['settings'].get(k, v) == v for k, v in wanted.items()):
                    held['settings'].update(wanted)
                    held['groups'].append(group)
                    break
            else:
                bins.append({'settings': dict(wanted), 'groups': [group]})
        runs += [DryRun(partition.name, tuple(b['groups'])) for b in bins]
    return runs


def group_partitions(group, partitions):
    """The partitions of the system a group runs on: those its entries name, else all."""
    return [p for p in partitions if not group.partitions or p.name in group.partitions]


def disjoint_pairs(nodes):
    """Nodes paired once each, in order: (n1, n2), (n3, n4), ...; an odd node out is paired
    with the first (every node measured)."""
    nodes = list(nodes)
    pairs = [tuple(nodes[i:i + 2]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        pairs.append((nodes[-1], nodes[0]))
    return pairs


def repairs(pair_verdicts, nodes):
    """The second round of node pairs: each node of a pair that failed, paired with a node
    of a pair that passed ({(a, b): passed}) other than its partners of the first round, a
    different good node each where there are enough; [] where no pair failed or none passed."""
    good = sorted({n for pair, passed in pair_verdicts.items() if passed for n in pair})
    suspects = sorted({n for pair, passed in pair_verdicts.items() if not passed
                       for n in pair} - set(good))
    again, turn = [], 0
    for suspect in suspects:
        if suspect not in nodes:
            continue
        met = {n for pair in pair_verdicts if suspect in pair for n in pair}
        partners = [n for n in good if n not in met]
        if partners:
            again.append(tuple(sorted((suspect, partners[turn % len(partners)]))))
            turn += 1
    return again


def blamed(first_round, second_round):
    """The nodes to blame for failing pairs: a node of a failing pair of the first round
    ({pair: passed}) that passed in no pair, and did not pass beside a good node in the
    second round either (a suspect the second round could not pair stays named)."""
    suspects = {n for pair, passed in first_round.items() if not passed for n in pair}
    cleared = {n for rounds in (first_round, second_round) for pair, passed in rounds.items()
               if passed for n in pair}
    return sorted(suspects - cleared)


def batches(group, partitions, runs_done, out_of_service=(), node_pairs=(),
            size=DEFAULT_BATCH_NODES):
    """The runs left of `group` on `partitions` (PartitionNodes), one pass: each unit that lacks
    runs once (the acceptance runs passes until each has the group's repeats: a unit's runs
    are then a pass apart, not back to back, where a load on the host that lasts a minute
    hit all three runs of a healthy node pair, which FAILed). Per node, its nodes in
    service whose runs so far (`runs_done(partition, unit)`: a node's name, a pair of nodes,
    or the partition's name) are fewer than the group's repeats, `size` nodes a batch; the
    node pairs of `node_pairs` ({partition: [(a, b), ...]}) so left, in batches of `size`
    nodes (a round of pairs in one ReFrame run); once, the partition where it is left. A
    partition whose nodes are unknown (a paper's system, whose scheduler is not here) or
    that is one node (local) runs the group once."""
    left = []
    for partition in group_partitions(group, partitions):
        name = partition.name

        def wanted(unit):
            return runs_done(name, unit) < group.repeats
        if group.kind == 'per_node' and partition.distributes and partition.nodes:
            nodes = [n for n in partition.nodes if n not in out_of_service and wanted(n)]
            left += [Batch(group, name, tuple(nodes[i:i + size]), True)
                     for i in range(0, len(nodes), size)]
        elif group.kind == 'node_pair' and partition.nodes:
            pairs = [tuple(pair) for pair in dict(node_pairs).get(name, ())
                     if not set(pair) & set(out_of_service) and wanted(tuple(sorted(pair)))]
            per_batch = max(1, size // 2)
            left += [Batch(group, name, pairs=tuple(pairs[i:i + per_batch]))
                     for i in range(0, len(pairs), per_batch)]
        elif group.kind == 'per_node' and partition.nodes:
            if wanted(partition.nodes[0]):
                left.append(Batch(group, name))
        elif wanted(name):
            left.append(Batch(group, name))
    return left


def expected_units(entry, partitions, system, node_pairs=()):
    """The units `entry` must have a verdict of on `partitions` (PartitionNodes; those of its
    scope, hpcbench.acceptance.scopes): every node; each GPU and each pair of GPUs of every
    node; each pair of nodes paired (`node_pairs`: {partition: [(a, b), ...]}); the
    partition; the system. A unit expected and never measured is NOT_RUN
    (hpcbench.acceptance.judgement)."""
    return {unit for partition in partitions
            if not entry.partitions or partition.name in entry.partitions
            for unit in entry.scope.expected(partition, system, node_pairs)}
