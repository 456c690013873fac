"""Clustering of sentence embeddings: k-means, agglomerative, communities.

K-means and agglomerative clustering are scikit-learn's. Scikit-learn has no threshold community
detection, so `community_detection` is written here, after
sentence-transformers' algorithm, chunked so the n x n score matrix is never
held at once. Embeddings with NaN or inf are rejected, naming the row: NaN
compares false with everything, so it would be grouped silently.

Example:
```python
import numpy as np
emb = np.array([[1, 0], [2, 0.1], [0, 1], [0.1, 3]], "float32")
labels = cluster(emb, method="kmeans", num_clusters=2)
```
"""

import numpy as np
from sklearn.cluster import AgglomerativeClustering
from sklearn.cluster import KMeans

from sbert_keras.retrieval.scores import as_matrix
from sbert_keras.retrieval.scores import normalize
from sbert_keras.retrieval.scores import similarity_matrix
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import CLUSTER_METHODS
from sbert_keras.utils.defaults import COMMUNITY_MIN_SIZE
from sbert_keras.utils.defaults import COMMUNITY_THRESHOLD


def community_detection(embeddings, threshold=COMMUNITY_THRESHOLD, min_community_size=10, batch_size=1024):
    """Groups of mutually close embeddings (sentence-transformers' algorithm).

    A point's neighbours are the points (itself included) with cosine >=
    `threshold`; one with `min_community_size` neighbours or more is a centre.
    Centres are taken by descending count (then index), members already taken
    are dropped, and what falls below `min_community_size` is discarded.

    Args:
        embeddings: array-like. Float embeddings `(n, dim)`.
        threshold: float. Cosine similarity for two points to be neighbours.
        min_community_size: int. The smallest community kept.
        batch_size: int. Rows scored at once.

    Returns:
        A list of communities, largest first; each is a list of row indices
        ordered by descending similarity to its centre. No index is in two.

    Raises:
        ValueError: a NaN or inf row (named), or a size argument < 1.

    Example:
    ```python
    import numpy as np
    emb = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1], [-1, 0]], "float32")
    groups = community_detection(emb, threshold=0.9, min_community_size=2)
    assert sorted(map(sorted, groups)) == [[0, 1], [2, 3]]
    ```
    """
    emb = normalize(as_matrix(embeddings, "embeddings"))
    min_size = check_positive_int(min_community_size, "min_community_size")
    batch_size = check_positive_int(batch_size, "batch_size")
    n = len(emb)
    if n == 0:
        return []
    min_size = min(min_size, n)
    counts = np.concatenate(
        [np.count_nonzero(emb[s : s + batch_size] @ emb.T >= threshold, axis=1) for s in range(0, n, batch_size)]
    )
    centres = np.nonzero(counts >= min_size)[0]  # by count, then index
    centres = centres[np.argsort(-counts[centres], kind="stable")]
    assigned = np.zeros(n, dtype=bool)
    communities = []
    for s in range(0, len(centres), batch_size):
        if assigned.all():
            break
        for row in emb[centres[s : s + batch_size]] @ emb.T:
            members = np.nonzero((row >= threshold) & ~assigned)[0]
            if len(members) < min_size:
                continue
            members = members[np.lexsort((members, -row[members]))]
            communities.append(members.tolist())
            assigned[members] = True
    return sorted(communities, key=len, reverse=True)


def cluster(embeddings, method="kmeans", num_clusters=None, threshold=None, random_state=0, **kwargs):
    """Cluster labels for each embedding.

    Args:
        embeddings: array-like. Float embeddings `(n, dim)`.
        method: str. `"kmeans"`: scikit-learn `KMeans` (`n_init=10`) on
            L2-normalised embeddings, needs `num_clusters`.
            `"agglomerative"`: scikit-learn `AgglomerativeClustering`,
            average linkage on cosine distances (precomputed, so zero
            vectors work), needs exactly one of `num_clusters` or
            `threshold` (a cosine *distance*, 1 - cos).
            `"community"`: `community_detection` with `threshold` (a cosine
            *similarity*, default 0.75) and `min_community_size` (default 2).
        num_clusters: int or None. The number of clusters.
        threshold: float or None. See `method`.
        random_state: int. Seed of k-means.
        **kwargs: for `"community"`, `min_community_size` and `batch_size`;
            otherwise passed to the scikit-learn estimator.

    Returns:
        An int array `(n,)` of labels. For `"community"`, label `c` is the
        c-th largest community and points in none get -1.

    Example:
    ```python
    import numpy as np
    emb = np.array([[1, 0], [2, 0.1], [0, 1], [0.1, 3]], "float32")
    labels = cluster(emb, method="kmeans", num_clusters=2)
    assert labels[0] == labels[1] != labels[2] == labels[3]
    ```
    """
    emb = as_matrix(embeddings, "embeddings")
    if method == "kmeans":
        if num_clusters is None:
            raise ValueError("`method='kmeans'` needs `num_clusters`.")
        model = KMeans(n_clusters=num_clusters, n_init=10, random_state=random_state, **kwargs)
        return model.fit_predict(normalize(emb)).astype(np.int64)
    if method == "agglomerative":
        if (num_clusters is None) == (threshold is None):
            raise ValueError(
                "`method='agglomerative'` needs exactly one of `num_clusters` or "
                f"`threshold`. Received {num_clusters!r} and {threshold!r}."
            )
        # scikit-learn's "cosine" metric rejects zero vectors; here they are at 1.
        distances = np.maximum(1.0 - similarity_matrix(emb), 0.0)
        np.fill_diagonal(distances, 0.0)
        model = AgglomerativeClustering(
            n_clusters=num_clusters,
            distance_threshold=threshold,
            metric="precomputed",
            linkage="average",
            **kwargs,
        )
        return model.fit_predict(distances).astype(np.int64)
    if method == "community":
        communities = community_detection(
            emb,
            threshold=COMMUNITY_THRESHOLD if threshold is None else threshold,
            min_community_size=kwargs.pop("min_community_size", COMMUNITY_MIN_SIZE),
            **kwargs,
        )
        labels = np.full(len(emb), -1, dtype=np.int64)
        for label, members in enumerate(communities):
            labels[members] = label
        return labels
    raise ValueError(f"`method` must be one of {CLUSTER_METHODS}. Received {method!r}.")
