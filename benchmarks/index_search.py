"""Approximate-nearest-neighbour search (`sbert_keras.index`) against exact search.

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
`search.semantic_search`) and queries per second over the 1,000 queries in
one batch (best of `--repeats`). It also times the exact NumPy
`semantic_search` of `sbert_keras.search`, the 10x QPS target's baseline.
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

import numpy as np  # noqa: E402

NAME = "index_search"
BATCH_SIZE = 32
TOP_K = 10
NUM_QUERIES = 1_000
QUICK_SIZE = 5_000
QUICK_QUERIES = 200
SNLI_FILES = ("data/snli/snli_1.0_train_subset.jsonl", "data/snli/snli_1.0_test.jsonl")


def distinct_sentences(paths):
    """The distinct premises and hypotheses of SNLI files, in first-seen order."""
    from sbert_keras import data

    unique = {}
    for path in paths:
        pairs = data.read_nli(path, skip_unlabeled=False)
        for a, b in zip(pairs.sentence_a, pairs.sentence_b):
            unique.setdefault(a.strip(), None)
            unique.setdefault(b.strip(), None)
    unique.pop("", None)
    return list(unique)


def split_queries(texts, num_queries, seed=0):
    """`(corpus_texts, query_texts)`: `num_queries` held out by a seeded shuffle."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    held = set(order[-num_queries:])
    corpus = [t for i, t in enumerate(texts) if i not in held]
    queries = [texts[i] for i in sorted(held)]
    return corpus, queries


def cached_embeddings(texts, model_dir, cache_dir):
    """Embeddings of `texts`, from `cache_dir` when the same texts were encoded before."""
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    path = Path(cache_dir) / f"snli_minilm_{len(texts)}_{digest}.npy"
    if path.is_file():
        return np.load(path), str(path), 0.0
    from sbert_keras import SentenceEncoder

    encoder = SentenceEncoder.from_preset(str(model_dir))
    with common.Timer() as timer:
        embeddings = encoder.encode(texts, batch_size=BATCH_SIZE, show_progress=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    from sbert_keras import outputs

    outputs.save_npy(path, embeddings)
    return embeddings, str(path), timer.seconds


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="corpus size (default: all, or 5,000 with --quick)")
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
    embeddings, cache, encode_seconds = cached_embeddings(texts, model_dir, args.cache_dir)
    common.emit(benchmark=NAME, measure="embeddings", texts=len(texts), cache=cache, encode_seconds=encode_seconds)
    if args.prepare_only:
        return 0
    return run(args, texts, embeddings)


if __name__ == "__main__":
    sys.exit(main())
