"""`sbert-keras export --format`: a SavedModel (the default) or a sentence-transformers folder.

`--format saved-model` runs `commands.cmd_export` unchanged.
`--format sentence-transformers` loads `--model` and writes it with
`SentenceEncoder.save_to_sentence_transformers` into `--output` (atomically,
`--overwrite` to replace an earlier export). That folder holds the float32
encoder with its prompts and full dimension, so the flags that change what
a SavedModel serves (`--quantize`, `--prompt`, `--prompt-name`,
`--truncate-dim`) are refused with it, before TensorFlow is imported
(`flag_checks.check_export`); `--compute` is not read.
"""

import os

from sbert_keras.cli import commands
from sbert_keras.utils.model_files import read_json


def cmd_export(args):
    """Runs the export of `args.format`."""
    if getattr(args, "format", "saved-model") != "sentence-transformers":
        return commands.cmd_export(args)
    return export_sentence_transformers(args)


def export_sentence_transformers(args):
    """Writes `--model` as a sentence-transformers folder in `--output`; returns a summary."""
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
