"""Executes the example notebooks in smoke mode (`SBERT_SMOKE=1`).

Each notebook runs top to bottom in a fresh `python3` kernel, with the
notebooks folder as working directory; any cell error fails the test. The
outputs are not written back. jupyter_client starts the `python3` kernel
with the interpreter running these tests (it swaps the kernelspec's
`python` for `sys.executable`); `test_kernel_is_this_interpreter` checks it.
"""

import pathlib
import sys

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT = 600


def execute(notebook):
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()
    return notebook


def stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"
                   and o.name == "stdout")


def test_four_notebooks_exist():
    assert NOTEBOOKS == [
        "01_regression_sts.ipynb",
        "02_triplet.ipynb",
        "03_nli_classification.ipynb",
        "04_search_cluster_export.ipynb",
    ]


@pytest.mark.slow
def test_kernel_is_this_interpreter(monkeypatch):
    monkeypatch.setenv("SBERT_SMOKE", "1")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "import os, sys; print(sys.executable); print(os.getcwd()); print(os.environ['SBERT_SMOKE'])")]
    lines = stdout_of(execute(notebook).cells[0]).split()
    assert lines == [sys.executable, str(NOTEBOOKS_DIR), "1"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_smoke_mode(name, monkeypatch):
    monkeypatch.setenv("SBERT_SMOKE", "1")
    notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    execute(notebook)  # raises nbclient.exceptions.CellExecutionError on any error
    setup = stdout_of(notebook.cells[next(i for i, c in enumerate(notebook.cells)
                                          if c.cell_type == "code")])
    assert "smoke run: True" in setup


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_keeps_a_full_run(name):
    """Saved by `notebooks/run_notebooks.py`: every cell ran, no error, plots kept."""
    notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert "smoke run: False" in stdout_of(code[0])


def test_tidy_outputs_merges_streams_and_drops_tensorflow_logs():
    sys.path.insert(0, str(NOTEBOOKS_DIR))
    from run_notebooks import tidy_outputs

    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text=(
            "I0000 00:00:1795342607.448359   27366 port.cc:153] oneDNN custom operations are on.\n")),
        nbformat.v4.new_output("stream", name="stdout", text="before\n"),
        nbformat.v4.new_output("stream", name="stderr", text="\rencode:  50%|#    | 1/2"),
        nbformat.v4.new_output("stream", name="stderr", text="\rencode: 100%|#####| 2/2\n"),
        nbformat.v4.new_output("stream", name="stdout", text="after\n"),
        nbformat.v4.new_output("stream", name="stderr", text="E0000 00:00:1.5  1 cuda.cc:52] x\n"),
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    outputs = tidy_outputs(notebook).cells[0].outputs
    assert [(o.name, o.text) for o in outputs] == [
        ("stderr", "encode: 100%|#####| 2/2\n"), ("stdout", "before\nafter\n")]
