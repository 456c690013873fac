"""The package stays readable: no module over 400 lines, no class over 150; its tests mirror it.

Modules and classes count every line, docstrings included, in every module
of every subpackage. The failure names each module or class over its limit
and its length, so a change that grows one is split, by job, before it
lands; `docs/architecture.md` says which subpackage each job belongs to.

Each test file sits where the module it tests sits: `tests/<subpackage>/
test_<module>.py`. The failure names each test file that names no module
and each test folder that is no subpackage.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "sbert_keras"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 150


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def shown(path):
    """`sbert_keras/<path inside the package>`, as the failure names a file."""
    if path.is_relative_to(PACKAGE):
        return path.relative_to(PACKAGE.parent).as_posix()
    return f"sbert_keras/{path.name}"


def class_lengths(path):
    """`(file:Class, lines)` for every class in `path`.

    A class's length is its lines from the first decorator to the end.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield f"{shown(path)}:{node.name}", node.end_lineno - start + 1


def test_the_package_has_modules():
    assert len(modules()) > 10
    assert any(path.parent != PACKAGE for path in modules()), "the subpackages are counted too"


def too_long(paths):
    """`"file: N lines"` / `"file:Class: N lines"` for each module or class over its limit."""
    found = []
    for path in paths:
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            found.append(f"{shown(path)}: {n} lines (limit {MAX_MODULE_LINES})")
        found += [f"{c}: {k} lines (limit {MAX_CLASS_LINES})" for c, k in class_lengths(path) if k > MAX_CLASS_LINES]
    return found


def test_no_module_over_400_lines_and_no_class_over_150():
    assert not too_long(modules()), "split these by job: " + "; ".join(too_long(modules()))


def test_the_check_names_what_is_too_long(tmp_path):
    big_class = tmp_path / "big.py"
    big_class.write_text('class Big:\n    """Doc."""\n' + "    x = 1\n" * 200)
    big_module = tmp_path / "long.py"
    big_module.write_text("x = 1\n" * 401)
    assert too_long([big_class, big_module]) == [
        "sbert_keras/big.py:Big: 202 lines (limit 150)",
        "sbert_keras/long.py: 401 lines (limit 400)",
    ]


# The tests mirror the package: `tests/<subpackage>/test_<module>.py` (or `test_<module>_<aspect>.py`) tests
# `sbert_keras/<subpackage>/<module>.py`, `tests/test_<module>.py` a module of the package's top level
# (`encoder.py`, `encoding.py`). Two folders of their own: `project/` checks the whole repository (docs,
# layers, packaging), `benchmarks/` the scripts of `benchmarks/`, one test file named after each script.
# The rest are support folders, named here; every test folder is a package (`__init__.py`), so a basename
# may repeat in two folders (pytest's default `prepend` import mode).
TESTS = PACKAGE.parent / "tests"
BENCHMARKS = PACKAGE.parent / "benchmarks"
OWN_RULES = ("project", "benchmarks")
SUPPORT = ("backends", "fixtures", "peer", "saved_models")


def module_named(stem, folder):
    """The module or subpackage of `folder` that `test_<stem>.py` names (`<module>` or `<module>_<aspect>`)."""
    name = stem.removeprefix("test_")
    while name:
        if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
            return name
        name = name.rpartition("_")[0]
    return None


def misplaced_tests(tests=TESTS, package=PACKAGE, benchmarks=BENCHMARKS):
    """`"tests/<path>: why"` for each test file or folder that does not mirror what it tests."""
    found = []
    for path in sorted(tests.rglob("*")):
        relative = path.relative_to(tests)
        shown_path = f"tests/{relative.as_posix()}"
        if relative.parts[0] in SUPPORT or "__pycache__" in relative.parts:
            continue
        if path.is_dir():
            if relative.parts[0] not in OWN_RULES and not (package / relative / "__init__.py").is_file():
                found.append(f"{shown_path}: no subpackage sbert_keras/{relative.as_posix()}")
            if not (path / "__init__.py").is_file():
                found.append(f"{shown_path}: no __init__.py")
            continue
        if not (path.name.startswith("test_") and path.suffix == ".py") or relative.parts[0] == "project":
            continue
        where = benchmarks if relative.parts[0] == "benchmarks" else package.joinpath(*relative.parts[:-1])
        if module_named(path.stem, where) is None:
            named = "/".join(("sbert_keras", *relative.parts[:-1])) if where != benchmarks else "benchmarks"
            found.append(f"{shown_path}: names no module of {named}")
    return found


def test_the_tests_mirror_the_package():
    assert not misplaced_tests(), "move or rename: " + "; ".join(misplaced_tests())
    assert len(list(TESTS.glob("*/*/test_*.py"))) > 3, "the check walks the sub-folders of a subpackage too"


def test_the_mirror_check_names_what_is_misplaced(tmp_path):
    package, tests, benchmarks = tmp_path / "sbert_keras", tmp_path / "tests", tmp_path / "benchmarks"
    for folder in (package / "retrieval", tests / "retrieval", tests / "search", tests / "benchmarks", benchmarks):
        folder.mkdir(parents=True)
    for path in (package / "retrieval" / "__init__.py", package / "retrieval" / "index.py", package / "encoder.py"):
        path.write_text("")
    for path in (tests / "retrieval" / "__init__.py", tests / "benchmarks" / "__init__.py", benchmarks / "recipes.py"):
        path.write_text("")
    for name in ("retrieval/test_index.py", "retrieval/test_index_files.py", "retrieval/test_search.py"):
        (tests / name).write_text("")
    for name in ("test_encoder.py", "test_inference.py", "benchmarks/test_recipes.py", "benchmarks/test_gpu.py"):
        (tests / name).write_text("")
    assert misplaced_tests(tests, package, benchmarks) == [
        "tests/benchmarks/test_gpu.py: names no module of benchmarks",
        "tests/retrieval/test_search.py: names no module of sbert_keras/retrieval",
        "tests/search: no subpackage sbert_keras/search",
        "tests/search: no __init__.py",
        "tests/test_inference.py: names no module of sbert_keras",
    ]
