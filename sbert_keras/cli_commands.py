"""The commands of `sbert-keras`: one `cmd_<name>(args)` per subcommand.

Each takes the parsed `argparse.Namespace` of `sbert_keras.cli` and returns
the JSON-able result `main` prints. Inputs (flags, files, output folders)
are checked before a model loads, so a bad one fails fast. TensorFlow and
Keras are imported inside the commands, on purpose: `sbert-keras --help`
and usage errors import no TensorFlow, and `main` sets TensorFlow's logging
environment (`sbert_keras.console`) before it is first imported.

Example:
```python
from sbert_keras.cli import build_parser
args = build_parser().parse_args(["encode", "--model", "m.keras", "--input", "a.txt", "--output", "a.npy"])
cmd_encode(args)  # {"texts": ..., "dim": ..., "output": "a.npy", "truncated": 0}
```
"""

import hashlib
import math
import os
import tempfile
import time

from sbert_keras import data
from sbert_keras import defaults
from sbert_keras import index
from sbert_keras import outputs
from sbert_keras.checks import check_positive_int


def load_encoder(spec, **kwargs):
    """A `SentenceEncoder` from a `.keras` file (encoder or siamese model),
    a preset name, or a local preset / sentence-transformers folder.

    Returns `(encoder, siamese model or None)`; the loading and its errors
    (corrupt files, unreachable presets) are shared with `SentenceEncoder.from_preset`.
    """
    from sbert_keras.checkpoints import load_keras_encoder
    from sbert_keras.encoder import SentenceEncoder

    if str(spec).endswith(".keras"):
        return load_keras_encoder(spec, kwargs.get("sequence_length"))
    return SentenceEncoder.from_preset(spec, **kwargs), None


def read_examples(path, objective=None, limit=None):
    """Reads a training/eval file by its layout.

    `.jsonl`: NLI pairs (turned into triplets by the triplet/contrastive
    objectives); `.csv` with an `anchor`/`Sentence1` header: triplets;
    other `.csv`/`.tsv`: STS-B raw format.

    Args:
        path: str. The file.
        objective: str or None. Unused (kept for callers that pass it).
        limit: int or None. Keep the first `limit` examples (>= 1).
    """

    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"--limit must be an integer >= 1; received {limit!r}.")
    if path.endswith(".jsonl"):
        return data.read_nli(path, limit=limit)
    with open(path, encoding="utf-8-sig") as f:
        header = f.readline().lower()
    if "\t" not in header and ("anchor" in header or "sentence1" in header):
        examples = data.read_triplets_csv(path)
        if limit is not None:
            examples = data.Triplets(examples.anchor[:limit], examples.positive[:limit], examples.negative[:limit])
        return examples
    pairs = data.read_sts(path)
    if limit is not None:
        pairs = data.SentencePairs(pairs.sentence_a[:limit], pairs.sentence_b[:limit], pairs.labels[:limit])
    return pairs


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends (empty lines kept).

    Raises:
        sbert_keras.data.DataFormatError: bytes that are not UTF-8 (a
            Latin-1 or UTF-16 file), naming the file and line.
    """
    return [line for _, line in data.iter_text_lines(path, skip_empty=False)]


def evaluate_all(encoder, model=None, sts=None, triplets=None, nli=None, batch_size=defaults.ENCODE_BATCH_SIZE):
    """Runs each requested evaluation; returns one flat dict of metrics."""
    from sbert_keras import evaluation

    metrics = {}
    if sts:
        pairs = read_examples(sts)
        metrics.update(
            evaluation.sts_evaluation(encoder, pairs.sentence_a, pairs.sentence_b, pairs.labels, batch_size=batch_size)
        )
    if triplets:
        examples = read_examples(triplets)
        if isinstance(examples, data.NLIPairs):
            examples = data.nli_to_triplets(examples)
        metrics.update(
            evaluation.triplet_evaluation(
                encoder, examples.anchor, examples.positive, examples.negative, batch_size=batch_size
            )
        )
    if nli:
        from sbert_keras.siamese import ClassificationSiamese

        if not isinstance(model, ClassificationSiamese):
            raise ValueError(
                "--nli needs a classification model (.keras saved by `sbert-keras train --objective classification`)."
            )
        pairs = data.read_nli(nli)
        metrics.update(
            evaluation.nli_evaluation(model, pairs.sentence_a, pairs.sentence_b, pairs.labels, batch_size=batch_size)
        )
    return metrics


def check_flag(value, flag, minimum=1):
    """Raises a `ValueError` naming `flag` unless `value` is an int >= `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{flag} must be an integer >= {minimum}; received {value!r}.")
    return value


def file_sha256(path):
    """The SHA-256 of a file's bytes (the train file's part of the run fingerprint)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cmd_train(args):
    """Trains into `<output>.partial` (which resumes), then renames it to `--output`.

    Every flag, the data and the output folder are checked before the model
    loads; the backup is saved every `--save-every` steps and tied to this
    run's configuration and data. `--precision` sets Keras' global dtype
    policy for the run only: the caller's policy is restored afterwards
    (`main()` may run in a notebook or a test process).
    """
    import keras  # lazily, like the other TensorFlow imports of the CLI

    previous = keras.config.dtype_policy()
    try:
        return train_command(args)
    finally:
        keras.config.set_dtype_policy(previous)


def train_command(args):
    """The body of `cmd_train`, under the run's dtype policy."""
    from sbert_keras import backup
    from sbert_keras import distributed
    from sbert_keras import training

    # The strategy comes before any other TensorFlow op; the other workers train into a scratch folder.
    strategy = distributed.multi_worker_strategy() if getattr(args, "strategy", "none") == "multi-worker" else None
    if strategy is not None and not distributed.is_chief(strategy):
        args.output = os.path.join(tempfile.mkdtemp(prefix="sbert-keras-worker-"), "run")
    for flag, value in (
        ("--epochs", args.epochs),
        ("--batch-size", args.batch_size),
        ("--save-every", args.save_every),
    ):
        check_flag(value, flag)
    if not math.isfinite(args.lr) or args.lr <= 0:
        raise ValueError(f"--lr must be a finite number > 0; received {args.lr!r}.")
    model_kwargs = {"matryoshka_dims": args.matryoshka_dims} if args.matryoshka_dims else {}
    if model_kwargs and args.objective == "angle":
        raise ValueError(
            "--matryoshka-dims does not apply to --objective angle (AnglE's loss is on the full embeddings); "
            "use cosent or regression."
        )
    target = outputs.prepare_dir(args.output, overwrite=args.overwrite)
    train = read_examples(args.train, args.objective, args.limit)
    if not len(train):
        skipped = getattr(train, "num_skipped", 0)
        note = f" ({skipped} unlabelled line(s) skipped)" if skipped else ""
        raise ValueError(f"--train {args.train}: no labelled training examples{note}.")
    try:
        training.objective_inputs(args.objective, train)
    except (TypeError, ValueError) as error:
        raise ValueError(f"--train {args.train} does not fit --objective {args.objective}: {error}") from None
    dev = read_examples(args.dev) if args.dev else None
    created = outputs.first_missing_folder(target)
    work = outputs.partial_dir(target)
    try:
        precision = training.set_precision(args.precision)
        encoder, _ = load_encoder(args.model, sequence_length=args.sequence_length)
        before = evaluate_all(encoder, sts=args.dev) if args.dev and dev_is_sts(dev) else {}
        start = time.perf_counter()
        run_info = {"model": args.model, "train_file_sha256": file_sha256(args.train), "limit": args.limit}
        model, history = training.train_objective(
            args.objective,
            encoder,
            train,
            dev=dev,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.lr,
            output_dir=work,
            seed=args.seed,
            verbose=2 if args.quiet else "auto",
            save_freq=args.save_every,
            overwrite=args.overwrite,
            keep_backup=True,
            run_info=run_info,
            strategy=strategy,
            **model_kwargs,
        )
        seconds = time.perf_counter() - start
        outputs.replace_atomically(encoder.save, os.path.join(work, "encoder.keras"), ".keras")
        outputs.replace_atomically(model.save, os.path.join(work, "model.keras"), ".keras")
        report = {
            "objective": args.objective,
            "model": args.model,
            "precision": precision,
            "train_examples": len(train),
            "epochs": args.epochs,
            **model_kwargs,
            "train_seconds": round(seconds, 2),
            "dev_before": before,
            "dev_after": {k[4:]: v[-1] for k, v in history.history.items() if k.startswith("dev_")},
            "history": {k: [float(x) for x in v] for k, v in history.history.items()},
            "encoder": os.path.join(args.output, "encoder.keras"),
        }
        outputs.write_json(os.path.join(work, "metrics.json"), report)
        backup.RunBackup(os.path.join(work, "backup")).delete()
        outputs.finalize_dir(work, target, {"command": "train", "files": list(outputs.RUN_FILES)})
    except BaseException:
        outputs.remove_partial(work, created)  # kept only when it holds a backup to resume
        raise
    return report


def dev_is_sts(dev):

    return type(dev) is data.SentencePairs


def cmd_evaluate(args):
    """Metrics of each given set: `--sts`, `--triplets`, `--nli` and `--ir` (a BEIR folder, `--split`)."""
    from sbert_keras import retrieval_evaluation

    if not (args.sts or args.triplets or args.nli or args.ir):
        raise SystemExit("evaluate: give at least one of --sts, --triplets, --nli, --ir")
    check_flag(args.batch_size, "--batch-size")
    ir = retrieval_evaluation.read_beir(args.ir, args.split) if args.ir else None  # bad files fail before the model
    encoder, model = load_encoder(args.model)
    metrics = evaluate_all(encoder, model, args.sts, args.triplets, args.nli, args.batch_size)
    if ir:
        metrics.update(retrieval_evaluation.information_retrieval_evaluation(encoder, *ir, batch_size=args.batch_size))
    return metrics


def cmd_encode(args):
    """Embeds `--input` lines into `--output` (`.npy` added if missing), atomically."""
    check_flag(args.batch_size, "--batch-size")
    path = outputs.check_writable(outputs.npy_path(args.output), create_parents=False)
    if os.path.isdir(path):
        raise ValueError(f"--output {path} is a folder; give a .npy file name.")
    encoder = quantized(load_encoder(args.model)[0], args.quantize)
    texts = read_lines(args.input)
    embeddings = encoder.encode(
        texts,
        batch_size=args.batch_size,
        normalize=args.normalize or None,
        precision=args.precision,
        show_progress=True,
    )
    outputs.save_npy(path, embeddings)
    return {
        "texts": len(texts),
        "dim": int(embeddings.shape[1]),
        "output": outputs.npy_path(args.output),
        "truncated": encoder.last_num_truncated,
    }


def quantized(encoder, mode):
    """`encoder` after Keras' `quantize(mode)` (`--quantize int8`), or as it is."""
    if mode:
        encoder.quantize(mode)
    return encoder


def read_nonempty_lines(path, flag):
    """`read_lines(path)`, or a `ValueError` naming `flag` if there are none."""
    lines = read_lines(path)
    if not any(line.strip() for line in lines):
        raise ValueError(f"{flag} {path} has no text lines.")
    return lines


def cmd_search(args):
    from sbert_keras.search import semantic_search

    # Inputs first: a bad file fails before the model loads.
    batch_size = check_positive_int(args.batch_size, "--batch-size")
    corpus = read_nonempty_lines(args.corpus, "--corpus")
    queries = args.query or read_nonempty_lines(args.queries, "--queries")
    encoder, _ = load_encoder(args.model)
    corpus_embeddings = encoder.encode(corpus, batch_size=batch_size, show_progress=True)
    query_embeddings = encoder.encode(queries, batch_size=batch_size, show_progress=False)
    hits = semantic_search(query_embeddings, corpus_embeddings, top_k=args.top_k)
    return [{"query": q, "hits": [{"text": corpus[h["corpus_id"]], **h} for h in hs]} for q, hs in zip(queries, hits)]


def cmd_cluster(args):
    from sbert_keras.search import cluster

    batch_size = check_positive_int(args.batch_size, "--batch-size")
    texts = read_nonempty_lines(args.input, "--input")
    encoder, _ = load_encoder(args.model)
    labels = cluster(
        encoder.encode(texts, batch_size=batch_size, show_progress=True),
        method=args.method,
        num_clusters=args.num_clusters,
        threshold=args.threshold,
    )
    groups = {}
    for text, label in zip(texts, labels.tolist()):
        groups.setdefault(label, []).append(text)
    # Label -1 (community detection): in no community, reported apart.
    unclustered = groups.pop(-1, [])
    return {"method": args.method, "clusters": [groups[k] for k in sorted(groups)], "unclustered": unclustered}


def cmd_export(args):
    """Writes the SavedModel beside `--output`, then renames it (refuses to replace one)."""
    from sbert_keras.export import export_saved_model

    outputs.prepare_dir(args.output, overwrite=args.overwrite)
    encoder = quantized(load_encoder(args.model)[0], args.quantize)
    export_saved_model(encoder, args.output, overwrite=args.overwrite, precision=args.precision)
    return {
        "saved_model": args.output,
        "precision": args.precision,
        "signature": "serving_default",
        "input": "text: string[None]",
        "output": f"embeddings: float32[None, {encoder.embedding_dim}]",
    }


def cmd_index(args):
    """`index build` (a summary) or `index search` (one result per query, printed as JSON lines by `main`)."""
    if args.index_command == "build":
        return index.run_build(args)
    return index.run_search(args, load_encoder)


def cmd_mine_negatives(args):
    """Mines hard negatives for `--pairs` into the triplet CSV `--output` (`hard_negatives`).

    Flags left out keep `mine_hard_negatives`' defaults (argparse leaves them unset).
    """
    from sbert_keras import hard_negatives  # imports scikit-learn (via search): not for --help

    batch_size = check_flag(args.batch_size, "--batch-size")
    pairs = hard_negatives.read_pairs_csv(args.pairs)
    corpus = read_nonempty_lines(args.corpus, "--corpus") if args.corpus else None
    output = outputs.check_writable(args.output)
    if os.path.exists(output) and not args.overwrite:
        raise ValueError(f"--output {output} already exists; pass --overwrite to replace it.")
    # The mining flags given (`mine_<argument>`); the others keep the function's defaults.
    options = {name[5:]: value for name, value in vars(args).items() if name.startswith("mine_")}
    if options.get("range_min", 0) >= options.get("range_max", math.inf):
        raise ValueError(
            f"--range-min ({options['range_min']}) must be smaller than --range-max ({options['range_max']})."
        )
    encoder, _ = load_encoder(args.model)
    mined = hard_negatives.mine_hard_negatives(
        encoder, pairs.anchor, pairs.positive, corpus=corpus, batch_size=batch_size, show_progress=True, **options
    )
    written = hard_negatives.write_triplets_csv(output, mined, overwrite=args.overwrite)
    return {
        "pairs": len(pairs),
        "corpus": len(corpus) if corpus else 0,
        "triplets": len(mined),
        "anchors_short": mined.num_short,
        "output": written,
    }
