"""Runs `train_objective` on raw strings for every objective, 2-3 steps, under the process's Keras backend.

Run once per backend (the backend is per process):
`KERAS_BACKEND=jax python tests/backend_training.py OUT.npz WEIGHTS_DIR [objective ...]`; the first run saves
the tiny RoBERTa encoder's weights (no dropout) to `WEIGHTS_DIR`, later runs load them, so every backend starts
from the same numbers (the paper's learning rate for regression, 1e-3 for the others);
`tests/training/test_trainer_backends.py` compares what each writes: every step's loss
(`training_log.csv`), the vectors of a probe before and after, and whether TensorFlow was imported.
"""

import os
import sys

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import tiny_encoder  # noqa: E402
from sbert_keras.data.examples import LabelledSentences  # noqa: E402
from sbert_keras.data.examples import NLIPairs  # noqa: E402
from sbert_keras.data.examples import SentencePairs  # noqa: E402
from sbert_keras.data.examples import Sentences  # noqa: E402
from sbert_keras.data.examples import Triplets  # noqa: E402
from sbert_keras.training.step_log import read_rows  # noqa: E402
from sbert_keras.training.trainer import train_objective  # noqa: E402
from sbert_keras.utils.atomic_io import TRAINING_LOG  # noqa: E402

WORDS = "a man woman is playing guitar piano dog cat runs the sleeps on sofa park in ball red car".split()
N = 12  # rows: 3 steps of 4 (the bucket batching may make a few more)
PROBE = ["a man is playing guitar", "the cat sleeps on the sofa"]


def sentences(seed, n=N):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(2, 8))) for _ in range(n)]


def examples():
    """`{name: (objective, train, dev, keyword arguments)}`: every objective of `training.objectives`."""
    a, b, c = sentences(1), sentences(2), sentences(3)
    scores = np.linspace(0, 5, N).astype("float32")
    pairs = SentencePairs(a, b, scores)
    nli = NLIPairs(a, b, (np.arange(N) % 3).astype("int32"))
    triplets = Triplets(a, b, c)
    binary = SentencePairs(a, b, (np.arange(N) % 2).astype("float32"))
    labelled = LabelledSentences(a, (np.arange(N) % 3).astype("int32"))
    teacher = np.random.default_rng(4).normal(size=(N, 8)).astype("float32")
    return {
        "regression": ("regression", pairs, pairs, {}),
        "cosent": ("cosent", pairs, None, {}),
        "angle": ("angle", pairs, None, {}),
        "online-contrastive": ("online-contrastive", binary, None, {}),
        "triplet": ("triplet", triplets, triplets, {}),
        "batch-hard": ("batch-hard", labelled, None, {}),
        "classification": ("classification", nli, nli, {}),
        "contrastive": ("contrastive", triplets, None, {"hard_negatives": True}),
        "cached-contrastive": ("contrastive", triplets, None, {"mini_batch_size": 2, "hard_negatives": True}),
        "matryoshka": ("contrastive", triplets, None, {"matryoshka_dims": (8, 4), "hard_negatives": True}),
        "distill": ("distill", Sentences(a), None, {"teacher": teacher}),
    }


def encoder(weights_dir):
    model = tiny_encoder(sequence_length=16, kind="roberta", dropout=0.0)
    path = os.path.join(weights_dir, "encoder.weights.h5")
    if os.path.exists(path):
        model.load_weights(path)
    else:
        model.save_weights(path)
    return model


def main(argv):
    out_path, weights_dir, *names = argv
    table = examples()
    out = {}
    for name in names or table:
        objective, train, dev, kwargs = table[name]
        model = encoder(weights_dir)
        before = model.encode(PROBE)
        output_dir = os.path.join(weights_dir, f"{name}.{keras.backend.backend()}")
        _, history = train_objective(
            objective,
            model,
            train,
            dev,
            batch_size=4,
            learning_rate=2e-5 if name == "regression" else 1e-3,
            seed=0,
            verbose=0,
            output_dir=output_dir,
            **kwargs,
        )
        out[f"{name}/losses"] = np.array(
            [float(row["loss"]) for row in read_rows(os.path.join(output_dir, TRAINING_LOG))]
        )
        out[f"{name}/before"], out[f"{name}/after"] = before, model.encode(PROBE)
        out[f"{name}/history"] = np.array(sorted(history.history))
    out["tensorflow_imported"] = np.bool_("tensorflow" in sys.modules and hasattr(sys.modules["tensorflow"], "Tensor"))
    np.savez(out_path, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
