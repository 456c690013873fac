"""What several losses share: a target implied by the batch, one value per batch, float32 inputs.

`ImpliedTargetLoss` lets a loss whose target is the batch itself (triplets,
in-batch negatives) be called with `y_true=None`; `BatchLevelLoss` refuses a
`sample_weight` for a loss that is one number per batch (CoSENT, AnglE).
Neither is registered: only their subclasses are saved.
"""

import keras
from keras import ops


def flat_float32(x):
    """`x` as a flat float32 tensor: the labels or scores of a batch."""
    return ops.reshape(ops.cast(x, "float32"), (-1,))


class ImpliedTargetLoss(keras.losses.Loss):
    """A loss whose target is implied by the batch: `y_true` may be `None`."""

    def __call__(self, y_true, y_pred, sample_weight=None):
        if y_true is None:
            y_true = ops.zeros(ops.shape(y_pred)[:1])
        return super().__call__(y_true, y_pred, sample_weight)


class BatchLevelLoss(keras.losses.Loss):
    """A loss that is one number per batch: it takes no `sample_weight`."""

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} is one value per batch (a log-sum over pairs of rows); "
                "it takes no `sample_weight`. Received one."
            )
        return super().__call__(y_true, y_pred)
