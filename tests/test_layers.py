"""The package's layers (src/hpcbench/__init__.py): each subpackage imports only from the
layers below it, and core and benchmarks from the standard library alone. Read from the
source with ast, every import statement counted (those inside functions too: an import
run late is still a dependency)."""
import ast
import shutil
import sys

from conftest import ROOT

PACKAGE = ROOT / 'src' / 'hpcbench'
# Lowest first: a module may import from its own layer and the layers before it.
LAYERS = ('core', 'benchmarks', 'machine', 'results', 'stack', 'rfm', 'acceptance', 'report',
          'devtools', 'cli')
# What job scripts run on compute nodes and `make run` runs before any venv exists.
STANDARD_LIBRARY_ONLY = ('core', 'benchmarks')
# Layers that stand on fewer of those below them: what a machine is does not depend on a
# benchmark.
STANDS_ON = {'machine': ('core',)}


def imported_modules(tree):
    """(line, dotted name) of every module an AST imports: `from a.b import c` names a.b,
    and `from hpcbench import cli` names hpcbench.cli."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == 'hpcbench':
                yield from ((node.lineno, f'hpcbench.{alias.name}') for alias in node.names)
            else:
                yield node.lineno, node.module


def layering_faults(package):
    """One line per import that breaks the layers, naming the file, its line, the import and
    the two layers; [] when none does."""
    faults = []
    modules = sorted(package.rglob('*.py'))
    assert modules, f'no modules under {package}'
    for path in modules:
        relative = path.relative_to(package)
        if len(relative.parts) == 1:            # hpcbench/__init__.py: the layer map itself
            continue
        layer = relative.parts[0]
        where = f'src/hpcbench/{relative}'
        if layer not in LAYERS:
            faults.append(f'{where}: in no layer (the layers: {", ".join(LAYERS)})')
            continue
        for line, name in imported_modules(ast.parse(path.read_text(), str(path))):
            parts = name.split('.')
            if parts[0] == 'hpcbench':
                target = parts[1] if len(parts) > 1 else None
                if target not in LAYERS:
                    faults.append(f'{where}:{line}: imports {name}, which is in no layer')
                elif LAYERS.index(target) > LAYERS.index(layer):
                    faults.append(f'{where}:{line}: imports {name}: {layer} may not import '
                                  f'from {target}, a layer above it')
                elif target != layer and target not in STANDS_ON.get(layer, LAYERS):
                    faults.append(f'{where}:{line}: imports {name}: {layer} stands on '
                                  f'{", ".join(STANDS_ON[layer])} alone')
            elif layer in STANDARD_LIBRARY_ONLY and parts[0] not in sys.stdlib_module_names:
                faults.append(f'{where}:{line}: imports {name}: {layer} imports the standard '
                              'library alone')
    return faults


def test_every_import_runs_down_the_layers():
    assert layering_faults(PACKAGE) == []


def test_the_package_is_its_layers_and_nothing_else():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != '__pycache__')
    assert entries == sorted(['__init__.py', *LAYERS])
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / '__init__.py').read_text()))
        assert doc and 'import' in doc, f'{layer}/__init__.py states what it may import'


def test_the_tests_mirror_the_layers():
    tested = {p.name for p in (ROOT / 'tests').iterdir() if p.is_dir()}
    assert set(LAYERS) - {'cli'} <= tested, 'tests/<layer>/ for every layer with modules tested'


def test_an_upward_import_is_named_with_its_file_line_and_layers(tmp_path):
    # A copy of the package where core, the floor, imports the command line, and a
    # benchmark module imports a third-party package.
    copy = tmp_path / 'hpcbench'
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns('__pycache__'))
    paths_module = copy / 'core' / 'paths.py'
    lines = paths_module.read_text().splitlines()
    first_import = next(i for i, line in enumerate(lines) if line.startswith('import '))
    lines.insert(first_import, 'from hpcbench.cli import main')
    paths_module.write_text('\n'.join(lines) + '\n')
    stream = copy / 'benchmarks' / 'stream.py'
    stream.write_text(stream.read_text() + '\n\ndef later():\n    import yaml\n    return yaml\n')
    (copy / 'helpers.py').write_text('')
    (copy / 'misc').mkdir()
    (copy / 'misc' / 'odd.py').write_text('')

    faults = layering_faults(copy)
    assert faults == [
        'src/hpcbench/benchmarks/stream.py:'
        f'{len(stream.read_text().splitlines()) - 1}: imports yaml: benchmarks imports the '
        'standard library alone',
        f'src/hpcbench/core/paths.py:{first_import + 1}: imports hpcbench.cli: core may not '
        'import from cli, a layer above it',
        'src/hpcbench/misc/odd.py: in no layer (the layers: core, benchmarks, machine, results, '
        'stack, rfm, acceptance, report, devtools, cli)',
    ]
    # helpers.py at the top is not a layer's either: it is listed by the layout test.
    entries = sorted(p.name for p in copy.iterdir() if p.name != '__pycache__')
    assert entries != sorted(['__init__.py', *LAYERS])


def test_every_test_module_has_a_name_of_its_own():
    """pytest imports each test module by its file name (tests/ has no packages): two of one
    name in two layers' folders stop the whole collection ("import file mismatch"), which a
    run of one folder never shows."""
    names = {}
    for path in sorted((ROOT / 'tests').rglob('test_*.py')):
        if 'fixtures' not in path.parts:
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}


# How large a room may grow before it is divided (issue 71): a module's lines, the lines a
# function may take, and how many functions may take more.
MAX_MODULE_LINES = 470
LONG_FUNCTION_LINES = 50
MAX_LONG_FUNCTIONS = 15


def test_the_rooms_stay_divided():
    """No module of src/ or reframe-checks/ over MAX_MODULE_LINES lines, and at most
    MAX_LONG_FUNCTIONS functions over LONG_FUNCTION_LINES: a room that holds two things is
    divided by what it holds before it grows further."""
    modules = sorted([*PACKAGE.rglob('*.py'), *(ROOT / 'reframe-checks').glob('*.py')])
    large = [f'{p.relative_to(ROOT)}: {n} lines' for p in modules
             if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert large == []
    long_functions = sorted(
        (node.end_lineno - node.lineno + 1, f'{p.relative_to(ROOT)}:{node.lineno} {node.name}')
        for p in modules for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > LONG_FUNCTION_LINES)
    assert len(long_functions) <= MAX_LONG_FUNCTIONS, long_functions
