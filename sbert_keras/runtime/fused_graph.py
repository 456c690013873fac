"""The fused forward pass of the encoders `fused_support` accepts, with cached weights.

Why this exists: `encode` is matmul-bound, and the Keras graph of KerasHub's
`TransformerEncoder` leaves speed on the table on CPU (per-op split:
`benchmarks/experiments/encode_profile.py`):

- query, key and value are three small `EinsumDense` matmuls, not one fused
  `[hidden, 3 * hidden]` matmul;
- under `mixed_bfloat16` the elementwise ops (erf-GELU, bias adds) run in
  bfloat16, slowly on TensorFlow's CPU kernels, so the policy gains little.

This graph runs the same computation from the same weights: matmuls with
their bias (and GELU) in the matmul dtype, so oneDNN fuses them into one
kernel, and attention, softmax, residuals, LayerNorm, pooling and the
projection in float32 (LayerNorm through oneDNN's fused kernel,
`runtime.kernels.onednn_layer_norm`). Keras and KerasHub have no such mixed
"bf16 matmul, float32 elsewhere" inference path, so it is written here.
Nothing in it is trusted blindly: `runtime.engine` checks it against the
Keras graph on first use and falls back when they differ, and `fused_support`
refuses any layer it does not reproduce exactly (other classes, quantized
layers, gated or windowed attention, activations it does not know).

The same graph is converted to TensorFlow Lite for XNNPACK
(`routes.xnnpack`), so it avoids ops XNNPACK does not run: query, key
and value leave their matmul through one `tf.split` (index slices become
TFLite strided slices, single-threaded outside XNNPACK), and the attention's
1/sqrt(head_dim) is folded into the query's weights (`compute_weights`).

The fused and cast weights live in `FusedWeights`: TensorFlow variables,
computed once and refreshed exactly when the source variables are written
(`runtime.weight_writes` counts every write made through the variables'
methods; a sampled fingerprint also catches most other writes), so a single query
pays no cast. Every matmul goes through one dispatch point, `dense(x, weights,
activation, policy)`, where int8 weights plug in as `build_forward`'s
`onednn_int8.MatmulPolicy` says.
"""

import collections
import math

import keras
import numpy as np

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.runtime import weight_writes
from sbert_keras.runtime.fused_support import block_sublayers
from sbert_keras.runtime.kernels import int8_quantization
from sbert_keras.runtime.kernels import onednn_int8
from sbert_keras.runtime.kernels import onednn_layer_norm
from sbert_keras.runtime.kernels import onednn_matmul
from sbert_keras.utils.backends import tensorflow as tf

SAMPLES_PER_VARIABLE = 32

DenseWeights = collections.namedtuple("DenseWeights", ["kernel", "bias"])
NormWeights = collections.namedtuple("NormWeights", ["gamma", "beta"])
BlockWeights = collections.namedtuple(
    "BlockWeights", ["qkv", "attention_output", "attention_norm", "intermediate", "output", "feedforward_norm"]
)
# `relative_bias`: MPNet's `(buckets, heads)` table of attention-score biases, `()` for other families.
ModelWeights = collections.namedtuple(
    "ModelWeights", ["token_table", "position_table", "embedding_norm", "blocks", "relative_bias"]
)


def prepare_dense(kernel, bias, precision, role=None, int8_stats=None, int8_recipe=None, host=None):
    """A dense layer's weights in the form `dense` takes for `precision`.

    `"int8"`: `int8_quantization.quantize_role` by `int8_recipe` (of the block
    `role`, with the block's calibration `int8_stats`); a role the recipe
    keeps in bf16/float32 gets `DenseWeights` (bf16 only where `host` has it).
    """
    if precision != "int8":
        return DenseWeights(tf.cast(kernel, precision), tf.cast(bias, precision))
    weights = int8_quantization.quantize_role(kernel, bias, role, int8_stats, int8_recipe, host)
    return weights if isinstance(weights, onednn_int8.INT8_WEIGHT_TYPES) else DenseWeights(*weights)


def dense(x, weights, activation=None, policy=None):
    """`activation(x @ kernel + bias)`: the one dispatch point of every matmul.

    Args:
        x: float tensor `(rows, in)`.
        weights: `DenseWeights` (the matmul runs in the kernel's dtype;
            bf16 through `onednn_matmul.constant_dense` where `policy` says
            `constant_bf16`) or int8 weights
            (`onednn_int8.int8_dense`: oneDNN int8 matmul, float32 out).
        activation: callable or None.
        policy: an `onednn_int8.MatmulPolicy`, or None (int8 weights as this machine allows).
    """
    if isinstance(weights, onednn_int8.INT8_WEIGHT_TYPES):
        return onednn_int8.int8_dense(x, weights, activation, policy)
    kernel, bias = weights.kernel, weights.bias
    x = tf.cast(x, kernel.dtype)
    if policy is not None and policy.constant_bf16 and kernel.dtype == tf.bfloat16:
        return onednn_matmul.constant_dense(x, kernel, bias, activation)
    y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return y if activation is None else activation(y)


def compute_weights(backbone, precision, int8_stats=None, int8_recipe=None, host=None):
    """The backbone's weights as a `ModelWeights` of tensors for `forward`.

    Matmul weights go through `prepare_dense` (Keras int8 layers are read
    dequantized); embeddings and LayerNorm parameters stay float32. Query,
    key and value are fused. `int8_stats` (per block, see
    `int8_quantization.calibrate`), `int8_recipe` and `host` (bf16 roles only
    where it has bf16) serve `compute="int8"`.
    """
    kernel_of = int8_quantization.float_kernel

    def matmul(kernel, bias, role, i):
        stats = None if int8_stats is None else int8_stats[i]
        return prepare_dense(kernel, bias, precision, role, stats, int8_recipe, host)

    def f32(x):
        return tf.cast(x, "float32")

    def norm(layer):
        return NormWeights(f32(layer.gamma), f32(layer.beta))

    blocks = []
    for i, block in enumerate(backbone.transformer_layers):
        parts = block_sublayers(block)
        qkv = (parts.query, parts.key, parts.value)
        hidden = parts.query.kernel.shape[0]
        # The attention's 1/sqrt(head_dim) is folded into the query's columns: one pass less per layer.
        scales = (1.0 / math.sqrt(hidden // backbone.num_heads), 1.0, 1.0)
        blocks.append(
            BlockWeights(
                matmul(
                    tf.concat([tf.reshape(kernel_of(d), [hidden, -1]) * s for d, s in zip(qkv, scales)], axis=1),
                    tf.concat([tf.reshape(d.bias, [-1]) * s for d, s in zip(qkv, scales)], axis=0),
                    "qkv",
                    i,
                ),
                matmul(
                    tf.reshape(kernel_of(parts.attention_output), [-1, hidden]),
                    parts.attention_output.bias,
                    "attention_output",
                    i,
                ),
                norm(parts.attention_norm),
                matmul(kernel_of(parts.intermediate), parts.intermediate.bias, "intermediate", i),
                matmul(kernel_of(parts.output), parts.output.bias, "output", i),
                norm(parts.feedforward_norm),
            )
        )
    embeddings = backbone.embeddings
    bias = getattr(backbone, "relative_position_bias", None)
    return ModelWeights(
        int8_quantization.float_embeddings(embeddings.token_embedding),
        f32(embeddings.position_embedding.position_embeddings),
        norm(backbone.embeddings_layer_norm),
        tuple(blocks),
        () if bias is None else f32(bias.embeddings),
    )


class FusedWeights:
    """`compute_weights` held in TensorFlow variables, refreshed when stale.

    Args:
        backbone: a backbone that `unsupported_reason` accepts.
        precision: str. The matmul dtype (`"float32"`, `"bfloat16"`, ...) or `"int8"`.
        int8_stats: list or None. Calibration statistics per block
            (`int8_quantization.calibrate`), for `"int8"`; kept across refreshes.
        int8_recipe: dict or None (`int8_quantization.DEFAULT_RECIPE`).
        host: a `hardware.Host` or None (this machine), for `"int8"`'s bf16 roles.

    Example:
    ```python
    weights = FusedWeights(encoder.backbone, "bfloat16")
    weights.sync()  # re-casts only if the backbone's weights changed
    weights.values().blocks[0].qkv.kernel.dtype  # bfloat16
    ```
    """

    def __init__(self, backbone, precision, int8_stats=None, int8_recipe=None, host=None):
        self.precision = precision
        sources = list(backbone.weights)
        arguments = (backbone, precision, int8_stats, int8_recipe, host)
        initial = compute_weights(*arguments)  # eager: no trace up front
        compute = compat_tf.traced_once(tf.function(lambda: compute_weights(*arguments)))
        self._structure = tf.nest.map_structure(lambda _: None, initial)
        # A tf.Module, so an export archive can track (and save) the variables.
        self.module = tf.Module(name=f"fused_weights_{precision}")
        self.module.flat = [tf.Variable(t, trainable=False) for t in tf.nest.flatten(initial)]

        @compat_tf.traced_once
        @tf.function(autograph=False)  # plain ops: AutoGraph would only slow the trace
        def refresh():
            for variable, value in zip(self.module.flat, tf.nest.flatten(compute())):
                variable.assign(value)

        rng = np.random.default_rng(0)
        picks = []
        for variable in sources:
            size = int(np.prod(variable.shape))
            stride = np.linspace(0, size - 1, SAMPLES_PER_VARIABLE // 2).astype("int64")
            picks.append(np.concatenate([stride, rng.integers(0, size, SAMPLES_PER_VARIABLE // 2)]))

        def fingerprint():
            return tf.concat(
                [tf.cast(tf.gather(tf.reshape(v.value, [-1]), idx), "float32") for v, idx in zip(sources, picks)],
                axis=0,
            )

        self._refresh, self._fingerprint = refresh, compat_tf.traced_once(tf.function(fingerprint, autograph=False))
        self._last = tf.Variable(self._fingerprint(), trainable=False)  # the trace `sync` and `changed` call
        self.watch = weight_writes.WriteWatch(sources)
        self.version = 0  # bumped by each refresh (graphs that cache weights re-trace)

    def values(self):
        """The variables as a `ModelWeights` (usable inside a `tf.function`)."""
        return tf.nest.pack_sequence_as(self._structure, self.module.flat)

    def written(self):
        """Whether the source weights were written since the last refresh (exact for their methods, no graph call)."""
        return self.watch.written()

    def sync(self, force=False):
        """Re-computes the variables if the source weights changed; True if it did.

        Exact for writes made through the variables' methods (`written`); a
        fingerprint of sampled elements of every source variable, compared
        with the one of the last refresh, also catches most other writes.
        """
        state = self.watch.state()
        current = self._fingerprint()
        if not force and not self.watch.written(state) and np.array_equal(current.numpy(), self._last.numpy()):
            return False
        self._refresh()
        self._last.assign(current)
        self.watch.mark(state)
        self.version += 1
        return True

    def changed(self, others=()):
        """A boolean tensor: whether sampled source weights changed since the last refresh.

        The in-graph second guard, for writes that bypass Keras; callers
        check `written` (exact for Keras writes) before the graph call.

        For use inside a `tf.function` next to the forward pass: its few
        hundred small ops then run beside the forward pass instead of in a
        graph call of their own before it (what `sync` costs a single query).

        Args:
            others: `FusedWeights` of the same backbone (other precisions),
                checked against the same fingerprint, computed once.
        """
        current = self._fingerprint()
        return tf.reduce_any([tf.reduce_any(tf.not_equal(current, w._last)) for w in (self, *others)])


def position_bias(layer, table, length):
    """MPNet's attention-score bias `(1, heads, length, length)`, as `layer` (a `RelativePositionBias`) computes it.

    Args:
        layer: the backbone's `RelativePositionBias` (its bucket of every
            relative position, a NumPy constant).
        table: float32 `(buckets, heads)`, the layer's weights (cached).
        length: scalar int32 tensor, the padded length.
    """
    positions = tf.range(length)
    # Reshapes, not new-axis slices: the TFLite converter refuses those.
    relative = tf.reshape(positions, [1, -1]) - tf.reshape(positions, [-1, 1]) + (layer.max_sequence_length - 1)
    bias = tf.gather(table, tf.gather(tf.constant(layer.buckets), relative))  # (length, length, heads)
    return tf.reshape(tf.transpose(bias, [2, 0, 1]), [1, -1, length, length])


def build_forward(encoder, weights, fused_norm=None, matmul_policy=None, lookup=True):
    """The Python function `(token_ids, padding_mask)` -> pooled, projected float32 vectors.

    Args:
        encoder: a `SentenceEncoder` that `unsupported_reason` accepts.
        weights: `FusedWeights` of its backbone.
        fused_norm: bool or None. Whether large inputs (every input where
            the matmuls run in int8) may use oneDNN's fused LayerNorm (None: where
            `onednn_layer_norm.layer_norm_available()`; False for XLA, which
            cannot compile it).
        matmul_policy: an `onednn_int8.MatmulPolicy`: how dense layers run (int8
            weights through oneDNN's op, constant or not, or dequantized to a
            float dtype). None: as this machine allows, weights not constant.
        lookup: bool. False: the first input is the token embeddings, float32
            `(batch, length, hidden)`, looked up by the caller (the TFLite
            converter would store the table in int8 with one scale, 7% error
            per token on all-mpnet-base-v2; `routes.xnnpack`).

    The vectors are not L2-normalised. Untraced: wrap it in `tf.function`.
    """
    backbone = encoder.backbone
    parts = [block_sublayers(block) for block in backbone.transformer_layers]
    num_heads = backbone.num_heads
    epsilons = [backbone.embeddings_layer_norm.epsilon] + [
        (p.attention_norm.epsilon, p.feedforward_norm.epsilon) for p in parts
    ]
    activations = [p.intermediate.activation for p in parts]
    pooling, project = encoder.pooling_layer, getattr(encoder, "project", None)
    relative = getattr(backbone, "relative_position_bias", None)

    # Probed here, outside any trace: the probe runs a graph of its own.
    fused_norm = onednn_layer_norm.layer_norm_available() if fused_norm is None else fused_norm
    if weights.precision == "int8":  # resolved once here: the LayerNorm rule below and `dense` read the same policy
        matmul_policy = matmul_policy or onednn_int8.MatmulPolicy.for_host()
    # Whether the matmuls round every activation row to int8 (dequantized int8 weights do not).
    rounds_rows = weights.precision == "int8" and matmul_policy.int8_op

    def matmul(x, params, activation=None):
        return dense(x, params, activation, matmul_policy)

    def run(groups, norm):
        """The pooled vectors of `groups` (`(token_ids, padding_mask)` pairs, each padded to its own
        length), stacked: their rows share every matmul and LayerNorm, attention and pooling stay per group."""
        model = weights.values()
        hidden = model.token_table.shape[-1]
        head_dim = hidden // num_heads
        shapes = [(tf.shape(ids)[0], tf.shape(ids)[1]) for ids, _ in groups]
        sizes = [batch * length for batch, length in shapes]

        def layer_norm(x, params, epsilon):
            return norm(x, params.gamma, params.beta, epsilon)

        def rows(parts):  # one tensor of every group's rows (no copy for one group)
            return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)

        def per_group(x):
            return [x] if len(groups) == 1 else tf.split(x, sizes, axis=0)

        def attend(qkv, bias, batch, length):
            qkv = tf.transpose(tf.reshape(qkv, [batch, length, 3, num_heads, head_dim]), [2, 0, 3, 1, 4])
            q, k, v = (tf.reshape(t, [batch, num_heads, length, head_dim]) for t in tf.split(qkv, 3, axis=0))
            scores = tf.matmul(q, k, transpose_b=True)  # q carries 1/sqrt(head_dim) (`compute_weights`)
            context = tf.matmul(tf.nn.softmax(scores + bias), v)
            return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, hidden])

        embedded, biases = [], []
        for (token_ids, padding_mask), (batch, length) in zip(groups, shapes):
            # `keras.ops.take`, as the embedding layer does (negative ids wrap around).
            x = keras.ops.take(model.token_table, token_ids, axis=0) if lookup else token_ids
            x = x + model.position_table[:length]  # no new-axis slices: the TFLite converter refuses them
            embedded.append(tf.reshape(x, [-1, hidden]))
            bias = tf.reshape((1.0 - tf.cast(padding_mask, "float32")) * -1e9, [batch, 1, 1, length])
            biases.append(bias if relative is None else bias + position_bias(relative, model.relative_bias, length))
        x = layer_norm(rows(embedded), model.embedding_norm, epsilons[0])
        for i, block in enumerate(model.blocks):
            qkv = per_group(tf.cast(matmul(x, block.qkv), "float32"))
            context = rows([attend(part, bias, *shape) for part, bias, shape in zip(qkv, biases, shapes)])
            attended = tf.cast(matmul(context, block.attention_output), "float32")
            x = layer_norm(attended + x, block.attention_norm, epsilons[i + 1][0])
            h = matmul(x, block.intermediate, activations[i])
            x = layer_norm(tf.cast(matmul(h, block.output), "float32") + x, block.feedforward_norm, epsilons[i + 1][1])
        pooled = [
            pooling(tf.reshape(part, [batch, length, hidden]), mask)
            for part, (batch, length), (_, mask) in zip(per_group(x), shapes, groups)
        ]
        pooled = rows(pooled)
        return pooled if project is None else tf.cast(project(pooled), "float32")

    def forward(token_ids, padding_mask, *more):
        """Pooled vectors of one padded batch, or of several (`more`: further `token_ids, padding_mask`)."""
        groups = [(token_ids, padding_mask)] + list(zip(more[::2], more[1::2]))
        if not fused_norm:
            return run(groups, onednn_layer_norm.composite_layer_norm)
        if rounds_rows:
            # One LayerNorm at every size: int8 rounds each activation row, so the two kernels' last-bit
            # differences would move values across rounding steps, and a text's vector with its batch's size.
            return run(groups, onednn_layer_norm.fused_layer_norm)
        # oneDNN's LayerNorm from FUSED_LAYER_NORM_MIN_ROWS tokens; below, the composite is faster.
        tokens = tf.add_n([tf.size(mask) for _, mask in groups])
        return tf.cond(
            tokens >= onednn_layer_norm.FUSED_LAYER_NORM_MIN_ROWS,
            lambda: run(groups, onednn_layer_norm.fused_layer_norm),
            lambda: run(groups, onednn_layer_norm.composite_layer_norm),
        )

    return forward
