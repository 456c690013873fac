"""NLI classification objective: all-MiniLM-L6-v2 on the first 20,000 SNLI pairs.

Trains `train_objective("classification", encoder, read_nli(train,
limit=20000))`: softmax over (u, v, |u - v|), 1 epoch, the SBERT paper's
recipe (batch 16, Adam lr 2e-5, 10 % linear warmup). Reports the accuracy on
the SNLI test set (`nli_evaluation`; the 10,000 lines minus those with
gold_label "-"), the STS-B dev Spearman (cosine) of the encoder before and
after training, and the wall time of the fit.

    .venv/bin/python benchmarks/nli_classification.py [--quick] [--limit N] [--compute ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "nli_classification"
FULL_TRAIN = 20_000
QUICK_TRAIN, QUICK_TEST, QUICK_DEV = 64, 200, 100


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, f"SNLI training pairs (default {FULL_TRAIN:,}; {QUICK_TRAIN} with --quick)")
    parser.add_argument(
        "--test-limit",
        type=int,
        default=None,
        help=f"first labelled SNLI test pairs (default all; {QUICK_TEST} with --quick)",
    )
    parser.add_argument(
        "--dev-limit", type=int, default=None, help=f"first STS-B dev pairs (default all; {QUICK_DEV} with --quick)"
    )
    args = parser.parse_args()
    paths = common.shared_files(
        NAME, "data/snli/snli_1.0_train_subset.jsonl", "data/snli/snli_1.0_test.jsonl", "data/stsbenchmark/sts-dev.csv"
    )
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0

    import keras
    import tensorflow as tf  # noqa: F401

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras import nli_evaluation
    from sbert_keras import set_compute
    from sbert_keras import sts_evaluation
    from sbert_keras import train_objective
    from sbert_keras.data import readers

    limit = args.limit or (QUICK_TRAIN if args.quick else FULL_TRAIN)
    test_limit = args.test_limit or (QUICK_TEST if args.quick else None)
    dev_limit = args.dev_limit or (QUICK_DEV if args.quick else None)
    train = readers.read_nli(paths[0], limit=limit)
    test = readers.read_nli(paths[1], limit=test_limit)
    dev = readers.read_sts(paths[2])
    dev_a, dev_b, dev_scores = dev.sentence_a[:dev_limit], dev.sentence_b[:dev_limit], dev.labels[:dev_limit]

    precision = set_compute(args.compute)
    keras.utils.set_random_seed(args.seed)
    encoder = SentenceEncoder.from_preset(str(model_dir))

    def dev_spearman():
        return sts_evaluation(encoder, dev_a, dev_b, dev_scores)["spearman_cosine"]

    before = dev_spearman()
    timer = common.fit_timer()
    model, history = train_objective(
        "classification",
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
    with common.Timer() as evaluation:
        accuracy = nli_evaluation(model, test.sentence_a, test.sentence_b, test.labels)["nli_accuracy"]
    after = dev_spearman()
    common.emit(
        benchmark=NAME,
        quick=args.quick,
        precision=precision,
        seed=args.seed,
        train_pairs=len(train),
        train_skipped_unlabeled=train.num_skipped,
        test_pairs=len(test),
        test_skipped_unlabeled=test.num_skipped,
        dev_pairs=len(dev_a),
        epochs=1,
        batch_size=16,
        learning_rate=2e-5,
        warmup_fraction=0.1,
        snli_test_accuracy=accuracy,
        sts_dev_spearman_before=before,
        sts_dev_spearman_after=after,
        **timer.summary(),
        test_eval_seconds=evaluation.seconds,
        final_logs=common.last_history(history),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
