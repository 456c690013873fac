"""Generates the example notebooks from their `.py` sources, runs them and saves their outputs.

    .venv/bin/python notebooks/run_notebooks.py                  # generate and run all four
    .venv/bin/python notebooks/run_notebooks.py --names 01 03    # a selection
    .venv/bin/python notebooks/run_notebooks.py --smoke          # SBERT_SMOKE=1, nothing saved
    .venv/bin/python notebooks/run_notebooks.py --no-execute     # sources -> .ipynb, outputs kept
    .venv/bin/python notebooks/run_notebooks.py --check          # exit 1 if a source and its notebook differ,
                                                                 # or its Colab link or install differs from pyproject

Each notebook `NN_name.ipynb` is written from `NN_name.py`, in jupytext's
"percent" format: `# %%` starts a code cell and `# %% [markdown]` a
markdown cell whose lines are comments (`# text`, `#` for an empty line).
Comment lines before the first marker are the file's header, not a cell.
The percent format, rather than keras-io's `tutobooks` layout (markdown in
triple-quoted strings), because its cells are delimited explicitly (two
code cells in a row stay two cells), markdown needs no escaping of
backslashes or quotes, and editors (VS Code, PyCharm, Spyder) run its cells
as they are. `read_source` below is the whole converter; jupytext itself
would be a new dependency for these thirty lines, and `jupytext --to
ipynb` reads the same files.

Each notebook runs in a fresh `python3` kernel started with this
interpreter (jupyter_client replaces the kernelspec's `python` with
`sys.executable`, so the venv that runs this script is the kernel's), with
the notebooks folder as working directory. `--no-execute` writes the
sources into the notebooks without running them, for a change of prose,
comments or formatting: every code cell whose syntax tree is unchanged
keeps its saved outputs, any other code cell loses them, and the script
names those cells.

The Colab set-up has one source of truth, `pyproject.toml`: the repository
(`[project.urls] Repository`), the git ref (`[tool.sbert_keras] colab-ref`)
and the packages Colab lacks (`colab-packages`, pinned as in
`requirements.txt`). Each notebook opens with an "Open in Colab" badge for
`<repository>/blob/<colab-ref>/notebooks/NN_name.ipynb`, and its set-up cell
runs `pip install "sbert_keras @ git+<repository>@<colab-ref>" <packages>`.
The sources spell both out, so that they read and run as they are;
`--check`, generating a notebook and `tests/project/test_notebooks.py` fail where a
source's badge or install differs from what `colab_badge` and
`colab_requirements` derive, and name the expected text.
"""

import argparse
import ast
import os
import pathlib
import re
import sys
import time
import tomllib

import nbclient
import nbformat

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent  # pyproject.toml and requirements.txt
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
MARKER = re.compile(r"# %%(?P<rest>.*)$")
MARKERS = {"": "code", " [markdown]": "markdown"}
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",
}
# stderr lines that are TensorFlow's C++ logs (printed whatever
# TF_CPP_MIN_LOG_LEVEL says) or tqdm's "no ipywidgets" notice, not output.
NOISE = re.compile(
    r"^([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]|WARNING: All log messages before absl"
    r"|.*TqdmWarning: IProgress not found|  from \.autonotebook import tqdm)"
)


def read_source(path):
    """The notebook of a percent-format source: its cells, ids `NN-ii`, no outputs.

    Args:
        path: pathlib.Path. The `.py` source, e.g. `notebooks/01_regression_sts.py`.

    Raises:
        ValueError: code before the first marker, a markdown line that is not
            a comment, or a marker with a title or cell type other than
            markdown; the message names the file and the 1-based line.
    """
    cells, kind, lines = [], None, []

    def close_cell():
        if kind is not None:
            make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
            cells.append(make("\n".join(lines).strip("\n"), id=f"{path.stem[:2]}-{len(cells):02d}"))

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        marker = MARKER.match(line)
        if marker:
            close_cell()
            if marker["rest"].rstrip() not in MARKERS:
                raise ValueError(f"{path}, line {number}: expected '# %%' or '# %% [markdown]', found {line!r}")
            kind, lines = MARKERS[marker["rest"].rstrip()], []
        elif kind == "code":
            lines.append(line)
        elif line.strip() and not (line == "#" or line.startswith("# ")):
            where = "markdown cell" if kind else "header, before the first '# %%'"
            raise ValueError(f"{path}, line {number}: expected a '# ' comment line in the {where}")
        elif kind == "markdown":
            lines.append(line[2:])
    close_cell()
    notebook = nbformat.v4.new_notebook(cells=cells, metadata=METADATA)
    nbformat.validate(notebook)
    return notebook


def differences(source, notebook):
    """How `notebook` differs from `source` in cell types and sources (outputs ignored).

    Returns:
        A list of readable lines, one per differing cell (1-based), empty when they agree.
    """
    found = []
    for number, (want, have) in enumerate(zip(source.cells, notebook.cells, strict=False), start=1):
        if (want.cell_type, want.source) != (have.cell_type, have.source):
            found.append(f"cell {number} ({want.cell_type}): {want.source[:60]!r}")
    if len(source.cells) != len(notebook.cells):
        found.append(f"{len(source.cells)} cells in the source, {len(notebook.cells)} in the notebook")
    return found


def colab_settings(root=None):
    """The repository URL, the git ref and the pip requirements of the notebooks' Colab cell.

    Args:
        root: pathlib.Path or None. The folder of `pyproject.toml` and
            `requirements.txt`; None: the repository root (`ROOT`).

    Returns:
        `(repository, ref, requirements)`: `[project.urls] Repository`,
        `[tool.sbert_keras] colab-ref`, and `sbert_keras @ git+<repository>@<ref>`
        followed by `colab-packages`, each bare name pinned as in
        `requirements.txt`.

    Raises:
        ValueError: a bare name that `requirements.txt` does not pin with `==`.
    """
    root = pathlib.Path(root or ROOT)
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    repository = project["project"]["urls"]["Repository"].rstrip("/")
    settings = project["tool"]["sbert_keras"]
    pins = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        name, _, version = line.split("#")[0].strip().partition("==")
        if version:
            pins[name.strip().lower()] = f"{name.strip()}=={version.strip()}"
    requirements = [f"sbert_keras @ git+{repository}@{settings['colab-ref']}"]
    for package in settings["colab-packages"]:
        if re.fullmatch(r"[A-Za-z0-9._-]+", package):
            if package.lower() not in pins:
                raise ValueError(f"colab-packages names {package!r}, which requirements.txt does not pin with '=='.")
            package = pins[package.lower()]
        requirements.append(package)
    return repository, settings["colab-ref"], requirements


def colab_badge(name, root=None):
    """The "Open in Colab" markdown line of notebook `name` (e.g. "01_regression_sts").

    It links to `https://colab.research.google.com/github/<owner>/<repo>/blob/<colab-ref>/notebooks/<name>.ipynb`.

    Raises:
        ValueError: a `Repository` URL that is not `https://github.com/<owner>/<repo>`.
    """
    repository, ref, _ = colab_settings(root)
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(\.git)?", repository)
    if not match:
        raise ValueError(f"[project.urls] Repository must be https://github.com/<owner>/<repo>, found {repository!r}.")
    link = f"https://colab.research.google.com/github/{match[1]}/blob/{ref}/notebooks/{name}.ipynb"
    return f"[![Open In Colab]({COLAB_BADGE})]({link})"


def installed_on_colab(code):
    """The requirements that the `pip install` list of `code` names, or None without one.

    The list is the first list or tuple literal holding the string "install";
    its string items after "install" that are not options are the requirements.
    """
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.List | ast.Tuple):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if "install" in items:
                rest = items[items.index("install") + 1 :]
                return [item for item in rest if isinstance(item, str) and not item.startswith("-")]
    return None


def colab_differences(notebook, name, root=None):
    """How the badge and the Colab install of `notebook` differ from `pyproject.toml`.

    Args:
        notebook: the notebook (as `read_source` returns it, or a saved one).
        name: str. Its file name without suffix, e.g. "03_nli_classification".
        root: the folder of `pyproject.toml`, as in `colab_settings`.

    Returns:
        A list of readable lines, each naming the expected text; empty when they agree.
    """
    found = []
    badge = colab_badge(name, root)
    first = notebook.cells[0] if notebook.cells else None
    if first is None or first.cell_type != "markdown" or badge not in first.source.splitlines():
        found.append(f"first cell: no line {badge}")
    setup = next((c for c in notebook.cells if c.cell_type == "code"), None)
    want = colab_settings(root)[2]
    have = installed_on_colab(setup.source) if setup is not None else None
    if have != want:
        found.append(f"set-up cell: pip installs {have}, expected {want}")
    return found


def keep_outputs(source, saved):
    """Gives `source` the outputs of `saved` on every code cell whose id and code are unchanged.

    Code compares by its syntax tree, so a cell reformatted (`ruff format`)
    or with new comments keeps its outputs; any other change drops them.

    The notebook metadata (kernel, language version of the run) comes from
    `saved` too.

    Returns:
        The ids of the code cells that lost their outputs.
    """
    old = {cell.id: cell for cell in saved.cells}
    lost = []
    for index, cell in enumerate(source.cells):
        if cell.cell_type != "code":
            continue
        match = old.get(cell.id)
        if match is not None and match.cell_type == "code" and code_key(match.source) == code_key(cell.source):
            match.source = cell.source
            source.cells[index] = match
        else:
            lost.append(cell.id)
    source.metadata = saved.metadata
    return lost


def code_key(text):
    """What a code cell's outputs depend on: its syntax tree, or its text if it does not parse."""
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:
        return text


def tidy_outputs(notebook):
    """Merges each cell's stream outputs by name, as a notebook front end shows them.

    Progress-bar redraws (`\\r`) keep their last state, and TensorFlow's C++
    log lines are dropped from stderr, so a saved notebook reads cleanly.
    """
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs, streams = [], {}
        for output in cell.outputs:
            if output.output_type != "stream":
                outputs.append(output)
            elif output.name in streams:
                streams[output.name].text += output.text
            else:
                streams[output.name] = output
                outputs.append(output)
        for output in streams.values():
            lines = [line.rsplit("\r", 1)[-1] for line in output.text.split("\n")]
            if output.name == "stderr":
                lines = [line for line in lines if not NOISE.match(line)]
            output.text = "\n".join(lines)
        cell.outputs = [o for o in outputs if o.output_type != "stream" or o.text.strip()]
    return notebook


def source_paths(names=None):
    """The notebook sources of this folder, or those whose file name starts with one of `names`."""
    paths = sorted(HERE.glob("[0-9][0-9]_*.py"))
    if names:
        paths = [p for p in paths if any(p.name.startswith(n) for n in names)]
    return paths


def execute(notebook, timeout=600):
    """Runs every cell of `notebook` in a fresh kernel, in this folder; returns the seconds taken.

    The kernel finds `sbert_keras` in this checkout first (`ROOT` leads its
    `PYTHONPATH`): from the notebooks folder, `import sbert_keras` would
    otherwise find whichever copy the virtualenv has installed in editable
    mode, possibly another checkout.
    """
    client = nbclient.NotebookClient(
        notebook, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(HERE)}})
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    start = time.perf_counter()
    client.execute(env={**os.environ, "PYTHONPATH": path})
    return time.perf_counter() - start


def require_colab_in_step(paths):
    """Exits 1, naming what differs, if a source's Colab badge or install is not pyproject's."""
    found = [f"{path.name}: {line}" for path in paths for line in colab_differences(read_source(path), path.stem)]
    if found:
        sys.exit("\n".join(["the Colab set-up differs from pyproject.toml; edit the sources:", *found]))


def check(paths):
    """Prints whether each source and its notebook agree, and their Colab set-up with pyproject; exits 1 if not."""
    stale = False
    for path in paths:
        target = path.with_suffix(".ipynb")
        source = read_source(path)
        found = differences(source, nbformat.read(target, as_version=4)) + colab_differences(source, path.stem)
        print(f"{target.name}: " + ("; ".join(found) if found else "in sync"))
        stale = stale or bool(found)
    sys.exit(1 if stale else 0)


def write_without_running(paths):
    """Writes each source into its notebook, keeping the outputs of unchanged code cells."""
    require_colab_in_step(paths)
    for path in paths:
        notebook, target = read_source(path), path.with_suffix(".ipynb")
        lost = keep_outputs(notebook, nbformat.read(target, as_version=4))
        nbformat.write(notebook, target)
        print(f"wrote {target.name}" + (f"; code cells without outputs now: {lost}" if lost else ""))


def run(paths, smoke, timeout):
    """Generates and executes each notebook; saves the outputs unless `smoke`."""
    require_colab_in_step(paths)
    if smoke:
        os.environ["SBERT_SMOKE"] = "1"
    else:
        os.environ.pop("SBERT_SMOKE", None)
    print(f"kernel interpreter: {sys.executable}; smoke={smoke}")
    total = 0.0
    for path in paths:
        notebook, target = read_source(path), path.with_suffix(".ipynb")
        print(f"running {path.name} ...", flush=True)
        seconds = execute(notebook, timeout=timeout)
        total += seconds
        if not smoke:
            nbformat.write(tidy_outputs(notebook), target)
        print(f"  {target.name}: {seconds:.0f} s" + ("" if smoke else " (outputs saved)"), flush=True)
    print(f"{len(paths)} notebook(s) in {total:.0f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", nargs="*", help="notebook name prefixes, e.g. 01 02_triplet")
    parser.add_argument("--smoke", action="store_true", help="set SBERT_SMOKE=1 (tiny sizes); saves nothing")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--no-execute", action="store_true", help="write the sources, keep unchanged outputs")
    parser.add_argument("--check", action="store_true", help="compare sources and notebooks, run nothing")
    args = parser.parse_args(argv)
    paths = source_paths(args.names)
    if not paths:
        parser.error(f"no notebook source matches {args.names}")
    if args.check:
        check(paths)
    elif args.no_execute:
        write_without_running(paths)
    else:
        run(paths, args.smoke, args.timeout)


if __name__ == "__main__":
    main()
