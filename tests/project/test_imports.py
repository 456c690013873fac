"""The package's import rule, checked on the source by an AST scan.

The subpackages form layers; a module imports its own subpackage and lower
layers only, never a higher layer or a sibling of its own layer:

    utils                              imports nothing from the package
    compat
    model, data                        siblings
    runtime, checkpoints, retrieval    siblings
    facade                             sbert_keras/encoder.py, sbert_keras/encoding.py
    losses, evaluation                 siblings
    training
    integrations
    cli

`sbert_keras/__init__.py` (the public names, imported lazily) may import
anything, and nothing imports it back. Three more rules keep the graph
honest:

- no `sbert_keras` import inside a function body: an import hidden in a
  function is how a cycle or an upward dependency goes unseen (imports of
  optional third-party libraries, such as faiss, pyarrow or Apache Beam,
  inside functions are fine);
- no import cycle between the modules' top-level imports;
- every subpackage's `__init__.py` has a docstring naming what it owns:
  each of its modules and subpackages.

`docs/architecture.md` explains the layers. keras-hub enforces its own
import rule the same way (`keras_hub/src/tests/import_test.py`). The
checker's own tests (`test_the_checker_*`) run it on tiny synthetic
packages, so the rule cannot pass by finding nothing.
"""

import ast
import dataclasses
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "sbert_keras"

# Lowest first; the groups of one tuple are siblings.
LAYERS = (
    ("utils",),
    ("compat",),
    ("model", "data"),
    ("runtime", "checkpoints", "retrieval"),
    ("facade",),
    ("losses", "evaluation"),
    ("training",),
    ("integrations",),
    ("cli",),
)
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}
FACADE = ("encoder", "encoding")
ROOT_GROUP = "the package root"


@dataclasses.dataclass(frozen=True)
class Import:
    """One import of a package module, as written in a file.

    Args:
        path: pathlib.Path. The importing file.
        line: int. Its line number.
        source: str. The importing module (`sbert_keras.runtime.engine`).
        target: str. The imported module, after resolution
            (`from sbert_keras.model import pooling` -> `sbert_keras.model.pooling`).
        in_function: bool. Whether the import sits in a function body.
    """

    path: pathlib.Path
    line: int
    source: str
    target: str
    in_function: bool

    def where(self, package_dir):
        return f"{self.path.relative_to(package_dir.parent).as_posix()}:{self.line}"


def module_name(path, package_dir):
    """`sbert_keras/runtime/engine.py` -> `sbert_keras.runtime.engine`; a package's `__init__` -> the package."""
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir):
    """`{module name: path}` of every `.py` file under `package_dir`."""
    return {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}


def group_of(module, package):
    """The layer group of a module: its subpackage, `"facade"`, or the root."""
    parts = module.split(".")
    if parts == [package]:
        return ROOT_GROUP
    return "facade" if parts[1] in FACADE and len(parts) == 2 else parts[1]


def _is_package(module, modules):
    return modules.get(module) is not None and modules[module].name == "__init__.py"


def _resolve_from(node, source, modules):
    """The absolute module of an `ImportFrom`, relative imports included."""
    if not node.level:
        return node.module or ""
    base = source.split(".")
    if not _is_package(source, modules):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _literal_import_module(node):
    """The string of `importlib.import_module("...")` / `__import__("...")`, or None."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


class _Scanner(ast.NodeVisitor):
    """Collects `(line, module as written, in_function[, base])` for every import in a tree.

    `base` (for `from base import name` only) is what the import means when
    `base.name` is not a module but a name defined in `base`.
    """

    def __init__(self, source, modules):
        self.source = source
        self.modules = modules
        self.depth = 0
        self.found = []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node):
        self.found += [(node.lineno, alias.name, self.depth > 0) for alias in node.names]

    def visit_ImportFrom(self, node):
        base = _resolve_from(node, self.source, self.modules)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            self.found.append((node.lineno, submodule if alias.name != "*" else base, self.depth > 0, base))

    def visit_Call(self, node):
        literal = _literal_import_module(node)
        if literal:
            self.found.append((node.lineno, literal, self.depth > 0))
        self.generic_visit(node)


def scan(package_dir):
    """Every import of a module of the package found under `package_dir`, as `Import`s.

    `from pkg import name` is an import of the submodule `pkg.name` when
    that module exists, else of `pkg`.

    Args:
        package_dir: pathlib.Path. The package folder (`sbert_keras/`).
    """
    package = package_dir.name
    modules = package_modules(package_dir)
    imports = []
    for source, path in modules.items():
        scanner = _Scanner(source, modules)
        scanner.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for line, written, in_function, *base in scanner.found:
            if base and written not in modules:
                written = base[0]
            if written != package and not written.startswith(package + "."):
                continue
            target = written
            while target not in modules and "." in target:  # no such module: its closest existing parent
                target = target.rpartition(".")[0]
            imports.append(Import(path, line, source, target, in_function))
    return imports


def layer_violations(package_dir):
    """`file:line imports X (a -> b: why)` for each import that breaks the layer rule."""
    package = package_dir.name
    found = []
    for imp in scan(package_dir):
        source, target = group_of(imp.source, package), group_of(imp.target, package)
        if source == ROOT_GROUP or source == target:
            continue
        why = None
        if source not in RANK:
            why = f"{source} is not in the layer table"
        elif target == ROOT_GROUP:
            why = "the package root imports everything"
        elif target not in RANK:
            why = f"{target} is not in the layer table"
        elif RANK[target] > RANK[source]:
            why = "upward"
        elif RANK[target] == RANK[source]:
            why = "sibling"
        if why:
            found.append(f"{imp.where(package_dir)} imports {imp.target} (layer {source} -> layer {target}: {why})")
    return sorted(set(found))


def function_level_imports(package_dir):
    """`file:line imports X` for each package import inside a function body (the root `__init__` aside)."""
    package = package_dir.name
    return sorted(
        {
            f"{imp.where(package_dir)} imports {imp.target} inside a function"
            for imp in scan(package_dir)
            if imp.in_function and imp.source != package
        }
    )


def import_graph(package_dir):
    """`{module: set of modules}` of the imports that run when each module is first imported.

    Top-level imports only (module and class bodies, not functions). An
    import of `a.b.c` also runs the `__init__` of `a.b` (and of `a`), so
    those packages are edges too, except the importer's own packages and
    the root, which are already being imported.
    """
    package = package_dir.name
    graph = {module: set() for module in package_modules(package_dir)}
    for imp in scan(package_dir):
        if imp.in_function or imp.target == imp.source:
            continue
        targets = {imp.target}
        parts = imp.target.split(".")
        targets |= {".".join(parts[:n]) for n in range(2, len(parts))}
        own = {".".join(imp.source.split(".")[:n]) for n in range(1, imp.source.count(".") + 2)}
        graph[imp.source] |= {t for t in targets if t != package and (t not in own or t == imp.target)}
    return graph


def import_cycles(graph):
    """One `a -> b -> ... -> a` path per cycle that a depth-first search meets, each from its first module by name."""
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                loop = stack[stack.index(nxt) :]
                start = loop.index(min(loop))
                loop = loop[start:] + loop[:start]
                cycles.append(" -> ".join(loop + loop[:1]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return sorted(set(cycles))


def undocumented_subpackages(package_dir):
    """`pkg/__init__.py: why` for each subpackage whose docstring is missing or leaves out one of its modules."""
    found = []
    for init in sorted(package_dir.rglob("__init__.py")):
        if init.parent == package_dir:
            continue
        where = init.relative_to(package_dir.parent).as_posix()
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if not doc or len(doc.split()) < 5:
            found.append(f"{where}: no docstring saying what the subpackage owns")
            continue
        owned = sorted(
            [p.stem for p in init.parent.glob("*.py") if not p.stem.startswith("__")]
            + [p.parent.name for p in init.parent.glob("*/__init__.py")]
        )
        missing = [name for name in owned if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", doc)]
        if missing:
            found.append(f"{where}: the docstring does not name {', '.join(missing)}")
    return found


# === The package ===


def test_the_scan_finds_the_package_imports():
    imports = scan(PACKAGE)
    assert len(package_modules(PACKAGE)) > 40
    assert len([i for i in imports if not i.in_function]) > 100
    assert "sbert_keras.runtime.engine" in import_graph(PACKAGE)["sbert_keras.encoding"]


def test_every_subpackage_is_in_the_layer_table():
    groups = {group_of(m, PACKAGE.name) for m in package_modules(PACKAGE)} - {ROOT_GROUP}
    assert groups <= set(RANK), f"place these in LAYERS and docs/architecture.md: {sorted(groups - set(RANK))}"


def test_no_upward_or_sibling_import():
    found = layer_violations(PACKAGE)
    assert not found, "imports against the layers (docs/architecture.md):\n" + "\n".join(found)


def test_no_package_import_inside_a_function():
    found = function_level_imports(PACKAGE)
    assert not found, "move these to the top of the module:\n" + "\n".join(found)


def test_no_import_cycle():
    cycles = import_cycles(import_graph(PACKAGE))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def keras_object_modules(package_dir):
    """`(modules that call register_keras_serializable, the root's _KERAS_OBJECT_MODULES)`, relative to the package."""
    calling = set()
    for module, path in package_modules(package_dir).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            if getattr(func, "attr", getattr(func, "id", None)) == "register_keras_serializable":
                calling.add(module.partition(".")[2])
    listed = ()
    for node in ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8")).body:
        names = [getattr(target, "id", None) for target in getattr(node, "targets", ())]
        if "_KERAS_OBJECT_MODULES" in names:
            listed = ast.literal_eval(node.value)
    return calling, set(listed)


def test_every_module_with_keras_objects_is_imported_by_the_root():
    # Registration must not depend on which names are public: the root imports each of these.
    calling, listed = keras_object_modules(PACKAGE)
    assert len(calling) > 10
    assert calling == listed, f"_KERAS_OBJECT_MODULES: add {sorted(calling - listed)}, drop {sorted(listed - calling)}"


def test_every_subpackage_says_what_it_owns():
    found = undocumented_subpackages(PACKAGE)
    assert not found, "\n".join(found)


# === The checker itself, on synthetic packages ===


def write_package(root, files):
    """Writes `{relative path: source}` under `root/sbert_keras` and returns that folder."""
    package = root / "sbert_keras"
    for relative, source in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return package


LAYERED = {
    "__init__.py": '"""Root."""\nfrom sbert_keras.cli import main\n',
    "utils/__init__.py": '"""Plain helpers: defaults and checks, nothing else."""\n',
    "utils/defaults.py": "X = 1\n",
    "model/__init__.py": '"""Layers of the encoder: pooling and more."""\n',
    "model/pooling.py": "from sbert_keras.utils import defaults\n",
    "data/__init__.py": '"""Readers of the files: readers and more."""\n',
    "data/readers.py": "from sbert_keras.utils.defaults import X\n",
    "runtime/__init__.py": '"""Inference: the engine and more."""\n',
    "runtime/engine.py": "from sbert_keras.model import pooling\nfrom . import engine as _self\n",
    "encoder.py": "from sbert_keras.runtime.engine import *\nfrom sbert_keras import encoding\n",
    "encoding.py": "import sbert_keras.model.pooling\n",
    "cli/__init__.py": '"""Command line: main and more."""\n',
    "cli/main.py": "from sbert_keras.encoder import *\n",
}


def test_the_checker_passes_a_layered_package(tmp_path):
    package = write_package(tmp_path, LAYERED)
    assert layer_violations(package) == []
    assert function_level_imports(package) == []
    assert import_cycles(import_graph(package)) == []
    assert import_graph(package)["sbert_keras.encoder"] == {
        "sbert_keras.runtime.engine",
        "sbert_keras.runtime",
        "sbert_keras.encoding",
    }


def test_the_checker_names_upward_and_sibling_imports(tmp_path):
    files = dict(LAYERED)
    files["model/pooling.py"] = (
        "from sbert_keras.utils import defaults\nfrom sbert_keras import encoder\nfrom ..runtime import engine\n"
    )
    files["data/readers.py"] = "\n\nfrom sbert_keras.model.pooling import Pool\n"
    files["utils/defaults.py"] = "import importlib\nimportlib.import_module('sbert_keras.cli.main')\n"
    files["runtime/engine.py"] = "from sbert_keras import Encoder\n"
    package = write_package(tmp_path, files)
    assert layer_violations(package) == [
        "sbert_keras/data/readers.py:3 imports sbert_keras.model.pooling (layer data -> layer model: sibling)",
        "sbert_keras/model/pooling.py:2 imports sbert_keras.encoder (layer model -> layer facade: upward)",
        "sbert_keras/model/pooling.py:3 imports sbert_keras.runtime.engine (layer model -> layer runtime: upward)",
        "sbert_keras/runtime/engine.py:1 imports sbert_keras (layer runtime -> layer the package root: "
        "the package root imports everything)",
        "sbert_keras/utils/defaults.py:2 imports sbert_keras.cli.main (layer utils -> layer cli: upward)",
    ]


def test_the_checker_names_a_group_missing_from_the_table(tmp_path):
    files = dict(LAYERED, **{"extras/__init__.py": '"""Extras: tools."""\nfrom sbert_keras.utils import defaults\n'})
    package = write_package(tmp_path, files)
    assert layer_violations(package) == [
        "sbert_keras/extras/__init__.py:2 imports sbert_keras.utils.defaults "
        "(layer extras -> layer utils: extras is not in the layer table)"
    ]


def test_the_checker_finds_imports_inside_functions(tmp_path):
    files = dict(LAYERED)
    files["runtime/engine.py"] = (
        "import numpy\n"
        "class Engine:\n"
        "    def run(self):\n"
        "        def inner():\n"
        "            from sbert_keras.model import pooling\n"
        "        import faiss\n"
        "        f = lambda: __import__('sbert_keras.utils.defaults')\n"
    )
    package = write_package(tmp_path, files)
    assert function_level_imports(package) == [
        "sbert_keras/runtime/engine.py:5 imports sbert_keras.model.pooling inside a function",
        "sbert_keras/runtime/engine.py:7 imports sbert_keras.utils.defaults inside a function",
    ]
    assert layer_violations(package) == []


def test_the_checker_finds_a_cycle(tmp_path):
    files = dict(LAYERED)
    files["runtime/engine.py"] = "from sbert_keras.runtime.routes import fused\n"
    files["runtime/routes/__init__.py"] = '"""Routes: fused."""\n'
    files["runtime/routes/fused.py"] = "from sbert_keras.runtime import batching\n"
    files["runtime/batching.py"] = (
        "def f():\n    from sbert_keras.runtime import engine\nimport sbert_keras.runtime.engine\n"
    )
    package = write_package(tmp_path, files)
    assert import_cycles(import_graph(package)) == [
        "sbert_keras.runtime.batching -> sbert_keras.runtime.engine -> sbert_keras.runtime.routes.fused "
        "-> sbert_keras.runtime.batching"
    ]


def test_the_checker_finds_a_cycle_through_a_package_init(tmp_path):
    files = dict(LAYERED)
    files["model/__init__.py"] = '"""Layers: pooling."""\nfrom sbert_keras.model.pooling import *\n'
    files["model/pooling.py"] = "from sbert_keras.data import readers\n"
    files["data/__init__.py"] = '"""Readers: readers."""\nfrom sbert_keras.model import pooling\n'
    package = write_package(tmp_path, files)
    assert import_cycles(import_graph(package)) == [
        "sbert_keras.data -> sbert_keras.model -> sbert_keras.model.pooling -> sbert_keras.data",
        "sbert_keras.data -> sbert_keras.model.pooling -> sbert_keras.data",
    ]


@pytest.mark.parametrize(
    "docstring, expected",
    [
        ('"""Layers of the encoder: `pooling` and `similarity`."""', []),
        (
            '"""Layers of the encoder: pooling."""',
            ["sbert_keras/model/__init__.py: the docstring does not name similarity"],
        ),
        ("", ["sbert_keras/model/__init__.py: no docstring saying what the subpackage owns"]),
    ],
)
def test_the_checker_reads_subpackage_docstrings(tmp_path, docstring, expected):
    files = {k: v for k, v in LAYERED.items() if k.startswith("model/")}
    files["model/__init__.py"] = docstring + "\n"
    files["model/similarity.py"] = ""
    package = write_package(tmp_path, files)
    assert undocumented_subpackages(package) == expected
