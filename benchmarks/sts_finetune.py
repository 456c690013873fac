"""Fine-tuning all-MiniLM-L6-v2 on STS-B train with the regression objective.

Reports the STS-B dev Spearman correlation (cosine similarity vs gold) before
and after `train_objective("regression", encoder, train, epochs=1)` on all of
STS-B train with the SBERT paper's recipe (batch 16, Adam lr 2e-5, linear
warmup over 10 % of the steps then linear decay), and the wall time of the
fit alone (a callback's train begin -> end) and per step.

Options:
  --compute auto|float32|bfloat16|float16  training precision (`set_compute`,
      called before the encoder is built: bfloat16 is Keras' mixed_bfloat16
      policy); it applies to the evaluations too.
  --label-scale unit|keras-io  unit (the library's default): targets
      score / 5 in [0, 1], the sentence-transformers convention; keras-io:
      score / 2.5 - 1 in [-1, 1] (passed as `train_objective(sts_mapping=...)`).
  --with-peer  also run sentence-transformers' CosineSimilarityLoss recipe
      (`peer/st_sts_finetune.py`, ~6 minutes on 2 cores) and report the ratio.

    .venv/bin/python benchmarks/sts_finetune.py [--quick] [--with-peer --peer-python PATH]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "sts_finetune"
TARGET_SPEARMAN = 0.893
TARGET_SECONDS = 336.0
QUICK_TRAIN, QUICK_DEV = 64, 100


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, "first N STS-B training pairs (default all; 64 with --quick)")
    parser.add_argument(
        "--dev-limit", type=int, default=None, help="first M dev pairs (default all 1,500; 100 with --quick)"
    )
    parser.add_argument("--label-scale", choices=("unit", "keras-io"), default="unit")
    parser.add_argument(
        "--with-peer", action="store_true", help="also fine-tune with sentence-transformers (peer venv)"
    )
    args = parser.parse_args()
    paths = common.shared_files(NAME, "data/stsbenchmark/sts-train.csv", "data/stsbenchmark/sts-dev.csv")
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0

    import keras
    import tensorflow as tf  # noqa: F401

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder
    from sbert_keras import set_compute
    from sbert_keras import sts_evaluation
    from sbert_keras import train_objective
    from sbert_keras.data import examples
    from sbert_keras.data import readers

    limit = args.limit or (QUICK_TRAIN if args.quick else None)
    dev_limit = args.dev_limit or (QUICK_DEV if args.quick else None)
    train = readers.read_sts(paths[0])
    dev = readers.read_sts(paths[1])
    train = examples.SentencePairs(train.sentence_a[:limit], train.sentence_b[:limit], train.labels[:limit])
    dev = examples.SentencePairs(dev.sentence_a[:dev_limit], dev.sentence_b[:dev_limit], dev.labels[:dev_limit])

    full = limit is None and dev_limit is None
    precision = set_compute(args.compute)
    keras.utils.set_random_seed(args.seed)
    encoder = SentenceEncoder.from_preset(str(model_dir))

    def dev_spearman():
        return sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)["spearman_cosine"]

    before = dev_spearman()
    timer = common.fit_timer()
    with common.Timer() as total:
        _, history = train_objective(
            "regression",
            encoder,
            train,
            epochs=1,
            batch_size=16,
            learning_rate=2e-5,
            warmup_fraction=0.1,
            seed=args.seed,
            callbacks=[timer],
            verbose=0,
            sts_mapping=args.label_scale,
        )
    after = dev_spearman()
    timing = timer.summary()
    result = dict(
        benchmark=NAME,
        quick=args.quick,
        precision=precision,
        label_scale=args.label_scale,
        seed=args.seed,
        train_pairs=len(train),
        dev_pairs=len(dev),
        epochs=1,
        batch_size=16,
        learning_rate=2e-5,
        warmup_fraction=0.1,
        dev_spearman_before=before,
        dev_spearman_after=after,
        **timing,
        train_objective_seconds=total.seconds,
        final_logs=common.last_history(history),
        targets={
            "dev_spearman_after": f">= {TARGET_SPEARMAN}",
            "fit_seconds": f"<= {TARGET_SECONDS:g}",
            "applies": "full run only (all 5,749 train and 1,500 dev pairs)",
        },
        # None when the data is cut (--quick, --limit, --dev-limit).
        meets_spearman_target=bool(after >= TARGET_SPEARMAN) if full else None,
        meets_time_target=bool(timing["fit_seconds"] <= TARGET_SECONDS) if full else None,
    )

    if args.with_peer:
        python, reason = common.peer_or_reason(args.peer_python)
        if python is None:
            result["peer"] = reason
        else:
            peer_args = ["--train", paths[0], "--dev", paths[1], "--seed", args.seed, "--model", model_dir]
            if limit:
                peer_args += ["--limit", limit]
            if dev_limit:
                peer_args += ["--dev-limit", dev_limit]
            try:
                peer = common.run_peer("st_sts_finetune.py", peer_args, python=python)[-1]
            except common.PeerError as error:
                result.update(peer="failed", peer_error=str(error))
            else:
                result.update(
                    peer=peer,
                    speed_ratio_ours_over_peer=peer["train_seconds"] / timing["fit_seconds"],
                    seconds_per_step_ratio_peer_over_ours=(peer["seconds_per_step"] / timing["seconds_per_step"]),
                    dev_spearman_after_minus_peer=after - peer["dev_spearman_after"],
                )
    else:
        result["peer"] = "not run (pass --with-peer)"
    common.emit(**result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
