"""The SBERT objectives' losses. Pure functions plus registered `Loss` classes.

The regression objective uses `keras.losses.MeanSquaredError` on the cosine
and the classification objective `keras.losses.SparseCategoricalCrossentropy`
on the logits; the two below have no Keras equivalent. Both compute in
float32 and ignore `y_true` (their targets are implied by the batch).
`triplet_settings` resolves the triplet distance and margin from whether
the encoder normalises, in one place for `TripletSiamese` and the CLI.
"""

import keras
from keras import ops

from sbert_keras.utils.defaults import IN_BATCH_SCALE
from sbert_keras.utils.defaults import TRIPLET_COSINE_MARGIN
from sbert_keras.utils.defaults import TRIPLET_DISTANCE
from sbert_keras.utils.defaults import TRIPLET_DISTANCES
from sbert_keras.utils.defaults import TRIPLET_MARGIN
from sbert_keras.utils.defaults import TRIPLET_NORMALIZED_DISTANCE


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


class ImpliedTargetLoss(keras.losses.Loss):
    """A loss whose target is implied by the batch: `y_true` may be `None`."""

    def __call__(self, y_true, y_pred, sample_weight=None):
        if y_true is None:
            y_true = ops.zeros(ops.shape(y_pred)[:1])
        return super().__call__(y_true, y_pred, sample_weight)


@keras.saving.register_keras_serializable(package="sbert_keras")
class TripletLoss(ImpliedTargetLoss):
    """Triplet margin loss on `TripletSiamese` outputs; no `y_true` needed.

    Args:
        margin: float. The margin ε of `max(d(a, p) − d(a, n) + ε, 0)`; 1.0
            (the SBERT paper's, for euclidean distances of unnormalised
            outputs). `TripletSiamese.compile()` passes its own margin,
            which for a normalising encoder is the cosine distance's
            `defaults.TRIPLET_COSINE_MARGIN` (`siamese.triplet_settings`).

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
