"""The `sbert-keras` command line: its parser, the checks before anything loads, and `main`.

Every command prints its result as JSON on stdout; status lines, progress
and errors go to stderr. An error the user can cause (a bad argument or
file, a missing or corrupt model, no network) prints one line
`sbert-keras <command>: error: ...` and exits with status 2; anything else
keeps its traceback. `main` parses the arguments, checks the flags
(`sbert_keras.cli.flag_checks`), then, with a status line on stderr,
imports TensorFlow with its C++ start-up log lines kept off the console
(`sbert_keras.utils.console`) and the command's module (`COMMANDS`); so
`--help`, `--version` and usage errors import no TensorFlow. The flags of
each command are in `sbert_keras.cli.arguments` (`index`:
`sbert_keras.cli.index_commands`; `embed-corpus`:
`sbert_keras.integrations.beam_arguments`), the commands in
`sbert_keras.cli.commands` (`train` in `sbert_keras.cli.train`).
"""

import argparse
import contextlib
import importlib
import json
import os
import sys
import zipfile

from sbert_keras.cli import arguments
from sbert_keras.cli import index_commands
from sbert_keras.cli.arguments import MINING_FLAGS  # noqa: F401 (importable from here too)
from sbert_keras.cli.arguments import add_prompt_flags  # noqa: F401 (importable from here too)
from sbert_keras.cli.flag_checks import check_args
from sbert_keras.cli.flag_types import dimensions  # noqa: F401 (importable from here too)
from sbert_keras.cli.flag_types import non_negative_float  # noqa: F401 (importable from here too)
from sbert_keras.cli.flag_types import non_negative_int  # noqa: F401 (importable from here too)
from sbert_keras.cli.flag_types import positive_int  # noqa: F401 (importable from here too)
from sbert_keras.cli.flag_types import training_precision  # noqa: F401 (importable from here too)
from sbert_keras.integrations import beam_arguments
from sbert_keras.utils import backends
from sbert_keras.utils import console
from sbert_keras.utils import defaults
from sbert_keras.utils import tf_startup

DESCRIPTION = """\
Sentence embeddings with Keras 3 and KerasHub (Sentence-BERT): fine-tune an
encoder, evaluate it, embed, search and cluster text files, mine hard
negatives, and export a SavedModel that TF Serving feeds raw text.

Each command prints its result as JSON on stdout; status lines, progress
bars and errors go to stderr. An error you can fix is one line,
`sbert-keras COMMAND: error: ...`, with exit status 2.

--model takes a KerasHub preset name, a local folder (a KerasHub preset, a
sentence-transformers model or a `train` output) or a .keras file. Search
hits and index ids are 1-based line numbers of the corpus file.
`sbert-keras COMMAND --help` lists a command's flags and their defaults.
"""

EPILOG = """\
examples:
  sbert-keras encode --model all-MiniLM-L6-v2/ --input corpus.txt --output corpus.npy
  sbert-keras search --model all-MiniLM-L6-v2/ --corpus corpus.txt --embeddings corpus.npy --query "a cat"
  sbert-keras cluster --model all-MiniLM-L6-v2/ --input corpus.txt --method kmeans --num-clusters 5
"""

EMBED_CORPUS_HELP = "embed a corpus into Parquet shards with Apache Beam RunInference (needs apache-beam)"
# Subcommand -> its one-line summary: its line in `sbert-keras --help` and the start of its own `--help`.
SUMMARIES = {
    "train": "fine-tune an encoder with one SBERT objective into a folder holding encoder.keras",
    "evaluate": "print an encoder's metrics on STS, triplet, NLI or retrieval (BEIR) sets as JSON",
    "encode": "embed a text file, one text per line, into a .npy matrix with one row per line",
    "search": "rank the lines of a corpus file for each query by cosine similarity (exact search)",
    "cluster": "group the lines of a text file by meaning (k-means, agglomerative or communities)",
    "export": "write a TensorFlow SavedModel that serves raw strings (TF Serving), or a sentence-transformers folder",
    "mine-negatives": "mine hard negatives for (anchor, positive) pairs into a triplet CSV",
    "index": "build or search an approximate nearest-neighbour index (faiss)",
    "embed-corpus": EMBED_CORPUS_HELP,
}
# Subcommand -> the function that runs it, as `"module:function"`, as a console-script entry point
# names it. `main` imports the module once the arguments are parsed and checked and TensorFlow's logging
# is set up: the command modules import TensorFlow at their top, this module does not.
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
# The optional extra that installs what a command's module imports.
EXTRAS = {"embed-corpus": "beam"}
# Flags added to each subcommand, by `build_parser`.
ADD_ARGUMENTS = {
    "evaluate": arguments.add_evaluate_arguments,
    "encode": arguments.add_encode_arguments,
    "search": arguments.add_search_arguments,
    "cluster": arguments.add_cluster_arguments,
    "export": arguments.add_export_arguments,
    "mine-negatives": arguments.add_mine_negatives_arguments,
}
# `--batch-size`'s help where it is more than "texts per forward pass".
BATCH_HELP = {"export": "texts per forward pass inside the served graph"}
# What a command's `--help` says after its summary.
MORE = {"embed-corpus": "Options it does not know (--runner, --direct_num_workers, ...) go to Beam."}


def command_function(spec):
    """The function that a `"module:function"` string of `COMMANDS` names, its module imported now."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def version():
    """`sbert_keras.__version__`.

    Read from the package object itself: Python imports `sbert_keras` before any of its modules, and
    the layer rule keeps modules from importing the package root back (`docs/architecture.md`).
    """
    return sys.modules["sbert_keras"].__version__


def build_parser():
    """The `sbert-keras` parser; each subcommand sets `fn`, its `COMMANDS` entry.

    `embed-corpus` accepts options it does not know (Beam's own): `main` parses with
    `parse_known_args` and passes them on as `args.pipeline_args`.
    """
    parser = argparse.ArgumentParser(
        prog="sbert-keras", description=DESCRIPTION, epilog=EPILOG, formatter_class=arguments.HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"sbert-keras {version()}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for name, summary in SUMMARIES.items():
        p = arguments.add_command(sub, name, summary, MORE.get(name, ""))
        p.set_defaults(fn=COMMANDS[name])
        if name == "train":
            batch = "training examples per step (with --strategy multi-worker: across all workers)"
            arguments.add_model_flags(p, defaults.PAPER_BATCH_SIZE, batch)
            arguments.add_train_arguments(p)
        elif name in ADD_ARGUMENTS:
            arguments.add_model_flags(p, batch_help=BATCH_HELP.get(name, "texts per forward pass"))
            ADD_ARGUMENTS[name](p)
        elif name == "index":
            index_commands.add_arguments(p)
        else:  # embed-corpus
            beam_arguments.add_arguments(p)
    return parser


def parse_args(argv):
    """The parsed `argv`: a usage error (exit status 2) for unknown options, except Beam's for `embed-corpus`."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command != "embed-corpus":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.pipeline_args = unknown
    return args


def embed_corpus_args(argv):
    """The arguments of `embed-corpus` (`argv[0]`): its own flags, and Beam's options in `args.pipeline_args`."""
    return parse_args(argv)


# Errors a user can cause (bad file, bad argument, no network, a corrupt
# `.keras`/`.h5` file: h5py raises OSError, zipfile BadZipFile). Anything
# else is a bug and keeps its traceback.
# ImportError: an optional dependency is missing (faiss for `index`).
EXPECTED_ERRORS = (ValueError, TypeError, KeyError, OSError, FloatingPointError, zipfile.BadZipFile, ImportError)


# The exit status of a command stopped by Ctrl-C (SIGINT), as shells report it: 128 + 2.
INTERRUPTED = 130


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
    """Runs `sbert-keras` on `argv` (default: `sys.argv[1:]`); returns the exit status.

    2: an expected error, printed as one line; 130 (`INTERRUPTED`): Ctrl-C,
    printed as `sbert-keras <command>: interrupted`, without a traceback.

    The flags are checked first (`check_args`), then TensorFlow is imported
    by `console.quiet_tensorflow`, so its start-up lines stay off the
    console, then the command's module. A status line on stderr covers that
    import, which takes seconds; `--help`, `--version`, usage errors and bad
    flags import no TensorFlow.

    Args:
        argv: list of str or None. The arguments after the program name.
    """
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        check_args(args)
        select_backend(getattr(args, "backend", None), getattr(args, "strategy", "none"))
        function = import_command(args)
        # Keras writes progress to stdout; keep stdout for the JSON result.
        with contextlib.redirect_stdout(sys.stderr):
            result = function(args)
    except EXPECTED_ERRORS as e:
        print(f"sbert-keras {args.command}: error: {error_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: outputs are written atomically, so nothing half-written remains
        print(f"sbert-keras {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    if args.command == "index" and args.index_command == "search":  # one JSON line per query
        for line in result:
            print(json.dumps(line, ensure_ascii=False))
        return 0
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def select_backend(backend, strategy="none"):
    """Sets `KERAS_BACKEND` to `backend` (a `--backend` flag) before Keras is imported; one-line errors.

    Args:
        backend: str or None. `"tensorflow"`, `"jax"` or `"torch"`; None:
            `$KERAS_BACKEND`, else the default (`backends.default_backend`).
        strategy: str. `--strategy`; `"multi-worker"` needs TensorFlow.

    Raises:
        ValueError: Keras already imported with another backend (the backend
            is per process), or multi-worker off TensorFlow.
        ImportError: the backend's library is not installed.

    Example:
    ```python
    select_backend("jax")  # then import the command's module
    ```
    """
    if backend is not None:
        keras = sys.modules.get("keras")
        current = keras.backend.backend() if keras is not None and hasattr(keras, "backend") else None
        if current not in (None, backend):
            raise ValueError(
                f"--backend {backend}: Keras is already imported with the {current!r} backend in this process "
                "(the backend is chosen once per process); run the command in a new process."
            )
        if not backends.installed(backend):
            raise ImportError(f"--backend {backend}: {backend} is not installed (pip install {backend}).")
        os.environ["KERAS_BACKEND"] = backend
    if strategy == "multi-worker" and backends.keras_backend() != "tensorflow":
        raise ValueError(
            f"--strategy multi-worker runs on tf.distribute: it needs --backend tensorflow; the backend is "
            f"{backends.keras_backend()!r}."
        )


def import_command(args):
    """The function of `args.fn`, after TensorFlow's quiet import; a status line while TensorFlow is new.

    On JAX and PyTorch nothing imports TensorFlow here (the status line
    names the backend).

    Raises:
        ImportError: the command's module cannot be imported, naming the extra to install if it has one.
    """
    on_tensorflow = backends.keras_backend() == "tensorflow"
    name = "TensorFlow" if on_tensorflow else f"Keras ({backends.keras_backend()})"
    starting = ("tensorflow" if on_tensorflow else "keras") not in sys.modules
    with console.status(f"sbert-keras: starting {name} ...", f"sbert-keras: {name} started", starting):
        if on_tensorflow:
            tf_startup.enable_xla_cache()  # read once, when TensorFlow loads
            console.quiet_tensorflow()  # sets TensorFlow's logging environment before anything imports it
        try:
            return command_function(args.fn)
        except ImportError as error:
            if args.command not in EXTRAS:
                raise
            raise ImportError(f"{error} (pip install sbert_keras[{EXTRAS[args.command]}])") from None


if __name__ == "__main__":
    sys.exit(main())
