"""What a stored test case says its nodes' hardware read around its job (issue 73:
hpcbench.rfm.hardware_facts): each node's fact figures and text facts by its own name, each
device's text facts by its key; a node name, key or text that is none refused. The
devices' fact figures are read as their measured figures are (hpcbench.results.measured)."""
from hpcbench.core import device_keys, fact_figures
from hpcbench.core.slurm_cluster import NODE_NAME


def node_facts(tc):
    """{node: {name: value}} of a case's facts, each node as it named itself; a name that
    is none refused. A record written before every node was read (2026-12-05) holds one
    node's: `facts_node` and its figures."""
    stored = tc.get('node_facts') or {}
    if stored and not all(isinstance(v, dict) for v in stored.values()):
        stored = {tc.get('facts_node') or '': stored}
    found = {}
    for name, figures in stored.items():
        if not name:
            continue
        if not NODE_NAME.fullmatch(name):
            raise RuntimeError(f'test case {tc.get("display_name") or tc.get("name")}: its '
                               f'facts are of {name[:80]!r}, no node\'s name')
        found[name] = {k: float(v) for k, v in figures.items()}
    return found


def texts(tc):
    """{'node_texts': {node: {name: text}}, 'device_texts': {device key: {name: text}}} of a
    case; a node name, device key or text that is none refused."""
    where = f'test case {tc.get("display_name") or tc.get("name")}'
    nodes, devices = {}, {}
    for name, texts in (tc.get('node_texts') or {}).items():
        if not NODE_NAME.fullmatch(name):
            raise RuntimeError(f'{where}: its texts are of {name[:80]!r}, no node\'s name')
        nodes[name] = checked_texts(texts, where)
    for text, texts in (tc.get('device_texts') or {}).items():
        try:
            key = device_keys.parse(text)
        except device_keys.DeviceKeyError as err:
            raise RuntimeError(f'{where}: {err}') from None
        devices[key] = checked_texts(texts, where)
    return {'node_texts': nodes, 'device_texts': devices}


def checked_texts(texts, where):
    for name, value in texts.items():
        if not fact_figures.is_fact_text(value):
            raise RuntimeError(f'{where}: its fact {str(name)[:40]!r} reads {str(value)[:60]!r}, '
                               'no text a node reports')
    return dict(texts)
