"""Row-wise L2 normalisation of NumPy embeddings, the one implementation.

Search, evaluation, hard-negative mining, the index and `encode` all
normalise NumPy rows the same way: in float32 (evaluation asks for float64),
the norm clamped at `defaults.NORM_EPSILON`, so a zero row stays zero
instead of becoming NaN.
(`keras.utils.normalize` returns float64 for float32 input with a different
epsilon rule, and scikit-learn's `normalize` copies to float64 too.)
"""

import numpy as np

from sbert_keras.utils.defaults import NORM_EPSILON


def l2_normalize(x, axis=-1, out=None, dtype=np.float32):
    """`x` divided by its L2 norm along `axis`, in float32; zero rows stay zero.

    Args:
        x: array-like. Embeddings, one per row.
        axis: int. The axis to normalise over.
        out: None or an array of `dtype`. Normalise into it (`x` itself for in place).
        dtype: NumPy dtype. The dtype computed in and returned (float32 unless asked).

    Returns:
        The normalised array, of `dtype`.

    Example:
    ```python
    l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))  # [[0.6, 0.8], [0.0, 0.0]]
    ```
    """
    x = np.asarray(x, dtype=dtype)
    norms = np.maximum(np.linalg.norm(x, axis=axis, keepdims=True), NORM_EPSILON)
    return np.divide(x, norms, out=out)
