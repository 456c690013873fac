"""`sbert-keras`: train, evaluate, encode, search, cluster and export.

Every command prints its result as JSON on stdout; progress goes to stderr.
An error the user can cause (a bad argument or file, a missing or corrupt
model, no network) prints one line `sbert-keras <command>: error: ...` and
exits with status 2; anything else keeps its traceback. `main` keeps
TensorFlow's C++ start-up log lines off the console (`sbert_keras.utils.console`),
and `--help` does not import TensorFlow at all. This module holds the
parser and the error handling; the commands are in `sbert_keras.cli.commands`
(`train` in `sbert_keras.cli.train`).
"""

import argparse
import contextlib
import importlib
import json
import math
import sys
import zipfile

from sbert_keras.cli import index_commands
from sbert_keras.utils import console
from sbert_keras.utils import defaults
from sbert_keras.utils.checks import check_positive_int


def positive_int(text):
    """argparse `type`: an integer >= 1."""
    try:
        return check_positive_int(int(text), "value")
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None


def non_negative_float(text):
    """argparse `type`: a finite number >= 0 (`train --weight-decay`, `--clip-norm`)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def dimensions(text):
    """argparse `type` of `--matryoshka-dims`: comma-separated integers >= 1 (`384,256,128,64`)."""
    try:
        dims = tuple(int(part) for part in text.split(","))
    except ValueError:
        dims = ()
    if not dims or min(dims) < 1 or len(set(dims)) != len(dims):
        raise argparse.ArgumentTypeError(
            f"must be distinct comma-separated integers >= 1 such as 384,256,128,64, got {text!r}"
        )
    return dims


def training_precision(text):
    """argparse `type` of `train --precision`: a word of `defaults.POLICY_PRECISIONS`.

    A Keras policy name (`mixed_bfloat16`) is still accepted: it is replaced
    by its word, with a deprecation note on stderr.
    """
    if text in defaults.DEPRECATED_POLICY_NAMES:
        word = defaults.DEPRECATED_POLICY_NAMES[text]
        print(f"sbert-keras: --precision {text} is deprecated; use --precision {word}.", file=sys.stderr)
        return word
    if text not in defaults.POLICY_PRECISIONS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(defaults.POLICY_PRECISIONS)}, got {text!r}")
    return text


def non_negative_int(text):
    """argparse `type`: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


# `mine-negatives` flag -> type; each goes to the `mine_hard_negatives` argument
# of its name (dest `mine_<name>`, collected by `cmd_mine_negatives`).
MINING_FLAGS = {
    "--num-negatives": (positive_int, "negatives per anchor"),
    "--range-min": (non_negative_int, "skip the candidates ranked before this (0-based)"),
    "--range-max": (positive_int, "use no candidate ranked from this on"),
    "--margin": (float, "keep candidates scoring <= positive score - margin"),
    "--relative-margin": (float, "keep candidates scoring <= positive score - |positive score| * relative margin"),
    "--max-score": (float, "drop candidates scoring above this"),
    "--min-score": (float, "drop candidates scoring below this"),
    "--seed": (int, "seed of --sampling random"),
}


def add_prompt_flags(p, inside=""):
    """`--prompt` / `--prompt-name` (one of them) and `--truncate-dim` of `encode` and `export`."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--prompt", help=f"text prepended {inside}to every input (default: the model's default prompt)")
    group.add_argument("--prompt-name", help="name of one of the model's prompts (config_sentence_transformers.json)")
    p.add_argument(
        "--truncate-dim", type=positive_int, help="keep the first N dimensions (re-normalised if normalising)"
    )


# Subcommand -> the function that runs it, as `"module:function"`, as a console-script entry point
# names it. `main` imports the module once the arguments are parsed and TensorFlow's logging is set
# up: the command modules import TensorFlow at their top, this module does not.
COMMANDS = {
    "train": "sbert_keras.cli.train:cmd_train",
    "evaluate": "sbert_keras.cli.commands:cmd_evaluate",
    "encode": "sbert_keras.cli.commands:cmd_encode",
    "search": "sbert_keras.cli.commands:cmd_search",
    "cluster": "sbert_keras.cli.commands:cmd_cluster",
    "export": "sbert_keras.cli.export_formats:cmd_export",
    "mine-negatives": "sbert_keras.cli.commands:cmd_mine_negatives",
    "index": "sbert_keras.cli.commands:cmd_index",
    "embed-corpus": "sbert_keras.integrations.beam:run",
}


def command_function(spec):
    """The function that a `"module:function"` string of `COMMANDS` names, its module imported now."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def build_parser():
    """The `sbert-keras` parser; each subcommand sets `fn`, its `COMMANDS` entry."""
    parser = argparse.ArgumentParser(prog="sbert-keras", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, help_text):
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(fn=COMMANDS[name])
        p.add_argument("--model", required=True, help="preset name, local folder or .keras file")
        p.add_argument("--batch-size", type=int, default=defaults.ENCODE_BATCH_SIZE)
        return p

    p = add("train", "fine-tune an encoder with one SBERT objective")
    p.add_argument("--objective", required=True, choices=list(defaults.OBJECTIVES))
    p.add_argument(
        "--train",
        required=True,
        help="STS .csv (regression, cosent, angle), NLI .jsonl or triplet .csv (triplet, contrastive, "
        "classification: NLI); text,label .csv (batch-hard); sentence1,sentence2,label .csv with labels 0/1 "
        "(online-contrastive); sentences, one per line, or any of these files' sentences (distill)",
    )
    p.add_argument(
        "--matryoshka-dims",
        type=dimensions,
        help="also train these embedding prefixes, e.g. 384,256,128,64 (Matryoshka; not with angle)",
    )
    p.add_argument(
        "--hard-negatives",
        action="store_true",
        help="contrastive: also train on the third column of a triplet .csv (as mine-negatives writes it; "
        "NLI: the contradictions) as hard negatives; without it, (anchor, positive) pairs only",
    )
    p.add_argument(
        "--mini-batch-size",
        type=positive_int,
        metavar="N",
        help="contrastive: cached in-batch negatives (GradCache), N texts per encoder pass, so --batch-size "
        "can exceed what fits in memory",
    )
    p.add_argument(
        "--teacher",
        metavar="MODEL",
        help="distill: the model (preset, folder or .keras) whose embeddings the student learns (MSE); "
        "its dimension must be the student's",
    )
    p.add_argument("--dev", help="STS .csv, NLI .jsonl or triplet .csv for dev metrics")
    p.add_argument("--epochs", type=int, default=defaults.PAPER_EPOCHS)
    p.add_argument("--lr", type=float, default=defaults.PAPER_LEARNING_RATE)
    p.add_argument(
        "--weight-decay",
        type=non_negative_float,
        default=defaults.WEIGHT_DECAY,
        help=f"> 0: AdamW with this weight decay (not on biases and LayerNorm), as sentence-transformers; "
        f"0: Adam (default {defaults.WEIGHT_DECAY})",
    )
    p.add_argument(
        "--clip-norm",
        type=non_negative_float,
        default=defaults.CLIP_NORM,
        help=f"clip the gradients to this global norm, as sentence-transformers; 0: no clipping "
        f"(default {defaults.CLIP_NORM})",
    )
    p.add_argument(
        "--output",
        required=True,
        help="output directory; it appears when training is complete "
        "(until then <output>.partial holds the backup, and rerunning resumes)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a completed run in --output, and discard a backup of a different run",
    )
    p.add_argument(
        "--save-every",
        type=int,
        default=defaults.DEFAULT_SAVE_STEPS,
        help="back up every N training steps (and at each epoch end)",
    )
    p.add_argument(
        "--precision",
        default="auto",
        type=training_precision,
        metavar="{" + ",".join(defaults.POLICY_PRECISIONS) + "}",
        help="matmul precision of training (a Keras mixed policy); auto: float16 on a GPU, "
        "bf16 on CPUs with AVX512-BF16/AMX, else float32",
    )
    p.add_argument("--sequence-length", type=int, default=None)
    p.add_argument("--limit", type=int, default=None, help="use the first N training examples")
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds the batch order, dropout and new heads: the same command repeats its weights on one machine",
    )
    p.add_argument("--quiet", action="store_true", help="one log line per epoch")
    p.add_argument(
        "--batching",
        choices=list(defaults.BATCHINGS),
        default=None,
        help="batch composition (default per objective: no_duplicates for contrastive, else bucket)",
    )
    p.add_argument(
        "--strategy",
        choices=["none", "multi-worker"],
        default="none",
        help="multi-worker: one worker of a tf.distribute.MultiWorkerMirroredStrategy cluster described by TF_CONFIG "
        "(run the same command on every worker; --batch-size is global; worker 0 writes --output)",
    )
    p.set_defaults(batch_size=defaults.PAPER_BATCH_SIZE)

    p = add("evaluate", "print dev/test metrics as JSON")
    p.add_argument("--sts")
    p.add_argument("--triplets", help="triplet .csv or NLI .jsonl")
    p.add_argument("--nli", help="NLI .jsonl (classification models)")
    p.add_argument("--ir", help="information retrieval set, a folder in the BEIR layout")
    p.add_argument("--split", default="test", help="qrels split of --ir (qrels/<split>.tsv)")

    p = add("encode", "embed a file of lines into a .npy")
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True, help=".npy file (.npy is added if missing)")
    p.add_argument("--normalize", action="store_true")
    p.add_argument(
        "--precision",
        default="auto",
        choices=list(defaults.PRECISIONS),
        help="matmul precision; auto: bf16 on CPUs with AVX512-BF16/AMX, else float32",
    )
    p.add_argument("--quantize", choices=["int8"], help="Keras int8 weight quantization before encoding")
    add_prompt_flags(p)

    p = add("search", "rank a corpus (file of lines) for queries")
    p.add_argument("--corpus", required=True)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", action="append")
    group.add_argument("--queries", help="file of lines")
    p.add_argument("--top-k", type=positive_int, default=5)

    p = add("cluster", "cluster a file of lines")
    p.add_argument("--input", required=True)
    p.add_argument("--method", default="kmeans", choices=list(defaults.CLUSTER_METHODS))
    p.add_argument("--num-clusters", type=positive_int)
    p.add_argument("--threshold", type=float)

    p = add("export", "write a SavedModel that serves raw strings, or a sentence-transformers folder (--format)")
    p.add_argument("--format", default="saved-model", choices=["saved-model", "sentence-transformers"])
    p.add_argument("--output", required=True, help="SavedModel directory (appears when complete)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export in --output")
    p.add_argument(
        "--precision",
        default="auto",
        choices=list(defaults.PRECISIONS),
        help="precision of the served graph; auto: the fastest that passes the self-check here "
        "(bf16 on AVX512-BF16/AMX CPUs; use float32 for servers without bf16)",
    )
    p.add_argument("--quantize", choices=["int8"], help="Keras int8 weight quantization before exporting")
    add_prompt_flags(p, inside="in the graph ")

    p = add("mine-negatives", "mine hard negatives for (anchor, positive) pairs into triplets")
    p.add_argument("--pairs", required=True, help="CSV with anchor,positive (or query,positive) columns")
    p.add_argument("--corpus", help="file of lines: candidate negatives besides the positives")
    p.add_argument("--output", required=True, help="triplet CSV (anchor,positive,negative)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    # Flags left out keep the defaults of `hard_negatives.mine_hard_negatives` (defined there only).
    mined = "(default: mine_hard_negatives')"
    for flag, (kind, text) in MINING_FLAGS.items():
        name = flag[2:].replace("-", "_")
        p.add_argument(
            flag,
            type=kind,
            dest="mine_" + name,
            metavar=name.upper(),
            default=argparse.SUPPRESS,
            help=f"{text} {mined}",
        )
    p.add_argument(
        "--sampling",
        choices=["top", "random"],
        dest="mine_sampling_strategy",
        default=argparse.SUPPRESS,
        help=f"top: the best candidates, random: a sample of the rank window {mined}",
    )

    p = sub.add_parser("index", help="build or search an approximate-nearest-neighbour index (faiss)")
    p.set_defaults(fn=COMMANDS["index"])
    index_commands.add_arguments(p)

    # Parsed by `embed_corpus_args` (apache-beam is optional); listed here for --help.
    sub.add_parser("embed-corpus", help=EMBED_CORPUS_HELP, add_help=False)
    return parser


EMBED_CORPUS_HELP = "embed a corpus into Parquet shards with Apache Beam RunInference (needs apache-beam)"


def embed_corpus_args(argv):
    """The arguments of `embed-corpus`: its own flags, and Beam's options (`args.pipeline_args`) passed through.

    `sbert_keras.integrations.beam` (its `COMMANDS` module) is imported here, to add its flags, and only
    for this command: apache-beam is an optional extra.
    """
    try:
        beam = importlib.import_module(COMMANDS["embed-corpus"].partition(":")[0])
    except ImportError as error:  # exit status 2, as for any error the user can fix
        print(f"sbert-keras embed-corpus: error: {error} (pip install sbert_keras[beam])", file=sys.stderr)
        raise SystemExit(2) from None
    parser = argparse.ArgumentParser(
        prog="sbert-keras embed-corpus",
        description=EMBED_CORPUS_HELP + ". Other options (--runner, --direct_num_workers, ...) go to Beam.",
    )
    beam.add_arguments(parser)
    args, unknown = parser.parse_known_args(argv[1:])
    args.pipeline_args, args.fn, args.command = unknown, COMMANDS["embed-corpus"], "embed-corpus"
    return args


# Errors a user can cause (bad file, bad argument, no network, a corrupt
# `.keras`/`.h5` file: h5py raises OSError, zipfile BadZipFile). Anything
# else is a bug and keeps its traceback.
# ImportError: an optional dependency is missing (faiss for `index`).
EXPECTED_ERRORS = (ValueError, TypeError, KeyError, OSError, zipfile.BadZipFile, ImportError)


def error_message(error):
    """One readable line for an expected error."""
    text = str(error).strip()
    if isinstance(error, KeyError):
        return f"missing key {text}"
    if isinstance(error, ConnectionError) or "connection" in type(error).__name__.lower():
        return (
            f"{type(error).__name__}: {text or 'no network'}. "
            "A preset name must be downloaded first (or give a local folder or .keras file)."
        )
    return " ".join(text.split()) or type(error).__name__


def main(argv=None):
    """Runs `sbert-keras` on `argv` (default: `sys.argv[1:]`); returns the exit status (2: an expected error).

    The command's module is imported after `console.quiet_tensorflow`, so
    TensorFlow's start-up lines stay off the console, and `--help` or a
    usage error imports no TensorFlow.

    Args:
        argv: list of str or None. The arguments after the program name.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["embed-corpus"]:
        args = embed_corpus_args(argv)
    else:
        args = build_parser().parse_args(argv)  # --help and usage errors need no TensorFlow
    # Set TensorFlow's logging environment before anything imports it.
    console.quiet_tensorflow()
    try:
        # Keras writes progress to stdout; keep stdout for the JSON result.
        with contextlib.redirect_stdout(sys.stderr):
            result = command_function(args.fn)(args)
    except EXPECTED_ERRORS as e:
        print(f"sbert-keras {args.command}: error: {error_message(e)}", file=sys.stderr)
        return 2
    if args.command == "index" and args.index_command == "search":  # one JSON line per query
        for line in result:
            print(json.dumps(line, ensure_ascii=False))
        return 0
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
