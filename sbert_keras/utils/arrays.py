"""Row-wise L2 normalisation of NumPy embeddings, the one implementation.

Search, evaluation, hard-negative mining, the index and `encode` all
normalise NumPy rows the same way: in float32, the norm clamped at
`defaults.NORM_EPSILON`, so a zero row stays zero instead of becoming NaN.
(`keras.utils.normalize` returns float64 for float32 input with a different
epsilon rule, and scikit-learn's `normalize` copies to float64 too.)
"""

import numpy as np

from sbert_keras.utils.defaults import NORM_EPSILON


def l2_normalize(x, axis=-1, out=None):
    """`x` divided by its L2 norm along `axis`, in float32; zero rows stay zero.

    Args:
        x: array-like. Embeddings, one per row.
        axis: int. The axis to normalise over.
        out: None or a float32 array. Normalise into it (`x` itself for in place).

    Returns:
        The normalised float32 array.

    Example:
    ```python
    l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))  # [[0.6, 0.8], [0.0, 0.0]]
    ```
    """
    x = np.asarray(x, dtype=np.float32)
    norms = np.maximum(np.linalg.norm(x, axis=axis, keepdims=True), NORM_EPSILON)
    return np.divide(x, norms, out=out)
