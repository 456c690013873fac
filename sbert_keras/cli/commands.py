"""The commands of `sbert-keras`: one `cmd_<name>(args)` per subcommand.

Each takes the parsed `argparse.Namespace` of `sbert_keras.cli.parser` and returns
the JSON-able result `main` prints. Inputs (flags, files, output folders)
are checked before a model loads, so a bad one fails fast. This module
imports TensorFlow (through the encoder): `sbert_keras.cli.parser.main`
imports it only after it has parsed the arguments and set TensorFlow's
logging environment (`sbert_keras.utils.console`), so `sbert-keras --help`
and usage errors import no TensorFlow.

Example:
```python
from sbert_keras.cli.parser import build_parser
args = build_parser().parse_args(["encode", "--model", "m.keras", "--input", "a.txt", "--output", "a.npy"])
cmd_encode(args)  # {"texts": ..., "dim": ..., "output": "a.npy", "truncated": 0}
```
"""

import dataclasses
import math
import os

from sbert_keras.checkpoints.keras_files import load_keras_encoder
from sbert_keras.cli import index_commands
from sbert_keras.data import readers as data
from sbert_keras.encoder import SentenceEncoder
from sbert_keras.evaluation import evaluators as evaluation
from sbert_keras.evaluation import retrieval_evaluation
from sbert_keras.retrieval.semantic_search import cluster
from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.runtime.export import export_saved_model
from sbert_keras.training import hard_negatives
from sbert_keras.training.siamese import ClassificationSiamese
from sbert_keras.utils import atomic_io as outputs
from sbert_keras.utils import defaults
from sbert_keras.utils.checks import check_positive_int


def load_encoder(spec, **kwargs):
    """A `SentenceEncoder` from a `.keras` file (encoder or siamese model),
    a preset name, or a local preset / sentence-transformers folder.

    Returns `(encoder, siamese model or None)`; the loading and its errors
    (corrupt files, unreachable presets) are shared with `SentenceEncoder.from_preset`.
    """
    if str(spec).endswith(".keras"):
        return load_keras_encoder(spec, SentenceEncoder, kwargs.get("sequence_length"))
    return SentenceEncoder.from_preset(spec, **kwargs), None


# Training files read by the objective's own reader, not by their layout.
OBJECTIVE_READERS = {
    "batch-hard": data.read_labelled_sentences_csv,
    "online-contrastive": data.read_labelled_pairs_csv,
}
# Files whose layout `read_examples` recognises; distill takes their sentences.
STRUCTURED_SUFFIXES = (".jsonl", ".csv", ".tsv")
EXAMPLE_COLUMNS = ("sentence_a", "sentence_b", "labels", "anchor", "positive", "negative", "texts")


def read_examples(path, objective=None, limit=None):
    """Reads a training/eval file by the objective's format or by its layout.

    batch-hard: a `text,label` CSV; online-contrastive: a
    `sentence1,sentence2,label` CSV (0/1 labels); distill: sentences, one
    per line, or the distinct sentences of a file of another layout. Other
    objectives (and `objective=None`) by layout: `.jsonl`: NLI pairs
    (turned into triplets or pairs by the triplet/contrastive objectives);
    `.csv` with an `anchor`/`Sentence1` header: triplets; other
    `.csv`/`.tsv`: STS-B raw format.

    Args:
        path: str. The file.
        objective: str or None. The objective the file is for.
        limit: int or None. Keep the first `limit` examples (>= 1).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"--limit must be an integer >= 1; received {limit!r}.")
    if objective in OBJECTIVE_READERS:
        return first(OBJECTIVE_READERS[objective](path), limit)
    if objective == "distill":
        if not path.endswith(STRUCTURED_SUFFIXES):
            return first(data.read_sentences(path), limit)
        return first(data.unique_sentences(read_examples(path)), limit)
    if path.endswith(".jsonl"):
        return data.read_nli(path, limit=limit)
    with open(path, encoding="utf-8-sig") as f:
        header = f.readline().lower()
    if "\t" not in header and ("anchor" in header or "sentence1" in header):
        return first(data.read_triplets_csv(path), limit)
    return first(data.read_sts(path), limit)


def first(examples, limit):
    """The first `limit` examples (all with `None`), of any record of `sbert_keras.data.examples`."""
    if limit is None:
        return examples
    columns = {
        name: getattr(examples, name)[:limit]
        for name in EXAMPLE_COLUMNS
        if hasattr(examples, name) and getattr(examples, name) is not None
    }
    return dataclasses.replace(examples, **columns)


def read_lines(path):
    """The lines of a UTF-8 text file, without line ends (empty lines kept).

    Raises:
        sbert_keras.data.DataFormatError: bytes that are not UTF-8 (a
            Latin-1 or UTF-16 file), naming the file and line.
    """
    return [line for _, line in data.iter_text_lines(path, skip_empty=False)]


def evaluate_all(encoder, model=None, sts=None, triplets=None, nli=None, batch_size=defaults.ENCODE_BATCH_SIZE):
    """Runs each requested evaluation; returns one flat dict of metrics."""
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


def cmd_evaluate(args):
    """Metrics of each given set: `--sts`, `--triplets`, `--nli` and `--ir` (a BEIR folder, `--split`)."""
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
        **prompt_options(args),
    )
    outputs.save_npy(path, embeddings)
    return {
        "texts": len(texts),
        "dim": int(embeddings.shape[1]),
        "output": outputs.npy_path(args.output),
        "truncated": encoder.last_num_truncated,
    }


def prompt_options(args):
    """`encode` / `export_saved_model` keywords of `--prompt`, `--prompt-name` and `--truncate-dim`."""
    return {"prompt": args.prompt, "prompt_name": args.prompt_name, "truncate_dim": args.truncate_dim}


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
    outputs.prepare_dir(args.output, overwrite=args.overwrite)
    encoder = quantized(load_encoder(args.model)[0], args.quantize)
    options = prompt_options(args)
    export_saved_model(encoder, args.output, overwrite=args.overwrite, precision=args.precision, **options)
    return {
        "saved_model": args.output,
        "precision": args.precision,
        "signature": "serving_default",
        "input": "text: string[None]",
        "output": f"embeddings: float32[None, {args.truncate_dim or encoder.embedding_dim}]",
        "prompt": encoder.resolve_prompt(args.prompt, args.prompt_name) or "",
    }


def cmd_index(args):
    """`index build` (a summary) or `index search` (one result per query, printed as JSON lines by `main`)."""
    if args.index_command == "build":
        return index_commands.run_build(args)
    return index_commands.run_search(args, load_encoder)


def cmd_mine_negatives(args):
    """Mines hard negatives for `--pairs` into the triplet CSV `--output` (`hard_negatives`).

    Flags left out keep `mine_hard_negatives`' defaults (argparse leaves them unset).
    """
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
