"""`hpcbench contract init SYSTEM`: a draft contract from what the suite knows, every value
with its source, for the site to edit to what was committed:

- a paper's system: each figure its paper measured at installation (references/<system>.yaml,
  `use: reference`), committed as measured, its reference's lower tolerance as the
  entry's, cited by its seed and table;
- a system with a stored session (a baseline: the newest, or one named): each figure of each
  test case, committed at `factor` (0.9) times the median over its nodes; a case that ran on
  one node (ReFrame's --distribute, or a one-node partition) becomes a node entry judged on
  every node, each GPU's and each GPU pair's figures GPU and GPU-pair entries, any other a
  partition entry;
- a system's NVIDIA GPUs of a model with a datasheet (references/datasheets), for what no
  baseline measured: what Azure's node health checks commit a node of eight of them to
  (all_reduce's bus bandwidth, pinned copies, GPU pairs), else DATASHEET_SHARE of the
  datasheet (memory bandwidth, FP64 peak, host link, the slowest GPU-to-GPU link).

The draft is checked as any contract is (hpcbench.acceptance.contract.from_data) before it
is written: a draft the schema refuses is never written."""
import re
import statistics

import yaml

from hpcbench.acceptance import contract as contracts, fact_drafts, scopes
from hpcbench.benchmarks.reports import declared
from hpcbench.core import gpu_topology
from hpcbench.machine import plain_yaml
from hpcbench.results import measured, references, results_db
from hpcbench.rfm import reframe_port

DEFAULT_FACTOR = 0.9
# Figures no acceptance commits to: ratios the suite derives (efficiencies against a peak
# or a ceiling, a spread) and sweep settings; a site may add them by hand.
_DERIVED = re.compile(r'(efficiency|_below_median|spread|balance|_cv$|switch_size|=)')


def _entry_id(*parts):
    text = '-'.join(str(p) for p in parts if p not in (None, ''))
    return re.sub(r'[^A-Za-z0-9_.-]+', '-', text).strip('-.')[:80] or 'entry'


def _unique(entries):
    seen = {}
    for entry in entries:
        base = entry['id']
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            entry['id'] = f'{base}-{seen[base]}'
    return entries


def _direction(variable, unit):
    return 'at_least' if measured.better(variable, unit) == 'higher' else 'at_most'


def _plain_parameters(parameters):
    """A case's parameters as an entry names them: ReFrame's own (.nid, .part, the repeat)
    left out, values as the contract's grammar takes them."""
    return {k: v for k, v in sorted(parameters.items())
            if not k.startswith('.') and k != measured.REPEAT_PARAMETER
            and re.fullmatch(r'[A-Za-z0-9_.+:=/-]+', str(v))}


def from_paper(system):
    """Entries of each figure `system`'s paper measured (its references file)."""
    refs = references.load(system)
    entries = []
    for fig in refs.figures:
        if fig.use != 'reference':
            continue
        source = refs.sources.get(fig.source, {})
        title = source.get('title', fig.source) if isinstance(source, dict) else fig.source
        seed = source.get('seed', '') if isinstance(source, dict) else ''
        lower, upper = fig.tolerance
        direction = _direction(fig.variable, fig.unit)
        tolerance = abs(lower if direction == 'at_least' else upper or 0) if (
            lower if direction == 'at_least' else upper) is not None else 0
        params = _plain_parameters(dict(fig.match))
        entries.append({
            'id': _entry_id(fig.check, fig.variable, fig.partition, fig.environ,
                            *(f'{k}{v}' for k, v in params.items())),
            'check': fig.check, 'figure': fig.variable,
            **({'parameters': params} if params else {}),
            'scope': 'partition', 'partitions': [fig.partition],
            **({'environ': fig.environ} if fig.environ else {}),
            'committed': {'value': fig.value, 'unit': fig.unit, 'direction': direction,
                          'tolerance': min(tolerance, 0.5)},
            'source': {'kind': 'paper', 'cite': f'{title}' + (f' (seed {seed})' if seed else ''),
                       'clause': fig.where, 'figure': fig.value},
            'fault': {'code': _entry_id(fig.check, 'PAPER').upper().replace('.', '-'),
                      'action': f'compare with the paper\'s configuration: {fig.configuration}'[:400]},
        })
    return _unique(entries)


def _lowest_node_efficiency():
    """(the lowest single-node HPL efficiency, in %, any paper's system measured; where)."""
    found = []
    for system in references.systems_with_references():
        for fig in references.load(system).figures:
            if (fig.check, fig.variable, fig.use) == ('HplCheck', 'efficiency', 'reference') \
                    and str(fig.match.get('num_nodes')) == '1':
                found.append((fig.value, f'{system}, {fig.where}'))
    if not found:
        raise RuntimeError('no paper\'s system measured a single-node HPL efficiency to draw '
                           'a share of the peak from')
    return min(found)


def from_peaks(system, configured):
    """Entries of single-node HPL on every node of each partition at a share of its node's
    peak (cores x clock x flop/cycle, as the description gives them: the peak the system's
    paper publishes for its nodes), the share the lowest single-node HPL efficiency any
    paper's system measured (`configured`: the partitions as ReFrame shows them,
    hpcbench.rfm.reframe_port.SeenPartition)."""
    efficiency, where = _lowest_node_efficiency()
    factor = float(f'{efficiency / 100:.3g}')
    notes = references.load(system).notes
    clause = notes[0].get('where', '') if notes and isinstance(notes[0], dict) else ''
    entries = []
    for p in configured:
        node, cores = p.description, p.cores
        if not (cores and node.clock_hz and node.flops_per_cycle):
            continue
        peak = cores * node.clock_hz * node.flops_per_cycle / 1e9
        entries.append({
            'id': _entry_id('hpl-node', p.name), 'check': 'HplNodeScreen',
            'figure': 'gflops', 'scope': 'node', 'partitions': [p.name],
            'committed': {'value': float(f'{factor * peak:.4g}'), 'unit': 'GFLOP/s',
                          'direction': 'at_least', 'tolerance': 0.05},
            'source': {'kind': 'published', 'cite': (
                f'the node\'s peak, {cores} cores x {node.clock_hz / 1e9:g} GHz x '
                f'{node.flops_per_cycle} flop/cycle (site-configs/{system}.yaml, as its '
                f'paper gives them), at the lowest single-node HPL efficiency a paper\'s '
                f'system measured ({efficiency:g} %: {where})'),
                **({'clause': clause} if clause else {}), 'figure': float(f'{peak:.6g}'),
                'factor': factor},
            'fault': {'code': 'HPL-NODE', 'action': 'drain the node; check its clocks, memory '
                      'and BLAS against its sisters\''},
        })
    return entries


# The share of a GPU's datasheet figure a draft commits to: Azure's node health checks
# (github.com/Azure/azurehpc-health-checks) commit 0.75 of the datasheets' link rates,
# 48 of PCIe 5's 64 GB/s (ND H100 v5, ND H200 v5: `check_gpu_bw 48 335`), 24 of PCIe 4's
# 32 GB/s (ND A100 v4: `check_cuda_bw 24`), 335 of NVLink 4's 450 GB/s each way; the H200
# this project was lent measured 82 % of its memory bandwidth (BabelStream triad) and 89 %
# of its FP64 matrix peak (tests/fixtures/gpu/h200-jobs), both above it.
DATASHEET_SHARE = 0.75
# A datasheet's figures are in base units (bytes/s, FLOP/s); the checks report in these.
_BASE_UNITS = {'GB/s': 1e9, 'TFLOP/s': 1e12}
_AZURE_NHC = ('Azure node health checks (github.com/Azure/azurehpc-health-checks), '
              '{path}, commit {commit}')
# What Azure's health checks commit one node of eight GPUs of a model to (its VM size's
# file), as {(datasheet model, GPUs per node): [(check, figure, parameters, settings, scope,
# GB/s, fault code, its file, commit, its line)]}: all_reduce's bus bandwidth at 16 GiB
# (nccl-tests' `-b 16G -e 16G`: what `check_nccl_allreduce` reads, its `Avg bus bandwidth`
# of that one size) and, where the file gives them, each GPU's pinned copies both ways and
# each pair's copy (nvbandwidth's memcpy copy engines: `check_gpu_bw H2D P2P`).
_ND_V5 = ('conf/nd96isr_h200_v5.conf', '13fa400b10f5')
_ND_H100_V5 = ('conf/nd96isr_h100_v5.conf', '7e6ac7796e43')
_ND_A100_V4 = ('conf/nd96amsr_a100_v4.conf', '2a20aecf0371')
_ALL_REDUCE = ('NcclTestsCheck', 'busbw', {'collective': 'all_reduce'},
               {'min_bytes': 16 << 30, 'max_bytes': 16 << 30}, 'node')
_COPIES = [('HostDeviceBandwidthCheck', figure, {}, {}, 'gpu')
           for figure in ('host_to_device_pinned', 'device_to_host_pinned')]
_PAIR_COPY = ('DeviceBufferPairCheck', 'bandwidth', {'path': 'intra-node'}, {}, 'gpu_pair')
PUBLISHED_NODE_FIGURES = {
    ('H200 SXM', 8): [(*_ALL_REDUCE, 431.0, 'NHC2010', *_ND_V5,
                       'check_nccl_allreduce 431.0 1 ... 16G'),
                      *[(*c, 48.0, 'NHC2020', *_ND_V5, 'check_gpu_bw 48 335') for c in _COPIES],
                      (*_PAIR_COPY, 335.0, 'NHC2020', *_ND_V5, 'check_gpu_bw 48 335')],
    ('H100 SXM', 8): [(*_ALL_REDUCE, 460.0, 'NHC2010', *_ND_H100_V5,
                       'check_nccl_allreduce 460.0 1 ... 16G'),
                      *[(*c, 48.0, 'NHC2020', *_ND_H100_V5, 'check_gpu_bw 48 335')
                        for c in _COPIES],
                      (*_PAIR_COPY, 335.0, 'NHC2020', *_ND_H100_V5, 'check_gpu_bw 48 335')],
    ('A100 80GB SXM', 8): [(*_ALL_REDUCE, 228.0, 'NHC2010', *_ND_A100_V4,
                            'check_nccl_allreduce 228.0 10 ... 16G'),
                           *[(*c, 24.0, 'NHC2020', *_ND_A100_V4, 'check_cuda_bw 24')
                             for c in _COPIES]],
}
_GPU_ACTIONS = {
    'node': 'rerun it on the node; if it stays short, drain the node and check its NVLink '
            'and NVSwitch state (nvidia-smi nvlink --status) and its GPUs\' clocks',
    'gpu': 'rerun it on the GPU; if it stays short, drain the node and have the GPU (its '
           'clocks, its slot\'s PCIe width and speed, its memory errors) looked at',
    'gpu_pair': 'rerun it on the pair; if it stays short, drain the node and check the '
                'pair\'s NVLinks (nvidia-smi nvlink --status)',
}


def _min_pair_bandwidth(accelerators, sheet):
    """(bytes/s each way, what) of the slowest link between two of the node's GPUs, from
    its described topology, else every pair at the datasheet's whole NVLink rate (an
    NVSwitch), else at the host link's."""
    topology = gpu_topology.from_description(accelerators.get('topology'))
    rates = list(topology.link_rates(sheet).values()) if topology else []
    if rates and all(rate for rate, _ in rates):
        return min(rates)
    if sheet.get('nvlink_bandwidth'):
        return sheet['nvlink_bandwidth'], f'{sheet.get("nvlink") or "NVLink"}, all links'
    if sheet.get('host_link_bandwidth'):
        return sheet['host_link_bandwidth'], sheet.get('host_link') or 'PCIe'
    return None, 'no link rate in the datasheet'


def _gpu_entry(check, figure, params, settings, scope, partition, value, source, fault):
    return {
        'id': _entry_id(check, figure, partition, scope),
        'check': check, 'figure': figure, **({'parameters': params} if params else {}),
        'scope': scope, 'partitions': [partition],
        'committed': {'value': float(f'{value:.4g}'),
                      'unit': declared()[check].unit_of(figure, params),
                      'direction': 'at_least', 'tolerance': 0.05},
        'rule': {'every': True},
        **({'run_rules': {'settings': dict(settings)}} if settings else {}),
        'source': source,
        'fault': {'code': fault, 'action': _GPU_ACTIONS[scope]},
    }


def _datasheet_figures(sheet, pair_rate, pair_what):
    """[(check, figure, scope, rate, what, fault code)] a GPU's datasheet commits to: its
    memory bandwidth, FP64 peak, host link each way, and the slowest link of a pair."""
    return [
        ('BabelStreamCheck', 'triad_bandwidth', 'gpu', sheet.get('memory_bandwidth'),
         'memory bandwidth', 'GPU-MEMORY'),
        ('GpuDgemmCheck', 'tflops', 'gpu',
         sheet.get('fp64_tensor_flops') or sheet.get('fp64_flops'), 'FP64 peak', 'GPU-DGEMM'),
        *[('HostDeviceBandwidthCheck', figure, 'gpu', sheet.get('host_link_bandwidth'),
           f'{sheet.get("host_link") or "host link"}, each direction', 'GPU-HOST-LINK')
          for figure in ('host_to_device_pinned', 'device_to_host_pinned')],
        ('DeviceBufferPairCheck', 'bandwidth', 'gpu_pair', pair_rate,
         f'slowest GPU-to-GPU link ({pair_what}), each way', 'GPU-PAIR-LINK'),
    ]


def from_gpus(configured):
    """Entries of each GPU partition's nodes, GPUs and GPU pairs from what is published of
    its GPUs' model (`configured`: the partitions as ReFrame shows them, reframe_port.
    SeenPartition, each GPU's datasheet in its description): Azure's health checks'
    figures for a node of eight of the model (PUBLISHED_NODE_FIGURES), and DATASHEET_SHARE of the datasheet's memory bandwidth
    (BabelStream's triad), FP64 matrix peak (the DGEMM), host link (pinned copies) and
    slowest GPU-to-GPU link (a pair's device-buffer copy) where nothing is published."""
    entries = []
    for p in configured:
        accelerators = p.description.accelerators or {}
        sheet = accelerators.get('datasheet') or {}
        gpus = p.gpus_per_node
        # Stand-in devices (the testbed's) run no GPU program: nothing to commit them to.
        if not (sheet and gpus) or accelerators.get('vendor') != 'nvidia' or \
                accelerators.get('stand_in'):
            continue
        published = {}
        for (check, figure, params, settings, scope, value, fault, path, commit,
             line) in PUBLISHED_NODE_FIGURES.get((sheet['model'], gpus), []):
            published[(check, figure)] = _gpu_entry(
                check, figure, params, settings, scope, p.name, value,
                {'kind': 'published', 'cite': _AZURE_NHC.format(path=path, commit=commit),
                 'clause': f'`{line}`', 'figure': value, 'factor': 1.0}, fault)
        pair_rate, pair_what = _min_pair_bandwidth(accelerators, sheet) if gpus > 1 else \
            (None, '')
        for check, figure, scope, rate, what, fault in _datasheet_figures(sheet, pair_rate,
                                                                          pair_what):
            if (check, figure) in published or not rate:
                continue
            params = {'path': 'intra-node'} if check == 'DeviceBufferPairCheck' else {}
            unit = declared()[check].unit_of(figure, params)
            rate /= _BASE_UNITS[unit]
            published[(check, figure)] = _gpu_entry(
                check, figure, params, {}, scope, p.name, DATASHEET_SHARE * rate,
                {'kind': 'datasheet',
                 'cite': f'{sheet["model"]} ({sheet.get("source", "its datasheet")})',
                 'clause': f'{what}, {rate:g} {unit}', 'figure': float(f'{rate:.6g}'),
                 'factor': DATASHEET_SHARE}, fault)
        entries.extend(published.values())
    return _unique(entries)


def _figure_groups(sessions, checks):
    """{(check, parameters, partition, environ, figure, scope): (unit, [values])} of the
    sessions' runs, each figure by the scope a draft takes it for (hpcbench.acceptance.
    scopes)."""
    groups = {}
    for case in (c for s in sessions for c in measured.measured_runs(s)):
        if checks and case.check not in checks:
            continue
        params = _plain_parameters(case.parameters)
        scope = scopes.of_case(case)
        for name, figure in case.figures.items():
            if figure.value is None or _DERIVED.search(name):
                continue
            key = (case.check, tuple(params.items()), case.partition, case.environ, name,
                   scope)
            groups.setdefault(key, (figure.unit, []))[1].append(figure.value)
        for device in case.devices:
            device_scope = scopes.of_device(device.key)
            for name, value in device.figures.items():
                if value is None or _DERIVED.search(name):
                    continue
                unit = case.figures[name].unit if name in case.figures else ''
                if not unit:
                    continue
                key = (case.check, tuple(params.items()), case.partition, case.environ, name,
                       device_scope)
                groups.setdefault(key, (unit, []))[1].append(value)
    return groups


def from_session(system, session_data, factor=DEFAULT_FACTOR, checks=None):
    """Entries of each figure of stored sessions (a baseline: one session's record, or a
    list of them), at `factor` times the median over the nodes (the GPUs, the pairs) of all
    of them."""
    sessions = session_data if isinstance(session_data, list) else [session_data]
    cited = fact_drafts.sessions_cite(system, sessions)
    entries = []
    for (check, params, partition, environ, name, scope), (unit, values) in \
            _figure_groups(sessions, checks).items():
        median = statistics.median(values)
        if not median or median <= 0:
            continue
        direction = _direction(name, unit)
        value = median * factor if direction == 'at_least' else median / factor
        entries.append({
            'id': _entry_id(check, name, partition, environ, *(f'{k}{v}' for k, v in params)),
            'check': check, 'figure': name, **({'parameters': dict(params)} if params else {}),
            'scope': scope.name, 'partitions': [partition], 'environ': environ,
            'committed': {'value': float(f'{value:.4g}'), 'unit': unit,
                          'direction': direction, 'tolerance': 0.05},
            'rule': dict([scope.draft_rule]),
            'source': {'kind': 'baseline', 'cite': cited,
                       'clause': f'the median of {len(values)} value(s)',
                       'figure': float(f'{median:.6g}'), 'factor': factor},
            'fault': {'code': _entry_id(check, scope.name).upper().replace('.', '-'),
                      'action': f'rerun {check} on the {scope.words}; if it stays short, '
                                'drain it and check its hardware and settings'},
        })
    return _unique(sorted(entries, key=lambda e: e['id']))


def draft(system, baseline=None, factor=DEFAULT_FACTOR, checks=None, settings=()):
    """The draft contract of `system` as data, checked. `baseline`: stored sessions' UUIDs
    (a list) to draw from, else the newest. `settings`: `Check.variable=value` the baseline
    ran with (its sizes), the run rules of each entry of that check."""
    if system in references.systems_with_references():
        entries, about = _from_papers(system)
    else:
        entries, about = _from_sessions_and_gpus(system, baseline, factor, checks)
    if not entries:
        raise RuntimeError(f'nothing of {system} to draw a contract from')
    for setting in settings:
        _with_setting(entries, setting)
    data = {'system': system, 'about': about, 'entries': entries}
    contracts.from_data(data, f'the draft of contracts/{system}.yaml', system)
    return data


def _from_papers(system):
    """(entries, about) of a paper's system: its paper's figures, else its nodes' peak."""
    entries = from_paper(system)
    if entries:
        return entries, (f'What {system}\'s paper measured at installation, as the contract a '
                         're-run is judged against (hpcbench contract init): edit to what was '
                         'committed.')
    return from_peaks(system, reframe_port.ReFrame(system).partitions()), (
        f'{system}\'s paper measured no figure as a number (its IMB results are plots); it '
        'publishes its nodes\' peak: single-node HPL on every node at the share of its peak '
        'the papers\' systems reached on one node (hpcbench contract init): edit to what was '
        'committed.')


def _from_sessions_and_gpus(system, baseline, factor, checks):
    """(entries, about) of a system measured here: its stored sessions' medians at `factor`
    and, for what they did not measure, what is published of its GPUs."""
    partitions = reframe_port.ReFrame(system).partitions()
    published = [e for e in from_gpus(partitions) if not checks or e['check'] in checks]
    config = results_db.site_config(system)
    if not baseline:
        stored = results_db.latest_session(config)
        if stored is None and not published:
            raise RuntimeError(f'{system} has no paper\'s figures, no GPU of a published '
                               'model and no stored session to draw a contract from: run '
                               f'it first (make run SYSTEM={system}), or write '
                               f'contracts/{system}.yaml by hand')
        baseline = [results_db.uuid_of(stored)] if stored is not None else []
    sessions = []
    for uuid in baseline:
        data = results_db.session(config, uuid)
        if not isinstance(data, dict):
            data = results_db.Store(config).decoded(results_db.uuid_of(data))
        sessions.append(data)
    entries = from_session(system, sessions, factor, checks) if sessions else []
    facts = fact_drafts.from_sessions(system, sessions, {p.name: {'cpus': p.cpus}
                                                         for p in partitions if p.cpus}) \
        if sessions else []
    # What the GPUs' vendor and a cloud publish, for what the baseline did not measure.
    measured_already = {(e['check'], e['figure'], e['scope'], tuple(e['partitions']))
                        for e in entries}
    entries += [e for e in published if (e['check'], e['figure'], e['scope'],
                                          tuple(e['partitions'])) not in measured_already]
    return _unique(entries) + facts, ' '.join(filter(None, [
        sessions and f'Drawn from a stored session of {system} at {factor:g} x its medians.',
        facts and 'The facts its nodes read around its jobs, each as most units of a '
                  'partition read it, and no error growing during a job.',
        published and f'Its GPUs: what Azure\'s health checks commit a node of their model '
                      f'to, else {DATASHEET_SHARE:g} x their datasheet.',
        '(hpcbench contract init): edit to what was committed.']))


def _with_setting(entries, setting):
    """`Check.variable=value` into the run rules of each entry of that check."""
    check, _, assignment = setting.partition('.')
    name, _, value = assignment.partition('=')
    if not (check and name and value):
        raise RuntimeError(f'--setting {setting!r}: give Check.variable=value')
    if not any(entry['check'] == check for entry in entries):
        raise RuntimeError(f'--setting {setting!r}: the draft has no entry of {check} '
                           f'(its checks: {", ".join(sorted({e["check"] for e in entries}))})')
    for entry in entries:
        if entry['check'] == check:
            rules = entry.setdefault('run_rules', {}).setdefault('settings', {})
            # Read as a contract's values are (a number, a word): plain, finite.
            try:
                rules[name] = plain_yaml.loads(value, f'--setting {setting!r}')
            except plain_yaml.PlainYamlError as err:
                raise contracts.ContractError(str(err)) from None


def draft_text(system, baseline=None, factor=DEFAULT_FACTOR, checks=None, settings=()):
    """The draft as the YAML file the site edits."""
    data = draft(system, baseline, factor, checks, settings)
    return ('# A draft acceptance contract (hpcbench contract init): every value with its '
            'source.\n# Edit it to what was committed; docs/acceptance.md says how.\n'
            + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True))
