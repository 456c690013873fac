"""`sbert-keras export --format`: a SavedModel (the default) or a sentence-transformers folder.

`--format saved-model` runs `commands.cmd_export` unchanged.
`--format sentence-transformers` loads `--model` and writes it with
`SentenceEncoder.save_to_sentence_transformers` into `--output` (atomically,
`--overwrite` to replace an earlier export). That folder holds the float32
encoder with its prompts and full dimension, so the flags that change what
a SavedModel serves (`--quantize`, `--prompt`, `--prompt-name`,
`--truncate-dim`) are refused with it; `--precision` is not read.
"""

import os

from sbert_keras.checkpoints.st_writer import FOLDER_FILES
from sbert_keras.cli import commands
from sbert_keras.utils import atomic_io as outputs
from sbert_keras.utils.model_files import read_json

FORMATS = ("saved-model", "sentence-transformers")


def cmd_export(args):
    """Runs the export of `args.format`."""
    if getattr(args, "format", "saved-model") != "sentence-transformers":
        return commands.cmd_export(args)
    return export_sentence_transformers(args)


def export_sentence_transformers(args):
    """Writes `--model` as a sentence-transformers folder in `--output`; returns a summary."""
    flags = {"--quantize": args.quantize, "--prompt": args.prompt}
    flags.update({"--prompt-name": args.prompt_name, "--truncate-dim": args.truncate_dim})
    for flag, value in flags.items():
        if value:
            raise ValueError(
                f"{flag} does not apply to --format sentence-transformers: the folder holds the float32 "
                "encoder with its prompts and its full dimension."
            )
    outputs.prepare_dir(args.output, overwrite=args.overwrite, replaceable=FOLDER_FILES)  # before the model loads
    encoder = commands.load_encoder(args.model)[0]
    if getattr(encoder, "loaded_from", None) is None:  # a `.keras` file: the model card names it
        encoder.loaded_from = os.fspath(args.model)
    path = encoder.save_to_sentence_transformers(args.output, overwrite=args.overwrite)
    return {
        "sentence_transformers": path,
        "model_type": read_json(path, "config.json")["model_type"],
        "dim": encoder.embedding_dim,
        "max_seq_length": encoder.sequence_length,
        "files": sorted(os.listdir(path)),
    }
