"""Tests of `sbert_keras.runtime.kernels.onednn_matmul`: the bf16 matmul whose weights oneDNN keeps."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from sbert_keras.compat import tensorflow as tf_compat
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.kernels import onednn_matmul
from sbert_keras.utils import hardware
from sbert_keras.utils.hardware import Host

available = pytest.mark.skipif(
    not onednn_matmul.constant_matmul_available(), reason="no bf16 _MklNativeFusedMatMul on this CPU and TensorFlow"
)

TEXTS = ["a man is playing guitar", "the dog runs in the park", "a cat", "a woman eats food in the kitchen"]


def bf16_weights(seed, fan_in=64, units=48):
    rng = np.random.default_rng(seed)
    kernel = tf.constant(rng.normal(size=(fan_in, units)) * 0.1, tf.bfloat16)
    return kernel, tf.constant(rng.normal(size=units), tf.bfloat16)


def constant_ops(graph_def):
    """The constant-weights matmuls of the function body with most of them (a `tf.cond` holds whole passes)."""
    bodies = [graph_def.node] + [function.node_def for function in graph_def.library.function]
    return max(
        ([node for node in body if node.op == onednn_matmul.FUSED_MATMUL_OP] for body in bodies), key=len
    )  # fmt: skip


@available
@pytest.mark.parametrize("activation", [None, keras.activations.gelu, keras.activations.relu, keras.activations.tanh])
@pytest.mark.parametrize("rows", [1, 40, 300])
def test_constant_dense_matches_the_plain_matmul(rows, activation):
    kernel, bias = bf16_weights(rows)
    x = tf.constant(np.random.default_rng(0).normal(size=(rows, 64)), tf.bfloat16)
    got = tf.function(lambda t: onednn_matmul.constant_dense(t, kernel, bias, activation))(x)
    plain = tf.function(lambda t: fused_graph.dense(t, fused_graph.DenseWeights(kernel, bias), activation))(x)
    got, plain = (tf.cast(y, tf.float32).numpy() for y in (got, plain))
    np.testing.assert_allclose(got, plain, atol=onednn_matmul.FUSED_MATMUL_TOLERANCE * np.abs(plain).max())


@available
def test_the_kernel_keeps_the_first_weights_it_sees():
    # Why graphs with these matmuls are traced once per weights version.
    run = tf.function(lambda t, kernel, bias: onednn_matmul.constant_dense(t, kernel, bias))
    x = tf.constant(np.random.default_rng(0).normal(size=(40, 64)), tf.bfloat16)
    (kernel, bias), (other, _) = bf16_weights(1), bf16_weights(2)
    first = run(x, kernel, bias).numpy()
    np.testing.assert_array_equal(run(x, other, bias).numpy(), first)  # a new kernel, the same bias: stale
    assert not np.allclose(tf.function(onednn_matmul.constant_dense)(x, other, bias).numpy(), first)


@available
def test_the_bf16_graph_keeps_its_weights_and_follows_new_ones():
    # Changed weights give a new trace, never the first weights again, for batches and single queries.
    encoder, fresh = tiny_encoder(seed=1), tiny_encoder(seed=2)
    before = encoder.encode(TEXTS, compute="bfloat16")
    encoder.encode(TEXTS[:1], compute="bfloat16")
    assert encoder.engine.route("bfloat16") == ("fused", "bfloat16")
    traces = encoder.engine.trace_count
    for variable, value in zip(encoder.backbone.weights, fresh.backbone.weights):
        variable.assign(value)
    one = encoder.encode(TEXTS[:1], compute="bfloat16")
    np.testing.assert_allclose(one, fresh.encode(TEXTS[:1], compute="bfloat16"), atol=1e-6)
    expected = fresh.encode(TEXTS, compute="bfloat16")
    np.testing.assert_allclose(encoder.encode(TEXTS, compute="bfloat16"), expected, atol=1e-6)
    assert np.abs(before - expected).max() > 0.1  # the weights did change
    assert encoder.engine.trace_count == traces + 1  # one new bf16 trace, the stale one dropped
    assert sum(key[:2] == ("fused", "bfloat16") for key in encoder.engine.graphs.functions) == 1
    graph = encoder.engine.graphs.fused_function("bfloat16").get_concrete_function().graph.as_graph_def()
    nodes = constant_ops(graph)
    assert len(nodes) == 8 and all(node.attr["is_filter_const"].b for node in nodes)  # 4 matmuls, 2 layers


@available
def test_saved_models_and_the_float32_graph_keep_the_portable_ops():
    encoder = tiny_encoder()
    forward, _ = encoder.engine.routes["fused"].forward("bfloat16")  # what a SavedModel serves
    spec = tf.TensorSpec([None, None], tf.int32)
    exported = tf.function(forward).get_concrete_function(spec, spec).graph.as_graph_def()
    float32 = encoder.engine.graphs.fused_function("float32").get_concrete_function().graph.as_graph_def()
    assert not constant_ops(exported) and not constant_ops(float32)


def test_no_constant_matmuls_without_bf16_instructions(monkeypatch):
    monkeypatch.setattr(hardware, "current_host", lambda: Host(cpu_flags={"avx2", "fma", "avx512f"}))
    onednn_matmul.constant_matmul_available.cache_clear()
    try:
        assert not onednn_matmul.constant_matmul_available()  # never probed: the op could abort the process
    finally:
        monkeypatch.undo()
        onednn_matmul.constant_matmul_available.cache_clear()
    policy = onednn_int8.MatmulPolicy.for_host(Host(cpu_flags={"avx2", "fma", "avx512_vnni"}), constant_weights=True)
    assert not policy.constant_bf16


def test_a_missing_op_keeps_the_plain_matmuls(monkeypatch):
    monkeypatch.setattr(tf_compat, "op_registered", lambda op_type: False)
    onednn_matmul.constant_matmul_available.cache_clear()
    try:
        assert not onednn_matmul.constant_matmul_available()
    finally:
        monkeypatch.undo()
        onednn_matmul.constant_matmul_available.cache_clear()
