"""MPNet's layers: the shared relative position bias and the encoder block.

Why these are written by hand: KerasHub 0.32 has no MPNet, and its
`TransformerEncoder` (like Keras' `MultiHeadAttention`) takes a boolean
attention mask only, not the additive per-head bias MPNet adds to every
attention score. The block below is Hugging Face's `MPNetLayer` in
`keras.ops`: post-LayerNorm self-attention with biases on the four
projections, then a feed-forward block. The bias is computed once per
forward pass by `RelativePositionBias` and shared by every block, as in
`MPNetEncoder.compute_position_bias`.

The bucket of each relative position is T5's bidirectional bucketing
(`relative_position_buckets`), computed once in NumPy float32 for every
relative position the backbone can see, so the graph only gathers. The
float32 arithmetic reproduces PyTorch's buckets exactly (checked for every
distance up to 4096 against `transformers` 5.24).

Example:
```python
bias = RelativePositionBias(num_heads=2, max_sequence_length=16)(token_ids)
block = MPNetBlock(num_heads=2, intermediate_dim=16)
outputs = block(hidden, position_bias=bias, padding_mask=padding_mask)
```
"""

import math

import keras
import numpy as np
from keras import ops


def relative_position_buckets(max_sequence_length, num_buckets=32, max_distance=128):
    """The bucket of every relative position `memory - context`, as MPNet and T5 bucket it.

    Args:
        max_sequence_length: int. The longest sequence; relative positions
            run from `-(max_sequence_length - 1)` to `max_sequence_length - 1`.
        num_buckets: int. Buckets for both directions together.
        max_distance: int. Distances from here on share the last bucket.

    Returns:
        int32 array of length `2 * max_sequence_length - 1`: entry
        `r + max_sequence_length - 1` is the bucket of relative position `r`.
    """
    relative = np.arange(-(max_sequence_length - 1), max_sequence_length)
    n = -relative
    half = num_buckets // 2
    buckets = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    scaled = np.log(np.maximum(n, 1).astype(np.float32) / np.float32(max_exact))
    scaled = scaled / np.float32(math.log(max_distance / max_exact)) * np.float32(half - max_exact)
    large = np.minimum(max_exact + scaled.astype(np.int64), half - 1)
    return (buckets + np.where(n < max_exact, n, large)).astype("int32")


@keras.saving.register_keras_serializable(package="sbert_keras")
class RelativePositionBias(keras.layers.Layer):
    """A learned bias per attention head and relative-position bucket.

    Args:
        num_heads: int. Attention heads (one bias each).
        max_sequence_length: int. The longest sequence it serves.
        num_buckets: int. Relative-position buckets (MPNet: 32).
        max_distance: int. The distance from which positions share a bucket (128).

    Call arguments:
        token_ids: `(batch, length)`; only its length is read.

    Returns:
        float32 `(1, num_heads, length, length)`, added to the attention scores.
    """

    def __init__(self, num_heads, max_sequence_length, num_buckets=32, max_distance=128, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.max_sequence_length = max_sequence_length
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.buckets = relative_position_buckets(max_sequence_length, num_buckets, max_distance)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.num_buckets, self.num_heads),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="embeddings",
        )
        self.built = True

    def call(self, token_ids):
        length = ops.shape(token_ids)[1]
        positions = ops.arange(length, dtype="int32")
        relative = positions[None, :] - positions[:, None] + (self.max_sequence_length - 1)
        buckets = ops.take(ops.convert_to_tensor(self.buckets), relative)
        bias = ops.take(ops.cast(self.embeddings, "float32"), buckets, axis=0)  # (length, length, heads)
        return ops.transpose(bias, (2, 0, 1))[None]

    def compute_output_spec(self, token_ids):
        length = token_ids.shape[1]
        return keras.KerasTensor((1, self.num_heads, length, length), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "max_sequence_length": self.max_sequence_length,
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="sbert_keras")
class MPNetBlock(keras.layers.Layer):
    """One MPNet layer: self-attention plus a position bias, then feed-forward (post-LayerNorm).

    Scores get the bias and go through the softmax in float32 under any dtype policy.

    Args:
        num_heads: int. Attention heads.
        intermediate_dim: int. The feed-forward width.
        activation: str. The feed-forward activation (`"gelu"`: exact erf GELU).
        dropout: float. Dropout on attention weights and sublayer outputs.
        layer_norm_epsilon: float. The LayerNorm epsilon.
        kernel_initializer: initializer of the dense kernels.

    Call arguments:
        hidden: `(batch, length, hidden_dim)`.
        position_bias: `(1, num_heads, length, length)` from `RelativePositionBias`.
        padding_mask: `(batch, length)`, 1 for tokens and 0 for padding.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        activation="gelu",
        dropout=0.0,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    # The attribute holding each sublayer, by the roles of KerasHub's
    # `TransformerEncoder` parts (`compat.keras_hub.BlockParts`): `output` is
    # a Keras `Layer` property, so the feed-forward output is `output_dense`.
    SUBLAYERS = {
        "query": "query",
        "key": "key",
        "value": "value",
        "attention_output": "attention_output",
        "attention_norm": "attention_norm",
        "attention_dropout": "attention_dropout",
        "intermediate": "intermediate",
        "output": "output_dense",
        "feedforward_norm": "feedforward_norm",
        "feedforward_dropout": "output_dropout",
    }

    def sublayer(self, role):
        """The built sublayer of `role` (a key of `SUBLAYERS`), e.g. `block.sublayer("output")`."""
        return getattr(self, self.SUBLAYERS[role])

    def _dense(self, units, input_dim, name, activation=None):
        initializer = self.kernel_initializer.__class__.from_config(self.kernel_initializer.get_config())
        layer = keras.layers.Dense(
            units, activation=activation, kernel_initializer=initializer, dtype=self.dtype_policy, name=name
        )
        layer.build((None, None, input_dim))
        return layer

    def build(self, input_shape):
        hidden = input_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of num_heads={self.num_heads}.")
        self.query, self.key, self.value = (self._dense(hidden, hidden, name) for name in ("query", "key", "value"))
        self.attention_output = self._dense(hidden, hidden, "attention_output")
        self.intermediate = self._dense(self.intermediate_dim, hidden, "intermediate", self.activation)
        self.output_dense = self._dense(hidden, self.intermediate_dim, "output")
        norm = dict(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy)
        self.attention_norm = keras.layers.LayerNormalization(name="attention_norm", **norm)
        self.attention_norm.build(input_shape)
        self.feedforward_norm = keras.layers.LayerNormalization(name="feedforward_norm", **norm)
        self.feedforward_norm.build(input_shape)
        self.attention_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def _heads(self, x, batch, length):
        x = ops.reshape(x, (batch, length, self.num_heads, -1))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, hidden, position_bias, padding_mask=None, training=None):
        batch, length = ops.shape(hidden)[0], ops.shape(hidden)[1]
        head_dim = hidden.shape[-1] // self.num_heads
        query = self._heads(self.query(hidden), batch, length)
        key = self._heads(self.key(hidden), batch, length)
        value = self._heads(self.value(hidden), batch, length)
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        scores = ops.cast(scores, "float32") / math.sqrt(head_dim) + ops.cast(position_bias, "float32")
        if padding_mask is not None:
            keep = ops.cast(padding_mask, "bool")[:, None, None, :]
            scores = ops.where(keep, scores, ops.full_like(scores, -1e9))
        weights = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        weights = self.attention_dropout(weights, training=training)
        context = ops.transpose(ops.matmul(weights, value), (0, 2, 1, 3))
        context = ops.reshape(context, (batch, length, -1))
        attended = self.output_dropout(self.attention_output(context), training=training)
        attended = self.attention_norm(attended + hidden)
        feedforward = self.output_dense(self.intermediate(attended))
        feedforward = self.output_dropout(feedforward, training=training)
        return self.feedforward_norm(feedforward + attended)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
