"""Run-time int8 quantization of activations for `sbert_keras.runtime.kernels.onednn_int8`.

Written in TensorFlow ops because the quantize op TensorFlow has
(`QuantizeV2`) takes fixed ranges: a symmetric range per batch
or per row, and XNNPACK's asymmetric per-row scheme, are computed here from
the activations themselves, inside the traced graph.

Example:
```python
x_q, x_range = quantize_activations(x)   # qint8, one scale for the batch
x_q, scale, zero = quantize_rows(x)      # quint8, x ~= scale * (x_q - zero) per row
```
"""

from sbert_keras.utils.backends import tensorflow as tf


def quantize_activations(x, x_range=None, axis=None):
    """Symmetric int8 quantization of `x`; `(x_q, x_range)`.

    Args:
        x: float32 tensor `(rows, in)`.
        x_range: float32 scalar tensor, or None: the maximum |x| (of the
            whole batch, or of each row with `axis=1`).
        axis: None or 1 (one scale per row, returned as `(rows, 1)`).
    """
    if x_range is None:
        x_range = tf.maximum(tf.reduce_max(tf.abs(x), axis=axis, keepdims=axis is not None), 1e-6)
    x_range = tf.cast(x_range, "float32")
    if axis is not None:
        x_q = tf.cast(tf.clip_by_value(tf.round(x * (127.0 / x_range)), -127.0, 127.0), tf.int8)
        return tf.bitcast(x_q, tf.qint8), x_range
    # The raw op: `tf.quantization.quantize` logs a deprecation warning on every trace.
    quantized = tf.raw_ops.QuantizeV2(
        input=x, min_range=-x_range, max_range=x_range, T=tf.qint8, mode="SCALED", round_mode="HALF_TO_EVEN",
        narrow_range=True, ensure_minimum_range=0.0,
    )  # fmt: skip
    return quantized.output, x_range


def quantize_rows(x):
    """Asymmetric uint8 quantization of each row of `x`, as XNNPACK's `xnn_qd8` kernels do; `(x_q, scale, zero)`.

    Each row's range is widened to hold 0, cut into 255 steps of `scale`,
    and 0 maps to the integer `zero`: `x ~= scale * (x_q - zero)`.

    Args:
        x: float32 `(rows, in)`.
    """
    low = tf.minimum(tf.reduce_min(x, axis=1, keepdims=True), 0.0)
    high = tf.maximum(tf.reduce_max(x, axis=1, keepdims=True), 0.0)
    scale = tf.maximum(high - low, 1e-6) / 255.0
    zero = tf.clip_by_value(tf.round(-low / scale), 0.0, 255.0)
    x_q = tf.cast(tf.clip_by_value(tf.round(x / scale) + zero, 0.0, 255.0), tf.uint8)
    return tf.bitcast(x_q, tf.quint8), scale, zero
