"""An acceptance's directory: claimed (checked, marked and locked while an acceptance runs
and writes there), its record computed whole and written all or none with its manifest and
signature, read back (the contract, state and session records it holds), and verified
(`hpcbench accept --verify DIR`: every file's sha256, the signature, and the verdicts
judged again from what it holds)."""
import contextlib
import fcntl
import json
import os
from pathlib import Path

from hpcbench.acceptance import assessment, contract as contracts, manifest, outputs
from hpcbench.acceptance.state import (CONTRACT_COPY, DRAIN_LIST, JUNIT_XML, MAX_SESSION_BYTES,
                                       SESSIONS, STATE, VERDICTS_JSON, AcceptanceError, State,
                                       json_data)
from hpcbench.core import paths
from hpcbench.machine import description_schema
from hpcbench.results import results_db

# The file that makes a directory an acceptance's of the suite, and its lock: held while an
# acceptance runs and writes there (one directory, one acceptance at a time).
MARKER = '.hpcbench-acceptance'


def check_directory(directory, dry_run=False):
    """AcceptanceError where `directory` is not one an acceptance may use: a directory of
    other files (a `contract.yaml` of the user's own was overwritten), or, for a dry run,
    one that holds an acceptance (a dry run of another contract replaced a signed one's
    contract and added runs). New, empty, or the suite's acceptance (its MARKER, or its
    state from before the marker) is one."""
    directory = Path(directory)
    try:
        entries = sorted(os.listdir(directory))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise AcceptanceError(f'{directory} is a file: give --output a directory') from None
    ours = MARKER in entries or STATE in entries
    if entries and not ours:
        raise AcceptanceError(
            f'{directory} holds other files ({", ".join(entries[:5])}'
            f'{", ..." if len(entries) > 5 else ""}) and no acceptance of the suite (no '
            f'{MARKER}): give --output a new or empty directory')
    if dry_run and (STATE in entries or manifest.MANIFEST in entries):
        raise AcceptanceError(f'{directory} holds an acceptance: a dry run writes its jobs '
                              'beside another --output, never into one')


@contextlib.contextmanager
def claimed(directory, dry_run=False):
    """`directory` checked (check_directory), made and marked as an acceptance's, and
    locked while the block runs: AcceptanceError where another acceptance holds it."""
    directory = Path(directory)
    check_directory(directory, dry_run)
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / MARKER
    if marker.is_symlink():
        raise AcceptanceError(f'{marker} is a link: {directory} is not the suite\'s')
    with open(marker, 'a+') as fp:
        try:
            fcntl.flock(fp, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AcceptanceError(f'{directory} is in use by another acceptance (it holds '
                                  f'{MARKER}\'s lock): one directory, one acceptance at a '
                                  'time') from None
        fp.seek(0)
        if not fp.read():
            fp.write('An acceptance of hpcbench: its contract, state, sessions and '
                     'verdicts.\n')
            fp.flush()
        yield directory


def record_files(the_contract, state, records, assessed):
    """{path in the directory: text or bytes} of what the verdicts (an assessment.Assessment)
    stand on and say: each session's record, the description and the Spack lock of the
    system, the project's commit, and the verdicts as JSON (checked against its schema),
    JUnit XML and a drain list. Computed whole before anything is written (write): a node
    name Slurm refuses stopped an acceptance after half its outputs were written."""
    from hpcbench.stack import provenance
    files = {f'{SESSIONS}/{uuid}.json': json.dumps(data, indent=1, sort_keys=True)
             for uuid, data in records.items()}
    for source, name in ((paths.SITE_CONFIGS_DIR / f'{state.system}.yaml', 'description.yaml'),
                         (paths.SPACK_ENVS_DIR / state.system / 'spack.lock', 'spack.lock'),
                         (paths.SPACK_ENVS_DIR / state.system / 'spack.yaml', 'spack.yaml')):
        if source.is_file():
            files[name] = source.read_bytes()
    files['project-commit.txt'] = f'{provenance.project_commit()}\n'
    document = outputs.as_json(state.system, assessed.verdicts)
    # What --verify and a site's tools read back: checked against its schema first.
    description_schema.check(json.loads(json.dumps(document)), outputs.JSON_SCHEMA)
    files[VERDICTS_JSON] = json.dumps(document, indent=1) + '\n'
    files[JUNIT_XML] = outputs.junit_xml(state.system, assessed.verdicts)
    lines = outputs.drain_lines(assessed.verdicts, assessed.blame)
    files[DRAIN_LIST] = ('# The nodes this acceptance blames, for the site to drain (the suite '
                         'drains none):\n' + ''.join(f'{line}\n' for line in lines))
    return files


def write(directory, files, key=None):
    """Write `files` ({path in `directory`: text or bytes}), then the manifest over the
    directory and, with `key`, its signature: all or none. The old manifest and signature go
    first (they sign what is about to change); each file is written whole
    (paths.write_atomically); where one cannot be written (a full disk), those written now
    are removed and OSError names the file."""
    directory = Path(directory)
    for stale in (manifest.SIGNATURE, manifest.MANIFEST):
        (directory / stale).unlink(missing_ok=True)
    written = []
    try:
        for name, data in files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            existed = path.exists()
            paths.write_atomically(path, data)
            if not existed:
                written.append(path)
        manifest.write(directory)
        if key:
            manifest.sign(directory, key)
    except (OSError, manifest.ManifestError):
        for path in written + [directory / manifest.MANIFEST, directory / manifest.SIGNATURE]:
            path.unlink(missing_ok=True)
        raise


def stored(directory):
    """(contract, state, records) an acceptance's directory holds: the records of the
    state's sessions, in its order (the order they ran, which a unit's runs keep); each a
    regular file (a FIFO or a device is never read: UnreadableFileError), checked as a
    record of ReFrame's (hpcbench.results.results_db.checked_record)."""
    directory = Path(directory)
    state = State.load(directory)
    the_contract = contracts.load(directory / CONTRACT_COPY, state.system)
    records = {}
    for uuid in state.sessions:
        name = f'{SESSIONS}/{uuid}.json'
        text = paths.read_regular(directory / name, MAX_SESSION_BYTES, 'a session record')
        records[uuid] = results_db.checked_record(json_data(text, name), name)
    return the_contract, state, records


def verify(directory, allowed_signers=None, identity=None):
    """What does and does not hold of an acceptance's directory (manifest.Verification: the
    problems, one line each, [] where it holds; what was checked of its signature): every
    file's sha256 and the signature (hpcbench.acceptance.manifest.verify), and the verdicts
    judged again from the contract, the plan and the session records it holds."""
    from hpcbench.stack import provenance
    directory = Path(directory)
    checked = manifest.verify(directory, allowed_signers, identity)
    problems = checked.problems
    try:
        the_contract, state, records = stored(directory)
        written = json_data(paths.read_regular(directory / VERDICTS_JSON, MAX_SESSION_BYTES,
                                               'a verdicts document'), VERDICTS_JSON)
        # Compared with what is judged again, whatever fields another commit wrote: a
        # mapping of entries, each a mapping, is what a comparison needs.
        if not (isinstance(written, dict) and isinstance(written.get('entries'), list)
                and all(isinstance(e, dict) for e in written['entries'])):
            raise ValueError(f'{VERDICTS_JSON}: no mapping of entries (its schema: '
                             'hpcbench.acceptance.outputs.JSON_SCHEMA)')
        # Judged again into the format it was written in (an acceptance written before
        # verdicts were data holds format 1, without the field).
        version = written.get('format', 1)
        if version not in (1, outputs.FORMAT):
            raise ValueError(f'{VERDICTS_JSON}: format {str(version)[:20]!r} is none this '
                             f'suite writes (1 to {outputs.FORMAT})')
        again = outputs.as_json(state.system, assessment.judge(the_contract, state, records),
                                version)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, RecursionError,
            contracts.ContractError) as err:
        problems.append(f'the verdicts cannot be judged again from {directory}: '
                        f'{type(err).__name__}: {str(err)[:400]}')
        return checked
    if again != written:
        differ = [e['id'] for e, w in zip(again['entries'], written['entries']) if e != w]
        differ += [str(w.get('id'))[:80] for w in written['entries'][len(again['entries']):]]
        # Judged again by this checkout's rules: a directory another commit wrote may differ
        # because the rules did (a field added, a test changed), which says so.
        commit = provenance.project_commit()
        wrote = (directory / 'project-commit.txt').read_text().strip() \
            if (directory / 'project-commit.txt').is_file() else ''
        rules = (f'; judged by the rules of project commit {commit[:12] or "unknown"}, '
                 f'written by {wrote[:12] or "an unknown one"}: the rules may have changed '
                 'since' if wrote.split('-')[0] != commit.split('-')[0] else '')
        problems.append(f'{VERDICTS_JSON}: not what its contract, plan and sessions give '
                        f'(entries {", ".join(differ) or "listed differently"}; system '
                        f'{again["verdict"]}, written {written.get("verdict")}){rules}')
    return checked
