"""The checks of `sbert-keras`'s flags that argparse cannot make, run before TensorFlow is imported.

argparse checks each flag's own type (`sbert_keras.cli.flag_types`);
`check_args` checks the rest before `main` imports TensorFlow and before any
model loads, so a bad command line fails in a moment instead of after the
import and the load: counts given as plain integers (`--batch-size`,
`--epochs`), flags that need or exclude each other (`cluster --method
kmeans` needs `--num-clusters`), ranges that depend on another flag
(`--threshold` is a distance for agglomerative clustering and a similarity
for community detection), input files and folders that must exist, and
outputs that must be writable and must not be replaced without
`--overwrite`. Each failure is a `ValueError` whose text starts with the
flag, printed by `main` as one line `sbert-keras <command>: error: ...`.

What can only be known from a file's contents (a line that is not UTF-8,
a CSV without the right columns) or from the model (its dimension, its
prompts) is checked by the command, still before the model's weights are
used. Nothing here imports TensorFlow. A command that needs TensorFlow
(`export --format saved-model`, `embed-corpus`) is refused here, in one
line naming the install, when Keras runs on another backend or TensorFlow
is absent.
"""

import math
import os

from sbert_keras.retrieval.index_files import check_target
from sbert_keras.utils import atomic_io
from sbert_keras.utils import backends
from sbert_keras.utils.checks import check_export_compute
from sbert_keras.utils.defaults import MAX_LEARNING_RATE


def check_flag(value, flag, minimum=1):
    """Raises a `ValueError` naming `flag` unless `value` is an int >= `minimum`; returns `value`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{flag} must be an integer >= {minimum}; received {value!r}.")
    return value


def check_input(path, flag, folder=False):
    """Raises a `ValueError` naming `flag` unless `path` is an existing file (a folder if `folder`)."""
    if path is None:
        return
    kind = "folder" if folder else "file"
    if not os.path.exists(path):
        raise ValueError(f"{flag} {path}: no such {kind}.")
    if os.path.isdir(path) != folder:
        raise ValueError(f"{flag} {path} is a {'file' if folder else 'folder'}; give a {kind}.")


def check_new_file(path, overwrite, flag="--output", create_parents=True):
    """The absolute `path` of an output file, or a `ValueError` naming `flag`: unwritable, a folder, or an
    existing file without `--overwrite`."""
    path = atomic_io.check_writable(path, flag, create_parents=create_parents)
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a folder; give a file name.")
    if os.path.exists(path) and not overwrite:
        raise ValueError(f"{flag} {path} already exists; pass --overwrite to replace it.")
    return path


def check_train(args):
    for flag, value in (("--epochs", args.epochs), ("--save-every", args.save_every)):
        check_flag(value, flag)
    if not math.isfinite(args.lr) or not 0 < args.lr <= MAX_LEARNING_RATE:
        raise ValueError(f"--lr must be a number in (0, {MAX_LEARNING_RATE:g}]; received {args.lr!r}.")
    for flag, value in (("--limit", args.limit), ("--sequence-length", args.sequence_length)):
        if value is not None:
            check_flag(value, flag)
    objective = args.objective
    if args.matryoshka_dims and objective == "angle":
        raise ValueError(
            "--matryoshka-dims does not apply to --objective angle (AnglE's loss is on the full embeddings); "
            "use cosent or regression."
        )
    for flag, value in (("--hard-negatives", args.hard_negatives), ("--mini-batch-size", args.mini_batch_size)):
        if value and objective != "contrastive":
            raise ValueError(f"{flag} applies to --objective contrastive only; received --objective {objective}.")
    if objective == "distill" and not args.teacher:
        raise ValueError("--objective distill needs --teacher MODEL (the model whose embeddings the student learns).")
    if args.teacher and objective != "distill":
        raise ValueError(f"--teacher applies to --objective distill only; received --objective {objective}.")
    check_input(args.train, "--train")
    check_input(args.dev, "--dev")


def check_evaluate(args):
    if not (args.sts or args.triplets or args.nli or args.ir):
        raise ValueError("give at least one of --sts, --triplets, --nli, --ir.")
    for flag in ("--sts", "--triplets", "--nli"):
        check_input(getattr(args, flag[2:]), flag)
    check_input(args.ir, "--ir", folder=True)


def check_encode(args):
    check_input(args.input, "--input")
    check_new_file(atomic_io.npy_path(args.output), args.overwrite, create_parents=False)


def check_search(args):
    check_input(args.corpus, "--corpus")
    check_input(args.queries, "--queries")
    check_input(args.embeddings, "--embeddings")


def check_cluster(args):
    check_input(args.input, "--input")
    method, num_clusters, threshold = args.method, args.num_clusters, args.threshold
    if method == "kmeans":
        if num_clusters is None:
            raise ValueError("--num-clusters is required with --method kmeans.")
        if threshold is not None:
            raise ValueError("--threshold does not apply to --method kmeans; give --num-clusters only.")
    elif method == "agglomerative":
        if (num_clusters is None) == (threshold is None):
            raise ValueError(
                "--method agglomerative needs exactly one of --num-clusters or --threshold "
                "(a cosine distance, 1 - cos, between 0 and 2)."
            )
        if threshold is not None and not 0 <= threshold <= 2:
            raise ValueError(
                "--threshold is a cosine distance (1 - cos) with --method agglomerative, between 0 and 2; "
                f"received {threshold}."
            )
    else:  # community
        if num_clusters is not None:
            raise ValueError(
                "--num-clusters does not apply to --method community: --threshold decides how many communities "
                "there are."
            )
        if threshold is not None and not -1 <= threshold <= 1:
            raise ValueError(
                f"--threshold is a cosine similarity with --method community, between -1 and 1; received {threshold}."
            )


def check_export(args):
    if args.format != "sentence-transformers":
        backends.require_tensorflow("sbert-keras export --format saved-model")
        check_export_compute(args.compute, "--compute")
    replaceable = None
    if args.format == "sentence-transformers":
        flags = {"--quantize": args.quantize, "--prompt": args.prompt}
        flags.update({"--prompt-name": args.prompt_name, "--truncate-dim": args.truncate_dim})
        for flag, value in flags.items():
            if value:
                raise ValueError(
                    f"{flag} does not apply to --format sentence-transformers: the folder holds the float32 "
                    "encoder with its prompts and its full dimension."
                )
        replaceable = atomic_io.SENTENCE_TRANSFORMERS_FILES
    atomic_io.prepare_dir(args.output, overwrite=args.overwrite, replaceable=replaceable)


def check_mine_negatives(args):
    check_input(args.pairs, "--pairs")
    check_input(args.corpus, "--corpus")
    check_new_file(args.output, args.overwrite)
    range_min, range_max, wanted = args.mine_range_min, args.mine_range_max, args.mine_num_negatives
    if range_max is not None and range_min >= range_max:
        raise ValueError(f"--range-min ({range_min}) must be smaller than --range-max ({range_max}).")
    if range_max is not None and wanted > range_max - range_min:
        raise ValueError(
            f"--num-negatives {wanted} is more than the {range_max - range_min} ranks from --range-min {range_min} "
            f"to --range-max {range_max}; lower --num-negatives or widen the range."
        )


def check_index(args):
    if args.index_command == "build":
        check_input(args.embeddings, "--embeddings", folder=not str(args.embeddings).endswith(".npy"))
        check_target(atomic_io.check_writable(args.output), args.overwrite, flag="--output")
    else:
        check_input(args.index, "--index", folder=True)
        check_input(args.queries, "--queries")


def check_embed_corpus(args):
    backends.require_tensorflow("sbert-keras embed-corpus (Apache Beam)")
    for flag, value in (("--beam-batch-size", args.beam_batch_size), ("--worker-threads", args.worker_threads)):
        if value is not None:
            check_flag(value, flag)


CHECKS = {
    "train": check_train,
    "evaluate": check_evaluate,
    "encode": check_encode,
    "search": check_search,
    "cluster": check_cluster,
    "export": check_export,
    "mine-negatives": check_mine_negatives,
    "index": check_index,
    "embed-corpus": check_embed_corpus,
}


def check_args(args):
    """Raises a `ValueError` naming the flag for the first bad flag of the parsed `args`; imports nothing.

    Args:
        args: argparse.Namespace. `sbert_keras.cli.parser.build_parser()`'s result for one command.
    """
    if getattr(args, "batch_size", None) is not None:
        check_flag(args.batch_size, "--batch-size")
    CHECKS[args.command](args)
