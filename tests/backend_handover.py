"""The JAX side of `tests/utils/test_backends_handover.py`, run in its own process with `KERAS_BACKEND=jax`.

`python tests/backend_handover.py MODEL_FOLDER OUT`: loads the encoder on JAX, writes `OUT/encoder.keras`,
the sentence-transformers folder `OUT/st` and `OUT/vectors.npy` (the JAX vectors of `TEXTS`), and
prints the backend and whether TensorFlow was imported by sbert_keras' own code.
"""

import json
import pathlib
import sys

import keras
import numpy as np

from sbert_keras import SentenceEncoder

TEXTS = ["A man is playing a guitar.", "A dog runs in the park.", "The sky is blue today.", "Someone eats food."]


def main(model, out):
    out = pathlib.Path(out)
    encoder = SentenceEncoder.from_preset(model)
    np.save(out / "vectors.npy", encoder.encode(TEXTS, show_progress=False, compute="float32"))
    encoder.save(str(out / "encoder.keras"))
    encoder.save_to_sentence_transformers(out / "st")
    print(json.dumps({"backend": keras.backend.backend()}))


if __name__ == "__main__":
    main(*sys.argv[1:])
