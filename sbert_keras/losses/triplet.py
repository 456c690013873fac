"""Triplet losses: the SBERT paper's on (anchor, positive, negative) distances, and batch-hard.

`TripletLoss` is the paper's `max(d(a, p) - d(a, n) + margin, 0)` on the two
distances that `TripletSiamese` outputs; `triplet_settings` resolves its
distance and margin from whether the encoder normalises, in one place for
`TripletSiamese` and the CLI. `BatchHardTripletLoss` (Hermans et al., 2017;
sentence-transformers' `BatchHardTripletLoss`, checked against it in
`tests/losses/test_pair_scores.py`) takes class ids and the encoder's own
embeddings, and picks each anchor's hardest positive and negative in the
batch from `pairwise_distances`. TensorFlow Addons' `TripletHardLoss` is
gone with TFA and took squared distances. All compute in float32.
"""

import keras
from keras import ops

from sbert_keras.losses.base import ImpliedTargetLoss
from sbert_keras.losses.base import flat_float32
from sbert_keras.model.similarity import cosine_similarity_matrix
from sbert_keras.utils.defaults import NORM_EPSILON
from sbert_keras.utils.defaults import TRIPLET_COSINE_MARGIN
from sbert_keras.utils.defaults import TRIPLET_DISTANCE
from sbert_keras.utils.defaults import TRIPLET_DISTANCES
from sbert_keras.utils.defaults import TRIPLET_MARGIN
from sbert_keras.utils.defaults import TRIPLET_NORMALIZED_DISTANCE

# sentence-transformers' defaults of `BatchHardTripletLoss`.
BATCH_HARD_MARGIN = 5.0
BATCH_HARD_DISTANCES = ("euclidean", "cosine")


def triplet_settings(normalized, distance=None, margin=None):
    """The triplet objective's `(distance, margin)`; given values win.

    The paper's euclidean distance with margin 1 suits raw (unnormalised)
    outputs. On L2-normalised outputs distances lie in [0, 2] and margin 1
    asks for more than the geometry gives (it lowered the SNLI triplet
    accuracy of all-MiniLM-L6-v2 from 0.943 to 0.907), so the default there
    is the cosine distance (1 - cos) with `defaults.TRIPLET_COSINE_MARGIN`.
    A cosine distance chosen by hand also gets that margin (cosine distances
    lie in [0, 2] whatever the norm); euclidean and manhattan get the
    paper's 1, so pass a smaller `margin` with them on normalised outputs.

    Args:
        normalized: bool. Whether the encoder L2-normalises its outputs
            (`SentenceEncoder.normalize`).
        distance: str or None. `"euclidean"`, `"cosine"` or `"manhattan"`.
        margin: float or None.

    Returns:
        `(distance, margin)`.

    Example:
    ```python
    triplet_settings(True)  # ("cosine", 0.1), e.g. all-MiniLM-L6-v2
    triplet_settings(False)  # ("euclidean", 1.0), the paper's
    triplet_settings(True, distance="euclidean", margin=0.5)  # as given
    ```
    """
    if distance is None:
        distance = TRIPLET_NORMALIZED_DISTANCE if normalized else TRIPLET_DISTANCE
    if distance not in TRIPLET_DISTANCES:
        raise ValueError(f"`distance` must be one of {TRIPLET_DISTANCES}. Received {distance!r}.")
    if margin is None:
        margin = TRIPLET_COSINE_MARGIN if distance == "cosine" else TRIPLET_MARGIN
    return distance, float(margin)


def triplet_loss(distances, margin=TRIPLET_MARGIN):
    """`max(d(a, p) - d(a, n) + margin, 0)` per row of `(batch, 2)` distances."""
    distances = ops.cast(distances, "float32")
    return ops.relu(distances[:, 0] - distances[:, 1] + margin)


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
    labels = flat_float32(labels)
    distances = pairwise_distances(embeddings, metric)
    same = labels[:, None] == labels[None, :]
    not_self = ops.logical_not(ops.eye(ops.shape(distances)[0], dtype="bool"))
    hardest_positive = ops.max(ops.where(ops.logical_and(same, not_self), distances, 0.0), axis=1)
    farthest = ops.max(distances, axis=1, keepdims=True)
    hardest_negative = ops.min(distances + farthest * ops.cast(same, "float32"), axis=1)
    return ops.relu(hardest_positive - hardest_negative + margin)


@keras.saving.register_keras_serializable(package="sbert_keras")
class TripletLoss(ImpliedTargetLoss):
    """Triplet margin loss on `TripletSiamese` outputs; no `y_true` needed.

    Args:
        margin: float. The margin ε of `max(d(a, p) − d(a, n) + ε, 0)`; 1.0
            (the SBERT paper's, for euclidean distances of unnormalised
            outputs). `TripletSiamese.compile()` passes its own margin,
            which for a normalising encoder is the cosine distance's
            `defaults.TRIPLET_COSINE_MARGIN` (`triplet_settings`).

    Example:
    ```python
    loss = TripletLoss(margin=1.0)
    loss(None, np.array([[0.5, 2.0], [1.0, 1.2]]))  # mean(0, 0.8) = 0.4
    ```
    """

    def __init__(self, margin=TRIPLET_MARGIN, name="triplet_loss", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.margin = margin

    def call(self, y_true, y_pred):
        return triplet_loss(y_pred, self.margin)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin}


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
