"""The argparse `type`s of `sbert-keras`'s flags: each turns one flag's text into its value or refuses it.

A refused value is argparse's usage error, `argument --top-k: must be an
integer >= 1, got '0'`, before anything is imported or loaded. Checks that
involve several flags, files or folders are in `sbert_keras.cli.flag_checks`.
"""

import argparse
import math
import sys

from sbert_keras.utils import defaults
from sbert_keras.utils.checks import check_positive_int


def positive_int(text):
    """argparse `type`: an integer >= 1."""
    try:
        return check_positive_int(int(text), "value")
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None


def non_negative_int(text):
    """argparse `type`: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def finite_float(text):
    """argparse `type`: a finite number (`nan` and `inf` are refused)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def non_negative_float(text):
    """argparse `type`: a finite number >= 0 (`train --weight-decay`, `--clip-norm`)."""
    try:
        value = finite_float(text)
    except argparse.ArgumentTypeError:
        value = -1.0
    if value < 0:
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


def training_compute(text):
    """argparse `type` of `train --compute`: a word of `defaults.POLICY_COMPUTES`.

    A Keras policy name (`mixed_bfloat16`) is still accepted: it is replaced
    by its word, with a deprecation note on stderr.
    """
    if text in defaults.DEPRECATED_POLICY_NAMES:
        word = defaults.DEPRECATED_POLICY_NAMES[text]
        print(f"sbert-keras: --compute {text} is deprecated; use --compute {word}.", file=sys.stderr)
        return word
    if text not in defaults.POLICY_COMPUTES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(defaults.POLICY_COMPUTES)}, got {text!r}")
    return text


training_precision = training_compute  # its name in earlier releases


def output_precision(text):
    """argparse `type` of `encode --precision`: a word of `defaults.PRECISIONS` (the output embeddings' dtype).

    A compute word (`auto`, `bfloat16`, `float16`), what `--precision` meant
    in earlier releases, is refused with a pointer to `--compute`.
    """
    if text in defaults.PRECISIONS:
        return text
    if text in defaults.COMPUTES:
        raise argparse.ArgumentTypeError(
            f"{text} names a compute path; use --compute {text} (--precision now quantizes the output "
            f"embeddings as in sentence-transformers: {', '.join(defaults.PRECISIONS)})"
        )
    raise argparse.ArgumentTypeError(f"must be one of {', '.join(defaults.PRECISIONS)}, got {text!r}")


def removed_precision(text):
    """argparse `type` of `train --precision` and `export --precision`: refused, naming `--compute`."""
    raise argparse.ArgumentTypeError(
        f"renamed --compute: use --compute {text} (--precision now names the output quantization of encode)"
    )
