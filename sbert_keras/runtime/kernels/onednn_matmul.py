"""oneDNN's fused bf16 matmul with its weights kept in oneDNN's layout.

Why this is hand-built: TensorFlow's remapper turns `bias_add(matmul(x, w),
b)` (and a GELU or ReLU after it) into one oneDNN inner product, but hands
it the weights in their plain layout on every call, so oneDNN picks a
kernel that reads them as they are: on an AMX CPU, `gemm:jit` on the
AVX-512 units instead of the AMX tiles (`ONEDNN_VERBOSE=1` shows it).
TensorFlow's `_MklNativeFusedMatMul` with `is_filter_const=True` lets
oneDNN choose the weights' layout, re-lay them once at the first call and
keep them in the kernel (`brgemm:avx10_1_512_amx` on AMX). Keras and
TensorFlow's public ops have no way to ask for it. The op has a leading
underscore and is registered under a kernel label, so it is built inside a
graph through `sbert_keras.compat.tensorflow`. Checked against TensorFlow 2.21.

The trap is int8's (`onednn_int8`): the kernel caches the first weights it
sees and may silently reuse them when a later call passes others (a new
kernel with the same bias returns the old product, measured). So only
graphs traced anew whenever their weights change build it, under a
`onednn_int8.MatmulPolicy(constant_bf16=True)` (the engine's, one trace
per `FusedWeights.version`); SavedModels keep the portable ops.

Nothing is trusted blindly: `constant_matmul_available()` runs the op on
two sets of weights and compares it with the plain matmul. Where the CPU
has no bf16 instructions (oneDNN may have no bf16 kernel there, and the op
would abort the process), where the op is missing (another TensorFlow
build, `TF_ENABLE_ONEDNN_OPTS=0`) or where it differs, the graph keeps the
plain ops. The fused graph's own self-check (`sbert_keras.runtime.engine`)
then compares the whole graph with Keras.

Example:
```python
if constant_matmul_available():
    y = tf.function(lambda x: constant_dense(x, kernel, bias, keras.activations.gelu))(x)
```
"""

import functools

import keras
import numpy as np

from sbert_keras.compat import tensorflow as tf_compat
from sbert_keras.utils import hardware
from sbert_keras.utils.backends import tensorflow as tf

FUSED_MATMUL_OP = "_MklNativeFusedMatMul"
FUSED_MATMUL_KERNEL = "MklNameChangeOp"  # the label TensorFlow registers the op's kernel under
# Agreement with the plain matmul on the availability probe, relative to the largest output (bf16 rounding).
FUSED_MATMUL_TOLERANCE = 1e-2


def post_op(activation):
    """The oneDNN post-op name of `activation`, `""` for none, or None if it cannot be fused."""
    if activation is None or activation is keras.activations.linear:
        return ""
    if activation is keras.activations.gelu:  # Keras's default: exact (erf) GELU
        return "GeluExact"
    if activation is keras.activations.relu:
        return "Relu"
    return None


def constant_dense(x, kernel, bias, activation=None):
    """`activation(x @ kernel + bias)` in one `_MklNativeFusedMatMul` whose weights oneDNN keeps; graph only.

    Only for graphs traced anew when `kernel` changes (see the module
    docstring). An activation oneDNN cannot fuse runs after the op.

    Args:
        x: `(rows, in)`, in `kernel`'s dtype.
        kernel: `(in, out)`.
        bias: `(out,)`, in `kernel`'s dtype.
        activation: callable or None.
    """
    post = post_op(activation)
    op = tf_compat.apply_op(
        FUSED_MATMUL_OP,
        name="ConstantWeightsMatMul",
        kernel_label=FUSED_MATMUL_KERNEL,
        a=x,
        b=kernel,
        args=[bias],
        fused_ops=["BiasAdd"] + ([post] if post else []),
        is_filter_const=True,
        transpose_a=False,
        transpose_b=False,
        epsilon=0.0,
        leakyrelu_alpha=0.2,
    )
    y = op.outputs[0]
    return y if post is not None else activation(y)


@functools.lru_cache(maxsize=1)
def constant_matmul_available():
    """Whether `constant_dense` runs here in bf16 and agrees with the plain matmul.

    Probed once per process (call it outside any trace), on two sets of
    weights, each in a graph of its own as the engine traces them, with GELU
    fused; only on a CPU with bf16 instructions (`hardware.Host.bf16`).
    """
    dtype = "bfloat16"
    # Without bf16 instructions oneDNN may have no bf16 kernel, and the op then aborts the process.
    if not hardware.current_host().bf16 or not tf_compat.op_registered(FUSED_MATMUL_OP):
        return False
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(40, 64)), dtype)
    for seed in (1, 2):
        kernel = tf.constant(np.random.default_rng(seed).normal(size=(64, 48)) * 0.1, dtype)
        bias = tf.constant(np.random.default_rng(seed).normal(size=48), dtype)
        gelu = keras.activations.gelu
        try:
            fused = tf.function(lambda x: constant_dense(x, kernel, bias, gelu))(x)  # noqa: B023
        except (tf.errors.OpError, TypeError, ValueError):
            return False
        reference = tf.cast(gelu(tf.cast(tf.matmul(x, kernel) + bias, "float32")), "float32").numpy()
        error = np.abs(tf.cast(fused, "float32").numpy() - reference).max()
        if not error <= FUSED_MATMUL_TOLERANCE * np.abs(reference).max():
            return False
    return True
