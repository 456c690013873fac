"""Two batches a call against one: `encode`'s batches through the fused graph, alternated in one process.

`encode` sends consecutive length-sorted batches through the fused graph two
a call, each padded to its own longest text (`InferenceEngine.grouped`,
`fused_graph.build_forward` with two groups): their rows share each matmul.
This times the STS-B dev sentences (`--texts`, batch 32) through one encoder
with that graph and with it turned off on the engine (one batch a call, as
before), alternated for `--passes` rounds after a warm-up of each, in one
process, and prints texts/s per pass, the best of each and the min cosine
between the two sets of vectors.

    .venv/bin/python benchmarks/experiments/batch_groups.py [--model FOLDER] [--compute bfloat16] [--texts 3010]
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "batch_groups"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--compute", default="bfloat16")
    parser.add_argument("--texts", type=int, default=3010, help="STS-B dev sentences (3,010: an odd last batch)")
    parser.add_argument("--passes", type=int, default=3)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
