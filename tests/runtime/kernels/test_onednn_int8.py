"""Tests of `sbert_keras.runtime.kernels.onednn_int8`: the oneDNN int8 dense, Keras int8 weights, the CPU gate."""

import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from sbert_keras.compat import keras as keras_compat
from sbert_keras.runtime.kernels import activation_quantization
from sbert_keras.runtime.kernels import int8_quantization
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.routes import xnnpack
from sbert_keras.utils import hardware
from sbert_keras.utils.hardware import Host

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def onednn_route(monkeypatch):
    """`encode` in int8 on the oneDNN route, its fallback, tested here; XNNPACK's: test_xnnpack.py."""
    monkeypatch.setenv(xnnpack.DISABLE_ENV, "1")


# The int8 op reproduces Keras's int8 layers; the dequantized fallback (no
# exact int8 kernel here) skips their activation rounding and may run in bf16.
KERAS_INT8_TOLERANCE = 2e-3 if onednn_int8.int8_matmul_available() else 2e-2


def data(rows=40, fan_in=64, units=48, outlier=None):
    x = RNG.standard_normal((rows, fan_in)).astype("float32")
    if outlier is not None:
        x[:, outlier] *= 20.0
    kernel = (RNG.standard_normal((fan_in, units)) * 0.1).astype("float32")
    bias = RNG.standard_normal(units).astype("float32")
    return x, kernel, bias


def run(x, weights, activation=None, policy=None):
    # A fresh tf.function: the matmul policy (default: this host's) is fixed when the graph is traced.
    return tf.function(lambda t: onednn_int8.int8_dense(t, weights, activation, policy))(tf.constant(x)).numpy()


def relative_error(y, reference):
    return float(np.abs(y - reference).max() / np.abs(reference).max())


def uses_int8_op(weights, x, policy=None):
    graph = (
        tf.function(lambda t: onednn_int8.int8_dense(t, weights, policy=policy))
        .get_concrete_function(tf.TensorSpec(x.shape, tf.float32))
        .graph
    )
    return any(op.type == onednn_int8.QUANTIZED_MATMUL_OP for op in graph.get_operations())


@pytest.mark.parametrize("mode", ["dynamic", "token", "row", "static"])
def test_int8_dense_matches_float_dense(mode):
    x, kernel, bias = data()
    weights = int8_quantization.quantize_dense(kernel, bias, mode, input_max=np.abs(x).max(axis=0))
    assert relative_error(run(x, weights), x @ kernel + bias) < 0.02
    assert uses_int8_op(weights, x) == onednn_int8.int8_matmul_available()


def test_gelu_is_fused_and_exact():
    x, kernel, bias = data()
    weights = int8_quantization.quantize_dense(kernel, bias)
    reference = keras.activations.gelu(x @ kernel + bias).numpy()
    assert relative_error(run(x, weights, keras.activations.gelu), reference) < 0.02
    # An activation oneDNN cannot fuse is applied after the matmul.
    reference = keras.activations.silu(x @ kernel + bias).numpy()
    assert relative_error(run(x, weights, keras.activations.silu), reference) < 0.02


def test_smoothing_tames_an_outlier_channel():
    x, kernel, bias = data(outlier=3)
    reference = x @ kernel + bias
    input_max = np.abs(x).max(axis=0)
    plain = relative_error(run(x, int8_quantization.quantize_dense(kernel, bias, "static", input_max)), reference)
    smooth = relative_error(
        run(x, int8_quantization.quantize_dense(kernel, bias, "static", input_max, alpha=0.5)), reference
    )
    assert smooth < 0.02
    if onednn_int8.int8_matmul_available():  # without it activations stay float: nothing to tame
        assert smooth < plain


def test_unsigned_static_mode_for_gelu_outputs():
    pre, kernel, bias = data(fan_in=96)
    x = keras.activations.gelu(pre * 3.0).numpy()
    weights = int8_quantization.quantize_dense(
        kernel, bias, "static_u8", input_max=np.abs(x).max(axis=0), input_min=float(x.min())
    )
    assert weights.input_range > 0 and float(tf.reduce_min(weights.input_shift)) > 0
    assert relative_error(run(x, weights), x @ kernel + bias) < 0.02


def test_new_weights_in_the_same_graph_are_used():
    # The op's weight cache (is_weight_const=True) would silently reuse the
    # first weights; int8_dense must follow the weights it is given.
    x = tf.constant(data()[0])
    forward = tf.function(lambda t, w: onednn_int8.int8_dense(t, w))
    for seed in range(3):
        _, kernel, bias = data()
        kernel *= seed + 1
        out = forward(x, int8_quantization.quantize_dense(kernel, bias)).numpy()
        assert relative_error(out, x.numpy() @ kernel + bias) < 0.02


def test_keras_int8_dense_weights_are_read_exactly():
    x, kernel, bias = data()
    layer = keras.layers.Dense(kernel.shape[1], activation="gelu")
    layer.build((None, kernel.shape[0]))
    layer.set_weights([kernel, bias])
    layer.quantize("int8")
    q, kernel_range = int8_quantization.keras_int8_kernel(layer)
    np.testing.assert_array_equal(q, keras.ops.convert_to_numpy(keras_compat.int8_kernel(layer)))
    dequantized = q.astype("float32") * kernel_range / 127.0
    np.testing.assert_allclose(dequantized, kernel, atol=np.abs(kernel).max() / 100)
    # Per-row ("token") activation scales are what Keras's int8 layer uses.
    weights = onednn_int8.make_weights(q, kernel_range, bias, "token")
    out = run(x, weights, layer.activation)
    assert relative_error(out, layer(x).numpy()) < KERAS_INT8_TOLERANCE


def test_keras_int8_einsum_dense_weights_are_read_in_fused_layout():
    # The query projection of KerasHub's attention: (hidden) -> (heads, head_dim).
    x, _, _ = data(fan_in=16)
    layer = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 4), bias_axes="de")
    layer.build((None, None, 16))
    layer.quantize("int8")
    q, kernel_range = int8_quantization.keras_int8_kernel(layer)
    assert q.shape == (16, 8) and kernel_range.shape == (8,)
    bias = np.reshape(keras.ops.convert_to_numpy(layer.bias), [-1])
    out = run(x, onednn_int8.make_weights(q, kernel_range, bias, "token"))
    expected = layer(x[None]).numpy().reshape(x.shape[0], 8)
    assert relative_error(out, expected) < KERAS_INT8_TOLERANCE


def test_reading_a_float_layer_names_it():
    layer = keras.layers.Dense(3, name="plain")
    layer.build((None, 4))
    with pytest.raises(ValueError, match="plain"):
        int8_quantization.keras_int8_kernel(layer)


def test_static_mode_needs_calibration():
    _, kernel, bias = data()
    with pytest.raises(ValueError, match="input_max"):
        int8_quantization.quantize_dense(kernel, bias, "static")
    with pytest.raises(ValueError, match="mode"):
        int8_quantization.quantize_dense(kernel, bias, "int4")


@pytest.mark.parametrize("flags", [{"avx2", "fma"}, {"avx2", "avx512_bf16"}])
def test_cpu_without_vnni_falls_back_to_float(flags):
    host = Host(flags)
    assert not onednn_int8.int8_matmul_available(host)
    assert onednn_int8.fallback_dtype(host) == ("bfloat16" if "avx512_bf16" in flags else "float32")
    policy = onednn_int8.MatmulPolicy.for_host(host)
    assert not policy.int8_op and policy.warn
    pre, kernel, bias = data()
    x = keras.activations.gelu(pre).numpy()
    for weights in (
        int8_quantization.quantize_dense(kernel, bias, "token"),
        int8_quantization.quantize_dense(
            kernel, bias, "static_u8", np.abs(x).max(axis=0), alpha=0.5, input_min=float(x.min())
        ),
    ):
        with pytest.warns(UserWarning, match="dequantized"):
            assert not uses_int8_op(weights, x, policy)
        assert relative_error(run(x, weights, policy=policy), x @ kernel + bias) < 0.02


def vpmaddubsw_dense(x, weights, activation=None):
    """oneDNN's int8 product without VNNI: u8 x s8 pairs summed in saturating int16 (signed inputs + 128)."""
    unsigned = isinstance(weights, onednn_int8.StaticUint8DenseWeights)
    x = x * weights.input_scale + (weights.input_shift if unsigned else 0.0)
    x_range = weights.input_range if unsigned else tf.reduce_max(tf.abs(x))
    levels = 255.0 if unsigned else 127.0
    u = tf.round(x * (levels / x_range)) + (0.0 if unsigned else 128.0)
    w = tf.cast(weights.kernel, "float32")
    pairs = u[:, 0::2, None] * w[0::2] + u[:, 1::2, None] * w[1::2]
    acc = tf.reduce_sum(tf.clip_by_value(pairs, -32768.0, 32767.0), axis=1)
    if not unsigned:
        acc -= 128.0 * tf.reduce_sum(w, axis=0)
    return acc * (x_range / levels) * (weights.kernel_range / 127.0) + weights.bias


def test_kernel_probe_detects_saturating_int16_sums():
    error = tf.function(lambda: onednn_int8.kernel_probe_error(dense=vpmaddubsw_dense))()
    assert float(error) > 0.4  # about half the product is lost
    assert (
        float(tf.function(onednn_int8.kernel_probe_error)()) <= onednn_int8.KERNEL_PROBE_TOLERANCE
    )  # this host's route


def test_an_inexact_int8_kernel_closes_the_gate(monkeypatch):
    host = Host({"avx2", "avx512_vnni"})
    monkeypatch.setattr(onednn_int8, "_kernel_exact", lambda: False)
    assert not onednn_int8.int8_matmul_available(host)
    _, kernel, bias = data()
    with pytest.warns(UserWarning, match="saturating int16"):
        policy = onednn_int8.MatmulPolicy.for_host(host)
        assert not uses_int8_op(int8_quantization.quantize_dense(kernel, bias), data()[0], policy)


@pytest.mark.skipif(not onednn_int8.int8_matmul_available(), reason="needs a CPU with exact int8 matmuls (VNNI/AMX)")
def test_onednn_without_vnni_is_refused_in_a_fresh_process():
    # ONEDNN_MAX_CPU_ISA=AVX512_CORE: the CPU flags still say VNNI, but oneDNN
    # runs its non-VNNI int8 kernel; the gate's kernel probe must see it.
    code = "from sbert_keras.runtime.kernels import onednn_int8; print(onednn_int8.int8_matmul_available())"
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_a_dequantized_policy_traces_no_int8_op():
    x, kernel, bias = data()
    weights = int8_quantization.quantize_dense(kernel, bias)
    policy = onednn_int8.MatmulPolicy(int8_op=False)
    assert not uses_int8_op(weights, x, policy)
    assert relative_error(run(x, weights, policy=policy), x @ kernel + bias) < 0.02
    assert uses_int8_op(weights, x) == onednn_int8.int8_matmul_available()


def test_cpu_flags_reads_proc_cpuinfo():
    flags = hardware.cpu_flags()
    assert isinstance(flags, frozenset)
    if flags:
        assert "fpu" in flags or "sse2" in flags


def tiny_blocks(encoder):
    blocks = []
    for block in encoder.backbone.transformer_layers:
        attention = block._self_attention_layer
        blocks.append(
            {
                "qkv": attention._query_dense,
                "attention_output": attention._output_dense,
                "intermediate": block._feedforward_intermediate_dense,
                "output": block._feedforward_output_dense,
            }
        )
    return blocks


def test_calibrate_records_each_matmul_input_and_restores_the_layers():
    encoder = tiny_encoder()
    texts = ["a man is playing guitar", "the dog runs", "a cat"]
    batches = int8_quantization.calibration_batches(encoder.preprocessor, texts, batch_size=2)
    assert [len(ids) for ids, _ in batches] == [2, 1]
    assert batches[0][1].sum(axis=1).tolist()[0] >= batches[1][1].sum()  # longest first
    blocks = tiny_blocks(encoder)
    stats = int8_quantization.calibrate(encoder.backbone, blocks, batches)
    assert len(stats) == 2
    for block, block_stats in zip(blocks, stats):
        assert block_stats["qkv"][0].shape == (8,) and block_stats["attention_output"][0].shape == (8,)
        assert block_stats["intermediate"][0].shape == (8,) and block_stats["output"][0].shape == (16,)
        assert block_stats["output"][1] >= int8_quantization.GELU_MIN - 1e-4  # GELU outputs
        assert all((m > 0).all() for m, _ in block_stats.values())
        assert all("call" not in vars(layer) for layer in block.values())
    with pytest.raises(ValueError, match="empty"):
        int8_quantization.calibrate(encoder.backbone, blocks, [])


def test_quantize_role_follows_the_recipe():
    x, kernel, bias = data()
    stats = {"intermediate": (np.abs(x).max(axis=0), float(x.min()))}
    # DEFAULT_RECIPE: every role per row, as XNNPACK quantizes; no statistics needed.
    assert not int8_quantization.needs_calibration(int8_quantization.DEFAULT_RECIPE)
    for role in int8_quantization.ROLES:
        weights = int8_quantization.quantize_role(kernel, bias, role, None)
        assert isinstance(weights, onednn_int8.RowInt8DenseWeights)
    assert relative_error(run(x, weights), x @ kernel + bias) < 0.02
    recipe = int8_quantization.BATCH_SCALE_RECIPE
    assert int8_quantization.needs_calibration(recipe)
    weights = int8_quantization.quantize_role(kernel, bias, "intermediate", stats, recipe)
    assert isinstance(weights, onednn_int8.Int8DenseWeights)
    assert relative_error(run(x, weights), x @ kernel + bias) < 0.02
    kept = int8_quantization.quantize_role(kernel, bias, "output", stats, recipe, host=Host({"avx512_bf16"}))
    assert kept[0].dtype == tf.bfloat16
    kept = int8_quantization.quantize_role(kernel, bias, "output", stats, recipe, host=Host({"avx2", "fma"}))
    assert kept[0].dtype == tf.float32  # no bf16 matmuls on this CPU
    with pytest.raises(ValueError, match="input_max"):
        int8_quantization.quantize_role(kernel, bias, "intermediate", None, recipe)


def test_row_quantization_is_xnnpacks_asymmetric_uint8():
    x = tf.constant([[-1.0, 0.0, 3.0], [0.5, 1.0, 2.0], [0.0, 0.0, 0.0]])
    x_q, scale, zero = activation_quantization.quantize_rows(x)
    x_q = tf.bitcast(x_q, tf.uint8).numpy().astype("float32")
    np.testing.assert_allclose(scale.numpy()[:, 0], [4.0 / 255, 2.0 / 255, 1e-6 / 255], rtol=1e-6)
    assert list(zero.numpy()[:, 0]) == [64.0, 0.0, 0.0]  # 0 maps to an integer; ranges widened to hold 0
    assert x_q.min() >= 0 and x_q.max() <= 255
    np.testing.assert_allclose(scale.numpy() * (x_q - zero.numpy()), x.numpy(), atol=2.0 / 255)


def test_row_weights_carry_their_zero_point_sums():
    """The zero points multiply the kernel's column sums: computed with the weights, not on every call."""
    x, kernel, bias = data()
    weights = int8_quantization.quantize_role(kernel, bias, "qkv", None)
    dequantized = onednn_int8.dequantize(weights).numpy()
    np.testing.assert_allclose(weights.column_sums.numpy(), dequantized.sum(axis=0), rtol=1e-5, atol=1e-5)
    graph = (
        tf.function(lambda t: onednn_int8.int8_dense(t, weights, policy=onednn_int8.MatmulPolicy()))
        .get_concrete_function(tf.TensorSpec(x.shape, tf.float32))
        .graph
    )
    assert "Sum" not in {op.type for op in graph.get_operations()}  # no pass over the kernel per call
    if onednn_int8.int8_matmul_available():
        assert relative_error(run(x, weights), x @ kernel + bias) < 0.02


def test_dequantized_kernel_is_what_keras_computes_with():
    _, kernel, bias = data()
    layer = keras.layers.Dense(kernel.shape[1])
    layer.build((None, kernel.shape[0]))
    layer.set_weights([kernel, bias])
    layer.quantize("int8")
    dequantized = int8_quantization.dequantized_kernel(layer)
    expected = keras.ops.convert_to_numpy(layer._kernel).astype("float32") / keras.ops.convert_to_numpy(
        layer.kernel_scale
    )
    np.testing.assert_allclose(dequantized, expected, rtol=1e-6, atol=1e-7)


def test_float_kernel_reads_keras_int8_layers_in_graph_mode():
    layer = keras.layers.EinsumDense("abcd,cde->abe", output_shape=(None, 6), bias_axes="e")
    layer.build((None, None, 2, 4))
    kernel = layer.kernel.numpy()
    assert np.array_equal(int8_quantization.float_kernel(layer).numpy(), kernel)
    layer.quantize("int8")
    dequantized = tf.function(lambda: int8_quantization.float_kernel(layer))().numpy()
    assert dequantized.shape == kernel.shape
    np.testing.assert_allclose(dequantized, kernel, atol=np.abs(kernel).max() / 100)
    # Re-quantizing Keras's dequantized kernel gives back its int8 values.
    q, _ = int8_quantization.quantize_kernel(dequantized.reshape(8, 6))
    np.testing.assert_array_equal(q.numpy(), keras.ops.convert_to_numpy(layer._kernel).reshape(8, 6))


# === Wiring into the fused graph (sbert_keras.runtime.fused_graph / inference) ===

TEXTS = [
    "a man is playing guitar",
    "the dog runs in the park",
    "a cat",
    "a woman eats food in the kitchen",
    "red car fast",
]


def min_cosine(a, b):
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float(((a * b).sum(1) / np.maximum(norms, 1e-12)).min())


def int8_ops(encoder):
    """`_QuantizedMatMul` ops of one forward pass in the traced int8 graph.

    The most in one function body: the forward pass may sit in the branches
    of a `tf.cond` (one per LayerNorm kernel), each a whole pass.
    """
    graph_def = encoder.engine.graphs.fused_function("int8").get_concrete_function().graph.as_graph_def()
    bodies = [graph_def.node] + [function.node_def for function in graph_def.library.function]
    return max(sum(node.op == onednn_int8.QUANTIZED_MATMUL_OP for node in body) for body in bodies)


def test_encode_int8_runs_int8_matmuls_and_matches_float32():
    encoder = tiny_encoder()
    reference = encoder.encode(TEXTS, compute="float32")
    out = encoder.encode(TEXTS, compute="int8")
    assert encoder.engine.route("int8") == ("fused", "int8")
    assert min_cosine(out, reference) > 0.99
    # DEFAULT_RECIPE: qkv, attention output, intermediate and output in int8 per block.
    assert int8_ops(encoder) == (8 if onednn_int8.int8_matmul_available() else 0)


def test_int8_graph_follows_new_weights():
    # The engine's int8 graph lets oneDNN keep its weights between calls
    # (`is_weight_const`): changed weights must give a new trace, never the
    # first weights again, for batches (`encode`) and single queries.
    encoder, fresh = tiny_encoder(seed=1), tiny_encoder(seed=2)
    before = encoder.encode(TEXTS, compute="int8")
    encoder.encode(TEXTS[:1], compute="int8")
    traces = encoder.engine.trace_count
    for variable, value in zip(encoder.backbone.weights, fresh.backbone.weights):
        variable.assign(value)
    expected = fresh.encode(TEXTS, compute="int8")
    # Close, not equal: the smoothing factors stay calibrated on the first
    # weights. The first weights' int8 matmuls would be off by about 1e-2.
    one = encoder.encode(TEXTS[:1], compute="int8")  # detected inside the query's graph call
    np.testing.assert_allclose(one, fresh.encode(TEXTS[:1], compute="int8"), atol=1e-3)
    np.testing.assert_allclose(encoder.encode(TEXTS, compute="int8"), expected, atol=1e-3)
    assert min_cosine(before, expected) < 0.9  # the weights did change
    assert encoder.engine.trace_count == traces + 1  # one new int8 trace, the stale one dropped
    assert sum(key[:2] == ("fused", "int8") for key in encoder.engine.graphs.functions) == 1
    if onednn_int8.int8_matmul_available():
        graph = encoder.engine.graphs.fused_function("int8").get_concrete_function().graph.as_graph_def()
        every = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
        nodes = [n for n in every if n.op == onednn_int8.QUANTIZED_MATMUL_OP]
        assert nodes and all(n.attr["is_weight_const"].b for n in nodes)


def test_keras_quantized_encoder_runs_its_int8_weights_fast():
    encoder = tiny_encoder()
    encoder.quantize("int8")
    keras_int8 = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(TEXTS), verbose=0))
    out = encoder.encode(TEXTS, normalize=False, compute="int8")
    assert encoder.engine.route("int8") == ("fused", "int8")
    assert min_cosine(out, keras_int8) > 0.999  # the Keras int8 layers' arithmetic
    if onednn_int8.int8_matmul_available():
        assert encoder.engine.route("auto") == ("fused", "int8")
        assert int8_ops(encoder) == 8


def test_diverging_int8_graph_falls_back_with_a_warning(monkeypatch):
    encoder = tiny_encoder()
    reference = encoder.encode(TEXTS, compute="float32")

    def wrong(x, weights, activation=None, policy=None):  # large noise instead of the matmul
        return 100.0 * tf.random.stateless_normal([tf.shape(x)[0], weights.bias.shape[0]], [1, 2])

    monkeypatch.setattr(onednn_int8, "int8_dense", wrong)
    with pytest.warns(UserWarning, match="int8"):
        out = encoder.encode(TEXTS, compute="int8")
    np.testing.assert_allclose(out, reference, atol=1e-5)


def matmul_dtypes(graph_def):
    """The dtypes of every `MatMul` of a traced graph, its functions' bodies included."""
    bodies = [graph_def.node] + [function.node_def for function in graph_def.library.function]
    return {tf.as_dtype(n.attr["T"].type) for body in bodies for n in body if n.op == "MatMul"}


def test_int8_without_vnni_falls_back_to_float_matmuls(on_host):
    encoder = tiny_encoder()
    on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})
    reference = encoder.encode(TEXTS, compute="float32")
    with pytest.warns(UserWarning, match="dequantized"):
        out = encoder.encode(TEXTS, compute="int8")
    assert int8_ops(encoder) == 0
    assert min_cosine(out, reference) > 0.999
    # No bf16 matmul either (the recipe's bf16 feed-forward output): TensorFlow's is slow without AVX512-BF16.
    graph = encoder.engine.graphs.fused_function("int8").get_concrete_function().graph.as_graph_def()
    assert matmul_dtypes(graph) == {tf.float32}
