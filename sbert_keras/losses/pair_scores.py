"""Losses on one score per sentence pair: CoSENT, AnglE and online contrastive.

`CoSENTLoss` (Su, 2022) orders the pairs' cosines as their gold scores;
`AnglELoss` (Li & Li, 2023) does the same on an angle similarity of the two
embeddings; `OnlineContrastiveLoss` pulls similar pairs (label 1) together
and pushes dissimilar ones (label 0) apart, on the batch's hard pairs only.
They follow sentence-transformers 6.2 (`CoSENTLoss`, `AnglELoss`,
`OnlineContrastiveLoss`), checked against it on the same tensors in
`tests/losses/test_pair_scores.py`; Keras and KerasHub have none of them. CoSENT
and AnglE are one number per batch (a log-sum over pairs of rows), so they
take no `sample_weight`. All compute in float32.
"""

import keras
from keras import ops

from sbert_keras.losses.base import BatchLevelLoss
from sbert_keras.losses.base import flat_float32
from sbert_keras.model.similarity import l2_normalize

# sentence-transformers' defaults.
COSENT_SCALE = 20.0
ONLINE_CONTRASTIVE_MARGIN = 0.5


def cosent_loss(labels, scores, scale=COSENT_SCALE):
    """`log(1 + Σ exp(s·(cos_i − cos_j)))` over pairs with `label_i < label_j`.

    Su (2022), "CoSENT": every pair of rows whose gold scores are ordered
    should have its similarities ordered the same way. Ties add nothing.

    Args:
        labels: tensor `(batch,)`. Gold scores (any scale; only the order counts).
        scores: tensor `(batch,)`. Predicted similarities, e.g. cosines.
        scale: float. Multiplies the similarities (20, as in ST).

    Returns:
        A float32 scalar.
    """
    labels = flat_float32(labels)
    scores = flat_float32(scores) * scale
    differences = scores[:, None] - scores[None, :]  # s_i - s_j
    ordered = labels[:, None] < labels[None, :]
    terms = ops.where(ordered, differences, float("-inf"))
    return ops.logsumexp(ops.concatenate([ops.zeros((1,)), ops.reshape(terms, (-1,))], axis=0))


def angle_similarity(u, v):
    """AnglE's similarity `|cos(u, v) + sin(u, v)|` of two `(batch, dim)` tensors.

    Li & Li (2023): each vector is read as `dim / 2` complex numbers
    `(x[:h] + i·x[h:])`; after L2 normalisation the real part of `u / v`
    summed is the cosine and the imaginary part the "sine" below (ST's
    `pairwise_angle_sim`). An odd `dim` is padded with one zero.
    """
    u = l2_normalize(u)
    v = l2_normalize(v)
    if u.shape[-1] is not None and u.shape[-1] % 2:
        u = ops.pad(u, [[0, 0], [0, 1]])
        v = ops.pad(v, [[0, 0], [0, 1]])
    half = ops.shape(u)[-1] // 2
    cosines = ops.sum(u * v, axis=-1)
    sines = ops.sum(u[:, half:] * v[:, :half] - u[:, :half] * v[:, half:], axis=-1)
    return ops.abs(cosines + sines)


def online_contrastive_loss(labels, distances, margin=ONLINE_CONTRASTIVE_MARGIN):
    """Contrastive loss on the batch's hard pairs only, one value per pair.

    A positive pair (label 1) counts `d²` when farther than the nearest
    negative; a negative pair (label 0) counts `max(margin − d, 0)²` when
    nearer than the farthest positive (with no positives / negatives in the
    batch, the other class's mean is the threshold). Other rows give 0; the
    sum over the batch is ST's `OnlineContrastiveLoss`.
    """
    labels = flat_float32(labels)
    d = flat_float32(distances)
    positive = labels == 1.0
    negative = labels == 0.0
    n_positive = ops.sum(ops.cast(positive, "float32"))
    n_negative = ops.sum(ops.cast(negative, "float32"))
    mean_positive = ops.sum(ops.where(positive, d, 0.0)) / ops.maximum(n_positive, 1.0)
    mean_negative = ops.sum(ops.where(negative, d, 0.0)) / ops.maximum(n_negative, 1.0)
    negative_below = ops.where(n_positive > 0, ops.max(ops.where(positive, d, float("-inf"))), mean_negative)
    positive_above = ops.where(n_negative > 0, ops.min(ops.where(negative, d, float("inf"))), mean_positive)
    hard_positive = ops.logical_and(positive, d > positive_above)
    hard_negative = ops.logical_and(negative, d < negative_below)
    return ops.where(hard_positive, ops.square(d), 0.0) + ops.where(
        hard_negative, ops.square(ops.relu(margin - d)), 0.0
    )


@keras.saving.register_keras_serializable(package="sbert_keras")
class CoSENTLoss(BatchLevelLoss):
    """CoSENT on `RegressionSiamese` cosines against gold scores.

    Args:
        scale: float. Multiplies the cosines (20, as in sentence-transformers).

    Example:
    ```python
    loss = CoSENTLoss()
    loss(np.array([0.0, 1.0]), np.array([0.2, 0.1]))  # log(1 + e^(20·0.1)) ≈ 2.127
    model = RegressionSiamese(encoder)
    model.compile(loss=CoSENTLoss())
    ```
    """

    def __init__(self, scale=COSENT_SCALE, name="cosent_loss", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.scale = scale

    def call(self, y_true, y_pred):
        return cosent_loss(y_true, y_pred, self.scale)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="sbert_keras")
class AnglELoss(CoSENTLoss):
    """CoSENT on AnglE's angle similarity of each pair's two embeddings.

    `y_pred` is `(batch, 2, dim)`: `[u, v]` per pair, as
    `RegressionSiamese(pair_output="embeddings")` outputs (the cosine alone does
    not determine the angle). `y_true` are the gold scores.

    Args:
        scale: float. Multiplies the angle similarities (20, as in ST).

    Example:
    ```python
    model = RegressionSiamese(encoder, pair_output="embeddings")
    model.compile(loss=AnglELoss())
    model.fit((sentences_a, sentences_b), scores)
    ```
    """

    def __init__(self, scale=COSENT_SCALE, name="angle_loss", reduction="sum_over_batch_size", dtype=None):
        super().__init__(scale=scale, name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] != 2:
            raise ValueError(
                f"AnglELoss takes `y_pred` of shape (batch, 2, dim): the two embeddings of each pair. "
                f"Received shape {tuple(y_pred.shape)}."
            )
        return cosent_loss(y_true, angle_similarity(y_pred[:, 0], y_pred[:, 1]), self.scale)


@keras.saving.register_keras_serializable(package="sbert_keras")
class OnlineContrastiveLoss(keras.losses.Loss):
    """Online contrastive loss on pairs labelled 1 (similar) or 0 (dissimilar).

    Args:
        margin: float. Negative pairs nearer than this are pushed apart (0.5).
        from_similarity: bool. `y_pred` are cosines (`RegressionSiamese`'s
            output) and the distance is `1 − cos` (ST's default cosine
            distance); `False` if `y_pred` are distances already.

    The reduction is a sum over the batch, as in sentence-transformers.

    Example:
    ```python
    model = RegressionSiamese(encoder)
    model.compile(loss=OnlineContrastiveLoss(margin=0.5))
    model.fit((questions_a, questions_b), is_duplicate)
    ```
    """

    def __init__(
        self,
        margin=ONLINE_CONTRASTIVE_MARGIN,
        from_similarity=True,
        name="online_contrastive_loss",
        reduction="sum",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.margin = margin
        self.from_similarity = from_similarity

    def call(self, y_true, y_pred):
        distances = 1.0 - ops.cast(y_pred, "float32") if self.from_similarity else y_pred
        return online_contrastive_loss(y_true, distances, self.margin)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin, "from_similarity": self.from_similarity}
