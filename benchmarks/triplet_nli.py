"""Triplet and in-batch-negatives objectives on SNLI: defaults compared.

Builds triplets with `nli_to_triplets(read_nli(train, limit=N))` (default
N = 20,000 pairs, 6,657 triplets), then, for each run of `--runs`, loads
all-MiniLM-L6-v2 afresh and trains it for 1 epoch with the SBERT paper's
recipe (batch 16, Adam lr 2e-5, 10 % linear warmup). Reports the triplet
accuracy (`triplet_evaluation`: d(anchor, positive) < d(anchor, negative))
on the triplets of the SNLI test set and the STS-B dev Spearman, before
training (once) and after each run, the fit's wall time, and how many
batches held a text twice (a duplicate premise is its own false negative
under in-batch negatives).

A run is `triplet:DISTANCE:MARGIN` (e.g. `triplet:euclidean:1`, the paper's
setting), `triplet:default` (the `TripletSiamese` defaults, resolved from
whether the encoder normalises), or `contrastive:BATCHING` with BATCHING one
of `defaults.BATCHINGS` (`bucket`: length buckets; `shuffle`: random
batches; `no_duplicates`: random batches in which no text repeats).

    .venv/bin/python benchmarks/triplet_nli.py [--quick] [--limit N] [--runs triplet:default,contrastive:bucket]
"""

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "triplet_nli"
FULL_PAIRS = 20_000
QUICK_PAIRS, QUICK_TEST = 64, 100
RUNS = (
    "triplet:euclidean:1",
    "triplet:default",
    "triplet:cosine:0.1",
    "contrastive:bucket",
    "contrastive:no_duplicates",
)
BATCH_SIZE, LEARNING_RATE, WARMUP = 16, 2e-5, 0.1


def duplicates(dataset, roles):
    """`(batches, batches with a repeated text, row pairs sharing a text)` over one pass of `dataset`."""
    batches = bad_batches = pairs = 0
    for features, _ in dataset:
        rows = [features[f"{role}_token_ids"].numpy() for role in roles]
        width = max(r.shape[1] for r in rows)
        rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]))) for r in rows]
        seen = {}
        for role_rows in rows:
            for i, row in enumerate(role_rows):
                seen.setdefault(row.tobytes(), set()).add(i)
        shared = {tuple(sorted(owners)) for owners in seen.values() if len(owners) > 1}
        count = len({(a, b) for owners in shared for a in owners for b in owners if a < b})
        batches += 1
        bad_batches += count > 0
        pairs += count
    return batches, bad_batches, pairs


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, f"SNLI training pairs read (default {FULL_PAIRS:,}; {QUICK_PAIRS} with --quick)")
    parser.add_argument(
        "--test-limit",
        type=int,
        default=None,
        help=f"first SNLI test triplets (default all; {QUICK_TEST} with --quick)",
    )
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated runs (default {','.join(RUNS)})")
    parser.add_argument("--skip-before", action="store_true", help="do not evaluate the encoder before training")
    args = parser.parse_args()
    paths = common.shared_files(
        NAME,
        "data/snli/snli_1.0_train_subset.jsonl",
        "data/snli/snli_1.0_test.jsonl",
        "data/stsbenchmark/sts-dev.csv",
    )
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0

    import keras
    import tensorflow as tf  # noqa: F401

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras import set_compute
    from sbert_keras import sts_evaluation
    from sbert_keras import triplet_evaluation
    from sbert_keras.data import examples
    from sbert_keras.data import readers
    from sbert_keras.training import trainer
    from sbert_keras.training.pipelines import siamese_dataset
    from sbert_keras.training.schedules import paper_optimizer

    limit = args.limit or (QUICK_PAIRS if args.quick else FULL_PAIRS)
    test_limit = args.test_limit or (QUICK_TEST if args.quick else None)
    train = examples.nli_to_triplets(readers.read_nli(paths[0], limit=limit))
    test = examples.nli_to_triplets(readers.read_nli(paths[1]))
    test = examples.Triplets(test.anchor[:test_limit], test.positive[:test_limit], test.negative[:test_limit])
    sts = readers.read_sts(paths[2])
    if args.quick:
        sts = examples.SentencePairs(sts.sentence_a[:QUICK_TEST], sts.sentence_b[:QUICK_TEST], sts.labels[:QUICK_TEST])
    if len(train) == 0:
        common.emit(benchmark=NAME, skipped=f"no triplets in the first {limit} SNLI pairs")
        return 0
    precision = set_compute(args.compute)

    def metrics(encoder):
        triplets = triplet_evaluation(encoder, test.anchor, test.positive, test.negative)
        spearman = sts_evaluation(encoder, sts.sentence_a, sts.sentence_b, sts.labels)["spearman_cosine"]
        return {
            "triplet_accuracy": triplets["triplet_accuracy"],
            "triplet_accuracy_cosine": triplets["triplet_accuracy_cosine"],
            "sts_dev_spearman": spearman,
        }

    before = {} if args.skip_before else metrics(SentenceEncoder.from_preset(str(model_dir)))
    common.emit(
        benchmark=NAME,
        run="before",
        quick=args.quick,
        precision=precision,
        train_pairs_read=limit,
        train_triplets=len(train),
        test_triplets=len(test),
        sts_dev_pairs=len(sts),
        **before,
    )
    for run in args.runs.split(","):
        objective, *setting = run.split(":")
        keras.utils.set_random_seed(args.seed)
        encoder = SentenceEncoder.from_preset(str(model_dir))
        columns, labels, extra = trainer.objective_inputs(objective, train)
        model_kwargs, data_kwargs = {}, {}
        if objective == "triplet" and setting != ["default"]:
            model_kwargs = {"distance": setting[0], "margin": float(setting[1])}
        elif objective == "contrastive":
            data_kwargs = {"batching": setting[0]}
        model = trainer.MODEL_CLASSES[objective](encoder, **extra, **model_kwargs)
        dataset = siamese_dataset(
            columns, labels, encoder.preprocessor, model.active_roles, BATCH_SIZE, seed=args.seed, **data_kwargs
        )
        batches, duplicate_batches, duplicate_pairs = duplicates(dataset, model.active_roles)
        model.compile(optimizer=paper_optimizer(batches, LEARNING_RATE, WARMUP))
        timer = common.fit_timer()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            history = model.fit(dataset, epochs=1, callbacks=[timer], verbose=0)
        common.emit(
            benchmark=NAME,
            run=run,
            precision=precision,
            seed=args.seed,
            distance=getattr(model, "distance", None),
            margin=getattr(model, "margin", None),
            batching=data_kwargs.get("batching", "bucket"),
            batch_size=BATCH_SIZE,
            batches=batches,
            batches_with_a_repeated_text=duplicate_batches,
            row_pairs_sharing_a_text=duplicate_pairs,
            **metrics(encoder),
            **timer.summary(),
            final_logs=common.last_history(history),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
