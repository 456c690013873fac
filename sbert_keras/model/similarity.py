"""Similarities and distances between sentence embeddings, in float32.

Keras has `keras.losses.cosine_similarity` (negated, a loss) and
`keras.layers.Dot(normalize=True)`, but neither has a gradient-safe norm at
zero nor runs in float32 under a mixed policy, so these few functions are
written here. Every function casts to float32 first; norms use
`x * rsqrt(max(|x|², eps))` and distances `sqrt(max(d², eps))`, so identical
or all-zero vectors give finite values *and* finite gradients.
"""

import keras
from keras import ops

from sbert_keras.utils.defaults import CONCATENATION
from sbert_keras.utils.defaults import NORM_EPSILON as EPSILON
from sbert_keras.utils.defaults import TRIPLET_DISTANCE
from sbert_keras.utils.defaults import TRIPLET_DISTANCES

METRICS = ("cosine", "euclidean", "manhattan", "dot")


def l2_normalize(x, axis=-1):
    """`x / |x|` in float32; a zero vector stays zero (finite gradient)."""
    x = ops.cast(x, "float32")
    squared = ops.sum(ops.square(x), axis=axis, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared, EPSILON))


def cosine_similarity(u, v):
    """Row-wise cosine of two `(batch, dim)` tensors -> `(batch,)`."""
    return ops.sum(l2_normalize(u) * l2_normalize(v), axis=-1)


def cosine_similarity_matrix(a, b):
    """All-pairs cosine `(n, dim) x (m, dim) -> (n, m)`."""
    return ops.matmul(l2_normalize(a), ops.transpose(l2_normalize(b)))


def distance(u, v, metric=TRIPLET_DISTANCE):
    """Row-wise distance `(batch,)`: euclidean, manhattan or cosine (1 - cos)."""
    u = ops.cast(u, "float32")
    v = ops.cast(v, "float32")
    if metric == "euclidean":
        return ops.sqrt(ops.maximum(ops.sum(ops.square(u - v), axis=-1), EPSILON))
    if metric == "manhattan":
        return ops.sum(ops.abs(u - v), axis=-1)
    if metric == "cosine":
        return 1.0 - cosine_similarity(u, v)
    raise ValueError(f"`metric` must be 'euclidean', 'manhattan' or 'cosine'. Received {metric!r}.")


class _Float32Layer(keras.layers.Layer):
    """Base for the stateless float32 layers below."""

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)


@keras.saving.register_keras_serializable(package="sbert_keras")
class CosineSimilarity(_Float32Layer):
    """Row-wise cosine similarity of `(u, v)` -> `(batch,)`, in float32.

    This is the regression objective's output: one similarity per pair,
    not the `(batch, batch)` matrix of `matmul(u, vᵀ)`.
    """

    def call(self, u, v):
        return cosine_similarity(u, v)


@keras.saving.register_keras_serializable(package="sbert_keras")
class TripletDistances(_Float32Layer):
    """`(anchor, positive, negative)` -> `(batch, 2)`: `[d(a, p), d(a, n)]`.

    Args:
        metric: str. `"euclidean"` (default), `"cosine"` or `"manhattan"`.
    """

    def __init__(self, metric=TRIPLET_DISTANCE, **kwargs):
        if metric not in TRIPLET_DISTANCES:
            raise ValueError(f"`metric` must be one of {TRIPLET_DISTANCES}. Received {metric!r}.")
        super().__init__(**kwargs)
        self.metric = metric

    def call(self, anchor, positive, negative):
        return ops.stack(
            [distance(anchor, positive, self.metric), distance(anchor, negative, self.metric)],
            axis=-1,
        )

    def get_config(self):
        return {**super().get_config(), "metric": self.metric}


@keras.saving.register_keras_serializable(package="sbert_keras")
class SimilarityMatrix(_Float32Layer):
    """Cosine of every anchor with every candidate: `(batch, batch * k)`.

    Call with `(anchors, positives)` or `(anchors, positives, negatives)`;
    candidate `j < batch` is positive `j`, the rest are hard negatives.
    """

    def call(self, anchors, *candidates):
        pool = ops.concatenate([ops.cast(c, "float32") for c in candidates], axis=0)
        return cosine_similarity_matrix(anchors, pool)


CONCATENATION_PARTS = ("u", "v", "|u-v|", "u*v")


@keras.saving.register_keras_serializable(package="sbert_keras")
class PairFeatures(_Float32Layer):
    """Concatenates features of a pair, e.g. `[u, v, |u-v|]`, in float32.

    Args:
        concatenation: tuple of str, a subset of `("u", "v", "|u-v|", "u*v")`
            in any order: the ablation modes of the SBERT paper (Table 6).
    """

    def __init__(self, concatenation=CONCATENATION, **kwargs):
        concatenation = tuple(concatenation)
        bad = [p for p in concatenation if p not in CONCATENATION_PARTS]
        if bad or not concatenation:
            raise ValueError(
                f"`concatenation` must be a non-empty subset of {CONCATENATION_PARTS}. Received {concatenation!r}."
            )
        super().__init__(**kwargs)
        self.concatenation = concatenation

    def call(self, u, v):
        u = ops.cast(u, "float32")
        v = ops.cast(v, "float32")
        parts = {"u": u, "v": v}
        if "|u-v|" in self.concatenation:
            parts["|u-v|"] = ops.abs(u - v)
        if "u*v" in self.concatenation:
            parts["u*v"] = u * v
        return ops.concatenate([parts[p] for p in self.concatenation], axis=-1)

    def get_config(self):
        return {**super().get_config(), "concatenation": list(self.concatenation)}
