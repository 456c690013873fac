"""The example notebooks: their `.py` sources, the generated `.ipynb`, and `sbert_keras.cli.notebook_setup`.

Each notebook `notebooks/NN_name.ipynb` is generated from `NN_name.py`
(jupytext percent format) by `notebooks/run_notebooks.py`; the sync test
fails when a source and its committed notebook disagree in any cell's type
or source (outputs and execution counts are ignored). The smoke tests run
each notebook, as generated from its source, top to bottom in a fresh
`python3` kernel with `SBERT_SMOKE=1` and the notebooks folder as working
directory; any cell error fails the test. jupyter_client starts the
`python3` kernel with the interpreter running these tests (it swaps the
kernelspec's `python` for `sys.executable`); `test_kernel_is_this_interpreter`
checks it. `sbert_keras.cli.notebook_setup` (the notebooks' sample data and loaders)
is tested here too, as it exists for the notebooks. The Colab tests check
that each notebook's "Open in Colab" badge and `pip install` line are the
ones `pyproject.toml` (repository, `colab-ref`, `colab-packages`) and
`requirements.txt` (pins) give, so that neither can drift.
"""

import ast
import importlib.util
import pathlib
import re
import shutil
import sys

import numpy as np
import pytest
import tomllib

from conftest import large
from sbert_keras.cli import notebook_setup
from sbert_keras.data import examples
from sbert_keras.data import readers

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT = 600

# notebooks/ is not a package: load its script by path.
_spec = importlib.util.spec_from_file_location("run_notebooks", NOTEBOOKS_DIR / "run_notebooks.py")
run_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebooks)


def execute(notebook):
    run_notebooks.execute(notebook, timeout=CELL_TIMEOUT)
    return notebook


def stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def source_of(name):
    return run_notebooks.read_source(NOTEBOOKS_DIR / name.replace(".ipynb", ".py"))


# === Sources and notebooks ===


def test_four_notebooks_exist_each_with_its_source():
    assert NOTEBOOKS == [
        "01_regression_sts.ipynb",
        "02_triplet.ipynb",
        "03_nli_classification.ipynb",
        "04_search_cluster_export.ipynb",
    ]
    sources = sorted(p.name for p in run_notebooks.source_paths())
    assert sources == [name.replace(".ipynb", ".py") for name in NOTEBOOKS]
    assert not (NOTEBOOKS_DIR / "build_notebooks.py").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_source_and_notebook_agree(name):
    """Regenerate with `python notebooks/run_notebooks.py --no-execute` (or a full run) when this fails."""
    committed = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    assert run_notebooks.differences(source_of(name), committed) == []
    assert [c.id for c in committed.cells] == [c.id for c in source_of(name).cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_setup_cell_sets_the_environment_before_tensorflow_is_imported(name):
    setup = next(c for c in source_of(name).cells if c.cell_type == "code").source.split("\n")
    first_import = next(
        i for i, line in enumerate(setup) if re.match(r"(import|from) (keras|tensorflow|sbert_keras)\b", line)
    )
    for variable in ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL"):
        assert any(f'os.environ.setdefault("{variable}"' in line for line in setup[:first_import]), variable
    # The set-up helpers (`sbert_keras.cli.notebook_setup`, importable as `sbert_keras.examples`).
    assert re.search(r"from sbert_keras\.(examples|cli\.notebook_setup) import", "\n".join(setup))


def test_sync_check_names_each_disagreement():
    source = source_of(NOTEBOOKS[0])
    notebook = nbformat.from_dict(source)
    assert run_notebooks.differences(source, notebook) == []
    code = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    notebook.cells[code].source += "\nprint('edited in the notebook only')"
    notebook.cells[0] = nbformat.v4.new_code_cell(notebook.cells[0].source)  # markdown -> code
    notebook.cells.pop()
    found = run_notebooks.differences(source, notebook)
    assert [line.split(" (")[0] for line in found[:2]] == ["cell 1", f"cell {code + 1}"]
    assert "cells in the source" in found[-1]


def test_outputs_and_execution_counts_do_not_count():
    source = source_of(NOTEBOOKS[0])
    notebook = nbformat.from_dict(source)
    for count, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        cell.execution_count = count + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x\n")]
    assert run_notebooks.differences(source, notebook) == []


def test_check_command_exits_non_zero_on_a_stale_notebook(tmp_path, monkeypatch, capsys):
    for name in ("02_triplet.py", "02_triplet.ipynb"):
        (tmp_path / name).write_text((NOTEBOOKS_DIR / name).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(run_notebooks, "HERE", tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        run_notebooks.main(["--check"])
    assert exit_info.value.code == 0
    source = tmp_path / "02_triplet.py"
    source.write_text(source.read_text(encoding="utf-8").replace("## Introduction", "## Overview"), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        run_notebooks.main(["--check"])
    assert exit_info.value.code == 1
    assert "02_triplet.ipynb: cell 2 (markdown): '## Overview" in capsys.readouterr().out


# === The Colab set-up: badge and install from pyproject.toml ===


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def settings_root(tmp_path, replace=()):
    """A folder with copies of pyproject.toml and requirements.txt, `replace`'s (old, new) texts applied."""
    shutil.copy(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    return tmp_path


def test_colab_requirements_are_the_repository_at_the_ref_and_the_pinned_packages():
    project = pyproject()
    repository = project["project"]["urls"]["Repository"]
    ref = project["tool"]["sbert_keras"]["colab-ref"]
    pins = dict(
        line.split("==")
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line
    )
    assert run_notebooks.colab_settings() == (
        repository,
        ref,
        [
            f"sbert_keras @ git+{repository}@{ref}",
            f"keras-hub=={pins['keras-hub']}",
            f"tensorflow-text=={pins['tensorflow-text']}",
            next(p for p in project["tool"]["sbert_keras"]["colab-packages"] if p.startswith("tensorflow-datasets==")),
        ],
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_colab_badge_and_install_follow_pyproject(name):
    stem = name.removesuffix(".ipynb")
    for notebook in (source_of(name), nbformat.read(NOTEBOOKS_DIR / name, as_version=4)):
        assert run_notebooks.colab_differences(notebook, stem) == []
    project = pyproject()
    owner_repo = project["project"]["urls"]["Repository"].removeprefix("https://github.com/")
    ref = project["tool"]["sbert_keras"]["colab-ref"]
    title = source_of(name).cells[0].source
    links = re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", title)
    assert links == [f"https://colab.research.google.com/github/{owner_repo}/blob/{ref}/notebooks/{name}"]
    assert title.index("Open In Colab") < title.index("**Library:**")  # at the top, under the title


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_only_colab_installs_and_nothing_by_a_bare_package_name(name):
    setup = next(c for c in source_of(name).cells if c.cell_type == "code").source
    colab_branch = next(
        n for n in ast.walk(ast.parse(setup)) if isinstance(n, ast.If) and "IN_COLAB" in ast.unparse(n.test)
    )
    assert "pip" in ast.unparse(colab_branch) and setup.count('"install"') == 1
    installed = run_notebooks.installed_on_colab(setup)
    assert installed[0].startswith("sbert_keras @ git+https://github.com/")
    assert all("==" in package for package in installed[1:])
    text = (NOTEBOOKS_DIR / name.replace(".ipynb", ".py")).read_text(encoding="utf-8").lower()
    assert "placeholder" not in text and "pip install sbert_keras" not in text


def test_installed_on_colab_reads_the_pip_list():
    code = (
        'if x:\n    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "a==1", "b @ git+u@v"], check=True)'
    )
    assert run_notebooks.installed_on_colab(code) == ["a==1", "b @ git+u@v"]
    assert run_notebooks.installed_on_colab("print('install')") is None


def test_a_new_colab_ref_makes_check_and_generation_fail_naming_the_expected_text(tmp_path, monkeypatch, capsys):
    root = settings_root(tmp_path, [('colab-ref = "v0.1.0"', 'colab-ref = "v9.9.9"')])
    monkeypatch.setattr(run_notebooks, "ROOT", root)
    notebook_before = (NOTEBOOKS_DIR / "01_regression_sts.ipynb").read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        run_notebooks.main(["--check", "--names", "01"])
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert "blob/v9.9.9/notebooks/01_regression_sts.ipynb" in out
    assert "sbert_keras @ git+https://github.com/sbert-keras/sbert-keras@v9.9.9" in out
    for command in (["--no-execute", "--names", "01"], ["--smoke", "--names", "01"]):
        with pytest.raises(SystemExit, match="the Colab set-up differs from pyproject.toml"):
            run_notebooks.main(command)
    assert (NOTEBOOKS_DIR / "01_regression_sts.ipynb").read_bytes() == notebook_before


def test_colab_packages_need_a_pin(tmp_path):
    root = settings_root(tmp_path, [('"keras-hub", ', '"keras-hub", "not-pinned-anywhere", ')])
    with pytest.raises(ValueError, match="'not-pinned-anywhere', which requirements.txt does not pin"):
        run_notebooks.colab_settings(root)


def test_the_badge_needs_a_github_repository(tmp_path):
    root = settings_root(
        tmp_path,
        [('Repository = "https://github.com/sbert-keras/sbert-keras"', 'Repository = "https://example.org/x"')],
    )
    with pytest.raises(ValueError, match="must be https://github.com/<owner>/<repo>"):
        run_notebooks.colab_badge("01_regression_sts", root)


# === The percent-format converter ===

PERCENT = """\
# Header comment: not a cell.
# ruff: noqa: E402

# %% [markdown]
# # Title
#
# Text with a \\ backslash and \"\"\"quotes\"\"\".
#     indented line

# %%
import os

x = 1


# %%
print(x)  # two code cells in a row stay two cells
# %% [markdown]
# Last.
"""


def test_read_source_splits_cells_at_the_markers(tmp_path):
    path = tmp_path / "07_example.py"
    path.write_text(PERCENT, encoding="utf-8")
    notebook = run_notebooks.read_source(path)
    assert [(c.cell_type, c.source, c.id) for c in notebook.cells] == [
        ("markdown", '# Title\n\nText with a \\ backslash and """quotes""".\n    indented line', "07-00"),
        ("code", "import os\n\nx = 1", "07-01"),
        ("code", "print(x)  # two code cells in a row stay two cells", "07-02"),
        ("markdown", "Last.", "07-03"),
    ]
    assert all(c.cell_type == "markdown" or (c.outputs == [] and c.execution_count is None) for c in notebook.cells)
    compile(PERCENT, str(path), "exec")  # the source is plain Python


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("# %% [markdown]\n# fine\nnot a comment\n", 3, "expected a '# ' comment line in the markdown cell"),
        ("# header\nimport os\n# %%\nx = 1\n", 2, "expected a '# ' comment line in the header"),
        ("# %%\nx = 1\n# %% [raw]\n", 3, "expected '# %%' or '# %% \\[markdown\\]', found '# %% \\[raw\\]'"),
    ],
)
def test_read_source_names_the_file_and_line_of_a_bad_line(tmp_path, text, line, message):
    path = tmp_path / "08_bad.py"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"08_bad\.py, line {line}: {message}"):
        run_notebooks.read_source(path)


def test_keep_outputs_survives_formatting_but_not_a_code_change():
    saved = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Old title", id="09-00"),
            nbformat.v4.new_code_cell("x = [1,2]\nprint( x )", id="09-01"),
            nbformat.v4.new_code_cell("print(1)", id="09-02"),
        ],
        metadata={"language_info": {"name": "python", "version": "3.11.7"}},
    )
    for count, cell in enumerate(saved.cells[1:], start=1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {count}\n")]
    source = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# New title", id="09-00"),
            nbformat.v4.new_code_cell("# a new comment\nx = [1, 2]\nprint(x)", id="09-01"),
            nbformat.v4.new_code_cell("print(2)", id="09-02"),
        ]
    )
    assert run_notebooks.keep_outputs(source, saved) == ["09-02"]
    assert [c.source for c in source.cells] == ["# New title", "# a new comment\nx = [1, 2]\nprint(x)", "print(2)"]
    assert stdout_of(source.cells[1]) == "out 1\n" and source.cells[1].execution_count == 1
    assert source.cells[2].outputs == [] and source.cells[2].execution_count is None
    assert source.metadata["language_info"]["version"] == "3.11.7"


def test_tidy_outputs_merges_streams_and_drops_tensorflow_logs():
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output(
            "stream",
            name="stderr",
            text=("I0000 00:00:1795342607.448359   27366 port.cc:153] oneDNN custom operations are on.\n"),
        ),
        nbformat.v4.new_output("stream", name="stdout", text="before\n"),
        nbformat.v4.new_output("stream", name="stderr", text="\rencode:  50%|#    | 1/2"),
        nbformat.v4.new_output("stream", name="stderr", text="\rencode: 100%|#####| 2/2\n"),
        nbformat.v4.new_output("stream", name="stdout", text="after\n"),
        nbformat.v4.new_output("stream", name="stderr", text="E0000 00:00:1.5  1 cuda.cc:52] x\n"),
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    outputs = run_notebooks.tidy_outputs(notebook).cells[0].outputs
    assert [(o.name, o.text) for o in outputs] == [
        ("stderr", "encode: 100%|#####| 2/2\n"),
        ("stdout", "before\nafter\n"),
    ]


# === sbert_keras.cli.notebook_setup ===


def test_pick_follows_sbert_smoke(monkeypatch):
    monkeypatch.delenv("SBERT_SMOKE", raising=False)
    assert (notebook_setup.pick(1_000, 32), notebook_setup.smoke_run()) == (1_000, False)
    monkeypatch.setenv("SBERT_SMOKE", "1")
    assert (notebook_setup.pick(1_000, 32), notebook_setup.smoke_run()) == (32, True)
    monkeypatch.setenv("SBERT_SMOKE", "0")
    assert notebook_setup.pick(None, 32) is None


def test_head_slices_every_column_and_keeps_the_rest():
    pairs = examples.NLIPairs(["a", "b", "c"], ["x", "y", "z"], np.array([0, 1, 2], "int32"), 5)
    first = notebook_setup.head(pairs, 2)
    assert (first.sentence_a, first.sentence_b, first.labels.tolist(), first.num_skipped) == (
        ["a", "b"],
        ["x", "y"],
        [0, 1],
        5,
    )
    assert len(notebook_setup.head(pairs, None)) == 3
    triplets = notebook_setup.head(examples.Triplets(["a", "b"], ["p", "q"], ["n", "m"]), 1)
    assert triplets.as_tuple() == (["a"], ["p"], ["n"])


def test_loaders_fall_back_on_the_sample(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ../shared or ../../shared here
    monkeypatch.setattr(notebook_setup, "IN_COLAB", False)
    assert notebook_setup.shared_data_dir() is None
    assert notebook_setup.data_source() == "the built-in SAMPLE"
    sts = notebook_setup.load_sts("dev")
    assert len(sts) == 3 * len(notebook_setup.SAMPLE)
    np.testing.assert_allclose(sts.labels[:3], notebook_setup.SAMPLE_SCORES)
    assert (sts.sentence_a[0], sts.sentence_b[2]) == (notebook_setup.SAMPLE[0][0], notebook_setup.SAMPLE[0][3])
    nli = notebook_setup.load_nli("train", limit=5)
    assert len(nli) == 5 and nli.labels.tolist() == [0, 1, 2, 0, 1]
    assert len(notebook_setup.load_nli("test")) == 3 * len(notebook_setup.SAMPLE)


def test_loaders_read_the_shared_files(tmp_path, monkeypatch):
    (tmp_path / "shared/data/stsbenchmark").mkdir(parents=True)
    (tmp_path / "shared/data/snli").mkdir(parents=True)
    (tmp_path / "shared/data/stsbenchmark/sts-dev.csv").write_text(
        "g\tf\t2012\t0001\t4.5\tA man sings.\tA man is singing.\n", encoding="utf-8"
    )
    (tmp_path / "shared/data/snli/snli_1.0_test.jsonl").write_text(
        '{"gold_label": "neutral", "sentence1": "A dog runs.", "sentence2": "A dog plays."}\n', encoding="utf-8"
    )
    notebooks = tmp_path / "repo/notebooks"
    notebooks.mkdir(parents=True)
    monkeypatch.chdir(notebooks)
    monkeypatch.setattr(notebook_setup, "IN_COLAB", False)
    assert notebook_setup.data_source() == "../../shared/data"
    sts = notebook_setup.load_sts("dev")
    assert sts.sentence_b == ["A man is singing."]
    np.testing.assert_allclose(sts.labels, [4.5])
    assert notebook_setup.load_nli("test").labels.tolist() == [1]


def test_loaders_use_tfds_on_colab(monkeypatch):
    calls = []
    monkeypatch.setattr(notebook_setup, "IN_COLAB", True)
    monkeypatch.setattr(readers, "load_tfds_stsb", lambda split: calls.append(split) or "pairs")
    assert notebook_setup.load_sts("dev") == "pairs" and calls == ["validation"]
    assert (notebook_setup.example_model(), notebook_setup.data_source()) == ("roberta_base_en", "Colab/tfds")


@pytest.mark.parametrize("loader, split", [("load_sts", "validation"), ("load_nli", "dev")])
def test_loaders_name_a_bad_split(loader, split):
    with pytest.raises(ValueError, match=rf"`split` must be .* received '{split}'"):
        getattr(notebook_setup, loader)(split)


# === Running the notebooks ===


def test_kernel_is_this_interpreter(monkeypatch):
    monkeypatch.setenv("SBERT_SMOKE", "1")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import os, sys; print(sys.executable); print(os.getcwd()); print(os.environ['SBERT_SMOKE'])"
        )
    ]
    lines = stdout_of(execute(notebook).cells[0]).split()
    assert lines == [sys.executable, str(NOTEBOOKS_DIR), "1"]


def test_kernel_imports_this_checkout():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import sbert_keras; print(sbert_keras.__file__)")]
    assert stdout_of(execute(notebook).cells[0]).strip() == str(ROOT / "sbert_keras" / "__init__.py")


# The training notebooks are large; the search, clustering and export notebook runs in every `make test`.
@pytest.mark.parametrize("name", [name if name.startswith("04_") else large(name) for name in NOTEBOOKS])
def test_notebook_runs_in_smoke_mode(name, monkeypatch):
    monkeypatch.setenv("SBERT_SMOKE", "1")
    notebook = execute(source_of(name))  # raises nbclient.exceptions.CellExecutionError on any error
    setup = stdout_of(next(c for c in notebook.cells if c.cell_type == "code"))
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
