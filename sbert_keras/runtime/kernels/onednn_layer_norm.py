"""oneDNN's fused LayerNorm for the fused inference graph.

Why this is hand-written: a LayerNorm written with TensorFlow ops
(`tf.nn.moments` + `tf.nn.batch_normalization`) is about eight kernels
(two means, a squared difference, rsqrt, three multiplies, a subtraction,
an add). Grappler's remapper does not fuse that pattern into oneDNN's
layer-normalization primitive, and KerasHub's `LayerNormalization` runs
the same kernels. TensorFlow ships the fused kernel as `_MklLayerNorm`
(`x`, `scale`, `offset`, `epsilon`; normalisation over the last axis), the
op its remapper emits for Keras 2 LayerNorms. It has a leading underscore,
so `tf.raw_ops` does not list it and it is built with `op_def_library`
inside a graph, as `sbert_keras.runtime.kernels.onednn_int8` builds `_QuantizedMatMul`.

On a batch (hundreds of rows) the fused op takes about half the time of
the composite, but each call has a fixed cost, so for a single query (a
few dozen rows) the composite is faster.
`FUSED_LAYER_NORM_MIN_ROWS` is where the fused graph switches. Checked
against TensorFlow 2.21.

Nothing is trusted blindly: `layer_norm_available()` runs the op once on a
small input and compares it with the composite; where the op is missing
(another TensorFlow build, `TF_ENABLE_ONEDNN_OPTS=0`) or differs,
the graph keeps the composite. The fused graph's own self-check
(`sbert_keras.runtime.engine`) then compares the whole graph with Keras, at
both sizes.

Example:
```python
if layer_norm_available():
    y = tf.function(lambda x: fused_layer_norm(x, gamma, beta, 1e-12))(x)
```
"""

import functools

import numpy as np

from sbert_keras.compat import tensorflow as tf_compat
from sbert_keras.utils.backends import tensorflow as tf

LAYER_NORM_OP = "_MklLayerNorm"
# Agreement of the fused op with the composite on the availability probe.
LAYER_NORM_TOLERANCE = 1e-5
# Rows from which the fused kernel beats the composite (see above).
FUSED_LAYER_NORM_MIN_ROWS = 128


def composite_layer_norm(x, gamma, beta, epsilon):
    """LayerNorm over the last axis from TensorFlow ops (float32 in, float32 out)."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon)


def fused_layer_norm(x, gamma, beta, epsilon):
    """oneDNN's `_MklLayerNorm` over the last axis of float32 `(rows, features)`; only inside a graph.

    Check `layer_norm_available()` (outside any trace) before using it.
    """
    op = tf_compat.apply_op(LAYER_NORM_OP, name="LayerNorm", x=x, scale=gamma, offset=beta, epsilon=float(epsilon))
    return op.outputs[0]


@functools.lru_cache(maxsize=1)
def layer_norm_available():
    """Whether `_MklLayerNorm` runs here and agrees with the composite.

    Probed once per process, on float32 rows of different scales.
    """
    if not tf_compat.op_registered(LAYER_NORM_OP):
        return False
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(5, 96)) * np.array([[0.01], [1], [10], [100], [1e3]]), tf.float32)
    gamma = tf.constant(rng.normal(size=96), tf.float32)
    beta = tf.constant(rng.normal(size=96), tf.float32)
    try:
        fused = tf.function(fused_layer_norm)(x, gamma, beta, 1e-12).numpy()
    except (tf.errors.OpError, TypeError, ValueError):
        return False
    reference = composite_layer_norm(x, gamma, beta, 1e-12).numpy()
    return bool(np.abs(fused - reference).max() <= LAYER_NORM_TOLERANCE * np.abs(reference).max())
