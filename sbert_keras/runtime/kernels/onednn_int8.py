"""int8 matmuls for the fused inference graph, through oneDNN in TensorFlow.

Why this is hand-written, and why this route:

- Keras's own int8 path (`layer.quantize("int8")`) runs
  `BatchMatMulV3(int8, int8 -> int32)`, an Eigen kernel without VNNI,
  several times slower than a bf16 matmul, so a quantized encoder is
  slower than a float one (benchmarks/RESULTS.md).
- `tf.raw_ops.QuantizedMatMulWithBiasAndDequantize` takes only unsigned
  activations and one scale per weight tensor, and under oneDNN v3 its
  MIN_FIRST bias compensation is wrong (an error of 2.5e5 at scale 6).
- TensorFlow's `_QuantizedMatMul` is the fused quantized matmul that Intel's
  quantization tools emit for oneDNN: signed int8 activations, one scale per
  output channel, bias, exact GELU and the float32 dequantization fused into
  one oneDNN inner product, which uses VNNI (`vpdpbusd`) or AMX. It has a
  leading underscore, so `tf.raw_ops` does not list it; `_quantized_matmul`
  builds it inside a graph through `sbert_keras.compat.tensorflow`. Checked against
  TensorFlow 2.21 (oneDNN v3); `int8_matmul_available` turns it off where
  the op or the CPU feature is missing, or where the op is not exact on a
  full-scale product (`kernel_probe_error`: oneDNN's non-VNNI kernel sums
  pairs in saturating int16, measured with `ONEDNN_MAX_CPU_ISA`).
- It is `encode`'s int8 fallback: `encode` runs int8 through TFLite's
  XNNPACK where it passes its self-check
  (`sbert_keras.runtime.routes.xnnpack`: every matmul in int8 with
  per-row activation scales, faster than this route), and this route where
  XNNPACK is off, fails or cannot run. SavedModels hold no int8.

Two traps of the op, both measured: with `is_weight_const=True` the kernel
caches the first weights it sees (re-laid out for oneDNN) and silently
reuses them when a later call passes other weights; and the op exists only
in graphs, so `int8_dense` must run inside a `tf.function`. So it is built
with `False` (weights re-laid out per call), except under a
`MatmulPolicy(constant_weights=True)`, for graphs re-traced whenever their weights change
(the engine's, one trace per `FusedWeights.version`): that cache makes
`encode` a little faster.

Weights follow Keras's int8 layout: symmetric per-output-channel int8,
`kernel ~= q * kernel_range / 127` (Keras stores `127 / kernel_range`).

Which matmuls run in int8 and how activations are scaled is decided in
`sbert_keras.runtime.kernels.int8_quantization` (recipes, SmoothQuant, calibration); the fused
graph's one dispatch point, `fused.dense`, calls `int8_dense` for these
weight types. How it runs them is a `MatmulPolicy`, fixed when the graph is
built and passed down (`fused.build_forward(..., matmul_policy=...)`): the
int8 op, its weights constant or not, or the weights dequantized to a float
dtype (a host without exact int8 matmuls).

Example:
```python
weights = int8_quantize.quantize_dense(kernel, bias)       # float32 -> int8
y = tf.function(lambda x: int8_dense(x, weights, keras.activations.gelu))(x)
```
"""

import collections
import dataclasses
import functools
import warnings

from sbert_keras.compat import tensorflow as tf_compat
from sbert_keras.runtime.kernels import onednn_matmul
from sbert_keras.runtime.kernels.activation_quantization import quantize_activations
from sbert_keras.runtime.kernels.activation_quantization import quantize_rows
from sbert_keras.utils import hardware
from sbert_keras.utils.backends import tensorflow as tf

# CPU flags (from /proc/cpuinfo) of the instructions that make int8 matmuls
# fast and exact: VNNI's `vpdpbusd` accumulates u8 x s8 products in int32.
# Without them oneDNN falls back to `vpmaddubsw`, whose int16 sums saturate.
QUANTIZED_MATMUL_OP = "_QuantizedMatMul"

# `kernel` int8 (in, out), `kernel_range` float32 (out,), `bias` float32 (out,);
# `input_range` float32 scalar: the activations' calibrated range (static);
# `input_scale` float32 (in,): multiplies the activations before they are
# quantized (SmoothQuant's 1 / s; the kernel rows were multiplied by s).
Int8DenseWeights = collections.namedtuple("Int8DenseWeights", ["kernel", "kernel_range", "bias", "input_scale"])
StaticInt8DenseWeights = collections.namedtuple(
    "StaticInt8DenseWeights", ["kernel", "kernel_range", "bias", "input_scale", "input_range"]
)
TokenInt8DenseWeights = collections.namedtuple(
    "TokenInt8DenseWeights", ["kernel", "kernel_range", "bias", "input_scale"]
)
# Unsigned static quantization of inputs bounded below (GELU outputs >= -0.17):
# `x * input_scale + input_shift >= 0` is quantized to uint8 over
# `[0, input_range]`, twice the resolution of a symmetric int8 scale; `bias`
# already subtracts `input_shift @ kernel`.
StaticUint8DenseWeights = collections.namedtuple(
    "StaticUint8DenseWeights", ["kernel", "kernel_range", "bias", "input_scale", "input_shift", "input_range"]
)
# One asymmetric uint8 scale and zero point per row, computed at run time: how
# XNNPACK's dynamic int8 kernels (QD8) quantize, so this fallback keeps that
# route's scheme. `column_sums` float32 (out,): the dequantized kernel's column
# sums, which the zero points multiply, computed with the weights, not per call.
RowInt8DenseWeights = collections.namedtuple(
    "RowInt8DenseWeights", ["kernel", "kernel_range", "bias", "input_scale", "column_sums"]
)
INT8_WEIGHT_TYPES = (
    Int8DenseWeights,
    StaticInt8DenseWeights,
    TokenInt8DenseWeights,
    StaticUint8DenseWeights,
    RowInt8DenseWeights,
)
# `kernel_probe_error` of an exact int8 kernel is 0; a saturating one's about 0.5.
KERNEL_PROBE_TOLERANCE = 1e-3


# === CPU gate ===


@functools.lru_cache(maxsize=1)
def _op_registered():
    """Whether this TensorFlow build registers `_QuantizedMatMul` (oneDNN builds do)."""
    return tf_compat.op_registered(QUANTIZED_MATMUL_OP)


def int8_matmul_available(host=None):
    """Whether `int8_dense` runs int8 matmuls here (else it dequantizes).

    True when the CPU has one of `hardware.INT8_FLAGS`, TensorFlow has the
    oneDNN `_QuantizedMatMul` op, and that op is exact on inputs that
    saturate int16 sums (`kernel_probe_error`, run once per process): so
    oneDNN's non-VNNI kernel is never used, also where the flags and the
    kernel oneDNN picks disagree (`ONEDNN_MAX_CPU_ISA`, a virtual CPU).

    Args:
        host: a `hardware.Host`, or None for this machine's.
    """
    host = host or hardware.current_host()
    return host.int8 and _op_registered() and _kernel_exact()


@functools.lru_cache(maxsize=1)
def _kernel_exact():
    """Whether oneDNN's int8 kernel computes `kernel_probe_error`'s saturating product exactly."""
    with tf.init_scope():  # eager, also when asked while a graph is traced
        error = tf.function(lambda: kernel_probe_error(dense=_int8_op_dense))()
        return float(error) <= KERNEL_PROBE_TOLERANCE


def fallback_dtype(host=None):
    """bfloat16 where the CPU has it, else float32: the dequantized fallback's and a recipe's bf16 roles' dtype.

    Args:
        host: a `hardware.Host`, or None for this machine's.
    """
    return "bfloat16" if (host or hardware.current_host()).bf16 else "float32"


@dataclasses.dataclass(frozen=True)
class MatmulPolicy:
    """How the fused graph's dense layers run, fixed when the graph is built (see `fused.build_forward`).

    Args:
        int8_op: bool. int8 weights run oneDNN's `_QuantizedMatMul`; False:
            they are dequantized and multiplied in `dtype`.
        dtype: str. The matmul dtype of dequantized int8 weights.
        constant_weights: bool. Build the int8 op with `is_weight_const=True`
            (oneDNN lays the weights out once, at the first call, and reuses
            them): only for a graph traced anew when its weights change.
        constant_bf16: bool. Run bf16 matmuls as `onednn_matmul.constant_dense`
            (oneDNN keeps their weights too; the same rule): only on a bf16
            host where `onednn_matmul.constant_matmul_available()`.
        warn: bool. Warn when the graph is traced that int8 weights are
            dequantized (the host has no exact int8 matmul).
    """

    int8_op: bool = True
    dtype: str = "float32"
    constant_weights: bool = False
    constant_bf16: bool = False
    warn: bool = False

    @classmethod
    def for_host(cls, host=None, constant_weights=False):
        """The int8 op where `int8_matmul_available(host)`, else weights dequantized to `fallback_dtype(host)`.

        With `constant_weights`, bf16 matmuls keep their weights too where
        `onednn_matmul.constant_matmul_available()` (probed here: call it outside a trace).
        """
        host = host or hardware.current_host()
        constant_bf16 = constant_weights and host.bf16 and onednn_matmul.constant_matmul_available()
        if int8_matmul_available(host):
            return cls(constant_weights=constant_weights, constant_bf16=constant_bf16)
        return cls(int8_op=False, dtype=fallback_dtype(host), constant_bf16=constant_bf16, warn=True)


# === Weights ===


def make_weights(q, kernel_range, bias, mode="dynamic", input_scale=None, input_range=None, input_shift=None):
    """Int8 dense weights of tensors, from int8 `q` `(in, out)` and per-channel ranges `(out,)`.

    Args:
        q: int8 `(in, out)`.
        kernel_range: float `(out,)`; the kernel is `q * kernel_range / 127`.
        bias: float `(out,)`.
        mode: str. How activations are quantized: `"dynamic"` (one scale per
            batch, its maximum), `"token"` (one scale per row, as Keras's
            int8 layers do), `"row"` (one uint8 scale and zero point per
            row, as XNNPACK does), `"static"` (one calibrated scale) or
            `"static_u8"` (calibrated, unsigned, for inputs bounded below).
        input_scale: float `(in,)` or None (ones). Multiplies the activations.
        input_range: float. The static range of the scaled activations.
        input_shift: float `(in,)`. With `"static_u8"`: added to the scaled
            activations, which makes them non-negative; `bias` must already
            subtract `input_shift @ kernel`.
    """
    q = tf.cast(q, "int8")
    if input_scale is None:
        input_scale = tf.ones([q.shape[0]], "float32")
    parts = (q, tf.cast(kernel_range, "float32"), tf.cast(bias, "float32"), tf.cast(input_scale, "float32"))
    if mode == "dynamic":
        return Int8DenseWeights(*parts)
    if mode == "token":
        return TokenInt8DenseWeights(*parts)
    if mode == "row":
        return RowInt8DenseWeights(*parts, tf.reduce_sum(tf.cast(q, "float32"), axis=0) * (parts[1] / 127.0))
    if mode == "static":
        return StaticInt8DenseWeights(*parts, tf.cast(input_range, "float32"))
    if mode == "static_u8":
        return StaticUint8DenseWeights(*parts, tf.cast(input_shift, "float32"), tf.cast(input_range, "float32"))
    raise ValueError(f"`mode` must be 'dynamic', 'token', 'row', 'static' or 'static_u8'. Received {mode!r}.")


def dequantize(weights, dtype="float32"):
    """The float kernel of int8 weights, in `dtype`, for unscaled inputs.

    `diag(input_scale) @ q * kernel_range / 127`: applying the activation
    scale to the kernel instead gives the same product.
    """
    kernel = tf.cast(weights.kernel, "float32") * (weights.kernel_range / 127.0)
    return tf.cast(kernel * weights.input_scale[:, None], dtype)


# === The matmul ===


def kernel_probe_error(fan_in=64, dense=None):
    """Graph-safe: max relative error of `int8_dense` on inputs that saturate int16 pair sums.

    Activations and weights at full scale, so every u8 x s8 pair (oneDNN
    shifts signed activations by 128) sums to 255 * 127 * 2 > 32767. Int32
    accumulation (VNNI, AMX) is exact; oneDNN's non-VNNI `vpmaddubsw` kernel
    is not (measured with `ONEDNN_MAX_CPU_ISA=AVX512_CORE` / `AVX2`: 0.49
    unsigned, 0.99 signed). Probes `Int8DenseWeights` and `StaticUint8DenseWeights`.

    Args:
        fan_in: int. The contraction length.
        dense: callable or None (`int8_dense`): the int8 matmul probed.
    """
    units = 16
    x = tf.ones([4, fan_in], "float32")
    q = tf.fill([fan_in, units], tf.constant(127, tf.int8))
    kernel_range = tf.ones([units], "float32")
    bias = tf.zeros([units], "float32")
    ones = tf.ones([fan_in], "float32")
    expected = float(fan_in)  # x @ (q * 1 / 127) = fan_in
    signed = Int8DenseWeights(q, kernel_range, bias, ones)
    unsigned = StaticUint8DenseWeights(q, kernel_range, bias, ones, tf.zeros([fan_in]), tf.constant(1.0))
    dense = dense or int8_dense
    errors = [tf.reduce_max(tf.abs(dense(x, w) - expected)) / expected for w in (signed, unsigned)]
    return tf.reduce_max(tf.stack(errors))


def _quantized_matmul(x_q, kernel_q, bias, x_range, kernel_range, fused_ops, constant_weights=False):
    """oneDNN's fused `activation((x_q * s_x) @ (kernel_q * s_k) + bias)` in float32.

    `x_q` is qint8 (`s_x = x_range / 127`) or quint8 (`s_x = x_range / 255`);
    `s_k = kernel_range / 127` per output channel.
    """
    low = tf.zeros_like(x_range) if x_q.dtype == tf.quint8 else -x_range
    inputs = [x_q, kernel_q, bias, low, x_range, -kernel_range, kernel_range]
    op = tf_compat.apply_op(
        QUANTIZED_MATMUL_OP,
        name="QuantizedMatMul",
        device_inputs=inputs,
        host_inputs=[],
        Tdevice_outputs=[tf.float32],
        Thost_outputs=[],
        T1=x_q.dtype,
        T2=tf.qint8,
        Tbias=tf.float32,
        Tout=tf.float32,
        U=tf.float32,
        transpose_a=False,
        transpose_b=False,
        is_weight_const=bool(constant_weights),
        is_bias_const=False,
        fused_ops=list(fused_ops),
        input_quant_mode="SCALED",
        output_quant_mode="SCALED",
        leakyrelu_alpha=0.2,
    )
    return op.outputs[0]


def int8_dense(x, weights, activation=None, policy=None):
    """`activation(x @ kernel + bias)` with an int8 matmul; float32 `(rows, out)`.

    Call it inside a `tf.function`. Activations are multiplied by
    `input_scale` and quantized to int8: one scale per batch (its maximum;
    `Int8DenseWeights`), per row (`TokenInt8DenseWeights`) or calibrated
    (`StaticInt8DenseWeights`). With one scale, the int8 product, bias,
    GELU/ReLU and the float32 dequantization run as one oneDNN kernel.
    Where `policy` says so (`MatmulPolicy.for_host` on a host without an
    exact int8 matmul, or `MatmulPolicy.dequantized`), the kernel is
    dequantized and the matmul runs in `policy.dtype` (no int8 speed; the
    host fallback warns).

    Args:
        x: float tensor `(rows, in)`.
        weights: one of `INT8_WEIGHT_TYPES`.
        activation: callable or None.
        policy: a `MatmulPolicy`, or None for `MatmulPolicy.for_host()` (this machine).
    """
    x = tf.cast(x, "float32")
    policy = policy or MatmulPolicy.for_host()
    if not policy.int8_op:
        dtype = policy.dtype
        if policy.warn:
            warnings.warn(
                f"No exact int8 matmul here (CPU flags {sorted(hardware.INT8_FLAGS)}, TensorFlow's oneDNN "
                f"{QUANTIZED_MATMUL_OP}, `kernel_probe_error`): int8 weights are dequantized and multiplied "
                f"in {dtype} instead (correct vectors, no int8 speed). Without VNNI, oneDNN's int8 kernel "
                "sums u8 x s8 pairs in saturating int16.",
                stacklevel=2,
            )
        bias = weights.bias
        if isinstance(weights, StaticUint8DenseWeights):  # undo the shift's compensation
            bias = bias + tf.linalg.matvec(
                dequantize(weights), weights.input_shift / weights.input_scale, transpose_a=True
            )
        y = tf.matmul(tf.cast(x, dtype), dequantize(weights, dtype))
        y = tf.cast(tf.nn.bias_add(y, tf.cast(bias, dtype)), "float32")
        return y if activation is None else activation(y)
    return _int8_op_dense(x, weights, activation, policy.constant_weights)


def _int8_op_dense(x, weights, activation=None, constant_weights=False):
    """`int8_dense` through oneDNN's `_QuantizedMatMul`, whatever the CPU (graph only)."""
    x = tf.cast(x, "float32")
    x = x * weights.input_scale
    if isinstance(weights, StaticUint8DenseWeights):
        x = x + weights.input_shift
    kernel_q = tf.bitcast(tf.cast(weights.kernel, tf.int8), tf.qint8)
    if isinstance(weights, TokenInt8DenseWeights):
        x_q, x_range = quantize_activations(x, axis=1)
        unit = tf.constant(127.0)
        zero_bias = tf.zeros_like(weights.bias)
        fused_ops = ["BiasAdd", "Dequantize"]
        y = _quantized_matmul(x_q, kernel_q, zero_bias, unit, weights.kernel_range, fused_ops, constant_weights)
        y = y * (x_range / 127.0) + weights.bias
        return y if activation is None else activation(y)
    if isinstance(weights, RowInt8DenseWeights):  # x = scale (x_q - zero): x @ k = scale (x_q @ k - zero sum(k))
        x_q, scale, zero = quantize_rows(x)
        zero_bias = tf.zeros_like(weights.bias)
        y = _quantized_matmul(
            x_q, kernel_q, zero_bias, tf.constant(255.0), weights.kernel_range, ["BiasAdd", "Dequantize"],
            constant_weights,
        )  # fmt: skip
        y = scale * (y - zero * weights.column_sums) + weights.bias
        return y if activation is None else activation(y)
    if isinstance(weights, StaticUint8DenseWeights):
        x_range = weights.input_range
        x_q = tf.raw_ops.QuantizeV2(
            input=x,
            min_range=tf.zeros_like(x_range),
            max_range=x_range,
            T=tf.quint8,
            mode="SCALED",
            round_mode="HALF_TO_EVEN",
            ensure_minimum_range=0.0,
        ).output  # fmt: skip (the raw op: `tf.quantization.quantize` logs a deprecation on every trace)
    else:
        x_range = weights.input_range if isinstance(weights, StaticInt8DenseWeights) else None
        x_q, x_range = quantize_activations(x, x_range)
    post = onednn_matmul.post_op(activation)
    fused_ops = ["BiasAdd"] + ([post] if post else []) + ["Dequantize"]
    y = _quantized_matmul(
        x_q,
        kernel_q,
        weights.bias,
        x_range,
        weights.kernel_range,
        fused_ops if post is not None else ["BiasAdd", "Dequantize"],
        constant_weights,
    )
    return y if post is not None else activation(y)
