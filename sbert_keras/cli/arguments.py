"""The flags of each `sbert-keras` subcommand, with the help text and default a user sees in `--help`.

`sbert_keras.cli.parser.build_parser` makes one subparser per command with
`add_command` (its one-line summary is both its line in the top-level list
and its own description) and fills it with the `add_<command>_arguments`
function here; `index`'s flags are in `sbert_keras.cli.index_commands`,
`embed-corpus`'s in
`sbert_keras.integrations.beam_arguments`. Every flag has a help line, and
`HelpFormatter` appends its default. A flag whose default is `None` says in
its help what leaving it out does. Nothing here imports TensorFlow.
"""

import argparse
import textwrap

from sbert_keras.cli.flag_types import dimensions
from sbert_keras.cli.flag_types import finite_float
from sbert_keras.cli.flag_types import non_negative_float
from sbert_keras.cli.flag_types import non_negative_int
from sbert_keras.cli.flag_types import output_precision
from sbert_keras.cli.flag_types import positive_int
from sbert_keras.cli.flag_types import removed_precision
from sbert_keras.cli.flag_types import training_compute
from sbert_keras.utils import backends
from sbert_keras.utils import defaults

# Line width of the descriptions (`HelpFormatter` keeps their line breaks).
DESCRIPTION_WIDTH = 79


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """argparse's help with `(default: ...)` after each flag that has one, and descriptions kept as written.

    Flags whose default is `None` or `False` (a switch that is off) get no
    `(default: ...)`: their help says what leaving them out does.
    """

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_command(subparsers, name, summary, more=""):
    """A subparser `name` whose `--help` starts with `summary` (its line in the parent's list too), then `more`."""
    description = f"{summary[0].upper()}{summary[1:]}. {more}".strip()
    description = textwrap.fill(description, DESCRIPTION_WIDTH, break_on_hyphens=False)
    return subparsers.add_parser(name, help=summary, description=description, formatter_class=HelpFormatter)


def add_model_flags(p, batch_size=defaults.ENCODE_BATCH_SIZE, batch_help="texts per forward pass"):
    """`--model` and `--batch-size`, which every command that loads a model takes."""
    p.add_argument(
        "--model",
        required=True,
        help="KerasHub preset name, local folder (KerasHub preset, sentence-transformers model or "
        "`sbert-keras train` output) or .keras file",
    )
    p.add_argument("--batch-size", type=int, default=batch_size, help=batch_help)


def add_prompt_flags(p, inside=""):
    """`--prompt` / `--prompt-name` (one of them) and `--truncate-dim` of `encode` and `export`."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--prompt", help=f"text prepended {inside}to every input (default: the model's default prompt)")
    group.add_argument(
        "--prompt-name",
        help="name of one of the model's prompts (config_sentence_transformers.json), instead of --prompt",
    )
    p.add_argument(
        "--truncate-dim",
        type=positive_int,
        help="keep the first N dimensions, re-normalised if normalising (default: all)",
    )


def add_compute_flags(p, what, step):
    """`--compute` and `--quantize` of `encode` and `export` (`what` runs the matmuls; `step` is the command's)."""
    p.add_argument(
        "--compute",
        default=defaults.ENCODE_COMPUTE,
        choices=list(defaults.COMPUTES),
        help=f"dtype the matmuls of {what} run in; auto: the fastest that passes the self-check on this machine "
        "(bf16 on CPUs with AVX512-BF16/AMX, float16 on a GPU, else float32)",
    )
    p.add_argument(
        "--quantize",
        choices=["int8"],
        help=f"Keras int8 weight quantization of the model before {step} (default: none)",
    )


def add_removed_precision_flag(p):
    """A hidden `--precision` that names `--compute`, its name in earlier releases."""
    p.add_argument("--precision", type=removed_precision, help=argparse.SUPPRESS)


def add_train_arguments(p):
    p.add_argument(
        "--objective",
        required=True,
        choices=list(defaults.OBJECTIVES),
        help="what the encoder learns; --train says which file each objective reads",
    )
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
    p.add_argument("--dev", help="STS .csv, NLI .jsonl or triplet .csv for dev metrics (default: none)")
    p.add_argument("--epochs", type=int, default=defaults.PAPER_EPOCHS, help="passes over the training data")
    p.add_argument(
        "--lr",
        type=float,
        default=defaults.PAPER_LEARNING_RATE,
        help="peak learning rate, in (0, 1]: linear warmup over the first 10%% of the steps, then linear decay to 0",
    )
    p.add_argument(
        "--weight-decay",
        type=non_negative_float,
        default=defaults.WEIGHT_DECAY,
        help="> 0: AdamW with this weight decay (not on biases and LayerNorm), as sentence-transformers; 0: Adam",
    )
    p.add_argument(
        "--clip-norm",
        type=non_negative_float,
        default=defaults.CLIP_NORM,
        help="clip the gradients to this global norm, as sentence-transformers; 0: no clipping",
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
        "--compute",
        default=defaults.ENCODE_COMPUTE,
        type=training_compute,
        metavar="{" + ",".join(defaults.POLICY_COMPUTES) + "}",
        help="dtype the matmuls of training run in (a Keras mixed policy); auto: float16 on a GPU, "
        "bf16 on CPUs with AVX512-BF16/AMX, else float32",
    )
    add_removed_precision_flag(p)
    p.add_argument(
        "--sequence-length",
        type=int,
        help="tokens kept per text, longer texts are truncated (default: the model's own maximum)",
    )
    p.add_argument("--limit", type=int, help="train on the first N examples of --train (default: all)")
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seeds the batch order, dropout and new heads: the same command repeats its weights on one machine",
    )
    p.add_argument("--quiet", action="store_true", help="one log line per epoch instead of a progress bar")
    p.add_argument(
        "--batching",
        choices=list(defaults.BATCHINGS),
        help="batch composition (default per objective: no_duplicates for contrastive, else bucket)",
    )
    p.add_argument(
        "--strategy",
        choices=["none", "multi-worker"],
        default="none",
        help="multi-worker: one worker of a tf.distribute.MultiWorkerMirroredStrategy cluster described by TF_CONFIG "
        "(run the same command on every worker; --batch-size is global; worker 0 writes --output)",
    )
    p.add_argument(
        "--backend",
        choices=list(backends.BACKENDS),
        help="Keras backend of the run (default: $KERAS_BACKEND, else TensorFlow when installed); set before Keras "
        "is imported. JAX and PyTorch tokenise on the host and need no TensorFlow; multi-worker needs tensorflow",
    )


def add_evaluate_arguments(p):
    p.add_argument(
        "--sts",
        help="STS Benchmark file (tab-separated sts-*.csv): correlations of the cosine similarities with the "
        "gold scores",
    )
    p.add_argument("--triplets", help="triplet .csv or NLI .jsonl: how often the anchor is closer to the positive")
    p.add_argument("--nli", help="NLI .jsonl: accuracy of a classification model (`train --objective classification`)")
    p.add_argument("--ir", help="information retrieval set, a folder in the BEIR layout")
    p.add_argument("--split", default="test", help="qrels split of --ir (qrels/<split>.tsv)")


def add_encode_arguments(p):
    p.add_argument(
        "--input",
        required=True,
        help="UTF-8 text file, one text per line; row i of the output is line i+1 (a blank line gets a row too)",
    )
    p.add_argument("--output", required=True, help=".npy file (.npy is added if missing)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output (refused otherwise)")
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        help="L2-normalise the vectors, or not (default: what the model's configuration says)",
    )
    add_compute_flags(p, "encoding", "encoding")
    p.add_argument(
        "--precision",
        default=defaults.ENCODE_PRECISION,
        type=output_precision,
        metavar="{" + ",".join(defaults.PRECISIONS) + "}",
        help="dtype of the saved embeddings, as sentence-transformers' encode(precision=): float32, or "
        "quantized: int8/uint8 (buckets from these texts' ranges), binary/ubinary (8 dimensions a byte)",
    )
    add_prompt_flags(p)


def add_search_arguments(p):
    p.add_argument(
        "--corpus",
        required=True,
        help="UTF-8 text file, one document per line; a hit's id is its 1-based line number (blank lines skipped)",
    )
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", action="append", help="a query; repeat the flag for several")
    group.add_argument("--queries", help="UTF-8 text file of queries, one per line (blank lines skipped)")
    p.add_argument("--top-k", type=positive_int, default=defaults.SEARCH_TOP_K, help="hits per query")
    p.add_argument(
        "--embeddings",
        metavar="FILE.npy",
        help="the corpus vectors written by `sbert-keras encode --input CORPUS` (one row per line of --corpus), "
        "so the corpus is not encoded again; --model, the model that wrote them, encodes the queries "
        "(default: encode --corpus now)",
    )


def add_cluster_arguments(p):
    p.add_argument("--input", required=True, help="UTF-8 text file, one text per line (blank lines skipped)")
    p.add_argument(
        "--method",
        default="kmeans",
        choices=list(defaults.CLUSTER_METHODS),
        help="kmeans: --num-clusters groups (k-means on normalised vectors); agglomerative: average linkage "
        "on cosine distances, stopped at --num-clusters groups or at the distance --threshold; community: "
        f"groups of at least {defaults.COMMUNITY_MIN_SIZE} texts within the similarity --threshold of a "
        "centre (the others are reported as unclustered)",
    )
    p.add_argument(
        "--num-clusters",
        type=positive_int,
        help="number of clusters: required with kmeans; with agglomerative, this or --threshold; not with community",
    )
    p.add_argument(
        "--threshold",
        type=finite_float,
        help="agglomerative: a cosine DISTANCE (1 - cos, 0 to 2), groups closer than this are merged (give this "
        "or --num-clusters); community: a cosine SIMILARITY (-1 to 1), a member's least similarity to its "
        f"community's centre (default: {defaults.COMMUNITY_THRESHOLD}); not with kmeans",
    )


EXPORT_FORMATS = ("saved-model", "sentence-transformers")


def add_export_arguments(p):
    p.add_argument(
        "--format",
        default="saved-model",
        choices=EXPORT_FORMATS,
        help="saved-model: a TensorFlow SavedModel serving raw strings; sentence-transformers: a folder that "
        "sentence-transformers and Hugging Face transformers load (float32, with the model's prompts)",
    )
    p.add_argument(
        "--output",
        required=True,
        help="SavedModel folder, e.g. serving/sbert/1 for TF Serving, or the sentence-transformers folder "
        "(appears when complete)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export in --output (refused otherwise)")
    add_compute_flags(p, "the served graph", "exporting")
    add_removed_precision_flag(p)
    add_prompt_flags(p, inside="in the graph ")


# `mine-negatives` flag -> (type, default, help); each goes to the `mine_hard_negatives`
# argument of its name (dest `mine_<name>`, collected by `cmd_mine_negatives`).
MINING_FLAGS = {
    "--num-negatives": (positive_int, defaults.MINING_NUM_NEGATIVES, "negatives per anchor"),
    "--range-min": (non_negative_int, 0, "skip the candidates ranked before this (0-based)"),
    "--range-max": (
        positive_int,
        None,
        "use no candidate ranked from this on (default: --range-min + --num-negatives + the most positives "
        "of one anchor; 10 x --num-negatives instead with --margin, --relative-margin or --max-score)",
    ),
    "--margin": (finite_float, None, "keep candidates scoring <= positive score - margin (default: no margin)"),
    "--relative-margin": (
        finite_float,
        None,
        "keep candidates scoring <= positive score - |positive score| * relative margin (default: no margin)",
    ),
    "--max-score": (finite_float, None, "drop candidates scoring above this (default: no limit)"),
    "--min-score": (finite_float, None, "drop candidates scoring below this (default: no limit)"),
    "--seed": (non_negative_int, None, "seed of --sampling random (default: a new random seed each run)"),
}


def add_mine_negatives_arguments(p):
    p.add_argument("--pairs", required=True, help="CSV with anchor,positive (or query,positive) columns")
    p.add_argument(
        "--corpus",
        help="UTF-8 text file, one candidate negative per line, besides the positives (default: the positives only)",
    )
    p.add_argument("--output", required=True, help="triplet CSV (anchor,positive,negative)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output (refused otherwise)")
    for flag, (kind, default, text) in MINING_FLAGS.items():
        name = flag[2:].replace("-", "_")
        p.add_argument(flag, type=kind, dest="mine_" + name, metavar=name.upper(), default=default, help=text)
    p.add_argument(
        "--sampling",
        choices=list(defaults.MINING_SAMPLING_STRATEGIES),
        dest="mine_sampling_strategy",
        default=defaults.MINING_SAMPLING_STRATEGIES[0],
        help="top: the best candidates of the rank window; random: a sample of it",
    )
