"""One int8 answer, on the real all-MiniLM-L6-v2: `encode(compute="int8")`, whatever the batch.

A SavedModel holds no int8 (`defaults.EXPORT_COMPUTES`), so int8 vectors
come from `encode` alone. Its route quantizes every activation row on its
own, so a text's vector does not depend on the other texts of its call: a
single query, small batches and the default batches give the same vector,
within the int8 gate of float32 on 500 STS-B dev sentences.
"""

import numpy as np
import pytest

from conftest import minilm_path
from conftest import shared_path
from sbert_keras import SentenceEncoder
from sbert_keras import export_saved_model
from sbert_keras.data import readers

SENTENCES = 500


def min_cosine(a, b):
    a, b = a.astype("float64"), b.astype("float64")
    return float(np.min(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


@pytest.fixture(scope="module")
def encoded():
    dev = readers.read_sts(shared_path("data", "stsbenchmark", "sts-dev.csv"))
    texts = (dev.sentence_a + dev.sentence_b)[:SENTENCES]
    encoder = SentenceEncoder.from_preset(minilm_path())
    return encoder, texts, encoder.encode(texts, compute="int8", show_progress=False)


def test_int8_vectors_do_not_depend_on_the_batch(encoded):
    encoder, texts, vectors = encoded
    small = encoder.encode(texts, compute="int8", batch_size=7, show_progress=False)
    assert min_cosine(small, vectors) >= 0.9999
    ones = np.stack([encoder.encode(texts[i], compute="int8") for i in range(0, SENTENCES, 50)])
    assert min_cosine(ones, vectors[::50]) >= 0.9999


def test_int8_stays_within_the_int8_gate_of_float32(encoded):
    encoder, texts, vectors = encoded
    reference = encoder.encode(texts, compute="float32", show_progress=False)
    assert min_cosine(vectors, reference) >= 0.99


def test_an_int8_saved_model_is_refused(encoded, tmp_path):
    encoder = encoded[0]
    with pytest.raises(ValueError, match="cannot be exported"):
        export_saved_model(encoder, str(tmp_path / "int8" / "1"), compute="int8")
    assert encoder.engine.plan("auto")[1] != "int8"
