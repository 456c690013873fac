"""A backbone configuration, checked before anything is built.

A model folder's `config.json` decides how much memory the backbone takes
and how it computes: `hidden_size` 1e9 would allocate for minutes,
`num_hidden_layers` 1,000,000 would hang building layers, 5 heads on a
hidden size of 64 would build another architecture, `layer_norm_eps` -1
would give NaN vectors. `check_backbone_arguments` is the one check every
loader runs on the backbone's arguments (KerasHub names:
`vocabulary_size`, `num_layers`, ...): types, sane bounds, heads that
divide the hidden size, and the shapes of the weights, read from the
`model.safetensors` header (`weight_shapes`) without loading a tensor.
`check_vocabulary_fits` then refuses a tokenizer with ids past the
embedding table.

Example:
```python
arguments = backbone_arguments(config, "folder/config.json", 0, layout, weight_shapes(path))
check_backbone_arguments(arguments, "BertLayoutBackbone")
```
"""

import dataclasses
import math
import os

from safetensors import SafetensorError
from safetensors import safe_open

from sbert_keras.utils.model_files import model_file
from sbert_keras.utils.model_files import read_json

# Hugging Face `config.json` field of each backbone argument.
HF_FIELDS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_position_embeddings",
    "layer_norm_epsilon": "layer_norm_eps",
    "dropout": "hidden_dropout_prob",
}
# The largest value accepted for each size; far above any text encoder
# checkpoint (XLM-R XL: 250k tokens, 36 layers, hidden size 2560).
SIZE_LIMITS = {
    "vocabulary_size": 2**22,
    "num_layers": 512,
    "num_heads": 1024,
    "hidden_dim": 2**16,
    "intermediate_dim": 2**18,
    "max_sequence_length": 2**20,
}
# 2e10 float32 parameters are 80 GB: more than one accelerator holds.
MAX_PARAMETERS = 2 * 10**10
KEY_PREFIXES = ("bert.", "roberta.", "distilbert.", "mpnet.", "model.")
# The JSON files KerasHub reads from a preset folder.
PRESET_FILES = ("config.json", "task.json", "preprocessor.json", "tokenizer.json", "metadata.json")


# LayerNorm tensors of older BERT checkpoints (and of BERT saved by some
# `transformers` 5 releases); `transformers` reads them as weight and bias.
LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}


def strip_prefix(key):
    """A checkpoint tensor name without its model prefix (`bert.` ...), LayerNorm `gamma`/`beta` as `weight`/`bias`."""
    for prefix in KEY_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
            break
    for old, new in LEGACY_SUFFIXES.items():
        if key.endswith(old) and "LayerNorm" in key:
            return key[: -len(old)] + new
    return key


def safetensors_path(folder):
    """The folder's `model.safetensors`, refused when absent or unsafe."""
    path = model_file(folder, "model.safetensors")
    if path is None:
        if os.path.isfile(os.path.join(folder, "pytorch_model.bin")):
            raise ValueError(
                f"{folder} holds only `pytorch_model.bin`; save it as "
                "`model.safetensors` (sentence-transformers does this by default)."
            )
        raise FileNotFoundError(f"No `model.safetensors` in {folder}.")
    return path


def weight_shapes(path):
    """`{name: shape}` of a safetensors file, from its header only (no tensor is read).

    Args:
        path: str. A `.safetensors` file.

    Raises:
        ValueError: the header cannot be parsed; the file is named.
    """
    try:
        with safe_open(path, framework="numpy") as f:
            return {strip_prefix(key): tuple(f.get_slice(key).get_shape()) for key in f.keys()}
    except (SafetensorError, OSError) as e:
        raise ValueError(f"{path} is not a readable safetensors file: {e}") from e


def backbone_arguments(config, source, position_offset, layout, shapes=None, weights_source=None):
    """The backbone's arguments from a Hugging Face `config.json`, checked.

    Args:
        config: dict. The parsed `config.json`.
        source: str. Its path, for error messages.
        position_offset: int. Position rows reserved before the first real
            position (RoBERTa: 2).
        layout: `ConfigLayout`. The model type's field names and tensors.
        shapes: dict or None. The weights' `{tensor: shape}` (`weight_shapes`).
        weights_source: str or None. The weights file, for error messages.

    Returns:
        dict of backbone arguments (without `dtype`).

    Raises:
        ValueError: a missing field, or one `check_backbone_arguments` refuses.
    """
    fields = layout.fields
    missing = [field for name, field in fields.items() if field not in config and name in SIZE_LIMITS]
    if missing:
        raise ValueError(f"{source}: missing {', '.join(missing)}.")
    arguments = dict(layout.defaults)
    for name, field in fields.items():
        arguments[name] = config.get(field, layout.defaults[name]) if name in layout.defaults else config.get(field)
    check_backbone_arguments(arguments, source, fields, shapes, weights_source, position_offset, layout)
    arguments["max_sequence_length"] -= position_offset
    return arguments


def _check_size(arguments, name, field, source):
    value = arguments[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{source}: {field}={value!r} must be a whole number.")
    if not 1 <= value <= SIZE_LIMITS[name]:
        raise ValueError(f"{source}: {field}={value} is outside the accepted range 1..{SIZE_LIMITS[name]:,}.")


def _check_fraction(value, field, source, low, high, closed):
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    inside = number and math.isfinite(value) and low <= value < high and (closed or value > low)
    if not inside:
        interval = f"[{low}, {high})" if closed else f"({low}, {high})"
        raise ValueError(f"{source}: {field}={value!r} must be a finite number in {interval}.")


def check_backbone_arguments(
    arguments, source, fields=None, shapes=None, weights_source="the weights", position_offset=0, layout=None
):
    """Refuses backbone arguments that are absurd or disagree with the weights.

    The one check of a backbone configuration, run by every loader before
    it builds anything.

    Args:
        arguments: dict. Backbone arguments (`vocabulary_size`, `num_layers`,
            `num_heads`, `hidden_dim`, `intermediate_dim`,
            `max_sequence_length`, and optionally `layer_norm_epsilon`,
            `dropout`); those absent are not checked.
        source: str. The file they come from, named in errors.
        fields: dict or None. The file's name of each argument (`HF_FIELDS`
            for `config.json`), for error messages.
        shapes: dict or None. `{tensor: shape}` of the Hugging Face weights
            (`weight_shapes`); `None` when no weights are loaded.
        weights_source: str. The weights file, named in errors.
        position_offset: int. Position rows reserved before the first real
            position (RoBERTa: 2); `max_sequence_length` must exceed it.
        layout: `ConfigLayout` or None. The tensors `shapes` must hold
            (required with `shapes`).

    Raises:
        ValueError: a size that is not a whole number or is out of range,
            heads that do not divide the hidden size, a non-positive or
            non-finite epsilon, more parameters than `MAX_PARAMETERS`, or
            weights whose shapes differ; the file and field are named.
    """
    fields = fields or {}
    name_of = {name: fields.get(name, name) for name in list(SIZE_LIMITS) + ["layer_norm_epsilon", "dropout"]}
    for name in SIZE_LIMITS:
        if name in arguments:
            _check_size(arguments, name, name_of[name], source)
    if "layer_norm_epsilon" in arguments:
        _check_fraction(arguments["layer_norm_epsilon"], name_of["layer_norm_epsilon"], source, 0, 1, closed=False)
    if "dropout" in arguments:
        _check_fraction(arguments["dropout"], name_of["dropout"], source, 0, 1, closed=True)
    if arguments.get("max_sequence_length", position_offset + 1) <= position_offset:
        field = name_of["max_sequence_length"]
        raise ValueError(f"{source}: {field} must be more than {position_offset} for this model type.")
    hidden, heads = arguments.get("hidden_dim"), arguments.get("num_heads")
    if hidden is not None and heads is not None and hidden % heads:
        raise ValueError(
            f"{source}: {name_of['hidden_dim']}={hidden} is not a multiple of {name_of['num_heads']}={heads}; "
            "each attention head takes an equal share of the hidden size."
        )
    if all(name in arguments for name in SIZE_LIMITS):
        _check_parameter_count(arguments, source)
    if shapes is not None:
        check_weight_shapes(arguments, shapes, source, name_of, weights_source or "the weights", layout)


def _check_parameter_count(arguments, source):
    hidden, inner = arguments["hidden_dim"], arguments["intermediate_dim"]
    table = (arguments["vocabulary_size"] + arguments["max_sequence_length"]) * hidden
    count = table + arguments["num_layers"] * (4 * hidden * hidden + 2 * hidden * inner)
    if count > MAX_PARAMETERS:
        raise ValueError(
            f"{source}: these sizes make a backbone of {count:.2e} parameters, more than {MAX_PARAMETERS:.0e}."
        )


def check_weight_shapes(arguments, shapes, source, name_of, weights_source, layout):
    """Refuses weights whose tensors, or layer count, differ from the arguments.

    `arguments["max_sequence_length"]` is the number of position rows in the
    file (`max_position_embeddings`).

    Args:
        arguments: dict. Backbone arguments.
        shapes: dict. `{tensor: shape}` from `weight_shapes`.
        source: str. The configuration file, named in errors.
        name_of: dict. The file's name of each argument.
        weights_source: str. The weights file, named in errors.
        layout: `ConfigLayout`. The tensors expected.
    """
    sizes = ", ".join(f"{name_of[n]}={arguments[n]}" for n in SIZE_LIMITS)
    for key, shape in layout.expected_shapes(arguments).items():
        if key not in shapes:
            raise ValueError(f"{weights_source} has no tensor {key!r}, which {source} ({sizes}) implies.")
        if shapes[key] != shape:
            raise ValueError(
                f"{weights_source}: tensor {key!r} has shape {list(shapes[key])}; "
                f"{source} ({sizes}) implies {list(shape)}."
            )
    prefix = layout.layer_prefix
    layers = {key[len(prefix) :].split(".")[0] for key in shapes if key.startswith(prefix)}
    if len(layers) != arguments["num_layers"]:
        raise ValueError(
            f"{weights_source} holds {len(layers)} transformer layers; {source} says "
            f"{name_of['num_layers']}={arguments['num_layers']}."
        )


@dataclasses.dataclass(frozen=True)
class ConfigLayout:
    """How one Hugging Face model type names a backbone's sizes and tensors.

    Args:
        fields: dict. The `config.json` field of each backbone argument.
        defaults: dict. Arguments whose field may be absent, with their value
            then (also arguments the file never holds, e.g. DistilBERT's
            fixed LayerNorm epsilon).
        expected_shapes: callable. Backbone arguments (with
            `max_sequence_length` counting every position row of the file)
            -> `{tensor: shape}` the weights must hold.
        layer_prefix: str. The tensor name prefix before a block's index.
    """

    fields: dict
    defaults: dict
    expected_shapes: object
    layer_prefix: str


def check_preset_folder(folder):
    """Checks a local KerasHub preset folder before KerasHub reads it.

    Its JSON files go through `model_files.read_json` (regular files of
    bounded size inside the folder), and the backbone arguments in
    `config.json` and `task.json` through `check_backbone_arguments`.

    Args:
        folder: str. A KerasHub preset folder (for example one written by
            `SentenceEncoder.save_to_preset`).

    Raises:
        ValueError: an unsafe or malformed JSON file, or backbone sizes
            that `check_backbone_arguments` refuses; the file is named.
    """
    found = {name: read_json(folder, name) for name in PRESET_FILES}
    backbone = (found["task.json"] or {}).get("config", {})
    backbone = backbone.get("backbone") if isinstance(backbone, dict) else None
    for name, layer in (("config.json", found["config.json"]), ("task.json", backbone)):
        arguments = layer.get("config") if isinstance(layer, dict) else None
        if isinstance(arguments, dict):
            check_backbone_arguments(arguments, os.path.join(folder, name))


def check_vocabulary_fits(tokenizer_size, table_rows, tokenizer_source, table_source):
    """Refuses a tokenizer whose ids run past the token embedding table.

    Args:
        tokenizer_size: int. The tokenizer's vocabulary size (largest id + 1).
        table_rows: int. The rows of the token embedding table.
        tokenizer_source: str. Where the vocabulary was read.
        table_source: str. Where the table's size comes from.

    Raises:
        ValueError: `tokenizer_size > table_rows`, naming both.
    """
    if tokenizer_size > table_rows:
        raise ValueError(
            f"The tokenizer ({tokenizer_source}) has {tokenizer_size:,} tokens, but the token embedding table "
            f"({table_source}) has {table_rows:,} rows: ids {table_rows:,} and above have no embedding."
        )
