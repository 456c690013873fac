"""`.keras` files written by an earlier layout of the package still load.

`tests/saved_models/` holds one tiny file of each saved type, written before
the modules moved into subpackages (`write_saved_models.py`). Each must load
with the current code, after a plain `import sbert_keras`, and give the
vectors it gave when it was written.
"""

import pathlib

import keras
import numpy as np
import pytest

import sbert_keras

HERE = pathlib.Path(__file__).resolve().parent / "saved_models"
TEXTS = ["a man is playing guitar", "the dog runs in the park", "a red car"]
NAMES = sorted(path.name for path in HERE.glob("*.keras"))


def test_every_saved_type_is_present():
    assert len(NAMES) == 10


@pytest.mark.parametrize("name", NAMES)
def test_saved_file_loads_with_the_same_vectors(name):
    model = keras.saving.load_model(HERE / name)
    encoder = model if isinstance(model, sbert_keras.SentenceEncoder) else model.encoder
    assert isinstance(encoder, sbert_keras.SentenceEncoder)
    expected = np.load(HERE / "vectors.npz")[name]
    np.testing.assert_allclose(encoder.predict(np.array(TEXTS), verbose=0), expected, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS, precision="float32"), expected, atol=5e-5)
