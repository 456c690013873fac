"""`.keras` files: load one with a clear error, or take the encoder out of it.

`keras.saving.load_model` reports a truncated or bit-flipped `.keras` file
as "File not found" or a `BadZipFile` traceback; `load_keras_file` checks
the archive first and names the file as corrupt. `load_keras_encoder`
returns the `SentenceEncoder` of a file holding either an encoder or a
siamese model, refusing a run folder that did not finish. Both are
importable from `sbert_keras.checkpoints.presets` too.

Example:
```python
encoder, model = load_keras_encoder("runs/sts/model.keras")  # model: the siamese model
```
"""

import os
import zipfile

import keras

from sbert_keras.model.preprocessor import check_sequence_length
from sbert_keras.utils.atomic_io import check_complete


class CorruptModelError(ValueError):
    """A `.keras` file that is truncated, bit-flipped or not a `.keras` archive."""


def load_keras_file(path):
    """Loads a `.keras` file, reporting a damaged one as corrupt.

    The archive's CRCs are checked before Keras reads it, so a truncated or
    bit-flipped file is named as such (Keras itself reports "File not found"
    or a `BadZipFile` traceback).

    Args:
        path: str. A `.keras` file saved by `model.save`.

    Returns:
        The loaded Keras model.

    Raises:
        FileNotFoundError: `path` does not exist.
        CorruptModelError: `path` is not a readable `.keras` archive.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such model file: {path}")
    if not zipfile.is_zipfile(path):
        raise CorruptModelError(f"{path} is corrupt: it is not a `.keras` archive (truncated, or not a zip file).")
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise CorruptModelError(f"{path} is corrupt: {e}") from e
    if bad is not None:
        raise CorruptModelError(f"{path} is corrupt: the checksum of {bad!r} does not match.")
    if "config.json" not in names:
        raise CorruptModelError(f"{path} is corrupt: the archive has no `config.json`.")
    try:
        return keras.saving.load_model(path)
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError) as e:
        raise CorruptModelError(f"{path} is corrupt: {type(e).__name__}: {e}") from e


def load_keras_encoder(path, cls, sequence_length=None):
    """The encoder of a `.keras` file (an encoder or a siamese model).

    Args:
        path: str. A `.keras` file.
        cls: type. The encoder class (`SentenceEncoder`); the file must hold
            one, or a model whose `encoder` is one.
        sequence_length: int or None. Overrides the saved maximum length.

    Returns:
        `(encoder, model)`: `model` is the siamese model the encoder came
        from, or `None` when the file holds the encoder itself.

    Raises:
        FileNotFoundError / CorruptModelError: see `load_keras_file`.
        IncompleteOutputError: the file lies in the output folder of a run
            that did not finish (no completion marker).
        ValueError: the file holds another kind of model.
    """
    check_complete(path)
    model = load_keras_file(path)
    encoder = model if isinstance(model, cls) else getattr(model, "encoder", None)
    if not isinstance(encoder, cls):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a {cls.__name__} or a siamese model.")
    if sequence_length is not None:
        check_sequence_length(sequence_length, getattr(encoder.backbone, "max_sequence_length", None))
        encoder.preprocessor.sequence_length = sequence_length
    return encoder, (None if model is encoder else model)
