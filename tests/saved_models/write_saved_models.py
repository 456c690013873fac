"""Writes the tiny `.keras` files of `tests/saved_models/` and their vectors.

Each file holds one saved type of sbert_keras (the encoder, every siamese and
single-text training model, an int8-quantized encoder), built from the tiny
BERT-layout fixture of `tests/conftest.py`. `tests/project/test_saved_models.py` loads the
committed files with the current code and compares their vectors with
`vectors.npz`, so a change of a registered name, a config key or a module
path that breaks files users already have fails a test.

Run from the repository root: `.venv/bin/python tests/saved_models/write_saved_models.py`
(only to add a new saved type; the committed files are the point).
"""

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import keras  # noqa: E402

import sbert_keras  # noqa: E402
from conftest import tiny_encoder  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
TEXTS = ["a man is playing guitar", "the dog runs in the park", "a red car"]


def models():
    """(file name, model) for each saved type."""
    yield "encoder.keras", tiny_encoder(normalize=True)
    yield "encoder_cls.keras", tiny_encoder(pooling="cls")
    yield "regression_siamese.keras", sbert_keras.RegressionSiamese(tiny_encoder())
    yield "triplet_siamese.keras", sbert_keras.TripletSiamese(tiny_encoder())
    yield "classification_siamese.keras", sbert_keras.ClassificationSiamese(tiny_encoder())
    yield "contrastive_siamese.keras", sbert_keras.ContrastiveSiamese(tiny_encoder())
    yield "cached_contrastive_siamese.keras", sbert_keras.CachedContrastiveSiamese(tiny_encoder(), mini_batch_size=2)
    yield "batch_hard_triplet_model.keras", sbert_keras.BatchHardTripletModel(tiny_encoder())
    yield "distillation_model.keras", sbert_keras.DistillationModel(tiny_encoder())
    quantized = tiny_encoder()
    quantized.quantize("int8")
    yield "encoder_int8.keras", quantized


def encoder_of(model):
    return model if isinstance(model, sbert_keras.SentenceEncoder) else model.encoder


def main():
    vectors = {}
    for name, model in models():
        encoder = encoder_of(model)
        vectors[name] = np.asarray(encoder.predict(np.array(TEXTS), verbose=0))
        model.save(HERE / name)
        keras.backend.clear_session()
    np.savez(HERE / "vectors.npz", **vectors)
    print(f"wrote {len(vectors)} files to {HERE}")


if __name__ == "__main__":
    main()
