"""One int8 answer: an int8 SavedModel and `encode(compute="int8")` on the real all-MiniLM-L6-v2.

The SavedModel serves the 3,000 STS-B dev sentences in requests of 64, in
file order; `encode` batches them by length. Both quantize every activation
row on its own (`int8_quantization.DEFAULT_RECIPE`), so a vector does not
depend on its batch: `like_export=True` reproduces the served vectors, and
the default TFLite route (the same scheme in XNNPACK's kernels) stays within
the int8 accuracy gate of both.
"""

import numpy as np
import pytest
import tensorflow as tf

from conftest import minilm_path
from conftest import shared_path
from sbert_keras import SentenceEncoder
from sbert_keras import export_saved_model
from sbert_keras.data import readers

REQUEST = 64


def min_cosine(a, b):
    a, b = a.astype("float64"), b.astype("float64")
    return float(np.min(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    dev = readers.read_sts(shared_path("data", "stsbenchmark", "sts-dev.csv"))
    texts = dev.sentence_a + dev.sentence_b
    encoder = SentenceEncoder.from_preset(minilm_path())
    path = tmp_path_factory.mktemp("int8") / "minilm" / "1"
    export_saved_model(encoder, str(path), compute="int8")
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    output = next(iter(serve.structured_outputs))
    vectors = [serve(text=tf.constant(texts[i : i + REQUEST]))[output].numpy() for i in range(0, len(texts), REQUEST)]
    return encoder, texts, np.concatenate(vectors)


def test_encode_like_export_reproduces_the_int8_saved_model(served):
    encoder, texts, vectors = served
    assert encoder.engine.plan("int8")[1] == "int8"
    local = encoder.encode(texts, compute="int8", like_export=True, show_progress=False)
    assert min_cosine(local, vectors) >= 0.999
    # A single query is quantized as in its batch: the same vector.
    one = encoder.encode(texts[7], compute="int8", like_export=True)
    assert min_cosine(one[None], vectors[7:8]) >= 0.999


def test_default_int8_route_stays_within_the_int8_gate_of_the_saved_model(served):
    encoder, texts, vectors = served
    fast = encoder.encode(texts, compute="int8", show_progress=False)
    reference = encoder.encode(texts, compute="float32", show_progress=False)
    assert min_cosine(fast, vectors) >= 0.99
    assert min_cosine(vectors, reference) >= 0.99
