"""The commands of `sbert-keras`: one `cmd_<name>(args)` per subcommand.

Each takes the parsed `argparse.Namespace` of `sbert_keras.cli.parser`, whose
flags, input paths and outputs `sbert_keras.cli.flag_checks` has checked,
and returns the JSON-able result `main` prints. A command reads its input
files before the model loads, so a bad file fails fast too. Texts of a
corpus file are named by their 1-based line numbers (`numbered`), as
`embed-corpus` and `index` name them. This module imports TensorFlow
(through the encoder): `sbert_keras.cli.parser.main` imports it only after
it has parsed and checked the arguments and set TensorFlow's logging
environment (`sbert_keras.utils.console`), so `sbert-keras --help` and
usage errors import no TensorFlow.

Example:
```python
from sbert_keras.cli.parser import build_parser
args = build_parser().parse_args(["encode", "--model", "m.keras", "--input", "a.txt", "--output", "a.npy"])
cmd_encode(args)  # {"texts": ..., "dim": ..., "output": "a.npy", "truncated": 0}
```
"""

import dataclasses
import json
import os

import numpy as np

from sbert_keras.checkpoints.keras_files import load_keras_encoder
from sbert_keras.cli import index_commands
from sbert_keras.data import readers
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import nli_to_triplets
from sbert_keras.data.examples import unique_sentences
from sbert_keras.encoder import SentenceEncoder
from sbert_keras.evaluation import evaluators
from sbert_keras.evaluation import retrieval_evaluation
from sbert_keras.retrieval.semantic_search import cluster
from sbert_keras.retrieval.semantic_search import semantic_search
from sbert_keras.runtime.export import export_saved_model
from sbert_keras.training import hard_negatives
from sbert_keras.training.siamese import ClassificationSiamese
from sbert_keras.utils import atomic_io
from sbert_keras.utils import console
from sbert_keras.utils import defaults


def load_encoder(spec, **kwargs):
    """A `SentenceEncoder` from a `.keras` file (encoder or siamese model),
    a preset name, or a local preset / sentence-transformers folder.

    Returns `(encoder, siamese model or None)`; the loading and its errors
    (corrupt files, unreachable presets) are shared with `SentenceEncoder.from_preset`.
    A status line on stderr says which model loads, then how long it took.
    """
    with console.status(f"sbert-keras: loading model {spec} ...", "sbert-keras: model loaded"):
        if str(spec).endswith(".keras"):
            return load_keras_encoder(spec, SentenceEncoder, kwargs.get("sequence_length"))
        return SentenceEncoder.from_preset(spec, **kwargs), None


# Training files read by the objective's own reader, not by their layout.
OBJECTIVE_READERS = {
    "batch-hard": readers.read_labelled_sentences_csv,
    "online-contrastive": readers.read_labelled_pairs_csv,
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
    if objective in OBJECTIVE_READERS:
        return first(OBJECTIVE_READERS[objective](path), limit)
    if objective == "distill":
        if not path.endswith(STRUCTURED_SUFFIXES):
            return first(readers.read_sentences(path), limit)
        return first(unique_sentences(read_examples(path)), limit)
    if path.endswith(".jsonl"):
        return readers.read_nli(path, limit=limit)
    with open(path, encoding="utf-8-sig") as f:
        header = f.readline().lower()
    if "\t" not in header and ("anchor" in header or "sentence1" in header):
        return first(readers.read_triplets_csv(path), limit)
    return first(readers.read_sts(path), limit)


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
        sbert_keras.data.examples.DataFormatError: bytes that are not UTF-8 (a
            Latin-1 or UTF-16 file), naming the file and line.
    """
    return [line for _, line in readers.iter_text_lines(path, skip_empty=False)]


def read_eval_sets(sts=None, triplets=None, nli=None):
    """The examples of each given evaluation file, read (and checked) before any model loads.

    Returns a dict with the keys given: `"sts"` (`SentencePairs`), `"triplets"` (`Triplets`; an NLI
    `.jsonl` is turned into triplets) and `"nli"` (`NLIPairs`).
    """
    sets = {}
    if sts:
        sets["sts"] = read_examples(sts)
    if triplets:
        examples = read_examples(triplets)
        sets["triplets"] = nli_to_triplets(examples) if isinstance(examples, NLIPairs) else examples
    if nli:
        sets["nli"] = readers.read_nli(nli)
    return sets


def evaluate_all(encoder, model=None, sts=None, triplets=None, nli=None, batch_size=defaults.ENCODE_BATCH_SIZE):
    """Runs each requested evaluation; returns one flat dict of metrics.

    Args:
        encoder: the `SentenceEncoder`.
        model: the siamese model loaded with it, or None (`nli` needs a `ClassificationSiamese`).
        sts, triplets, nli: the examples `read_eval_sets` read, or None.
        batch_size: int. Texts per forward pass.
    """
    sets = {name: value for name, value in (("sts", sts), ("triplets", triplets), ("nli", nli)) if value is not None}
    metrics = {}
    if "sts" in sets:
        pairs = sets["sts"]
        metrics.update(
            evaluators.sts_evaluation(encoder, pairs.sentence_a, pairs.sentence_b, pairs.labels, batch_size=batch_size)
        )
    if "triplets" in sets:
        t = sets["triplets"]
        metrics.update(evaluators.triplet_evaluation(encoder, t.anchor, t.positive, t.negative, batch_size=batch_size))
    if "nli" in sets:
        if not isinstance(model, ClassificationSiamese):
            raise ValueError(
                "--nli needs a classification model (.keras saved by `sbert-keras train --objective classification`)."
            )
        pairs = sets["nli"]
        metrics.update(
            evaluators.nli_evaluation(model, pairs.sentence_a, pairs.sentence_b, pairs.labels, batch_size=batch_size)
        )
    return metrics


def cmd_evaluate(args):
    """Metrics of each given set: `--sts`, `--triplets`, `--nli` and `--ir` (a BEIR folder, `--split`).

    Every file is read before the model loads (`sbert_keras.cli.flag_checks` checked the flags).
    """
    sets = read_eval_sets(args.sts, args.triplets, args.nli)
    ir = retrieval_evaluation.read_beir(args.ir, args.split) if args.ir else None
    encoder, model = load_encoder(args.model)
    metrics = evaluate_all(encoder, model, batch_size=args.batch_size, **sets)
    if ir:
        metrics.update(retrieval_evaluation.information_retrieval_evaluation(encoder, *ir, batch_size=args.batch_size))
    return metrics


def cmd_encode(args):
    """Embeds the lines of `--input`, one row per line, into `--output` (`.npy` added if missing), atomically.

    `sbert_keras.cli.flag_checks` refused an existing `--output` without `--overwrite`.
    """
    texts = read_nonempty_lines(args.input, "--input")
    encoder = quantized(load_encoder(args.model)[0], args.quantize)
    embeddings = encoder.encode(
        texts,
        batch_size=args.batch_size,
        normalize=args.normalize,
        precision=args.precision,
        compute=args.compute,
        show_progress=True,
        **prompt_options(args),
    )
    path = atomic_io.save_npy(args.output, embeddings)
    route = encoder.engine.route(args.compute)
    return {
        "texts": len(texts),
        "dim": args.truncate_dim or encoder.embedding_dim,
        "precision": args.precision,
        "dtype": str(embeddings.dtype),
        "output": path,
        "truncated": encoder.last_num_truncated,
        "route": "/".join(route),
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


def numbered(lines):
    """`(line numbers, texts)` of the non-blank `lines` of a file; the numbers are 1-based.

    The line numbers are the ids of `search`, `index` (a `.npy` of `encode`) and `embed-corpus`.
    """
    numbers = [number for number, line in enumerate(lines, start=1) if line.strip()]
    return numbers, [lines[number - 1] for number in numbers]


def saved_embeddings(args, num_lines):
    """The `--embeddings` array, checked to hold one row per line of `--corpus` (`num_lines`)."""
    try:
        embeddings = np.load(args.embeddings, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ValueError(f"--embeddings {args.embeddings} is not a .npy array ({error}).") from None
    if embeddings.ndim != 2 or len(embeddings) != num_lines:
        raise ValueError(
            f"--embeddings {args.embeddings} holds {embeddings.shape[0] if embeddings.ndim else 0} rows "
            f"(shape {embeddings.shape}) and --corpus {args.corpus} has {num_lines} lines: give the .npy that "
            f"`sbert-keras encode --input {args.corpus}` wrote."
        )
    return embeddings


def cmd_search(args):
    """Ranks the non-blank lines of `--corpus` for each query; a hit's `id` is its 1-based line number.

    With `--embeddings`, the corpus vectors are the rows `encode` saved (row `r` is line `r + 1`);
    the model encodes the queries only.
    """
    # Inputs first: a bad file fails before the model loads.
    lines = read_nonempty_lines(args.corpus, "--corpus")
    numbers, corpus = numbered(lines)
    queries = args.query or numbered(read_nonempty_lines(args.queries, "--queries"))[1]
    saved = saved_embeddings(args, len(lines)) if args.embeddings else None
    encoder, _ = load_encoder(args.model)
    query_embeddings = encoder.encode(queries, batch_size=args.batch_size, show_progress=False)
    if saved is None:
        corpus_embeddings = encoder.encode(corpus, batch_size=args.batch_size, show_progress=True)
    else:
        corpus_embeddings = np.asarray(saved[np.asarray(numbers) - 1], dtype="float32")
        if corpus_embeddings.shape[1] != query_embeddings.shape[1]:
            raise ValueError(
                f"--embeddings {args.embeddings} holds vectors of dimension {corpus_embeddings.shape[1]} and "
                f"--model {args.model} encodes {query_embeddings.shape[1]}: give the model that wrote them."
            )
    hits = semantic_search(query_embeddings, corpus_embeddings, top_k=args.top_k)
    return [{"query": q, "hits": [search_hit(h, numbers, corpus) for h in hs]} for q, hs in zip(queries, hits)]


def search_hit(hit, numbers, corpus):
    """`{"id", "text", "score"}` of one `semantic_search` hit: the id is the text's 1-based line number."""
    row = hit["corpus_id"]
    return {"id": str(numbers[row]), "text": corpus[row], "score": hit["score"]}


def cmd_cluster(args):
    """Groups the non-blank lines of `--input`; `sbert_keras.cli.flag_checks` checked the method's flags."""
    texts = numbered(read_nonempty_lines(args.input, "--input"))[1]
    if args.num_clusters is not None and args.num_clusters > len(texts):
        raise ValueError(f"--num-clusters {args.num_clusters} is more than the {len(texts)} texts of --input.")
    encoder, _ = load_encoder(args.model)
    labels = cluster(
        encoder.encode(texts, batch_size=args.batch_size, show_progress=True),
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
    """Writes the SavedModel beside `--output`, then renames it; prints what its `complete.json` records.

    `sbert_keras.cli.flag_checks` refused an earlier export in `--output` without `--overwrite`. The
    printed `compute` is the one the served graph runs (what `--compute auto` chose), and
    `client_requires` / `client_note` say what a Python client imports before loading it.
    """
    encoder = quantized(load_encoder(args.model)[0], args.quantize)
    path = export_saved_model(
        encoder, args.output, args.overwrite, args.compute, batch_size=args.batch_size, **prompt_options(args)
    )
    with open(os.path.join(path, atomic_io.MARKER), encoding="utf-8") as f:
        marker = json.load(f)
    return {
        "saved_model": args.output,
        "compute": marker["compute"],
        "signature": "serving_default",
        "input": "text: string[None]",
        "output": f"embeddings: float32[None, {args.truncate_dim or encoder.embedding_dim}]",
        "prompt": marker["prompt"],
        "client_requires": marker["client_requires"],
        "client_note": marker["client_note"],
    }


def cmd_index(args):
    """`index build` (a summary) or `index search` (one result per query, printed as JSON lines by `main`)."""
    if args.index_command == "build":
        return index_commands.run_build(args)
    return index_commands.run_search(args, load_encoder)


def cmd_mine_negatives(args):
    """Mines hard negatives for `--pairs` into the triplet CSV `--output` (`hard_negatives`).

    Each mining flag goes to the `mine_hard_negatives` argument of its name; `sbert_keras.cli.flag_checks`
    checked the rank window and the output.
    """
    pairs = hard_negatives.read_pairs_csv(args.pairs)
    corpus = numbered(read_nonempty_lines(args.corpus, "--corpus"))[1] if args.corpus else None
    options = {name[5:]: value for name, value in vars(args).items() if name.startswith("mine_")}
    encoder, _ = load_encoder(args.model)
    mined = hard_negatives.mine_hard_negatives(
        encoder, pairs.anchor, pairs.positive, corpus=corpus, batch_size=args.batch_size, show_progress=True, **options
    )
    written = hard_negatives.write_triplets_csv(args.output, mined, overwrite=args.overwrite)
    return {
        "pairs": len(pairs),
        "corpus": len(corpus) if corpus else 0,
        "triplets": len(mined),
        "anchors_short": mined.num_short,
        "output": written,
    }
