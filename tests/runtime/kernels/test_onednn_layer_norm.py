"""oneDNN's fused LayerNorm: agreement with the composite, the self-check at large batches, int8 at every size."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from sbert_keras.compat import tensorflow as tf_compat
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.kernels import onednn_layer_norm

pytestmark = pytest.mark.skipif(
    not onednn_layer_norm.layer_norm_available(), reason="no _MklLayerNorm in this TensorFlow"
)


@pytest.mark.parametrize("rows", [3, 130, 448])
@pytest.mark.parametrize("scale", [1e-2, 1.0, 1e3])
def test_fused_layer_norm_matches_the_composite(rows, scale):
    rng = np.random.default_rng(rows)
    x = tf.constant(rng.normal(size=(rows, 384)) * scale + scale, tf.float32)
    gamma = tf.constant(rng.normal(size=384), tf.float32)
    beta = tf.constant(rng.normal(size=384), tf.float32)
    fused = tf.function(onednn_layer_norm.fused_layer_norm)(x, gamma, beta, 1e-12).numpy()
    reference = onednn_layer_norm.composite_layer_norm(x, gamma, beta, 1e-12).numpy()
    np.testing.assert_allclose(fused, reference, atol=1e-5 * np.abs(reference).max())


def test_a_wrong_fused_layer_norm_is_caught_by_the_self_check(monkeypatch, on_host):
    """Only the probe repeated past FUSED_LAYER_NORM_MIN_ROWS runs the fused kernel; it must be checked too."""
    original = onednn_layer_norm.fused_layer_norm
    monkeypatch.setattr(onednn_layer_norm, "fused_layer_norm", lambda *args: original(*args) * 1.01)
    encoder = tiny_encoder(normalize=True)
    on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})  # batches run the fused graph (no XNNPACK float32)
    texts = ["the cat sat", "a dog ran in the park"] * 40  # > FUSED_LAYER_NORM_MIN_ROWS tokens per batch
    with pytest.warns(UserWarning, match=r"float32 diverges"):
        out = encoder.encode(texts, batch_size=64, compute="float32")
    monkeypatch.setattr(onednn_layer_norm, "fused_layer_norm", original)
    reference = tiny_encoder(normalize=True).encode(texts, batch_size=64, compute="float32")
    np.testing.assert_allclose(out, reference, atol=1e-5)


def test_large_and_small_batches_agree(on_host):
    encoder = tiny_encoder()
    on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})  # batches run the fused graph (no XNNPACK float32)
    texts = ["the red car is fast", "a cat", "dogs run in the park every day"] * 30
    large = encoder.encode(texts, batch_size=90, compute="float32")  # fused LayerNorm
    small = encoder.encode(texts, batch_size=2, compute="float32")  # composite LayerNorm
    np.testing.assert_allclose(large, small, atol=1e-5)


def test_the_tensorflow_compat_layer_asks_the_op_registry():
    assert tf_compat.op_registered(onednn_layer_norm.LAYER_NORM_OP)  # what `layer_norm_available` builds on
    assert not tf_compat.op_registered("NoSuchOpAnywhere")


@pytest.mark.parametrize(
    "precision, policy, switches",
    [
        ("float32", None, True),
        ("int8", onednn_int8.MatmulPolicy(), False),
        ("int8", onednn_int8.MatmulPolicy(int8_op=False), True),  # dequantized: no row is rounded
    ],
)
def test_int8_runs_one_layer_norm_at_every_size(precision, policy, switches):
    """int8 rounds every activation row: a LayerNorm switched by size would make a text's vector depend on its batch."""
    encoder = tiny_encoder()
    weights = fused_graph.FusedWeights(encoder.backbone, precision)
    forward = tf.function(fused_graph.build_forward(encoder, weights, fused_norm=True, matmul_policy=policy))
    ids = tf.TensorSpec([None, None], tf.int32)
    graph = forward.get_concrete_function(ids, ids).graph
    ops = {op.type for op in graph.get_operations()}
    assert bool(ops & {"If", "StatelessIf"}) == switches  # float: fused or composite by size, in a cond
    assert (onednn_layer_norm.LAYER_NORM_OP in ops) != switches  # int8: the fused kernel, in the graph itself
