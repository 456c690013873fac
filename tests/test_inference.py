"""The fused inference graph of `encode` against the model's own Keras graph."""

import keras_hub
import numpy as np
import pytest

from conftest import WORDS
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras import SentenceEncoderPreprocessor
from sbert_keras import inference

# "東京 😀" is out of the toy vocabularies (the toy BPE maps it to id -1).
TEXTS = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog",
         "the red car is fast and slow", "", "東京 😀"]


def keras_graph(encoder, texts):
    """The functional model's output (fixed-length padding, Keras layers)."""
    return np.asarray(encoder.predict(np.array(texts), verbose=0))


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_fused_graph_matches_the_keras_graph(kind, pooling):
    encoder = tiny_encoder(pooling=pooling, normalize=True, kind=kind)
    assert inference.supports(encoder.backbone)
    np.testing.assert_allclose(encoder.encode(TEXTS), keras_graph(encoder, TEXTS), atol=1e-6)


def test_encode_follows_weight_updates():
    encoder = tiny_encoder()
    before = encoder.encode(TEXTS)
    dense = encoder.backbone.transformer_layers[0]._feedforward_intermediate_dense
    dense.kernel.assign(dense.kernel * 3.0)
    after = encoder.encode(TEXTS)
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, keras_graph(encoder, TEXTS), atol=1e-6)


def test_bfloat16_path_is_close_to_float32():
    encoder = tiny_encoder(normalize=True)
    exact = encoder.encode(TEXTS)
    low = encoder.encode(TEXTS, precision="bfloat16")
    assert low.dtype == np.float32
    assert (low * exact).sum(1).min() >= 0.999


def test_other_backbones_use_the_keras_graph():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocab), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16, dropout=0.0)
    assert not inference.supports(backbone)
    preprocessor = SentenceEncoderPreprocessor(tokenizer, sequence_length=16,
                                               include_segment_ids=True)
    encoder = SentenceEncoder(backbone, preprocessor)
    for precision in ("float32", "bfloat16"):
        out = encoder.encode(TEXTS, precision=precision)
        assert np.isfinite(out).all()
    np.testing.assert_allclose(encoder.encode(TEXTS), keras_graph(encoder, TEXTS), atol=1e-6)


def test_unknown_precision_is_named():
    with pytest.raises(ValueError, match="int8"):
        tiny_encoder().encode(TEXTS, precision="int8")
