"""Masked pooling: token embeddings + padding mask -> one sentence vector.

Keras' `GlobalAveragePooling1D` / `GlobalMaxPooling1D` honour a Keras mask but
divide by zero on an all-padding row (mean) or return `-inf` (max), and have no
"cls" mode, so pooling is written here. It always computes in float32.
"""

import keras
from keras import ops

POOLING_MODES = ("mean", "max", "cls")


@keras.saving.register_keras_serializable(package="sbert_keras")
class MaskedPooling(keras.layers.Layer):
    """Pools token embeddings into a sentence embedding, ignoring padding.

    The layer runs in float32 whatever the global dtype policy: its inputs
    are cast up before any sum, so mixed precision never over- or
    underflows here. An all-padding row gives a zero vector, never NaN.

    Args:
        mode: str. `"mean"` (average of the real tokens, as
            sentence-transformers does), `"max"` (element-wise maximum over
            the real tokens) or `"cls"` (the first token).
        **kwargs: standard `keras.layers.Layer` arguments. `dtype` defaults
            to `"float32"`.

    Call arguments:
        token_embeddings: float tensor `(batch, length, dim)`.
        padding_mask: int or bool tensor `(batch, length)`, 1 for real tokens.

    Example:
    ```python
    import numpy as np
    x = np.ones((2, 3, 4), "float32")
    mask = np.array([[1, 1, 0], [0, 0, 0]])
    MaskedPooling("mean")(x, mask)  # [[1, 1, 1, 1], [0, 0, 0, 0]]
    ```
    """

    def __init__(self, mode="mean", **kwargs):
        if mode not in POOLING_MODES:
            raise ValueError(f"`mode` must be one of {POOLING_MODES}. Received: mode={mode!r}")
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.mode = mode
        self.supports_masking = False

    def call(self, token_embeddings, padding_mask):
        x = ops.cast(token_embeddings, "float32")
        mask = ops.cast(ops.expand_dims(padding_mask, -1), "float32")
        if self.mode == "cls":
            return x[:, 0, :]
        count = ops.sum(mask, axis=1)
        if self.mode == "mean":
            return ops.sum(x * mask, axis=1) / ops.maximum(count, 1e-9)
        # max: padded positions can never win; all-padding rows give zeros.
        lowest = ops.min(x, axis=1, keepdims=True) - 1.0
        masked = ops.where(mask > 0, x, ops.stop_gradient(lowest))
        return ops.where(count > 0, ops.max(masked, axis=1), 0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode})
        return config
