"""Two batches a call against one: `encode`'s batches through the fused graph, alternated in one process.

`encode` sends consecutive length-sorted batches through the fused graph two
a call, each padded to its own longest text (`InferenceEngine.grouped`,
`fused_graph.build_forward` with two groups): their rows share each matmul.
This times the STS-B dev sentences (`--texts`, batch 32) through one encoder
with that graph and with it turned off on the engine (one batch a call, as
before), alternated for `--passes` rounds after a warm-up of each, in one
process, and prints texts/s per pass, the best of each and the min cosine
between the two sets of vectors. `--saved-model` then exports the encoder
twice (`export_saved_model`, its batch loop two batches a call and, with
that graph refused on the engine, one), loads both and serves them a
request of all the texts in `--passes` alternated rounds after a warm-up.

    .venv/bin/python benchmarks/experiments/batch_groups.py [--model FOLDER] [--compute bfloat16] [--texts 3010]
    .venv/bin/python benchmarks/experiments/batch_groups.py --saved-model --texts 3000 --passes 8
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import numpy as np  # noqa: E402

common.silence_tensorflow()

NAME = "batch_groups"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--compute", default="bfloat16")
    parser.add_argument("--texts", type=int, default=3010, help="STS-B dev sentences (3,010: an odd last batch)")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--saved-model", action="store_true", help="then two SavedModels, served alternately")
    parser.add_argument("--quick", action="store_true", help="300 texts, 1 pass")
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME)
    if found is None:
        return 0
    texts, model_dir = found
    texts = texts[: 300 if args.quick else args.texts]
    from sbert_keras import SentenceEncoder

    encoder = SentenceEncoder.from_preset(args.model or str(model_dir))
    engine = encoder.engine
    grouped = engine.grouped

    def encode(groups):
        engine.grouped = grouped if groups else (lambda compute="auto": None)  # this engine only
        start = time.perf_counter()
        vectors = encoder.encode(texts, batch_size=32, compute=args.compute, show_progress=False)
        return vectors, len(texts) / (time.perf_counter() - start)

    (two, _), (one, _) = encode(True), encode(False)  # warm-up: checks and traces
    rates = {"two_a_call": [], "one_a_call": []}
    for _ in range(1 if args.quick else args.passes):
        rates["two_a_call"].append(encode(True)[1])
        rates["one_a_call"].append(encode(False)[1])
    common.emit(
        benchmark=NAME,
        model=Path(args.model).name if args.model else "all-MiniLM-L6-v2",
        compute=args.compute,
        route=list(engine.route(args.compute)),
        texts=len(texts),
        texts_per_second=rates,
        best={name: max(values) for name, values in rates.items()},
        min_cosine=float((two * one).sum(axis=1).min()),
    )
    if args.saved_model:
        saved_models(encoder, texts, 1 if args.quick else args.passes, args.compute)
    return 0


def saved_models(encoder, texts, passes, compute):
    """Prints texts/s of two SavedModels of `encoder`, two batches a call and one, served alternately."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    from sbert_keras import export_saved_model

    engine = encoder.engine
    with tempfile.TemporaryDirectory() as folder:
        export_saved_model(encoder, f"{folder}/two_a_call/1", compute=compute)
        engine.groups_pass = lambda route, resolved: False  # this engine only
        try:
            export_saved_model(encoder, f"{folder}/one_a_call/1", compute=compute)
        finally:
            del engine.groups_pass
        ways = ("two_a_call", "one_a_call")
        serves = {way: tf.saved_model.load(f"{folder}/{way}/1").signatures["serving_default"] for way in ways}
        request = tf.constant(texts)
        vectors = {way: serve(text=request)["embeddings"].numpy() for way, serve in serves.items()}  # warm-up
        rates = {way: [] for way in serves}
        for _ in range(passes):
            for way, serve in serves.items():
                start = time.perf_counter()
                serve(text=request)["embeddings"].numpy()
                rates[way].append(len(texts) / (time.perf_counter() - start))
    two, one = vectors["two_a_call"], vectors["one_a_call"]
    cosines = (two * one).sum(axis=1) / np.maximum(np.linalg.norm(two, axis=1) * np.linalg.norm(one, axis=1), 1e-12)
    common.emit(
        benchmark=NAME,
        kind="saved_model",
        compute=compute,
        texts=len(texts),
        texts_per_second=rates,
        median={way: float(np.median(values)) for way, values in rates.items()},
        best={way: max(values) for way, values in rates.items()},
        min_cosine=float(cosines.min()),
    )


if __name__ == "__main__":
    sys.exit(main())
