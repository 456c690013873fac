"""Approximate-nearest-neighbour search (`sbert_keras.retrieval.index`) against exact search.

The corpus: the distinct SNLI sentences (premises and hypotheses of the
training subset, then of the test file) encoded with all-MiniLM-L6-v2
(`encode`, batch 32, default precision). The last 1,000 distinct sentences
(in a seeded shuffle) are held out as queries; the corpus is the rest (all of
it by default, >= 100,000; `--size` to cut it). The embeddings take a few
minutes to encode, so they are cached in `--cache-dir` (outside the
repository) and reused.

For each index kind (`flat` = exact faiss, `hnsw`, `ivf`, `int8` and
`binary` with float rescoring) it reports build time, the process RSS growth
during the build, the index's serialized size (and the float vectors kept for
rescoring), recall@10 against exact search (the true top 10 by cosine, from
`semantic_search.semantic_search`) and queries per second over the 1,000 queries in
one batch (best of `--repeats`). It also times the exact NumPy
`semantic_search` of `sbert_keras.retrieval.semantic_search`, the 10x QPS target's baseline.
One JSON line per measurement; faiss and NumPy use all cores (2 here).

    PYTHONPATH=. .venv/bin/python benchmarks/index_search.py [--quick] [--cache-dir /work/scratch]
"""

import hashlib
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

import faiss  # noqa: E402
import numpy as np  # noqa: E402

from sbert_keras.data import readers  # noqa: E402
from sbert_keras.retrieval.index import EmbeddingIndex  # noqa: E402
from sbert_keras.retrieval.semantic_search import semantic_search  # noqa: E402
from sbert_keras.utils import atomic_io  # noqa: E402

NAME = "index_search"
BATCH_SIZE = 32
TOP_K = 10
NUM_QUERIES = 1_000
QUICK_SIZE = 5_000
QUICK_QUERIES = 200
SNLI_FILES = ("data/snli/snli_1.0_train_subset.jsonl", "data/snli/snli_1.0_test.jsonl")


def distinct_sentences(paths):
    """The distinct premises and hypotheses of SNLI files, in first-seen order."""
    unique = {}
    for path in paths:
        pairs = readers.read_nli(path, skip_unlabeled=False)
        for a, b in zip(pairs.sentence_a, pairs.sentence_b):
            unique.setdefault(a.strip(), None)
            unique.setdefault(b.strip(), None)
    unique.pop("", None)
    return list(unique)


def cached_embeddings(texts, model_dir, cache_dir):
    """Embeddings of `texts`, from `cache_dir` when the same texts were encoded before."""
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    path = Path(cache_dir) / f"snli_minilm_{len(texts)}_{digest}.npy"
    if path.is_file():
        return np.load(path), str(path), 0.0
    from sbert_keras import SentenceEncoder  # imports TensorFlow: only when encoding

    encoder = SentenceEncoder.from_preset(str(model_dir))
    with common.Timer() as timer:
        embeddings = encoder.encode(texts, batch_size=BATCH_SIZE, show_progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_io.save_npy(path, embeddings)
    return embeddings, str(path), timer.seconds


def best_seconds(call, repeats):
    """The fastest of `repeats` timed calls (after one warm-up call), and the last result."""
    result, best = call(), float("inf")
    for _ in range(repeats):
        with common.Timer() as timer:
            result = call()
        best = min(best, timer.seconds)
    return best, result


def recall_at_k(rows, truth):
    """Mean fraction of each query's exact top k found in `rows`."""
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(rows.tolist(), truth.tolist())]))


def single_query_qps(search, queries, count=100):
    """Queries per second when each query is searched alone (latency-bound serving)."""
    search(queries[:1])
    with common.Timer() as timer:
        for i in range(count):
            search(queries[i : i + 1])
    return count / timer.seconds


# Search-time settings swept per kind (the first is the index's default).
SWEEPS = {
    "hnsw": ("ef_search", (32, 16, 64, 128, 256)),
    "ivf": ("nprobe", (16, 8, 32, 64)),
    "int8": ("rescore_multiplier", (4, 1, 10)),
    "binary": ("rescore_multiplier", (10, 1, 4, 20)),
}


def run(args, texts, embeddings):
    num_queries = QUICK_QUERIES if args.quick else NUM_QUERIES
    size = args.size
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    query_rows, corpus_rows = sorted(order[-num_queries:]), sorted(order[:-num_queries])
    corpus, queries = embeddings[corpus_rows[:size]], embeddings[query_rows]
    ids = [texts[i] for i in corpus_rows[:size]]
    common.emit(
        benchmark=NAME,
        measure="setup",
        corpus=len(corpus),
        queries=len(queries),
        dim=corpus.shape[1],
        top_k=TOP_K,
        faiss=faiss.__version__,
        faiss_threads=faiss.omp_get_max_threads(),
        cpus=os.cpu_count(),
    )
    seconds, hits = best_seconds(lambda: semantic_search(queries, corpus, top_k=TOP_K), args.repeats)
    truth = np.array([[h["corpus_id"] for h in row] for row in hits])
    exact_qps = len(queries) / seconds
    common.emit(
        benchmark=NAME,
        measure="exact_semantic_search",
        qps=exact_qps,
        seconds=seconds,
        single_query_qps=single_query_qps(lambda q: semantic_search(q, corpus, top_k=TOP_K), queries),
        float32_bytes=int(corpus.nbytes),
    )
    for kind in args.kinds.split(","):
        measure_kind(kind, corpus, ids, queries, truth, exact_qps, args.repeats)
    return 0


def measure_kind(kind, corpus, ids, queries, truth, exact_qps, repeats):
    """Builds one index kind and emits a line per swept search setting."""
    rss_before = common.current_rss_mb()
    with common.Timer() as build:
        index = EmbeddingIndex.build(corpus, ids=ids, kind=kind)
    rss_growth = common.current_rss_mb() - rss_before
    key, values = SWEEPS.get(kind, (None, (None,)))
    for value in values:
        if key:
            index.params[key] = value
        seconds, (rows, _) = best_seconds(lambda: index.search_rows(queries, TOP_K), repeats)
        qps = len(queries) / seconds
        common.emit(
            benchmark=NAME,
            measure="index",
            kind=kind,
            setting={key: value} if key else None,
            recall_at_10=recall_at_k(rows, truth),
            qps=qps,
            speedup_vs_semantic_search=qps / exact_qps,
            single_query_qps=single_query_qps(lambda q: index.search_rows(q, TOP_K), queries),
            build_seconds=build.seconds,
            build_rss_growth_mb=rss_growth,
            index_bytes=index.nbytes(),
            rescore_vectors_bytes=int(index.vectors.nbytes) if index.vectors is not None else 0,
        )


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="cut the corpus to this size (default: all)")
    parser.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "sbert_keras_index_bench"))
    parser.add_argument("--repeats", type=int, default=3, help="timed searches per kind; the best is reported")
    parser.add_argument("--kinds", default="flat,hnsw,ivf,int8,binary", help="comma-separated index kinds")
    parser.add_argument("--prepare-only", action="store_true", help="encode and cache the embeddings, then stop")
    args = parser.parse_args()
    paths = common.shared_files(NAME, *SNLI_FILES)
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0
    texts = distinct_sentences(paths)
    if args.quick:  # encodes only these (about 20 s) instead of all 133,259
        texts = texts[: QUICK_SIZE + QUICK_QUERIES]
    embeddings, cache, encode_seconds = cached_embeddings(texts, model_dir, args.cache_dir)
    common.emit(benchmark=NAME, measure="embeddings", texts=len(texts), cache=cache, encode_seconds=encode_seconds)
    if args.prepare_only:
        return 0
    return run(args, texts, embeddings)


if __name__ == "__main__":
    sys.exit(main())
