"""The names of the files and folders the package writes, and which of them an overwrite may replace.

`atomic_io` decides with them whether a target holds an earlier result
(`prepare_dir`) and what `overwrite=True` may replace; the command line
checks the same before a model loads (`cli.flag_checks`).
"""

import os

MARKER = "complete.json"
PARTIAL_SUFFIX = ".partial"
# The files by which a folder is recognised as an sbert_keras training output.
RUN_FILES = ("encoder.keras", "model.keras", "metrics.json")
# A training run's step log and the note that lists its files (its folder's other files).
TRAINING_LOG, RUN_README = "training_log.csv", "README.md"
# What makes a working folder worth keeping: a training backup's state.
RESUMABLE = os.path.join("backup", "state.json")
# What a folder may hold to be replaced with `overwrite` (our outputs, a SavedModel).
REPLACEABLE = {
    *RUN_FILES,
    TRAINING_LOG,
    RUN_README,
    MARKER,
    "backup",
    "saved_model.pb",
    "fingerprint.pb",
    "variables",
    "assets",
    "keras_metadata.pb",
}
# The files of a sentence-transformers folder (`save_to_sentence_transformers`,
# `sbert-keras export --format sentence-transformers`): an earlier one is replaced with overwrite.
SENTENCE_TRANSFORMERS_FILES = {
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "modules.json",
    "config_sentence_transformers.json",
    "README.md",
    "1_Pooling",
    *(f"{i}_{module}" for i in range(2, 18) for module in ("Dense", "Normalize")),
}
