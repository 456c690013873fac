"""A plot of texts/s per engine per model, from the JSON lines `encode_peers.py` printed.

One panel per model; one bar per engine and variant, coloured by compute
class (float32, bf16, int8), labelled with its texts/s and, where scored,
its minimum cosine to sentence-transformers float32. Variants that failed,
were skipped or ran contended are left out (a contended run is named in the
title). matplotlib draws it (`requirements-dev.txt`); the runs it reads are
kept in `benchmarks/runs/`, named by model and commit. Pass the runs of one
window: speeds of different windows do not compare.

    .venv/bin/python benchmarks/plot_engines.py --out benchmarks/engines.svg benchmarks/runs/*-COMMIT.jsonl
"""

import argparse
import json
import sys
from pathlib import Path

import encode_peers_report

COLOURS = {"float32": "#4c72b0", "bfloat16": "#55a868", "int8": "#c44e52"}


def read_results(paths):
    """`{model: [result, ...]}` of the timed, uncontended `kind: "result"` lines of `paths`, in file order."""
    models = {}
    for path in paths:
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.startswith("{"):
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise SystemExit(f"{path}:{number}: not a JSON line ({error})") from None
            timed = row.get("kind") == "result" and row.get("texts_per_second")
            if timed and not row.get("contended") and "error" not in row:
                models.setdefault(row["model"], []).append(row)
    return models


def compute_class(row):
    """`"float32"`, `"bfloat16"` or `"int8"` of a result: its `precision`, else what its variant names."""
    precision = row.get("precision") or encode_peers_report.PRECISION.get(row["variant"], "float32")
    return precision if precision in COLOURS else "float32"


def plot(models, out):
    """Writes the figure of `models` (`read_results`) to `out` (its suffix picks the format)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a smaller, searchable SVG
    from matplotlib import pyplot
    from matplotlib.patches import Patch

    heights = [len(rows) for rows in models.values()]
    figure, axes = pyplot.subplots(
        len(models), 1, figsize=(9, 0.32 * sum(heights) + 1.2 * len(models)), height_ratios=heights, squeeze=False
    )
    for axis, (model, rows) in zip(axes[:, 0], models.items()):
        labels = [f"{row['engine']} · {row['variant']}" for row in rows]
        speeds = [row["texts_per_second"] for row in rows]
        colours = [COLOURS[compute_class(row)] for row in rows]
        bars = axis.barh(range(len(rows)), speeds, color=colours)
        axis.set_yticks(range(len(rows)), labels, fontsize=8)
        axis.invert_yaxis()
        axis.set_title(model, fontsize=10, loc="left")
        axis.set_xlabel("texts/s", fontsize=8)
        for bar, row in zip(bars, rows):
            note = f" {row['texts_per_second']:.0f}"
            if "min_cos" in row:
                note += f"  (min cos {row['min_cos']:.4f})"
            axis.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, note, va="center", fontsize=7)
        axis.set_xlim(0, max(speeds) * 1.45)
    handles = [Patch(color=c, label=name) for name, c in COLOURS.items()]
    figure.legend(handles=handles, loc="upper right", fontsize=8)
    figure.tight_layout(rect=(0, 0, 1, 0.985))
    figure.savefig(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="JSON-lines files printed by encode_peers.py")
    parser.add_argument("--out", required=True, help="the figure (.svg or .png)")
    args = parser.parse_args()
    models = read_results(args.runs)
    if not models:
        sys.exit(f"no timed result lines in {', '.join(args.runs)}")
    plot(models, args.out)
    print(json.dumps({"benchmark": "plot_engines", "out": args.out, "models": {m: len(r) for m, r in models.items()}}))


if __name__ == "__main__":
    main()
