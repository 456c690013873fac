"""The package stays readable: no module over 400 lines, no class over 150.

Modules and classes count every line, docstrings included, in every module
of every subpackage. The failure names each module or class over its limit
and its length, so a change that grows one is split, by job, before it
lands; `docs/architecture.md` says which subpackage each job belongs to.
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
