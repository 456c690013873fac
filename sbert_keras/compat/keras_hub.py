"""The one place that reads KerasHub's (and Keras') private attributes and modules.

Why this exists: `keras_hub.layers.TransformerEncoder` keeps its sublayers in
private attributes (`_self_attention_layer`, `_feedforward_intermediate_dense`,
...) and exposes no public accessor. The fused inference graph
(`sbert_keras.runtime.fused_graph`) and the checkpoint converter (`sbert_keras.checkpoints.presets`)
need those sublayers' weights, so every such read goes through the functions
below. They were checked against **keras-hub 0.32.0** (Keras 3.15). When an
upgrade moves an attribute, `block_parts` raises an `AttributeError` naming
it (and `tests/runtime/test_engine.py` fails on it) instead of a fast path
silently computing something else.

`load_saved_task` reads a `task.json` written by KerasHub's
`Task.save_to_preset` through KerasHub's private preset loader
(`keras_hub.src.utils.preset_utils`). KerasHub's public `Task.from_preset`
cannot load a `SentenceEncoder`: it looks up a task subclass by
`backbone_cls` ("Unable to find a subclass"), and a sentence encoder takes
any text backbone. The names it reads are listed in `PRESET_ATTRIBUTES`;
when one moves, `load_saved_task` raises an `AttributeError` naming it.

`preprocessing_function` is KerasHub's private decorator of a tokenizer's
`tokenize` (`keras_hub.src.utils.tensor_utils`): it runs the wrapped
TensorFlow code on the CPU and converts its inputs and outputs as every
KerasHub tokenizer does (Python lists for ragged outputs outside a graph),
so `model.wordpiece`'s tokenizers answer like KerasHub's own.

Example:
```python
parts = block_parts(backbone.transformer_layers[0])
parts.query.kernel, parts.intermediate.activation, parts.attention_norm.epsilon
```
"""

import collections

import keras
import keras_hub
from keras_hub.src.utils import preset_utils
from keras_hub.src.utils import tensor_utils

CHECKED_KERAS_HUB_VERSION = "0.32.0"

# Private attribute paths of a `TransformerEncoder` block, by role.
BLOCK_ATTRIBUTES = {
    "attention": ("_self_attention_layer",),
    "query": ("_self_attention_layer", "_query_dense"),
    "key": ("_self_attention_layer", "_key_dense"),
    "value": ("_self_attention_layer", "_value_dense"),
    "attention_output": ("_self_attention_layer", "_output_dense"),
    "attention_norm": ("_self_attention_layer_norm",),
    "attention_dropout": ("_self_attention_dropout",),
    "intermediate": ("_feedforward_intermediate_dense",),
    "output": ("_feedforward_output_dense",),
    "feedforward_norm": ("_feedforward_layer_norm",),
    "feedforward_dropout": ("_feedforward_dropout",),
}

BlockParts = collections.namedtuple("BlockParts", list(BLOCK_ATTRIBUTES))


def _read(layer, path):
    obj = layer
    for i, name in enumerate(path):
        if not hasattr(obj, name):
            owner = ".".join(path[:i]) or type(layer).__name__
            raise AttributeError(
                f"{type(layer).__name__}.{'.'.join(path)}: `{owner}` has no attribute "
                f"{name!r} (installed keras-hub {keras_hub.__version__}; sbert_keras reads "
                f"it as checked against keras-hub {CHECKED_KERAS_HUB_VERSION}). "
                "Update sbert_keras/compat/keras_hub.py."
            )
        obj = getattr(obj, name)
    return obj


def block_parts(block):
    """The sublayers of a KerasHub `TransformerEncoder`, by role.

    Args:
        block: keras_hub.layers.TransformerEncoder. A built block.

    Returns:
        A `BlockParts` namedtuple: `attention` (the `MultiHeadAttention`),
        `query`, `key`, `value`, `attention_output` (its `EinsumDense`
        layers), `attention_norm`, `attention_dropout`, `intermediate`,
        `output` (the feed-forward `Dense` layers), `feedforward_norm`,
        `feedforward_dropout`.

    Raises:
        AttributeError: an attribute moved; the message names it.
    """
    return BlockParts(**{role: _read(block, path) for role, path in BLOCK_ATTRIBUTES.items()})


# What `load_saved_task` reads of `keras_hub.src.utils.preset_utils`.
PRESET_ATTRIBUTES = (
    ("TASK_CONFIG_FILE",),
    ("check_file_exists",),
    ("load_json",),
    ("get_preset_loader",),
    ("KerasPresetLoader",),
    ("KerasPresetLoader", "load_task"),
)


def _preset_utils():
    """`preset_utils` with every name of `PRESET_ATTRIBUTES` checked."""
    for path in PRESET_ATTRIBUTES:
        obj = preset_utils
        for i, name in enumerate(path):
            if not hasattr(obj, name):
                raise AttributeError(
                    f"keras_hub.src.utils.preset_utils.{'.'.join(path[: i + 1])} is missing "
                    f"(installed keras-hub {keras_hub.__version__}; sbert_keras reads it as checked "
                    f"against keras-hub {CHECKED_KERAS_HUB_VERSION}). Update sbert_keras/compat/keras_hub.py."
                )
            obj = getattr(obj, name)
    return preset_utils


def load_saved_task(cls, preset, load_weights=True, **kwargs):
    """The `cls` saved in a KerasHub preset folder by `save_to_preset`, or `None`.

    Reads the folder's `task.json` (the task's whole config: backbone,
    preprocessor and the task's own arguments), then the backbone weights
    and the task-only weights (e.g. `Dense` projections), as KerasHub's
    `Task.from_preset` does for its own tasks.

    Args:
        cls: the task class (e.g. `SentenceEncoder`).
        preset: str. A local KerasHub preset folder.
        load_weights: bool. `False` keeps the freshly initialised weights.
        **kwargs: override the saved task arguments (e.g. `pooling`);
            `dtype` goes to the backbone.

    Returns:
        An instance of `cls`, or `None` when the folder has no `task.json`
        for `cls` (a backbone-only preset, or another task).

    Raises:
        AttributeError: keras-hub moved a name this reads; the message names it.
    """
    utils = _preset_utils()
    if not utils.check_file_exists(preset, utils.TASK_CONFIG_FILE):
        return None
    config = utils.load_json(preset, utils.TASK_CONFIG_FILE)
    registered = keras.saving.get_registered_object(config.get("registered_name", ""))
    if not (isinstance(registered, type) and issubclass(registered, cls)):
        return None
    loader = utils.get_preset_loader(preset)
    if not isinstance(loader, utils.KerasPresetLoader):
        return None
    return loader.load_task(cls, load_weights, True, **kwargs)


def preprocessing_function(function):
    """KerasHub's wrapper of a tokenizer method (`tensor_utils.preprocessing_function`).

    Args:
        function: a method `(self, inputs)` built from TensorFlow ops.

    Raises:
        AttributeError: keras-hub moved the decorator; the message names it.
    """
    if not hasattr(tensor_utils, "preprocessing_function"):
        raise AttributeError(
            "keras_hub.src.utils.tensor_utils.preprocessing_function is missing (installed keras-hub "
            f"{keras_hub.__version__}; sbert_keras reads it as checked against keras-hub "
            f"{CHECKED_KERAS_HUB_VERSION}). Update sbert_keras/compat/keras_hub.py."
        )
    return tensor_utils.preprocessing_function(function)
