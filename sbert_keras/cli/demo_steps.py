"""The steps of `make demo` (`sbert_keras.cli.demo`): load a model, compare pairs, rank a corpus.

Imported by `sbert_keras.cli.demo.main` once TensorFlow's logging is set up:
this module imports TensorFlow (through the encoder).
"""

import time

import numpy as np

from sbert_keras.cli.demo import CORPUS
from sbert_keras.cli.demo import PAIRS
from sbert_keras.cli.demo import QUERIES
from sbert_keras.encoder import SentenceEncoder
from sbert_keras.retrieval.semantic_search import semantic_search


def run(model):
    """Loads `model`, prints the cosine of each of `PAIRS` and the top hits of `QUERIES` in `CORPUS`.

    Args:
        model: str. A preset name or local folder.
    """
    start = time.perf_counter()
    encoder = SentenceEncoder.from_preset(model)
    print(f"Loaded {model}")
    print(
        f"  pooling={encoder.pooling} normalize={encoder.normalize} "
        f"max_length={encoder.sequence_length} dim={encoder.embedding_dim} "
        f"({time.perf_counter() - start:.1f} s)"
    )

    print("\n1. Compare sentence pairs (cosine similarity):")
    for a, b in PAIRS:
        u, v = encoder.encode([a, b], show_progress=False)
        cosine = float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
        print(f"  {cosine:+.3f}  {a!r} vs {b!r}")

    print(f"\n2. Semantic search over {len(CORPUS)} sentences:")
    corpus = encoder.encode(CORPUS, show_progress=False)
    queries = encoder.encode(QUERIES, show_progress=False)
    for query, hits in zip(QUERIES, semantic_search(queries, corpus, top_k=3)):
        print(f"  query: {query}")
        for hit in hits:
            print(f"    {hit['score']:.3f}  {CORPUS[hit['corpus_id']]}")

    print(
        f"\nDone in {time.perf_counter() - start:.1f} s: loaded a checkpoint, "
        f"encoded {len(CORPUS) + len(QUERIES) + 2 * len(PAIRS)} sentences, "
        "compared pairs and ranked a corpus."
    )
