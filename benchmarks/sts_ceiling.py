"""How far STS-B training takes all-MiniLM-L6-v2: longer runs, other learning rates, weight averaging.

The target is an STS-B dev Spearman >= 0.900 from all-MiniLM-L6-v2;
one epoch of regression gives 0.8934 (`recipes.py --recipe a`). This script
measures the levers that need no new data, on STS-B train only (the test
split stays withheld; every score is STS-B dev, cosine):

- `--mode epochs`: one `train_objective` run of `--epochs` epochs (the
  schedule spans all of them), scored on dev after every epoch (the
  `EvaluationCallback` of `train_objective(dev=...)`); `--objective`,
  `--learning-rate`, `--batching` and `--clip` (Adam's `global_clipnorm`, as
  sentence-transformers' trainer clips at 1.0; no weight decay) vary the run;
- `--mode soup`: `--runs` one-epoch regression runs from the same start with
  seeds 0..N-1, scored alone, then their uniform weight average ("model
  soup") after each new run, then WiSE-FT: the soup interpolated with the
  starting weights at `alpha` in 0.5 / 0.7 / 0.8 / 0.9;
- `--mode cross_encoder`: the teacher AugSBERT would need. A cross-encoder
  made from the same all-MiniLM-L6-v2 (both sentences in one input, masked
  mean pooling, one logit; binary cross-entropy on `score / 5`, both
  orders of every pair, as sentence-transformers' CrossEncoder examples
  train) for `--epochs` epochs, scored on dev after each (the mean logit of
  both orders). AugSBERT labels new pairs with it, which only helps if it
  scores above the bi-encoder.

Hand-written here: only the glue (calls of `train_objective`,
`sts_evaluation` and Keras `get_weights` / `set_weights`), and the
cross-encoder's few lines: sentence-transformers' `CrossEncoder` is PyTorch,
and KerasHub's `TextClassifier` needs one of its own backbone classes with
segment ids, which the converted BERT-layout backbone does not have.

    .venv/bin/python benchmarks/sts_ceiling.py --mode epochs --epochs 4 [--learning-rate 5e-5]
    .venv/bin/python benchmarks/sts_ceiling.py --mode soup --runs 4
    .venv/bin/python benchmarks/sts_ceiling.py --mode cross_encoder --epochs 3
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

common.quiet_tf_python_logs()

from sbert_keras import SentenceEncoder  # noqa: E402
from sbert_keras import set_compute  # noqa: E402
from sbert_keras import sts_evaluation  # noqa: E402
from sbert_keras import train_objective  # noqa: E402
from sbert_keras.data import examples  # noqa: E402
from sbert_keras.data import readers  # noqa: E402
from sbert_keras.training import schedules  # noqa: E402
from sbert_keras.utils import defaults  # noqa: E402

NAME = "sts_ceiling"
WISE_ALPHAS = (0.5, 0.7, 0.8, 0.9)


def dev_spearman(encoder, dev):
    """STS-B dev Spearman of the cosine similarities."""
    return sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)["spearman_cosine"]


def mode_epochs(args, encoder, train, dev):
    """One run of `args.epochs` epochs; yields its dev score after every epoch."""
    start = time.time()
    model, history = train_objective(
        args.objective, encoder, train, dev=dev, epochs=args.epochs, learning_rate=args.learning_rate,
        seed=args.seed, verbose=0, batching=args.batching, weight_decay=0.0, clipnorm=args.clip,
    )  # fmt: skip
    yield dict(
        mode="epochs", objective=args.objective, epochs=args.epochs, learning_rate=args.learning_rate,
        batching=args.batching or "default", clip=model.optimizer.global_clipnorm,
        optimizer=type(model.optimizer).__name__, seconds=time.time() - start,
        loss_by_epoch=history.history["loss"], dev_spearman_by_epoch=history.history["dev_spearman_cosine"],
    )  # fmt: skip


def mode_soup(args, encoder, train, dev):
    """Seeded one-epoch regression runs, their uniform soup, then WiSE-FT interpolations."""
    start_weights = [np.array(w) for w in encoder.get_weights()]
    runs = []
    for seed in range(args.runs):
        encoder.set_weights(start_weights)
        began = time.time()
        train_objective("regression", encoder, train, learning_rate=args.learning_rate, seed=seed, verbose=0)
        runs.append([np.array(w) for w in encoder.get_weights()])
        yield dict(mode="soup", run_seed=seed, seconds=time.time() - began, dev_spearman=dev_spearman(encoder, dev))
        soup = [np.mean(parts, axis=0) for parts in zip(*runs)]
        if len(runs) > 1:
            encoder.set_weights(soup)
            yield dict(mode="soup", soup_of=len(runs), dev_spearman=dev_spearman(encoder, dev))
    for alpha in WISE_ALPHAS:
        encoder.set_weights([alpha * s + (1 - alpha) * w for s, w in zip(soup, start_weights)])
        yield dict(mode="wise-ft", soup_of=len(runs), alpha=alpha, dev_spearman=dev_spearman(encoder, dev))


def cross_encoder(encoder):
    """`(token_ids, padding_mask)` -> one logit: the encoder's pooled output of a pair, then `Dense(1)`."""
    pooled = keras.Model(encoder.input, encoder.pooling_layer.output)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    mask = keras.Input((None,), dtype="int32", name="padding_mask")
    feed = {"token_ids": token_ids, "padding_mask": mask, "segment_ids": keras.ops.zeros_like(token_ids)}
    vector = pooled({name: feed[name] for name in pooled.input})
    return keras.Model([token_ids, mask], keras.layers.Dense(1, dtype="float32")(vector))


def pair_batches(preprocessor, first, second, labels=None, batch_size=defaults.PAPER_BATCH_SIZE, seed=None):
    """Padded batches of `[CLS] a [SEP] b [SEP]` (shuffled when `seed` is set), with `labels / 5`.

    A pair longer than the preprocessor's `sequence_length` is cut to it.
    """
    ids_a, _ = preprocessor.tokenize(list(first))
    ids_b, _ = preprocessor.tokenize(list(second))
    ids = tf.concat([ids_a, ids_b[:, 1:]], axis=1)[:, : preprocessor.sequence_length]  # b's start token dropped
    lengths = ids.row_lengths().numpy()
    flat = ids.to_tensor(preprocessor.tokenizer.pad_token_id).numpy().astype("int32")
    order = np.arange(len(lengths)) if seed is None else np.random.default_rng(seed).permutation(len(lengths))
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        width = int(lengths[index].max())
        x = (flat[index, :width], (np.arange(width)[None, :] < lengths[index, None]).astype("int32"))
        yield x if labels is None else (x, np.asarray(labels, "float32")[index] / 5.0)


def mode_cross_encoder(args, encoder, train, dev):
    """A cross-encoder from the encoder's weights, trained on both orders of the pairs; dev after every epoch."""
    from scipy.stats import spearmanr

    model, pre = cross_encoder(encoder), encoder.preprocessor
    first = list(train.sentence_a) + list(train.sentence_b)
    second = list(train.sentence_b) + list(train.sentence_a)
    labels = np.concatenate([train.labels, train.labels])
    steps = args.epochs * -(-len(labels) // defaults.PAPER_BATCH_SIZE)
    optimizer = schedules.paper_optimizer(steps, args.learning_rate, defaults.PAPER_WARMUP_FRACTION)
    model.compile(optimizer, keras.losses.BinaryCrossentropy(from_logits=True))
    start = time.time()
    for epoch in range(args.epochs):
        losses = [
            float(model.train_on_batch(x, y))
            for x, y in pair_batches(pre, first, second, labels, seed=args.seed + epoch)
        ]
        logits = sum(
            np.concatenate([model.predict_on_batch(x)[:, 0] for x in pair_batches(pre, a, b, batch_size=64)])
            for a, b in ((dev.sentence_a, dev.sentence_b), (dev.sentence_b, dev.sentence_a))
        )
        yield dict(
            mode="cross_encoder", epoch=epoch + 1, learning_rate=args.learning_rate, loss=float(np.mean(losses)),
            dev_spearman=float(spearmanr(logits, dev.labels)[0]), seconds=time.time() - start,
        )  # fmt: skip


def main(argv=None):
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, "first N STS-B train pairs (all; --quick: 64)")
    parser.add_argument("--mode", choices=tuple(MODES), default="epochs")
    parser.add_argument("--objective", default="regression", help="--mode epochs: the objective (regression)")
    parser.add_argument("--epochs", type=int, default=4, help="--mode epochs / cross_encoder: epochs (4)")
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--batching", default=None, help="bucket, shuffle or no_duplicates (the objective's default)")
    parser.add_argument("--clip", type=float, default=None, help="Adam global_clipnorm (none)")
    parser.add_argument("--runs", type=int, default=4, help="--mode soup: seeded runs (4)")
    args = parser.parse_args(argv)
    paths = common.shared_files(NAME, "data/stsbenchmark/sts-train.csv", "data/stsbenchmark/sts-dev.csv")
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return
    precision = set_compute(args.compute)
    limit = args.limit or (64 if args.quick else None)
    train, dev = readers.read_sts(paths[0]), readers.read_sts(paths[1])
    train = examples.SentencePairs(train.sentence_a[:limit], train.sentence_b[:limit], train.labels[:limit])
    if args.quick:
        dev = examples.SentencePairs(dev.sentence_a[:100], dev.sentence_b[:100], dev.labels[:100])
        args.epochs, args.runs = min(args.epochs, 2), min(args.runs, 2)
    encoder = SentenceEncoder.from_preset(str(model_dir))
    before = dev_spearman(encoder, dev)
    for row in MODES[args.mode](args, encoder, train, dev):
        common.emit(benchmark=NAME, precision=precision, train_pairs=len(train), dev_spearman_before=before, **row)


MODES = {"epochs": mode_epochs, "soup": mode_soup, "cross_encoder": mode_cross_encoder}

if __name__ == "__main__":
    main()
