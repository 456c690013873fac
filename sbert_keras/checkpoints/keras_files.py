"""`.keras` files: load one with a clear error, or take the encoder out of it.

`keras.saving.load_model` reports a truncated or bit-flipped `.keras` file
as "File not found" or a `BadZipFile` traceback, builds whatever sizes its
`config.json` names (a backbone of 1,000,000 layers builds for minutes),
and restores an optimizer whose variables it then skips with a warning.
So `load_keras_file` checks the archive itself first, in this order, each
step bounded before the next reads anything:

1. the members' declared sizes, compression and compression ratios (no
   member is inflated yet: a 3 KB zip bomb is refused, not decompressed);
2. the CRC of every member (a damaged file is named as corrupt);
3. the backbone sizes in `config.json`, through the same
   `model.backbone_config.check_backbone_arguments` that bounds a Hugging
   Face `config.json`, and the preprocessor's length against them;

then hands the file to Keras without its training configuration
(`compile=False` by default: no optimizer state is restored, and Keras'
warning that it skips the saved optimizer's variables is not shown). `load_keras_encoder` returns the
`SentenceEncoder` of a file holding either an encoder or a siamese model,
refusing a run folder that did not finish. Both are importable from
`sbert_keras.checkpoints.presets` too.

Example:
```python
encoder, model = load_keras_encoder("runs/sts/model.keras")  # model: the siamese model
```
"""

import json
import os
import warnings
import zipfile

import keras

from sbert_keras.model.backbone_config import SIZE_LIMITS
from sbert_keras.model.backbone_config import check_backbone_arguments
from sbert_keras.model.preprocessor import check_sequence_length
from sbert_keras.utils.atomic_io import check_complete
from sbert_keras.utils.model_files import JSON_LIMIT

# Keras writes every member uncompressed (ratio 1); DEFLATE is accepted for
# files zipped again by hand. bzip2 and LZMA are refused: Python's zipfile
# inflates them without a bound on what one read produces.
COMPRESSIONS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
# A member above the floor may inflate to at most `MAX_EXPANSION` times what
# it stores; all members together to at most `MAX_EXPANSION` times the file
# (or the floor of the archive, for small files).
MAX_EXPANSION = 100
MEMBER_EXPANSION_FLOOR = 2**20
ARCHIVE_EXPANSION_FLOOR = 64 * 2**20
MAX_MEMBERS = 10_000
JSON_MEMBERS = ("config.json", "metadata.json")
# Sizes of layers outside the backbone arguments that `check_backbone_arguments`
# bounds: `Dense` widths (projections), embedding tables, MPNet's relative position buckets.
OTHER_SIZE_LIMITS = {
    "units": SIZE_LIMITS["intermediate_dim"],
    "input_dim": SIZE_LIMITS["vocabulary_size"],
    "output_dim": SIZE_LIMITS["hidden_dim"],
    "num_buckets": 2**16,
    "max_distance": SIZE_LIMITS["max_sequence_length"],
}


class CorruptModelError(ValueError):
    """A `.keras` file that is truncated, bit-flipped or not a `.keras` archive."""


def _size(count):
    return f"{count:,} bytes"


def check_archive_sizes(archive, path):
    """Refuses members that would inflate past their bounds, before any is read.

    Only the sizes each member declares in the zip directory are read.
    Python's zipfile never yields more than a member's declared size, so
    bounding the declared sizes bounds what any later read inflates.

    Args:
        archive: zipfile.ZipFile. The opened `.keras` file.
        path: str. Its path, named in errors.

    Raises:
        CorruptModelError: too many members, a compression other than
            stored or DEFLATE, a JSON member over `JSON_LIMIT`, or a member
            (or the archive) inflating more than `MAX_EXPANSION` times what
            it stores; the member and its sizes are named.
    """
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise CorruptModelError(
            f"{path} is not a `.keras` file: it holds {len(members):,} members (at most {MAX_MEMBERS:,})."
        )
    total = 0
    for info in members:
        name, size, stored = info.filename, info.file_size, info.compress_size
        if info.compress_type not in COMPRESSIONS:
            raise CorruptModelError(
                f"{path}: member {name!r} uses compression method {info.compress_type}; "
                f"a `.keras` file holds only {' or '.join(COMPRESSIONS.values())} members."
            )
        if name in JSON_MEMBERS and size > JSON_LIMIT:
            raise CorruptModelError(f"{path}: member {name!r} declares {_size(size)}, more than {_size(JSON_LIMIT)}.")
        if size > MEMBER_EXPANSION_FLOOR and size > MAX_EXPANSION * stored:
            raise CorruptModelError(
                f"{path}: member {name!r} declares {_size(size)} from {_size(stored)} on disk, a compression "
                f"ratio above {MAX_EXPANSION}; refused as a decompression bomb."
            )
        total += size
    on_disk = os.path.getsize(path)
    if total > max(ARCHIVE_EXPANSION_FLOOR, MAX_EXPANSION * on_disk):
        raise CorruptModelError(
            f"{path}: its members declare {_size(total)} from a file of {_size(on_disk)}, more than "
            f"{MAX_EXPANSION} times its size; refused as a decompression bomb."
        )


def _read_config(archive, path):
    with archive.open("config.json") as f:
        text = f.read(JSON_LIMIT + 1)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CorruptModelError(f"{path}: config.json is not valid JSON ({type(e).__name__}: {e}).") from None


def _layer_configs(node):
    """Every `{"class_name": ..., "config": {...}}` in a serialised Keras config, depth first."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("config"), dict) and "class_name" in node:
                yield node["class_name"], node["config"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def check_keras_config(config, source):
    """Refuses a `.keras` `config.json` whose sizes are absurd, before Keras builds anything.

    Every serialised layer holding backbone arguments (`num_layers`,
    `hidden_dim`, ...) goes through `check_backbone_arguments`, as a Hugging
    Face `config.json` does; `Dense` widths and MPNet's position buckets
    are bounded too, and an encoder's preprocessor length must fit its
    backbone's position embeddings.

    Args:
        config: dict. The parsed `config.json` of a `.keras` file.
        source: str. Where it was read (`"model.keras: config.json"`), named in errors.

    Raises:
        ValueError: a size out of range, heads that do not divide the hidden
            size, or a sequence length the backbone cannot take; the file,
            the layer and the field are named.

    Example:
    ```python
    check_keras_config({"class_name": "Dense", "config": {"units": 10**9}}, "m.keras: config.json")  # ValueError
    ```
    """
    for class_name, layer in _layer_configs(config):
        where = f"{source} ({class_name} {layer.get('name', '')!r})"
        arguments = {
            name: layer[name] for name in list(SIZE_LIMITS) + ["layer_norm_epsilon", "dropout"] if name in layer
        }
        if any(name in layer for name in SIZE_LIMITS):
            check_backbone_arguments(arguments, where)
        for name, limit in OTHER_SIZE_LIMITS.items():
            value = layer.get(name)
            if name in layer and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit):
                raise ValueError(f"{where}: {name}={value!r} must be a whole number in 1..{limit:,}.")
        backbone, preprocessor = layer.get("backbone"), layer.get("preprocessor")
        if isinstance(backbone, dict) and isinstance(preprocessor, dict):
            length = (preprocessor.get("config") or {}).get("sequence_length")
            positions = (backbone.get("config") or {}).get("max_sequence_length")
            try:
                check_sequence_length(length, positions if isinstance(positions, int) else None)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: preprocessor {e}") from None


def load_keras_file(path, compile=False):
    """Loads a `.keras` file, refusing a damaged or hostile one with a one-line error.

    The archive's declared sizes, its CRCs and the sizes in its
    `config.json` are checked before Keras reads it (see the module
    docstring), so a truncated or bit-flipped file is named as corrupt
    (Keras itself reports "File not found" or a `BadZipFile` traceback), a
    zip bomb is refused without being inflated, and a configuration naming
    absurd sizes is refused before anything is built.

    Args:
        path: str. A `.keras` file saved by `model.save`.
        compile: bool. Also restore the training configuration (optimizer,
            loss) saved with the model. `False` (the default) loads the
            model for inference; training recompiles it anyway.

    Returns:
        The loaded Keras model.

    Raises:
        FileNotFoundError: `path` does not exist.
        CorruptModelError: `path` is not a readable `.keras` archive, or
            one whose members would inflate past their bounds.
        ValueError: its `config.json` names sizes out of range.

    Example:
    ```python
    model = load_keras_file("runs/sts/model.keras")
    ```
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such model file: {path}")
    if not zipfile.is_zipfile(path):
        raise CorruptModelError(f"{path} is corrupt: it is not a `.keras` archive (truncated, or not a zip file).")
    try:
        with zipfile.ZipFile(path) as archive:
            check_archive_sizes(archive, path)
            if "config.json" not in archive.namelist():
                raise CorruptModelError(f"{path} is corrupt: the archive has no `config.json`.")
            bad = archive.testzip()  # bounded by the checks above: stored or DEFLATE, declared sizes
            config = _read_config(archive, path) if bad is None else None
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
        raise CorruptModelError(f"{path} is corrupt: {e}") from e
    if bad is not None:
        raise CorruptModelError(f"{path} is corrupt: the checksum of {bad!r} does not match.")
    check_keras_config(config, f"{path}: config.json")
    try:
        with warnings.catch_warnings():
            if not compile:
                # KerasHub compiles every task when it is built; that fresh optimizer
                # cannot take the saved one's variables, which `compile=False` declined.
                warnings.filterwarnings(
                    "ignore", message="Skipping variable loading for optimizer", category=UserWarning
                )
            return keras.saving.load_model(path, compile=compile)
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
