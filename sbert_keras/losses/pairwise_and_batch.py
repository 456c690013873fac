"""Losses of today's embedding training: CoSENT, AnglE, symmetric in-batch
negatives, batch-hard triplet, online contrastive and MSE distillation.

Each is a pure function plus a registered `keras.losses.Loss`, computed in
float32 under any dtype policy. They follow the formulas of
sentence-transformers 6.2 (`CoSENTLoss`, `AnglELoss`,
`MultipleNegativesSymmetricRankingLoss`, `BatchHardTripletLoss`,
`OnlineContrastiveLoss`, `MSELoss`), checked against it on the same tensors
in `tests/test_losses_modern.py`. Keras, KerasHub and TensorFlow Addons have
none of the first five (TFA's `TripletHardLoss` is gone with TFA and takes
squared distances); MSE distillation *is* `keras.losses.MeanSquaredError`,
exposed here under its role's name rather than rewritten.

What each loss expects as `y_pred`, and which siamese model produces it:

| loss | `y_true` | `y_pred` | model |
|---|---|---|---|
| `CoSENTLoss` | scores `(batch,)` | cosines `(batch,)` | `RegressionSiamese` |
| `AnglELoss` | scores `(batch,)` | pair embeddings `(batch, 2, dim)` | `RegressionSiamese(pair_output="embeddings")` |
| `SymmetricInBatchNegativesLoss` | ignored | cosine matrix `(batch, batch * k)` | `ContrastiveSiamese` |
| `BatchHardTripletLoss` | class ids `(batch,)` | embeddings `(batch, dim)` | the `SentenceEncoder` itself |
| `OnlineContrastiveLoss` | 0/1 `(batch,)` | cosines (or distances) `(batch,)` | `RegressionSiamese` |
| `MSEDistillationLoss` | teacher `(batch, dim)` | student `(batch, dim)` | the `SentenceEncoder` itself |

CoSENT and AnglE are one number per batch (a log-sum over pairs of rows), so
they take no `sample_weight`.
"""

import keras
from keras import ops

from sbert_keras.losses.sentence_bert import ImpliedTargetLoss
from sbert_keras.model.similarity import cosine_similarity_matrix
from sbert_keras.model.similarity import l2_normalize
from sbert_keras.utils.defaults import IN_BATCH_SCALE
from sbert_keras.utils.defaults import NORM_EPSILON

# sentence-transformers' defaults.
COSENT_SCALE = 20.0
BATCH_HARD_MARGIN = 5.0
BATCH_HARD_DISTANCES = ("euclidean", "cosine")
ONLINE_CONTRASTIVE_MARGIN = 0.5

# MSE to the teacher's vectors (ST `MSELoss`): the mean over every element of
# `(batch, dim)`, which is Keras' MSE (mean over `dim`, then over the batch).
MSEDistillationLoss = keras.losses.MeanSquaredError


def _flat_float32(x):
    return ops.reshape(ops.cast(x, "float32"), (-1,))


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
    labels = _flat_float32(labels)
    scores = _flat_float32(scores) * scale
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


def pairwise_distances(embeddings, metric="euclidean"):
    """`(batch, dim)` -> `(batch, batch)` distances, float32.

    Euclidean through `|a|² + |b|² − 2a·b` (no `(batch, batch, dim)`
    intermediate), exactly 0 where that is ≤ 0 and with a finite gradient
    everywhere; cosine is `1 − cos`.
    """
    x = ops.cast(embeddings, "float32")
    if metric == "cosine":
        return 1.0 - cosine_similarity_matrix(x, x)
    if metric != "euclidean":
        raise ValueError(f"`metric` must be one of {BATCH_HARD_DISTANCES}. Received {metric!r}.")
    dots = ops.matmul(x, ops.transpose(x))
    squared = ops.sum(ops.square(x), axis=-1)
    d2 = ops.relu(squared[None, :] - 2.0 * dots + squared[:, None])
    return ops.where(d2 > 0, ops.sqrt(ops.maximum(d2, NORM_EPSILON)), 0.0)


def batch_hard_triplet_loss(labels, embeddings, margin=BATCH_HARD_MARGIN, metric="euclidean"):
    """Per anchor: `max(d(hardest positive) − d(hardest negative) + margin, 0)`.

    Hermans et al. (2017), "In Defense of the Triplet Loss": within a batch of
    labelled sentences, each anchor's farthest same-label sentence against
    its nearest other-label sentence. An anchor without a positive uses 0 as
    its positive distance (as ST does).

    Returns:
        `(batch,)` float32 losses, one per anchor.
    """
    labels = _flat_float32(labels)
    distances = pairwise_distances(embeddings, metric)
    same = labels[:, None] == labels[None, :]
    not_self = ops.logical_not(ops.eye(ops.shape(distances)[0], dtype="bool"))
    hardest_positive = ops.max(ops.where(ops.logical_and(same, not_self), distances, 0.0), axis=1)
    farthest = ops.max(distances, axis=1, keepdims=True)
    hardest_negative = ops.min(distances + farthest * ops.cast(same, "float32"), axis=1)
    return ops.relu(hardest_positive - hardest_negative + margin)


def online_contrastive_loss(labels, distances, margin=ONLINE_CONTRASTIVE_MARGIN):
    """Contrastive loss on the batch's hard pairs only, one value per pair.

    A positive pair (label 1) counts `d²` when farther than the nearest
    negative; a negative pair (label 0) counts `max(margin − d, 0)²` when
    nearer than the farthest positive (with no positives / negatives in the
    batch, the other class's mean is the threshold). Other rows give 0; the
    sum over the batch is ST's `OnlineContrastiveLoss`.
    """
    labels = _flat_float32(labels)
    d = _flat_float32(distances)
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


class BatchLevelLoss(keras.losses.Loss):
    """A loss that is one number per batch: it takes no `sample_weight`."""

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} is one value per batch (a log-sum over pairs of rows); "
                "it takes no `sample_weight`. Received one."
            )
        return super().__call__(y_true, y_pred)


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


@keras.saving.register_keras_serializable(package="sbert_keras")
class BatchHardTripletLoss(keras.losses.Loss):
    """Batch-hard triplet loss on `(class ids, embeddings)`, averaged over anchors.

    Args:
        margin: float. 5 as in sentence-transformers, for unnormalised
            Euclidean embeddings; L2-normalised ones lie within distance 2 of
            each other, so use a margin well below 2 (or `metric="cosine"`,
            distances in [0, 2]) there.
        metric: str. `"euclidean"` (default) or `"cosine"` (`1 − cos`).

    Example:
    ```python
    encoder.compile(optimizer="adam", loss=BatchHardTripletLoss(margin=0.5, metric="cosine"))
    encoder.fit(texts, class_ids, batch_size=64)
    ```
    """

    def __init__(
        self,
        margin=BATCH_HARD_MARGIN,
        metric="euclidean",
        name="batch_hard_triplet_loss",
        reduction="sum_over_batch_size",
        dtype=None,
    ):
        if metric not in BATCH_HARD_DISTANCES:
            raise ValueError(f"`metric` must be one of {BATCH_HARD_DISTANCES}. Received {metric!r}.")
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.margin = margin
        self.metric = metric

    def call(self, y_true, y_pred):
        return batch_hard_triplet_loss(y_true, y_pred, self.margin, self.metric)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin, "metric": self.metric}


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
