"""Matryoshka training: the loss of every embedding prefix, summed.

Kusupati et al. (2022); sentence-transformers' `MatryoshkaLoss`. The first
`d` dimensions of an embedding, re-normalised, should work on their own for
each `d` in e.g. `(384, 256, 128, 64)`, so the training loss is
`Σ_d weight_d · loss(prefix_d)`.

Most sbert_keras objectives do not hand their loss the embeddings but a
head's output (cosines, distances, a similarity matrix, logits), so the
truncation happens in two places, one per case:

- **On the siamese model** (`SiameseModel(..., matryoshka_dims=dims)`):
  `MatryoshkaPrefixes` turns each role's embedding into one re-normalised
  prefix per dim, zero-padded back to the full width (which changes no
  cosine, distance or dot product and keeps a classifier's input width);
  the head runs once per dim and the model outputs the results stacked on
  axis 1, `(batch, len(dims), ...)`. `MatryoshkaLoss(loss)` (no `dims`)
  applies `loss` to each slice `y_pred[:, i]` and sums.
- **On the loss** (`MatryoshkaLoss(loss, dims=dims)`), for losses that take
  embeddings on the last axis (`AnglELoss`, `BatchHardTripletLoss`, MSE
  distillation): it truncates and re-normalises `y_pred` itself, and cuts a
  `y_true` of the same width (teacher vectors) to the same prefix, as ST does.

Keras has no such wrapper; it is a few lines over `keras.ops`.
"""

import keras
from keras import ops

from sbert_keras.model.similarity import l2_normalize


def _check_dims(dims, what="dims"):
    dims = tuple(dims)
    if not dims or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
        raise ValueError(f"`{what}` must be a non-empty sequence of positive ints. Received {dims!r}.")
    return dims


def _check_fits(dims, width):
    if width is not None and max(dims) > width:
        raise ValueError(f"Matryoshka dims {dims} exceed the embedding dimension {width}.")


def truncate_embeddings(embeddings, dim, pad_to=None):
    """The first `dim` dimensions, L2-normalised in float32, optionally zero-padded.

    Args:
        embeddings: tensor `(..., width)`.
        dim: int. The prefix length, at most `width`.
        pad_to: int or None. Pad the prefix with zeros to this width.
    """
    prefix = l2_normalize(embeddings[..., :dim])
    if pad_to is not None and pad_to > dim:
        paddings = [[0, 0]] * (len(prefix.shape) - 1) + [[0, pad_to - dim]]
        prefix = ops.pad(prefix, paddings)
    return prefix


@keras.saving.register_keras_serializable(package="sbert_keras")
class MatryoshkaPrefixes(keras.layers.Layer):
    """`(batch, width)` -> one re-normalised, zero-padded prefix per dim (float32).

    Args:
        dims: tuple of int. Prefix lengths, each at most the embedding width.

    Example:
    ```python
    prefixes = MatryoshkaPrefixes((8, 4))(np.ones((2, 8)))  # two (2, 8) tensors
    ```
    """

    def __init__(self, dims, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.dims = _check_dims(dims)

    def call(self, embeddings):
        width = embeddings.shape[-1]
        _check_fits(self.dims, width)
        return [truncate_embeddings(embeddings, d, pad_to=width) for d in self.dims]

    def compute_output_shape(self, input_shape):
        return [tuple(input_shape)] * len(self.dims)

    def get_config(self):
        return {**super().get_config(), "dims": list(self.dims)}


@keras.saving.register_keras_serializable(package="sbert_keras")
class MatryoshkaLoss(keras.losses.Loss):
    """`Σ_i weights[i] · loss(y_true, prefix i of y_pred)`.

    Args:
        loss: a Keras loss (object, name or serialised config) to wrap.
        dims: tuple of int or None. `None`: `y_pred` already holds one output
            per prefix stacked on axis 1, as a siamese model built with
            `matryoshka_dims` outputs it. Given: `y_pred` holds full
            embeddings on its last axis, truncated and re-normalised here to
            each dim; a `y_true` of rank ≥ 2 and the same width (teacher
            vectors) is cut to the same prefix.
        weights: tuple of float or None. One per prefix; `None` is all 1.

    Example:
    ```python
    model = RegressionSiamese(encoder, matryoshka_dims=(384, 256, 128, 64))
    model.compile(loss=CoSENTLoss())  # wrapped as MatryoshkaLoss(CoSENTLoss())
    # embeddings in, e.g. AnglE on RegressionSiamese(encoder, pair_output="embeddings"):
    MatryoshkaLoss(AnglELoss(), dims=(384, 256, 128, 64))
    ```
    """

    def __init__(
        self, loss, dims=None, weights=None, name="matryoshka_loss", reduction="sum_over_batch_size", dtype=None
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.loss = keras.losses.get(loss)
        if self.loss is None:
            raise ValueError("`loss` must be a Keras loss to wrap. Received None.")
        self.dims = None if dims is None else _check_dims(dims)
        self.weights = None if weights is None else tuple(float(w) for w in weights)
        if self.dims is not None and self.weights is not None and len(self.weights) != len(self.dims):
            raise ValueError(f"`weights` {self.weights} must have one entry per dim of `dims` {self.dims}.")

    def _weights(self, count):
        if self.weights is None:
            return (1.0,) * count
        if len(self.weights) != count:
            raise ValueError(f"`weights` {self.weights} must have one entry per Matryoshka output; y_pred has {count}.")
        return self.weights

    def _parts(self, y_true, y_pred):
        """(y_true, y_pred) of each prefix."""
        if self.dims is None:
            count = y_pred.shape[1]
            if count is None:
                raise ValueError("MatryoshkaLoss without `dims` needs y_pred's axis 1 (one per prefix) known.")
            return [(y_true, y_pred[:, i]) for i in range(count)]
        width = y_pred.shape[-1]
        _check_fits(self.dims, width)
        cut = y_true is not None and len(y_true.shape) >= 2 and y_true.shape[-1] == width
        return [(y_true[..., :d] if cut else y_true, truncate_embeddings(y_pred, d)) for d in self.dims]

    def __call__(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.cast(y_pred, "float32")
        if y_true is not None:
            y_true = ops.convert_to_tensor(y_true)
        parts = self._parts(y_true, y_pred)
        total = 0.0
        for weight, (true, pred) in zip(self._weights(len(parts)), parts, strict=True):
            total = total + weight * ops.cast(self.loss(true, pred, sample_weight=sample_weight), "float32")
        return total

    def call(self, y_true, y_pred):
        return self(y_true, y_pred)

    def get_config(self):
        return {
            **super().get_config(),
            "loss": keras.losses.serialize(self.loss),
            "dims": None if self.dims is None else list(self.dims),
            "weights": None if self.weights is None else list(self.weights),
        }
