"""What an acceptance has done so far (`state.json` in its directory), and the names of what
its directory holds: the contract it ran, the state, each stored session's record."""
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hpcbench.acceptance import plan
from hpcbench.core import paths
from hpcbench.results import results_db

STATE = 'state.json'
CONTRACT_COPY = 'contract.yaml'
SESSIONS = 'sessions'
VERDICTS_JSON = 'verdicts.json'
JUNIT_XML = 'junit.xml'
DRAIN_LIST = 'drain-list.sh'
# The most one stored session's record holds (the 32-node testbed's sessions are 1 to 6 MB).
MAX_SESSION_BYTES = 1 << 30


class AcceptanceError(RuntimeError):
    """An acceptance that cannot go on: one sentence saying why."""


@dataclass
class State:
    """What an acceptance has done so far (state.json in its directory)."""
    system: str
    contract_sha256: str
    partitions: list                            # plan.PartitionNodes, as seen when it began
    sessions: list = field(default_factory=list)        # stored sessions' UUIDs, in order
    out_of_service: dict = field(default_factory=dict)  # {node: why}, as first seen
    node_pairs: dict = field(default_factory=dict)      # {partition: [[a, b], ...]}
    second_pairs: dict = field(default_factory=dict)    # {partition: [[a, b], ...]}

    def save(self, directory):
        """Into state.json whole or not at all: written beside it, then renamed over it (a
        kill or a full disk mid-write left one cut mid-string, and no resuming)."""
        paths.write_atomically(Path(directory) / STATE,
                               json.dumps(asdict(self), indent=1, sort_keys=True) + '\n')

    @classmethod
    def load(cls, directory):
        """The state in `directory`; AcceptanceError in one line where it is none."""
        path = Path(directory) / STATE
        try:
            data = json_data(paths.read_regular(path, MAX_SESSION_BYTES, 'a state'),
                             str(path))
            data['partitions'] = [plan.PartitionNodes(str(p['name']),
                                                      tuple(map(str, p['nodes'])),
                                                      int(p['gpus_per_node']),
                                                      bool(p['distributes']))
                                  for p in data['partitions']]
            state = cls(**data)
        except (ValueError, KeyError, TypeError) as err:
            raise AcceptanceError(f'{path} is no acceptance\'s state ({type(err).__name__}: '
                                  f'{str(err)[:200]}): give another --output') from None
        if not all(isinstance(u, str) and results_db.UUID.fullmatch(u)
                   for u in state.sessions):
            raise AcceptanceError(f'{path} is no acceptance\'s state: its sessions are not '
                                  'UUIDs: give another --output')
        return state

    def all_pairs(self):
        """{partition: [(a, b), ...]} of both rounds of node pairs."""
        return {name: [tuple(p) for p in (self.node_pairs.get(name, []) +
                                          self.second_pairs.get(name, []))]
                for name in {*self.node_pairs, *self.second_pairs}}


def json_data(data, where):
    """The JSON document of `data` (bytes or text) from `where`; ValueError in one line
    where it is none (cut mid-string, nested past Python's stack)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f'{where}: nested too deep to be a record of the suite\'s') from None
    except ValueError as err:
        raise ValueError(f'{where}: not JSON ({err})') from None
