"""The module list of a sentence-transformers folder: settings and `Dense`.

A sentence-transformers folder is a pipeline declared in `modules.json`:
`Transformer`, `Pooling`, optional `Dense` projections, optional
`Normalize`. This module reads that list and refuses anything it cannot
reproduce (`CNN`, `LSTM`, `WordWeights`, `Router`, ...) with an error naming
the module, instead of silently skipping it.

`Dense` (a linear layer and an activation, as in LaBSE) is reproduced with
Keras' own `keras.layers.Dense` in float32: its `linear.weight` (`[out, in]`)
is transposed into the kernel. Neither KerasHub nor Keras reads the
sentence-transformers module layout, so the reader is written here; it is
small and only parses JSON and safetensors.

Example:
```python
settings = read_sentence_transformers_settings("path/to/st-folder")
layers = load_dense_modules("path/to/st-folder", input_dim=384)
```
"""

import os
import warnings

import keras
import numpy as np
from safetensors.numpy import load_file

from sbert_keras.model.preprocessor import MIN_SEQUENCE_LENGTH
from sbert_keras.model.prompts import check_prompts
from sbert_keras.utils.model_files import model_file
from sbert_keras.utils.model_files import model_path
from sbert_keras.utils.model_files import read_json

SUPPORTED_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
# torch activation class (the last part of `activation_function`) -> Keras.
# Keras' "gelu" is the exact (erf) form, like `torch.nn.GELU()`.
ACTIVATIONS = {
    "Tanh": "tanh",
    "Identity": "linear",
    "ReLU": "relu",
    "Sigmoid": "sigmoid",
    "GELU": "gelu",
}


def read_modules(folder):
    """The modules of `modules.json` as `[(kind, path), ...]`, checked.

    `kind` is the class name at the end of the module's `type`
    (`"sentence_transformers.models.Dense"` -> `"Dense"`). A folder without
    `modules.json` (a plain Hugging Face model) gives `[]`.

    Raises:
        ValueError: a module type that sbert_keras does not implement,
            modules in an order other than Transformer, Pooling, Dense...,
            Normalize, or a module `path` that is not a relative path inside
            the folder (`model_files.model_path`). The message names the
            module, its path and the folder.
    """
    modules = read_json(folder, "modules.json", expect=list)
    if not modules:
        return []
    source = os.path.join(folder, "modules.json")
    found = []
    for i, module in enumerate(modules):
        if not isinstance(module, dict) or not isinstance(module.get("path", ""), str):
            raise ValueError(f"{source}: module {i + 1} must be an object with a string `path`; found {module!r}.")
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = module.get("path", "")
        model_path(folder, path, source=f"{source}: module {i + 1} `path`")
        if kind not in SUPPORTED_MODULES:
            raise ValueError(
                f"{source}: module {i + 1} is a {module.get('type')!r} (path "
                f"{path!r}), which sbert_keras does not implement; supported "
                f"modules: {', '.join(SUPPORTED_MODULES)}. Folder: {folder}"
            )
        found.append((kind, path))
    kinds = [kind for kind, _ in found]
    rest = kinds[2:]
    if rest and rest[-1] == "Normalize":
        rest = rest[:-1]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Dense" for k in rest):
        raise ValueError(
            f"{source}: modules in the order {kinds} are not supported; "
            "expected Transformer, Pooling, any Dense, then optionally Normalize. "
            f"Folder: {folder}"
        )
    return found


def _pooling_mode(folder, pooling_dir, declared):
    path = os.path.join(folder, pooling_dir, "config.json")
    pooling = read_json(folder, pooling_dir, "config.json")
    if pooling is None and declared:
        raise FileNotFoundError(
            f"{os.path.join(folder, 'modules.json')} declares a Pooling module in {pooling_dir!r}, "
            f"but {path} does not exist; without it the pooling mode (mean, cls, max) is unknown."
        )
    if pooling is None:
        return None
    if pooling.get("include_prompt") is False:
        warnings.warn(
            f"{path}: include_prompt=false (pool without the prompt's tokens) is not reproduced; "
            "sbert_keras pools over the prompt too, so vectors of prompted texts differ from "
            "sentence-transformers'.",
            stacklevel=4,
        )
    mode = pooling.get("pooling_mode")
    if mode is None:
        flags = {
            "cls": pooling.get("pooling_mode_cls_token"),
            "mean": pooling.get("pooling_mode_mean_tokens"),
            "max": pooling.get("pooling_mode_max_tokens"),
            "mean_sqrt_len": pooling.get("pooling_mode_mean_sqrt_len_tokens"),
        }
        chosen = [name for name, on in flags.items() if on]
        if len(chosen) != 1:
            raise ValueError(f"{path}: exactly one pooling mode must be set; found {chosen or 'none'}.")
        mode = chosen[0]
    if mode in ("mean_tokens", "cls_token", "max_tokens"):
        mode = mode.split("_")[0]
    if mode not in ("mean", "max", "cls"):
        raise ValueError(f"{path}: pooling mode {mode!r} is not supported (use mean, max or cls).")
    return mode


def read_sentence_transformers_settings(folder):
    """Pooling, normalisation and max length declared by a ST folder.

    Reads `modules.json` (checked by `read_modules`), the pooling module's
    `config.json` (both the old `pooling_mode_*_tokens` flags and the newer
    `pooling_mode` key) and `sentence_bert_config.json`; falls back to
    `tokenizer_config.json`'s `model_max_length`. Missing files give `None`
    for that setting, except the `config.json` of a Pooling module that
    `modules.json` declares.

    Args:
        folder: str. A sentence-transformers (or Hugging Face) folder.

    Returns:
        dict with keys `pooling`, `normalize`, `max_seq_length`.

    Raises:
        FileNotFoundError: `modules.json` declares a Pooling module whose
            folder has no `config.json`.
        ValueError: a `max_seq_length` that is not a whole number >= 3,
            naming `sentence_bert_config.json`.
    """
    settings = {"pooling": None, "normalize": None, "max_seq_length": None}
    modules = read_modules(folder)
    pooling_dir = "1_Pooling"
    if modules:
        settings["normalize"] = modules[-1][0] == "Normalize"
        pooling_dir = modules[1][1] or pooling_dir
    settings["pooling"] = _pooling_mode(folder, pooling_dir, declared=bool(modules))
    st_config = read_json(folder, "sentence_bert_config.json") or {}
    max_len = st_config.get("max_seq_length")
    if max_len is not None and (
        isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < MIN_SEQUENCE_LENGTH
    ):
        raise ValueError(
            f"{os.path.join(folder, 'sentence_bert_config.json')}: max_seq_length={max_len!r} must be a whole "
            f"number >= {MIN_SEQUENCE_LENGTH}."
        )
    if max_len is None:
        tok_config = read_json(folder, "tokenizer_config.json") or {}
        model_max = tok_config.get("model_max_length")
        if isinstance(model_max, int) and model_max < 100_000:
            max_len = model_max
    settings["max_seq_length"] = max_len
    return settings


def text_preprocessing(folder):
    """Whether sentence-transformers lowercases a text before its tokenizer.

    Args:
        folder: str. A sentence-transformers folder.

    Returns:
        bool. `do_lower_case` in `sentence_bert_config.json`.
    """
    return bool((read_json(folder, "sentence_bert_config.json") or {}).get("do_lower_case"))


def read_prompts(folder):
    """The `prompts` and `default_prompt_name` of `config_sentence_transformers.json`.

    sentence-transformers prepends the chosen prompt to every text;
    `SentenceEncoder` keeps both and does the same (`sbert_keras.model.prompts`).

    Args:
        folder: str. A sentence-transformers folder.

    Returns:
        `(prompts, default_prompt_name)`: a dict (`{}` without the file) and
        a str or None.

    Raises:
        TypeError / ValueError: prompts that are not strings, or a default
            prompt name that is not one of them; the file is named.
    """
    config = read_json(folder, "config_sentence_transformers.json") or {}
    name = config.get("default_prompt_name")
    source = os.path.join(folder, "config_sentence_transformers.json")
    return check_prompts(config.get("prompts"), name, source=source), name


def _dense_weights(module_dir):
    path = model_file(module_dir, "model.safetensors")
    if path is None:
        legacy = os.path.join(module_dir, "pytorch_model.bin")
        if os.path.isfile(legacy):
            raise ValueError(
                f"{legacy}: Dense weights saved as a PyTorch pickle cannot be read "
                "without torch; save the model again with sentence-transformers "
                "(it writes `model.safetensors`)."
            )
        raise FileNotFoundError(f"No `model.safetensors` in the Dense module folder {module_dir}.")
    return path, load_file(path)


def load_dense_module(module_dir, input_dim, name):
    """One sentence-transformers `Dense` module as a float32 `keras.layers.Dense`.

    Args:
        module_dir: str. The module's folder (`config.json` with
            `in_features`, `out_features`, `bias`, `activation_function`;
            weights in `model.safetensors` as `linear.weight`, `linear.bias`).
        input_dim: int. The width of the vectors it receives.
        name: str. The Keras layer name.

    Raises:
        ValueError: unknown activation, shapes that disagree with the config
            or the input width, or PyTorch-only weights; the file is named.
    """
    config_path = os.path.join(module_dir, "config.json")
    config = read_json(module_dir, "config.json")
    if config is None:
        raise FileNotFoundError(f"No `config.json` in the Dense module folder {module_dir}.")
    # sentence-transformers 5+ can point a Dense at other features (token
    # embeddings for multi-vector models, "scores" for cross-encoders).
    for key in ("module_input_name", "module_output_name"):
        if config.get(key) not in (None, "sentence_embedding"):
            raise ValueError(
                f"{config_path}: a Dense module with {key}={config[key]!r} is not "
                "supported; only Dense modules on the sentence embedding are."
            )
    torch_name = str(config.get("activation_function") or "torch.nn.modules.linear.Identity")
    if "activation_function" not in config:
        torch_name = "torch.nn.modules.activation.Tanh"  # sentence-transformers' default
    activation = ACTIVATIONS.get(torch_name.rsplit(".", 1)[-1])
    if activation is None:
        raise ValueError(
            f"{config_path}: activation_function {torch_name!r} is not supported; supported: {', '.join(ACTIVATIONS)}."
        )
    path, tensors = _dense_weights(module_dir)
    if "linear.weight" not in tensors:
        raise KeyError(f"{path}: missing tensor 'linear.weight'.")
    weight = np.asarray(tensors["linear.weight"], "float32")
    out_dim, in_dim = weight.shape
    use_bias = bool(config.get("bias", True))
    expected = (config.get("out_features", out_dim), config.get("in_features", in_dim))
    if (out_dim, in_dim) != expected or in_dim != input_dim:
        raise ValueError(
            f"{path}: linear.weight has shape {list(weight.shape)}; {config_path} "
            f"declares [{expected[0]}, {expected[1]}] and the module receives "
            f"{input_dim}-dimensional vectors."
        )
    if use_bias and "linear.bias" not in tensors:
        raise KeyError(f"{path}: missing tensor 'linear.bias'.")
    layer = keras.layers.Dense(out_dim, activation=activation, use_bias=use_bias, dtype="float32", name=name)
    layer.build((None, in_dim))
    layer.kernel.assign(weight.T)
    if use_bias:
        layer.bias.assign(np.asarray(tensors["linear.bias"], "float32"))
    return layer


def load_dense_modules(folder, input_dim):
    """The `Dense` modules of `modules.json`, in order, as Keras layers.

    Args:
        folder: str. A sentence-transformers folder.
        input_dim: int. The pooled embedding width (the backbone's hidden size).

    Returns:
        list of built float32 `keras.layers.Dense` (empty when there is none).
    """
    layers = []
    for kind, path in read_modules(folder):
        if kind == "Dense":
            layer = load_dense_module(model_path(folder, path), input_dim, f"projection_{len(layers)}")
            input_dim = layer.units
            layers.append(layer)
    return layers
