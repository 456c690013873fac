"""Tests for sbert_keras.retrieval.semantic_search: chunked search, paraphrase mining, clustering."""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from conftest import SCORE_ATOL
from conftest import assert_same_ranking
from sbert_keras.retrieval.semantic_search import cluster
from sbert_keras.retrieval.semantic_search import community_detection
from sbert_keras.retrieval.semantic_search import paraphrase_mining
from sbert_keras.retrieval.semantic_search import paraphrase_mining_texts
from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.retrieval.semantic_search import similarity_matrix


def _unit(x):
    x = np.asarray(x, np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def brute_force_search(queries, corpus, top_k, score_function):
    q, c = np.float32(queries), np.float32(corpus)
    if score_function == "cosine":
        q, c = np.float32(_unit(q)), np.float32(_unit(c))
    scores = q @ c.T
    out = []
    for row in scores:
        order = np.lexsort((np.arange(len(row)), -row))[:top_k]
        out.append((order, row[order]))
    return out


def brute_force_pairs(embeddings):
    emb = np.float32(_unit(embeddings))
    scores = emb @ emb.T
    n = len(emb)
    pairs = [(float(scores[i, j]), i, j) for i in range(n) for j in range(i + 1, n)]
    return sorted(pairs, key=lambda p: (-p[0], p[1], p[2]))


def clusters_around_axes(sizes, dim=8, noise=0.02, seed=0, outliers=0):
    """Tight groups around e_0, e_1, ...; outliers along later axes, one each."""
    rng = np.random.default_rng(seed)
    points, labels = [], []
    for label, size in enumerate(sizes):
        centre = np.eye(dim)[label] * rng.uniform(0.5, 3.0)
        points.append(centre + noise * rng.standard_normal((size, dim)))
        labels += [label] * size
    for k in range(outliers):
        points.append(np.eye(dim)[len(sizes) + k][None] * 2.0)
        labels.append(-1)
    return np.concatenate(points).astype(np.float32), np.array(labels)


@pytest.mark.parametrize("score_function", ["cosine", "dot"])
@pytest.mark.parametrize("chunks", [(7, 100), (100, 7), (50, 50000)])
def test_semantic_search_matches_brute_force(score_function, chunks):
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((37, 16)).astype(np.float32)
    corpus = rng.standard_normal((1013, 16)).astype(np.float32)
    hits = semantic_search(
        queries,
        corpus,
        top_k=10,
        score_function=score_function,
        query_chunk_size=chunks[0],
        corpus_chunk_size=chunks[1],
    )
    reference = brute_force_search(queries, corpus, 10, score_function)
    assert len(hits) == 37
    for row, (ids, scores) in zip(hits, reference):
        assert_same_ranking([(h["score"], h["corpus_id"]) for h in row], list(zip(scores, ids)))
        assert all(isinstance(h["corpus_id"], int) for h in row)
        assert all(isinstance(h["score"], float) for h in row)


def test_semantic_search_top_k_larger_than_corpus_returns_all():
    rng = np.random.default_rng(2)
    corpus = rng.standard_normal((9, 4)).astype(np.float32)
    hits = semantic_search(corpus[:2], corpus, top_k=50, corpus_chunk_size=4)
    for q, row in enumerate(hits):
        assert sorted(h["corpus_id"] for h in row) == list(range(9))
        scores = [h["score"] for h in row]
        assert scores == sorted(scores, reverse=True)
        assert row[0]["corpus_id"] == q


def test_semantic_search_one_dimensional_query():
    corpus = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    hits = semantic_search(np.array([0.1, 1.0], np.float32), corpus, top_k=2)
    assert len(hits) == 1
    assert [h["corpus_id"] for h in hits[0]] == [1, 2]


def test_semantic_search_ties_prefer_lower_ids_across_chunks():
    corpus = np.ones((10, 3), np.float32)
    for chunks in [(1, 3), (4, 4), (100, 100)]:
        hits = semantic_search(
            np.ones((2, 3), np.float32),
            corpus,
            top_k=4,
            query_chunk_size=chunks[0],
            corpus_chunk_size=chunks[1],
        )
        assert [[h["corpus_id"] for h in row] for row in hits] == [[0, 1, 2, 3]] * 2


def test_semantic_search_validation():
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(10, 4\)"):
        semantic_search(np.ones((3, 5)), np.ones((10, 4)))
    with pytest.raises(ValueError, match="top_k"):
        semantic_search(np.ones((3, 4)), np.ones((10, 4)), top_k=0)
    with pytest.raises(ValueError, match="score_function"):
        semantic_search(np.ones((3, 4)), np.ones((10, 4)), score_function="euclid")


def test_paraphrase_mining_all_pairs_match_brute_force():
    rng = np.random.default_rng(3)
    emb = rng.standard_normal((23, 6)).astype(np.float32)
    pairs = paraphrase_mining(emb, top_k=100, max_pairs=10_000)
    reference = brute_force_pairs(emb)
    assert len(pairs) == 23 * 22 // 2
    assert_same_ranking(pairs, reference)
    assert all(i < j for _, i, j in pairs)
    assert len({p[1:] for p in pairs}) == len(pairs)


def test_paraphrase_mining_chunking_and_max_pairs(monkeypatch):
    rng = np.random.default_rng(4)
    emb = rng.standard_normal((61, 8)).astype(np.float32)
    full = paraphrase_mining(emb, top_k=5, chunk_size=1000)
    # Other chunk sizes run other BLAS kernels: the same pairs in the same
    # order, scores equal up to rounding (ties within SCORE_ATOL may swap).
    assert_same_ranking(paraphrase_mining(emb, top_k=5, chunk_size=7), full)
    # Chunk the corpus too (normally at least 10 000 rows).
    monkeypatch.setattr("sbert_keras.retrieval.semantic_search._PARAPHRASE_CORPUS_CHUNK", 1)
    assert_same_ranking(paraphrase_mining(emb, top_k=5, chunk_size=7), full)
    # max_pairs keeps the best pairs, also when pruning while mining.
    assert_same_ranking(paraphrase_mining(emb, top_k=5, chunk_size=7, max_pairs=10), full[:10])
    # Each item contributes its own top-k partners.
    partners = {i: set() for i in range(61)}
    for _, i, j in full:
        partners[i].add(j)
        partners[j].add(i)
    sim = similarity_matrix(emb)
    np.fill_diagonal(sim, -np.inf)
    for i in range(61):
        fifth = np.sort(sim[i])[-5]  # neighbours tied with the 5th (within rounding) may differ
        assert set(np.nonzero(sim[i] > fifth + SCORE_ATOL)[0].tolist()) <= partners[i]


def test_paraphrase_mining_texts_uses_encoder():
    class FakeEncoder:
        def __init__(self):
            self.calls = []

        def encode(self, texts, batch_size=32, normalize=None, show_progress=None):
            self.calls.append((list(texts), batch_size))
            table = {"cat": [1, 0, 0], "kitten": [0.9, 0.1, 0], "car": [0, 0, 1]}
            return np.array([table[t] for t in texts], np.float32)

    encoder = FakeEncoder()
    pairs = paraphrase_mining_texts(encoder, ["cat", "car", "kitten"], batch_size=2, top_k=1)
    assert encoder.calls == [(["cat", "car", "kitten"], 2)]
    assert pairs[0][1:] == (0, 2)
    assert pairs[0][0] == pytest.approx(0.9 / np.sqrt(0.82), abs=1e-6)


def test_community_detection_finds_groups_and_skips_outliers():
    emb, labels = clusters_around_axes([12, 9, 6], outliers=3)
    perm = np.random.default_rng(5).permutation(len(emb))
    emb, labels = emb[perm], labels[perm]
    for batch_size in (4, 1024):
        groups = community_detection(emb, threshold=0.9, min_community_size=5, batch_size=batch_size)
        assert [len(g) for g in groups] == [12, 9, 6]
        for group, label in zip(groups, [0, 1, 2]):
            assert set(group) == set(np.nonzero(labels == label)[0].tolist())
    # min_community_size above a group's size drops that group.
    groups = community_detection(emb, threshold=0.9, min_community_size=7)
    assert [len(g) for g in groups] == [12, 9]


def test_community_detection_non_overlapping_largest_first():
    rng = np.random.default_rng(6)
    emb = rng.standard_normal((200, 3)).astype(np.float32)
    groups = community_detection(emb, threshold=0.8, min_community_size=5, batch_size=32)
    flat = [i for g in groups for i in g]
    assert len(flat) == len(set(flat))
    assert [len(g) for g in groups] == sorted((len(g) for g in groups), reverse=True)
    assert all(len(g) >= 5 for g in groups)


@pytest.mark.parametrize(
    "method, kwargs",
    [
        ("kmeans", {"num_clusters": 3}),
        ("agglomerative", {"num_clusters": 3}),
        ("agglomerative", {"threshold": 0.5}),
        ("community", {"threshold": 0.9}),
    ],
)
def test_cluster_recovers_obvious_groups(method, kwargs):
    emb, labels = clusters_around_axes([10, 7, 5], seed=7)
    predicted = cluster(emb, method=method, **kwargs)
    assert predicted.shape == (len(emb),)
    assert np.issubdtype(predicted.dtype, np.integer)
    assert adjusted_rand_score(labels, predicted) == 1.0


def test_cluster_community_marks_outliers():
    emb, labels = clusters_around_axes([10, 7, 5], seed=8, outliers=2)
    predicted = cluster(emb, method="community", threshold=0.9, min_community_size=3)
    np.testing.assert_array_equal(predicted == -1, labels == -1)
    assert adjusted_rand_score(labels, predicted) == 1.0
    assert np.bincount(predicted[predicted >= 0]).tolist() == [10, 7, 5]


def test_cluster_validation():
    emb = np.eye(4, dtype=np.float32)
    with pytest.raises(ValueError, match="num_clusters"):
        cluster(emb, method="kmeans")
    with pytest.raises(ValueError, match="exactly one"):
        cluster(emb, method="agglomerative")
    with pytest.raises(ValueError, match="exactly one"):
        cluster(emb, method="agglomerative", num_clusters=2, threshold=0.5)
    with pytest.raises(ValueError, match="method"):
        cluster(emb, method="dbscan")


def test_zero_vectors_give_no_nan():
    emb = np.eye(5, 4, dtype=np.float32)
    emb[1] = 0.0  # rows 1 and 4 are zero vectors
    sim = similarity_matrix(emb)
    assert sim.dtype == np.float32 and np.isfinite(sim).all()
    assert sim[1].tolist() == [0.0] * 5
    for score_function in ("cosine", "dot"):
        hits = semantic_search(emb, emb, top_k=5, score_function=score_function)
        assert all(np.isfinite(h["score"]) for row in hits for h in row)
    pairs = paraphrase_mining(emb, top_k=4)
    assert len(pairs) == 10 and all(np.isfinite(s) for s, _, _ in pairs)
    assert community_detection(emb, threshold=0.5, min_community_size=1) == [[0], [2], [3]]
    for method, kwargs in [("kmeans", {"num_clusters": 2}), ("agglomerative", {"num_clusters": 2}), ("community", {})]:
        assert cluster(emb, method=method, **kwargs).shape == (5,)


def test_similarity_matrix():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(similarity_matrix(a, b), _unit(a) @ _unit(b).T, atol=1e-6)
    np.testing.assert_allclose(np.diag(similarity_matrix(a)), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="dimensions"):
        similarity_matrix(a, b[:, :5])


# === Bad input: clear errors ===


def _with_bad_row(value, row=2, n=5, dim=4):
    emb = np.random.default_rng(0).normal(size=(n, dim)).astype("float32")
    emb[row, 1] = value
    return emb


@pytest.mark.parametrize("value, kind", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "inf")])
def test_non_finite_embeddings_name_the_row(value, kind):
    bad = _with_bad_row(value)
    good = _with_bad_row(0.0)
    calls = {
        "corpus_embeddings": lambda: semantic_search(good[:1], bad),
        "query_embeddings": lambda: semantic_search(bad, good),
        "embeddings": lambda: paraphrase_mining(bad),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"`{name}` row 2 contains {kind}"):
            call()
    for call in (
        lambda: community_detection(bad, min_community_size=1),
        lambda: cluster(bad, method="community"),
        lambda: cluster(bad, method="kmeans", num_clusters=2),
        lambda: similarity_matrix(bad),
    ):
        with pytest.raises(ValueError, match=rf"row 2 contains {kind}"):
            call()


def test_nan_row_is_not_a_top_hit():
    # Before the fix the NaN row came first, ahead of the real best hit.
    corpus = np.array([[0.0, 1.0], [np.nan, 0.0], [0.6, 0.8]], "float32")
    with pytest.raises(ValueError, match="row 1 contains NaN"):
        semantic_search(np.array([0.0, 1.0], "float32"), corpus)


def test_several_bad_rows_are_counted():
    bad = _with_bad_row(np.nan)
    bad[4, 0] = np.inf
    with pytest.raises(ValueError, match=r"row 2 contains NaN \(2 rows in all, e.g. \[2, 4\]\)"):
        paraphrase_mining(bad)


@pytest.mark.parametrize(
    "value, error",
    [(2.5, TypeError), ("8", TypeError), (None, TypeError), (True, TypeError), (0, ValueError), (-3, ValueError)],
)
def test_size_arguments_must_be_positive_integers(value, error):
    emb = _with_bad_row(0.0)
    with pytest.raises(error, match="`top_k` must be an integer >= 1"):
        semantic_search(emb, emb, top_k=value)
    with pytest.raises(error, match="`chunk_size` must be an integer >= 1"):
        paraphrase_mining(emb, chunk_size=value)
    with pytest.raises(error, match="`batch_size` must be an integer >= 1"):
        community_detection(emb, batch_size=value)

    class Encoder:
        def encode(self, texts, batch_size=32):
            return emb

    with pytest.raises(error, match="`batch_size` must be an integer >= 1"):
        paraphrase_mining_texts(Encoder(), ["a", "b"], batch_size=value)


def test_numpy_integers_are_accepted():
    emb = _with_bad_row(0.0)
    hits = semantic_search(emb, emb, top_k=np.int64(2), query_chunk_size=np.int32(2))
    assert [len(h) for h in hits] == [2] * 5


@pytest.mark.parametrize("corpus", [[], np.zeros((0, 4), "float32")])
def test_empty_corpus_is_a_clear_error(corpus):
    with pytest.raises(ValueError, match="`corpus_embeddings` is empty"):
        semantic_search(np.ones((2, 4), "float32"), corpus)


def test_no_queries_give_no_results():
    assert semantic_search([], np.ones((3, 4), "float32")) == []


def test_non_numeric_embeddings_are_a_clear_error():
    with pytest.raises(TypeError, match="`embeddings` must be a float array"):
        paraphrase_mining([["a", "b"], ["c", "d"]])


def test_semantic_search_with_an_index_matches_the_exact_search():
    pytest.importorskip("faiss")
    from sbert_keras.retrieval.index import EmbeddingIndex

    rng = np.random.default_rng(0)
    corpus, queries = rng.normal(size=(50, 8)).astype("float32"), rng.normal(size=(4, 8)).astype("float32")
    index = EmbeddingIndex.build(corpus, ids=[f"d{i}" for i in range(50)], kind="flat")
    exact = semantic_search(queries, corpus, top_k=3)
    hits = semantic_search(queries, top_k=3, index=index)
    assert [[h["corpus_id"] for h in q] for q in hits] == [[h["corpus_id"] for h in q] for q in exact]
    assert [h["id"] for h in hits[0]] == [f"d{h['corpus_id']}" for h in exact[0]]
    np.testing.assert_allclose([h["score"] for h in hits[0]], [h["score"] for h in exact[0]], atol=1e-5)
    with pytest.raises(ValueError, match="not both"):
        semantic_search(queries, corpus, index=index)
    with pytest.raises(ValueError, match="score_function='dot'"):
        semantic_search(queries, index=index, score_function="dot")
    with pytest.raises(ValueError, match="needs `corpus_embeddings` or `index`"):
        semantic_search(queries)
