"""In-batch negatives losses: every other positive in the batch is a negative.

`InBatchNegativesLoss` is the softmax cross-entropy of each anchor against
its own positive among all the batch's candidates (Logeswaran & Lee, 2018;
sentence-transformers' `MultipleNegativesRankingLoss`);
`SymmetricInBatchNegativesLoss` adds the positive -> anchor direction
(`MultipleNegativesSymmetricRankingLoss`). Both take `ContrastiveSiamese`'s
`(batch, batch * k)` cosine matrix, ignore `y_true` and compute in float32.
"""

import keras
from keras import ops

from sbert_keras.losses.base import ImpliedTargetLoss
from sbert_keras.utils.defaults import IN_BATCH_SCALE


def in_batch_negatives_loss(similarities, scale=IN_BATCH_SCALE):
    """Softmax cross-entropy of anchor `i` against candidate `i`.

    `similarities` is `(batch, batch * k)` (anchors x candidates); row `i`'s
    target is column `i`: its own positive; every other positive (and every
    hard negative) in the batch is a negative. Logeswaran & Lee (2018);
    sentence-transformers' MultipleNegativesRankingLoss.
    """
    logits = ops.cast(similarities, "float32") * scale
    labels = ops.arange(ops.shape(logits)[0])
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def symmetric_in_batch_negatives_loss(similarities, scale=IN_BATCH_SCALE):
    """Mean of anchor→positive and positive→anchor softmax cross-entropy, per row.

    `similarities` is `ContrastiveSiamese`'s `(batch, batch * k)` matrix.
    Anchor `i` must pick candidate `i` among all candidates (as in
    `in_batch_negatives_loss`); positive `i` must pick anchor `i` among the
    anchors (its column of the first `batch` columns). ST's
    `MultipleNegativesSymmetricRankingLoss`.
    """
    logits = ops.cast(similarities, "float32") * scale
    batch = ops.shape(logits)[0]
    labels = ops.arange(batch)
    forward = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    backward_logits = ops.transpose(logits[:, :batch])
    backward = keras.losses.sparse_categorical_crossentropy(labels, backward_logits, from_logits=True)
    return (forward + backward) / 2.0


@keras.saving.register_keras_serializable(package="sbert_keras")
class InBatchNegativesLoss(ImpliedTargetLoss):
    """In-batch negatives loss on `ContrastiveSiamese` outputs (no `y_true`).

    Args:
        scale: float. Multiplies the cosines before the softmax (the inverse
            temperature); 20 as in sentence-transformers.
    """

    def __init__(
        self, scale=IN_BATCH_SCALE, name="in_batch_negatives_loss", reduction="sum_over_batch_size", dtype=None
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.scale = scale

    def call(self, y_true, y_pred):
        return in_batch_negatives_loss(y_pred, self.scale)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="sbert_keras")
class SymmetricInBatchNegativesLoss(ImpliedTargetLoss):
    """In-batch negatives in both directions on `ContrastiveSiamese` outputs.

    Args:
        scale: float. Inverse temperature of both softmaxes (20).

    Example:
    ```python
    model = ContrastiveSiamese(encoder)
    model.compile(loss=SymmetricInBatchNegativesLoss())
    model.fit((anchors, positives))
    ```
    """

    def __init__(
        self,
        scale=IN_BATCH_SCALE,
        name="symmetric_in_batch_negatives_loss",
        reduction="sum_over_batch_size",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.scale = scale

    def call(self, y_true, y_pred):
        return symmetric_in_batch_negatives_loss(y_pred, self.scale)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}
