"""Encode throughput of all-MiniLM-L6-v2 on each Keras backend: TensorFlow, JAX and PyTorch.

The 3,000 STS-B dev sentences, batch 32, `encode` after a warm-up pass,
best of `--passes` timed passes. Each backend runs in its own process
(Keras' backend is fixed per process): TensorFlow through its routes
(`compute="float32"` and `"auto"`), JAX and PyTorch through the host
engine (`runtime.host_engine`: texts tokenised by `tokenizers`, the Keras
graph). "min cos" is the lowest per-sentence cosine to TensorFlow's
float32 vectors. `--python` runs the JAX/PyTorch processes with another
interpreter (a venv without TensorFlow).

    .venv/bin/python benchmarks/encode_backends.py [--quick] [--python .venv-backends/bin/python]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "encode_backends"
BATCH_SIZE = 32
VARIANTS = (("tensorflow", "float32"), ("tensorflow", "auto"), ("jax", "float32"), ("torch", "float32"))


def measure(model, texts_file, precision, passes, out):
    """Runs in the child process: times `encode` and saves the vectors to `out`."""
    import sbert_keras

    texts = json.loads(Path(texts_file).read_text())
    encoder = sbert_keras.SentenceEncoder.from_preset(model)
    start = time.perf_counter()
    encoder.encode(texts, batch_size=BATCH_SIZE, compute=precision, show_progress=False)
    warm = time.perf_counter() - start
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        vectors = encoder.encode(texts, batch_size=BATCH_SIZE, compute=precision, show_progress=False)
        times.append(time.perf_counter() - start)
    np.save(out, vectors)
    print(json.dumps({"first_pass_s": warm, "best_s": min(times), "tensorflow_imported": "tensorflow" in sys.modules}))


def run_variant(backend, precision, model, texts_file, passes, python, folder):
    """One variant in its own process: `(fields, vectors)`."""
    out = Path(folder) / f"{backend}-{precision}.npy"
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    command = [python, __file__, "--child", model, texts_file, precision, str(passes), str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}, None
    return json.loads(done.stdout.strip().splitlines()[-1]), np.load(out)


def main():
    if sys.argv[1:2] == ["--child"]:
        model, texts_file, precision, passes, out = sys.argv[2:7]
        return measure(model, texts_file, precision, int(passes), out)
    parser = common.base_parser(__doc__)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="interpreter for the JAX and PyTorch processes")
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME, lines=200 if args.quick else None)
    if found is None:
        return None
    texts, model = found
    with tempfile.TemporaryDirectory() as folder:
        texts_file = Path(folder) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        reference = None
        for backend, precision in VARIANTS:
            python = sys.executable if backend == "tensorflow" else args.python
            fields, vectors = run_variant(backend, precision, model, str(texts_file), args.passes, python, folder)
            if vectors is not None and reference is None:
                reference = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            if vectors is not None:
                unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
                fields["min_cos"] = float(np.min(np.sum(unit * reference, axis=1)))
                fields["texts_per_s"] = len(texts) / fields["best_s"]
            common.emit(benchmark=NAME, backend=backend, precision=precision, texts=len(texts), **fields)
    return None


if __name__ == "__main__":
    main()
