"""Seconds to tokenise and encode one very long text: a word of 20,000 or 100,000 letters.

Byte-level BPE merges pairs inside a word; done naively, a word's cost
grows with the square of its length, so one pasted log line or base64 blob
could hold `encode` or a SavedModel request for minutes. This times
`encode` and the preprocessor's in-graph tokenisation (what the SavedModel
runs) on such texts, after one warm-up call, for the tiny RoBERTa of
`../shared/reference` (byte-level BPE) and all-MiniLM-L6-v2 (WordPiece).

Usage:
```
.venv/bin/python benchmarks/long_texts.py [--quick] 2>/dev/null
```
"""

import time

import tensorflow as tf
from common import base_parser
from common import emit
from common import model_path
from common import shared_dir

import sbert_keras

BENCHMARK = "long_texts"
LENGTHS = (20_000, 100_000)


def best_seconds(call, repeats=3):
    """The best of `repeats` timed calls of `call()`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    args = base_parser(__doc__.splitlines()[0]).parse_args()
    models = {}
    shared = shared_dir()
    if shared is not None and (shared / "reference" / "tiny-roberta" / "model").is_dir():
        models["tiny-roberta"] = shared / "reference" / "tiny-roberta" / "model"
    minilm = model_path(BENCHMARK)
    if minilm is not None:
        models["all-MiniLM-L6-v2"] = minilm
    lengths = (2_000, 5_000) if args.quick else LENGTHS
    for name, folder in models.items():
        encoder = sbert_keras.SentenceEncoder.from_preset(str(folder))
        preprocessor = encoder.preprocessor
        tokenize = tf.function(lambda texts, p=preprocessor: p.ragged_token_ids(texts)[0].to_tensor())
        encoder.encode(["warm up"])
        tokenize(tf.constant(["warm up"]))
        for length in lengths:
            for kind, text in (("letters", "x" * length), ("letter pairs", "ab" * (length // 2))):
                texts = [text]
                emit(
                    benchmark=BENCHMARK,
                    model=name,
                    text=f"{length} {kind}, no space",
                    encode_s=round(best_seconds(lambda t=texts, e=encoder: e.encode(t)), 4),
                    in_graph_tokenize_s=round(best_seconds(lambda t=texts, f=tokenize: f(tf.constant(t))), 4),
                )


if __name__ == "__main__":
    main()
