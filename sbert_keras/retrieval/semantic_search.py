"""Semantic search and paraphrase mining of sentence embeddings.

Everything here works on NumPy float32 embeddings `(n, dim)`; no Keras or
TensorFlow is imported. Scikit-learn has no chunked top-k search or
paraphrase mining, so both are written here, after sentence-transformers'
`semantic_search` and `paraphrase_mining_embeddings`. They are chunked, so a
full queries x corpus (or n x n) score matrix is never held at once: per
chunk `np.argpartition` keeps the top k, then chunks are merged
(`sbert_keras.retrieval.scores`). On an equal score the lower index comes first.
Embeddings with NaN or inf are rejected, naming the row: NaN compares false
with everything, so it would be ranked first or dropped silently.
Clustering lives in `sbert_keras.retrieval.clustering`; `cluster` and
`community_detection` are importable from here too.
"""

import numpy as np

from sbert_keras.retrieval.clustering import CLUSTER_METHODS  # noqa: F401 (public here too)
from sbert_keras.retrieval.clustering import cluster
from sbert_keras.retrieval.clustering import community_detection
from sbert_keras.retrieval.scores import EPSILON  # noqa: F401 (public here too)
from sbert_keras.retrieval.scores import SCORE_FUNCTIONS  # noqa: F401 (public here too)
from sbert_keras.retrieval.scores import as_matrix
from sbert_keras.retrieval.scores import chunked_top_k
from sbert_keras.retrieval.scores import prepare
from sbert_keras.retrieval.scores import progress
from sbert_keras.retrieval.scores import similarity_matrix
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE

# Corpus chunk of `paraphrase_mining` (its rows are chunked by `chunk_size`).
_PARAPHRASE_CORPUS_CHUNK = 10_000

__all__ = [
    "cluster",
    "community_detection",
    "paraphrase_mining",
    "paraphrase_mining_texts",
    "semantic_search",
    "similarity_matrix",
]


def semantic_search(
    query_embeddings,
    corpus_embeddings=None,
    top_k=10,
    score_function="cosine",
    query_chunk_size=100,
    corpus_chunk_size=50000,
    index=None,
):
    """Top-k nearest corpus entries of each query, chunked over both.

    Args:
        query_embeddings: array-like. Float embeddings `(num_queries, dim)`;
            a 1-D vector is one query.
        corpus_embeddings: array-like. Float embeddings `(corpus_size, dim)`.
        top_k: int. Hits per query; more than the corpus returns all of it.
        score_function: str. `"cosine"` (on normalised float32 copies) or
            `"dot"` (raw dot product).
        query_chunk_size: int. Queries scored at once.
        corpus_chunk_size: int. Corpus rows scored at once.
        index: an `sbert_keras.retrieval.index.EmbeddingIndex` or None. Search it
            (faiss; approximate unless its kind is `"flat"`; cosine) instead
            of `corpus_embeddings`, which must then be None.

    Returns:
        A list with one list per query of `{"corpus_id": int, "score": float}`
        dicts, by descending score (lower `corpus_id` first on a tie). With
        `index`, `corpus_id` is the indexed row and each hit also has its `"id"`.

    Raises:
        ValueError: an empty corpus, a NaN or inf row (named), differing
            dimensions, or a size argument < 1.
        TypeError: a size argument that is not an integer (`2.5`, `"8"`, `None`).

    Example:
    ```python
    import numpy as np
    corpus = np.array([[1, 0], [0, 1], [1, 1]], "float32")
    hits = semantic_search(np.array([1, 0.1], "float32"), corpus, top_k=2)
    assert [h["corpus_id"] for h in hits[0]] == [0, 2]
    ```
    """
    top_k = check_positive_int(top_k, "top_k")
    if index is not None:
        if corpus_embeddings is not None:
            raise ValueError("Pass `corpus_embeddings` or `index`, not both.")
        if score_function != "cosine":
            raise ValueError(f"`index` searches by cosine; received `score_function={score_function!r}`.")
        return index.hits(query_embeddings, top_k)
    if corpus_embeddings is None:
        raise ValueError("`semantic_search` needs `corpus_embeddings` or `index`.")
    query_chunk_size = check_positive_int(query_chunk_size, "query_chunk_size")
    corpus_chunk_size = check_positive_int(corpus_chunk_size, "corpus_chunk_size")
    queries = as_matrix(query_embeddings, "query_embeddings")
    corpus = as_matrix(corpus_embeddings, "corpus_embeddings")
    if len(corpus) == 0:
        raise ValueError("`corpus_embeddings` is empty: semantic search needs at least one corpus embedding.")
    if len(queries) == 0:
        return []
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"`query_embeddings` and `corpus_embeddings` dimensions differ: shapes {queries.shape} and {corpus.shape}."
        )
    queries, corpus = prepare(queries, score_function), prepare(corpus, score_function)
    chunks = chunked_top_k(queries, corpus, top_k, query_chunk_size, corpus_chunk_size)
    return [
        [{"corpus_id": i, "score": s} for s, i in zip(row_vals, row_ids)]
        for _, vals, ids in chunks
        for row_vals, row_ids in zip(vals.tolist(), ids.tolist())
    ]


def _best_pairs(a, b, s, max_pairs, n):
    """Dedupes pairs (keeping the best score) and keeps the best `max_pairs`."""
    order = np.lexsort((b, a, -s))
    a, b, s = a[order], b[order], s[order]
    _, first = np.unique(a * n + b, return_index=True)
    keep = np.sort(first)[:max_pairs]
    return a[keep], b[keep], s[keep]


def paraphrase_mining(
    embeddings,
    top_k=100,
    max_pairs=500_000,
    chunk_size=1000,
    score_function="cosine",
    show_progress=False,
):
    """Most similar pairs among `embeddings`, without the full n x n matrix.

    Like sentence-transformers' `paraphrase_mining_embeddings`: each item
    keeps its `top_k` most similar others, then the pairs are deduplicated,
    sorted and cut to `max_pairs`.

    Args:
        embeddings: array-like. Float embeddings `(n, dim)`.
        top_k: int. Neighbours kept per item (itself excluded).
        max_pairs: int or None. The most pairs returned; `None` keeps all.
        chunk_size: int. Rows scored at once.
        score_function: str. `"cosine"` or `"dot"`.
        show_progress: bool. Show a tqdm bar over row chunks.

    Returns:
        A list of `(score, i, j)` tuples with `i < j`, by descending score
        (then ascending `i`, `j`), each pair once.

    Raises:
        ValueError: a NaN or inf row (named), or a size argument < 1.
        TypeError: a size argument that is not an integer.

    Example:
    ```python
    import numpy as np
    emb = np.array([[1, 0], [0.9, 0.1], [0, 1]], "float32")
    pairs = paraphrase_mining(emb, top_k=1)
    assert pairs[0][1:] == (0, 1)
    ```
    """
    emb = prepare(as_matrix(embeddings, "embeddings"), score_function)
    top_k = check_positive_int(top_k, "top_k")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    n = len(emb)
    max_pairs = n * n if max_pairs is None else check_positive_int(max_pairs, "max_pairs")
    if n < 2:
        return []
    k = min(top_k, n - 1)
    corpus_chunk = max(chunk_size, _PARAPHRASE_CORPUS_CHUNK)
    chunks = chunked_top_k(emb, emb, k, chunk_size, corpus_chunk, exclude_self=True)
    total = -(-n // chunk_size)
    parts, size = [], 0
    for qs, vals, ids in progress(chunks, total, show_progress, "Paraphrase mining"):
        i = np.repeat(np.arange(qs, qs + len(vals), dtype=np.int64), vals.shape[1])
        j, s = ids.ravel().astype(np.int64), vals.ravel()
        keep = np.isfinite(s)  # drops self pairs
        parts.append((np.minimum(i, j)[keep], np.maximum(i, j)[keep], s[keep]))
        size += len(parts[-1][2])
        if size > 2 * max_pairs:  # bound memory: prune to the best pairs so far
            parts = [_best_pairs(*map(np.concatenate, zip(*parts)), max_pairs, n)]
            size = len(parts[0][0])
    a, b, s = _best_pairs(*map(np.concatenate, zip(*parts)), max_pairs, n)
    return [(float(x), int(y), int(z)) for x, y, z in zip(s.tolist(), a.tolist(), b.tolist())]


def paraphrase_mining_texts(encoder, texts, batch_size=ENCODE_BATCH_SIZE, **kwargs):
    """Encodes `texts` with `encoder`, then runs `paraphrase_mining`.

    Args:
        encoder: an object with `encode(texts, batch_size=...)` returning
            float32 `(n, dim)` embeddings, such as a `SentenceEncoder`.
        texts: list of str. The sentences to mine.
        batch_size: int. Texts per forward pass of the encoder.
        **kwargs: passed on to `paraphrase_mining`.

    Returns:
        A list of `(score, i, j)` tuples indexing into `texts`.

    Example:
    ```python
    import numpy as np
    class Encoder:
        def encode(self, texts, batch_size=32):
            return np.array([[len(t), 1] for t in texts], "float32")
    pairs = paraphrase_mining_texts(Encoder(), ["a", "b", "long text"])
    assert pairs[0][1:] == (0, 1)
    ```
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    embeddings = encoder.encode(texts, batch_size=batch_size)
    return paraphrase_mining(embeddings, **kwargs)
