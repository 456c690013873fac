"""Executes the example notebooks in place and saves their outputs.

    .venv/bin/python notebooks/run_notebooks.py                  # full run, all four
    .venv/bin/python notebooks/run_notebooks.py --smoke          # SBERT_SMOKE=1
    .venv/bin/python notebooks/run_notebooks.py --names 01 03    # a selection

Each notebook runs in a fresh `python3` kernel started with this
interpreter (jupyter_client replaces the kernelspec's `python` with
`sys.executable`, so the venv that runs this script is the kernel's), with
the notebooks folder as working directory. Outputs are written back into
the `.ipynb` unless `--no-save`; `build_notebooks.py` regenerates clean
copies.
"""

import argparse
import os
import pathlib
import re
import sys
import time

import nbclient
import nbformat

HERE = pathlib.Path(__file__).resolve().parent
# stderr lines that are TensorFlow's C++ logs (printed whatever
# TF_CPP_MIN_LOG_LEVEL says) or tqdm's "no ipywidgets" notice, not output.
NOISE = re.compile(
    r"^([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\]|WARNING: All log messages before absl"
    r"|.*TqdmWarning: IProgress not found|  from \.autonotebook import tqdm)"
)


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


def notebook_paths(names=None):
    """The notebooks of this folder, or those whose file name starts with one of `names`."""
    paths = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    if names:
        paths = [p for p in paths if any(p.name.startswith(n) for n in names)]
    return paths


def execute(path, timeout=600, save=True):
    """Runs every cell of `path` in a fresh kernel; returns the seconds taken."""
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    if save:
        nbformat.write(tidy_outputs(notebook), path)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="set SBERT_SMOKE=1 (tiny sizes)")
    parser.add_argument("--names", nargs="*", help="notebook name prefixes, e.g. 01 02_triplet")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--no-save", action="store_true", help="do not write the outputs back")
    args = parser.parse_args(argv)

    if args.smoke:
        os.environ["SBERT_SMOKE"] = "1"
    else:
        os.environ.pop("SBERT_SMOKE", None)
    paths = notebook_paths(args.names)
    if not paths:
        parser.error(f"no notebook matches {args.names}")
    print(f"kernel interpreter: {sys.executable}; smoke={args.smoke}")
    total = 0.0
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        seconds = execute(path, timeout=args.timeout, save=not args.no_save)
        total += seconds
        print(f"  {path.name}: {seconds:.0f} s" + ("" if args.no_save else " (outputs saved)"),
              flush=True)
    print(f"{len(paths)} notebook(s) in {total:.0f} s")


if __name__ == "__main__":
    main()
