"""Triplet objective on SNLI: (premise, entailment, contradiction) triplets.

Builds triplets with `nli_to_triplets(read_nli(train, limit=N))` (default
N = 20,000 pairs), trains `train_objective("triplet", ...)` (euclidean
distance, margin 1) for 1 epoch with the SBERT paper's recipe (batch 16,
Adam lr 2e-5, 10 % linear warmup), and reports the triplet accuracy
(`triplet_evaluation`: d(anchor, positive) < d(anchor, negative)) on the
triplets of the SNLI test set before and after, and the fit's wall time.

    .venv/bin/python benchmarks/triplet_nli.py [--quick] [--limit N] [--precision ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "triplet_nli"
FULL_PAIRS = 20_000
QUICK_PAIRS, QUICK_TEST = 64, 100


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, f"SNLI training pairs read (default {FULL_PAIRS:,}; {QUICK_PAIRS} with --quick)")
    parser.add_argument(
        "--test-limit",
        type=int,
        default=None,
        help=f"first SNLI test triplets (default all; {QUICK_TEST} with --quick)",
    )
    args = parser.parse_args()
    paths = common.shared_files(NAME, "data/snli/snli_1.0_train_subset.jsonl", "data/snli/snli_1.0_test.jsonl")
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0

    import keras
    import tensorflow as tf  # noqa: F401

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras import data
    from sbert_keras import set_precision
    from sbert_keras import train_objective
    from sbert_keras import triplet_evaluation

    limit = args.limit or (QUICK_PAIRS if args.quick else FULL_PAIRS)
    test_limit = args.test_limit or (QUICK_TEST if args.quick else None)
    train = data.nli_to_triplets(data.read_nli(paths[0], limit=limit))
    test = data.nli_to_triplets(data.read_nli(paths[1]))
    test = data.Triplets(test.anchor[:test_limit], test.positive[:test_limit], test.negative[:test_limit])
    if len(train) == 0:
        common.emit(benchmark=NAME, skipped=f"no triplets in the first {limit} SNLI pairs")
        return 0

    precision = set_precision(args.precision)
    keras.utils.set_random_seed(args.seed)
    encoder = SentenceEncoder.from_preset(str(model_dir))

    def accuracy():
        return triplet_evaluation(encoder, test.anchor, test.positive, test.negative)

    before = accuracy()
    timer = common.fit_timer()
    _, history = train_objective(
        "triplet",
        encoder,
        train,
        epochs=1,
        batch_size=16,
        learning_rate=2e-5,
        warmup_fraction=0.1,
        seed=args.seed,
        callbacks=[timer],
        verbose=0,
    )
    after = accuracy()
    common.emit(
        benchmark=NAME,
        quick=args.quick,
        precision=precision,
        seed=args.seed,
        train_pairs_read=limit,
        train_triplets=len(train),
        test_triplets=len(test),
        epochs=1,
        batch_size=16,
        learning_rate=2e-5,
        warmup_fraction=0.1,
        distance="euclidean",
        margin=1.0,
        triplet_accuracy_before=before["triplet_accuracy"],
        triplet_accuracy_after=after["triplet_accuracy"],
        triplet_accuracy_cosine_before=before["triplet_accuracy_cosine"],
        triplet_accuracy_cosine_after=after["triplet_accuracy_cosine"],
        **timer.summary(),
        final_logs=common.last_history(history),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
