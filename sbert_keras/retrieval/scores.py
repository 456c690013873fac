"""Float32 similarity scores and exact chunked top-k of NumPy embeddings.

The building blocks of `sbert_keras.retrieval.semantic_search` and `sbert_keras.retrieval.clustering`:
plain NumPy on float32 `(n, dim)` arrays, no Keras or TensorFlow. Scikit-
learn's `cosine_similarity` returns float64 and rejects nothing, and neither
it nor NumPy has a chunked top-k with a fixed tie order, so they are written
here. Norms are clamped at 1e-12, so zero vectors give finite scores;
embeddings with NaN or inf are rejected, naming the row
(`checks.check_finite`). On an equal score the lower index comes first.

Example:
```python
import numpy as np
sim = similarity_matrix(np.eye(3, dtype="float32"))
```
"""

import numpy as np
from tqdm.auto import tqdm

from sbert_keras.retrieval.quantization import refuse_quantized
from sbert_keras.utils.arrays import l2_normalize
from sbert_keras.utils.checks import check_finite
from sbert_keras.utils.defaults import NORM_EPSILON as EPSILON  # noqa: F401 (public here too)

SCORE_FUNCTIONS = ("cosine", "dot")


def as_matrix(x, name):
    """`x` as a finite float32 `(n, dim)` array; a 1-D vector becomes one row.

    An empty sequence is `(0, 0)`; a NaN or inf raises naming the row.
    int8 and uint8 arrays are quantized embeddings (`encode(precision=...)`),
    whose buckets or packed bits are no float vectors: they are refused.
    """
    refuse_quantized(x, name)
    try:
        x = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise TypeError(f"`{name}` must be a float array (n, dim). {error}") from None
    if x.ndim == 1:
        x = x.reshape(0, 0) if x.size == 0 else x[None, :]
    if x.ndim != 2:
        raise ValueError(f"`{name}` must be 1-D or 2-D. Received shape {x.shape}.")
    check_finite(x, name)
    return x


def normalize(x):
    """Row-wise L2 normalisation of a float32 copy; zero rows stay zero (`utils.arrays.l2_normalize`)."""
    return l2_normalize(x, axis=1)


def prepare(x, score_function):
    if score_function not in SCORE_FUNCTIONS:
        raise ValueError(f"`score_function` must be one of {SCORE_FUNCTIONS}. Received {score_function!r}.")
    return normalize(x) if score_function == "cosine" else x


def sort_rows(vals, ids, k):
    """Sorts each row by descending score, then ascending id; keeps `k`."""
    order = np.lexsort((ids, -vals), axis=1)[:, :k]
    return np.take_along_axis(vals, order, 1), np.take_along_axis(ids, order, 1)


def top_k_rows(scores, k):
    """Exact per-row top `k` of `scores` (ties: lower column first), sorted."""
    n = scores.shape[1]
    k = min(k, n)
    idx = np.argpartition(scores, n - k, axis=1)[:, n - k :]
    vals = np.take_along_axis(scores, idx, 1)
    # argpartition picks arbitrarily among scores equal to the k-th: redo
    # those (rare) rows so that the lowest columns win.
    kth = vals.min(axis=1)
    for r in np.nonzero(np.count_nonzero(scores >= kth[:, None], axis=1) > k)[0]:
        cand = np.nonzero(scores[r] >= kth[r])[0]
        cand = cand[np.lexsort((cand, -scores[r, cand]))[:k]]
        idx[r], vals[r] = cand, scores[r, cand]
    return sort_rows(vals, idx, k)


def chunked_top_k(queries, corpus, k, query_chunk_size, corpus_chunk_size, exclude_self=False):
    """Yields `(start, scores, ids)`, each query's top `k`, per query chunk.

    With `exclude_self`, `queries` is `corpus`: a row scores -inf on itself.
    """
    for qs in range(0, len(queries), query_chunk_size):
        q = queries[qs : qs + query_chunk_size]
        best_vals = best_ids = None
        for cs in range(0, len(corpus), corpus_chunk_size):
            scores = q @ corpus[cs : cs + corpus_chunk_size].T
            if exclude_self:  # the rows of q that are in this corpus chunk
                rows = np.arange(max(cs - qs, 0), min(cs + scores.shape[1] - qs, len(q)))
                scores[rows, qs + rows - cs] = -np.inf
            vals, ids = top_k_rows(scores, k)
            ids = ids + cs
            if best_vals is not None:  # merge with the previous corpus chunks
                vals, ids = sort_rows(np.hstack([best_vals, vals]), np.hstack([best_ids, ids]), k)
            best_vals, best_ids = vals, ids
        yield qs, best_vals, best_ids


def progress(iterable, total, show, desc):
    """`iterable` under a tqdm progress bar when `show`, else as it is."""
    return tqdm(iterable, total=total, desc=desc) if show else iterable


def similarity_matrix(a, b=None):
    """All-pairs cosine similarity in float32.

    Args:
        a: array-like. Embeddings `(n, dim)` (a 1-D vector is one row).
        b: array-like or None. Embeddings `(m, dim)`; `None` compares `a`
            with itself.

    Returns:
        A float32 array `(n, m)`. Zero vectors score 0 against everything.

    Example:
    ```python
    import numpy as np
    sim = similarity_matrix(np.eye(3, dtype="float32"))
    assert np.allclose(sim, np.eye(3))
    ```
    """
    a = normalize(as_matrix(a, "a"))
    b = a if b is None else normalize(as_matrix(b, "b"))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"`a` and `b` dimensions differ: shapes {a.shape} and {b.shape}.")
    return (a @ b.T).astype(np.float32)
