"""One epoch of STS-B regression on all-MiniLM-L6-v2 on Keras' TensorFlow and JAX backends; steps/s at base size.

Each backend runs in its own process (Keras' backend is fixed per
process): `train_objective("regression", ...)` on STS-B train, seed 0, the
paper's recipe (batch 16, AdamW 2e-5, 10 % linear warm-up, the default
batching), then the dev Spearman of the cosine (`evaluators.sts_evaluation`).
TensorFlow batches with tf.data, JAX with the host twin
(`host_pipelines.HostBatches`); the same seed gives the same batches on
both, so the two Spearmans should agree (target: within 0.003).
`steps_per_second` counts the steps after the first `--warmup-steps`
(tracing), from Keras' batch callbacks.

`--base`: a few dozen regression steps on a BERT-base-shaped encoder
(12 layers, 768 wide, random weights, the MiniLM vocabulary) on each
backend, steps/s after the warm-up. `--python` runs the JAX process with
another interpreter (a venv without TensorFlow).

    .venv/bin/python benchmarks/train_backends.py [--quick] [--base-steps 30] [--python /tmp/venvjax/bin/python]
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

NAME = "train_backends"
BACKENDS = ("tensorflow", "jax")
STS_TRAIN, STS_DEV = "data/stsbenchmark/sts-train.csv", "data/stsbenchmark/sts-dev.csv"


def step_clock(warmup):
    """A Keras callback timing the steps after the first `warmup`."""
    import keras

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps, self.start, self.end = 0, None, None

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            if self.steps == warmup:
                self.start = time.perf_counter()
            self.end = time.perf_counter()

        def steps_per_second(self):
            return (self.steps - warmup) / (self.end - self.start) if self.start and self.steps > warmup else None

    return Clock()


def child_sts(model, train_path, dev_path, limit, warmup):
    """In the child: one epoch of regression, the dev Spearman and the steps/s."""
    import keras

    from sbert_keras import SentenceEncoder
    from sbert_keras.data import examples
    from sbert_keras.data import readers
    from sbert_keras.evaluation.evaluators import sts_evaluation
    from sbert_keras.training.trainer import train_objective

    train, dev = readers.read_sts(train_path), readers.read_sts(dev_path)
    if limit:
        train = examples.SentencePairs(train.sentence_a[:limit], train.sentence_b[:limit], train.labels[:limit])
    encoder = SentenceEncoder.from_preset(model)
    clock = step_clock(warmup)
    start = time.perf_counter()
    train_objective("regression", encoder, train, seed=0, verbose=0, callbacks=[clock])
    seconds = time.perf_counter() - start
    scores = sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)
    return {
        "backend": keras.backend.backend(),
        "dev_spearman_cosine": scores.get("spearman_cosine"),
        "steps": clock.steps,
        "steps_per_second": clock.steps_per_second(),
        "train_seconds": seconds,
        "tensorflow_imported": "tensorflow" in sys.modules,
    }


def child_base(model, train_path, steps, warmup):
    """In the child: `steps` regression steps of a BERT-base-shaped encoder (random weights)."""
    import keras

    from sbert_keras import SentenceEncoder
    from sbert_keras.data import examples
    from sbert_keras.data import readers
    from sbert_keras.model.backbone import BertLayoutBackbone
    from sbert_keras.training.trainer import train_objective

    train = readers.read_sts(train_path)
    n = steps * 16
    train = examples.SentencePairs(train.sentence_a[:n], train.sentence_b[:n], train.labels[:n])
    small = SentenceEncoder.from_preset(model)
    keras.utils.set_random_seed(0)
    backbone = BertLayoutBackbone(
        vocabulary_size=small.backbone.vocabulary_size,
        num_layers=12,
        num_heads=12,
        hidden_dim=768,
        intermediate_dim=3072,
        max_sequence_length=512,
    )
    encoder = SentenceEncoder(backbone, small.preprocessor, pooling="mean")
    clock = step_clock(warmup)
    train_objective("regression", encoder, train, seed=0, verbose=0, callbacks=[clock], batching="shuffle")
    return {"backend": keras.backend.backend(), "steps": clock.steps, "steps_per_second": clock.steps_per_second()}


def run_child(backend, python, *args):
    """One backend's run in its own process: its JSON line, or the error's last line."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([python, __file__, "--child", *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"backend": backend, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    if sys.argv[1:2] == ["--child"]:
        kind, *rest = sys.argv[2:]
        if kind == "sts":
            model, train, dev, limit, warmup = rest
            print(json.dumps(child_sts(model, train, dev, int(limit), int(warmup))))
        else:
            model, train, steps, warmup = rest
            print(json.dumps(child_base(model, train, int(steps), int(warmup))))
        return
    parser = common.base_parser(__doc__)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the JAX process")
    parser.add_argument("--base-steps", type=int, default=30, help="steps at BERT-base shape (0: skip)")
    parser.add_argument("--warmup-steps", type=int, default=5)
    args = parser.parse_args()
    paths = common.shared_files(NAME, STS_TRAIN, STS_DEV)
    model = common.model_path(NAME)
    if paths is None or model is None:
        return
    limit = 320 if args.quick else 0
    rows = {}
    for backend in BACKENDS:
        python = sys.executable if backend == "tensorflow" else args.python
        rows[backend] = run_child(
            backend, python, "sts", str(model), *map(str, paths), str(limit), str(args.warmup_steps)
        )
        common.emit(benchmark=NAME, kind="sts", **rows[backend])
    spearmans = [rows[b].get("dev_spearman_cosine") for b in BACKENDS]
    if None not in spearmans:
        common.emit(benchmark=NAME, kind="summary", spearman_gap=abs(spearmans[0] - spearmans[1]), target=0.003)
    steps = 8 if args.quick else args.base_steps
    for backend in BACKENDS if steps else ():
        python = sys.executable if backend == "tensorflow" else args.python
        row = run_child(backend, python, "base", str(model), str(paths[0]), str(steps), str(args.warmup_steps))
        common.emit(benchmark=NAME, kind="base", **row)


if __name__ == "__main__":
    main()
