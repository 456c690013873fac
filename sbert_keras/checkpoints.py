"""Load sentence-transformers / Hugging Face folders into KerasHub models.

KerasHub 0.32 converts Hugging Face checkpoints, but not with the exact
parity a sentence encoder needs. This module closes the known gaps without
touching KerasHub internals:

- BERT tokenisers get `strip_accents` (it follows `do_lower_case` when the
  tokenizer config leaves it `null`, as in Hugging Face);
- BERT-family folders load into `BertLayoutBackbone`, whose feed-forward
  GELU is the exact one (KerasHub's `BertBackbone` uses the tanh form);
- RoBERTa folders saved by sentence-transformers have no `roberta.` key
  prefix: any of `bert.`, `roberta.`, `model.` is accepted, or none;
- the token-type embedding row 0 (added to every token, since a sentence
  encoder only sees segment 0) is folded into the position embeddings.
"""

import json
import os

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from sbert_keras.backbone import BertLayoutBackbone

BERT_TYPES = ("bert",)


@keras.saving.register_keras_serializable(package="sbert_keras")
class LowercasingBertTokenizer(keras_hub.models.BertTokenizer):
    """`BertTokenizer` that lowercases like Hugging Face (`str.lower`).

    KerasHub's `lowercase=True` applies Unicode *case folding*, which also
    rewrites letters that lowercasing keeps (German "ß" -> "ss", Greek final
    "ς" -> "σ"), so some words tokenise differently from the checkpoint's
    own tokenizer. This class lowercases with `tf.strings.lower` (UTF-8)
    and hands KerasHub an already-lowercased string (`lowercase=False`).

    Args:
        lowercase: bool. Lowercase the input (the checkpoint's `do_lower_case`).
        **kwargs: passed to `keras_hub.models.BertTokenizer`.
    """

    def __init__(self, vocabulary=None, lowercase=False, **kwargs):
        kwargs.pop("lowercase", None)
        super().__init__(vocabulary=vocabulary, lowercase=False, **kwargs)
        self.lowercase_like_python = lowercase

    def tokenize(self, inputs):
        if self.lowercase_like_python:
            inputs = tf.strings.lower(tf.convert_to_tensor(inputs, tf.string), encoding="utf-8")
        return super().tokenize(inputs)

    def get_config(self):
        config = super().get_config()
        config["lowercase"] = self.lowercase_like_python
        return config
ROBERTA_TYPES = ("roberta", "xlm-roberta")
# Position rows that RoBERTa reserves before the first real position.
ROBERTA_POSITION_OFFSET = 2
KEY_PREFIXES = ("bert.", "roberta.", "model.")


def _read_json(folder, *parts):
    path = os.path.join(folder, *parts)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {e.lineno}: invalid JSON ({e.msg}).") from e


def is_transformers_folder(path):
    """True when `path` is a local folder with a Hugging Face `config.json`."""
    if not os.path.isdir(str(path)):
        return False
    config = _read_json(str(path), "config.json")
    return bool(config) and "model_type" in config


def read_sentence_transformers_settings(folder):
    """Pooling, normalisation and max length declared by a ST folder.

    Reads `modules.json`, the pooling module's `config.json` (both the old
    `pooling_mode_*_tokens` flags and the newer `pooling_mode` key) and
    `sentence_bert_config.json`; falls back to `tokenizer_config.json`'s
    `model_max_length`. Missing files give `None` for that setting.

    Returns:
        dict with keys `pooling`, `normalize`, `max_seq_length`.
    """
    settings = {"pooling": None, "normalize": None, "max_seq_length": None}
    modules = _read_json(folder, "modules.json")
    pooling_dir = "1_Pooling"
    if modules:
        types = [m.get("type", "") for m in modules]
        settings["normalize"] = any(t.endswith("Normalize") for t in types)
        for m in modules:
            if m.get("type", "").endswith("Pooling"):
                pooling_dir = m.get("path", pooling_dir)
    pooling = _read_json(folder, pooling_dir, "config.json")
    if pooling:
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
                raise ValueError(
                    f"{os.path.join(folder, pooling_dir, 'config.json')}: exactly one "
                    f"pooling mode must be set; found {chosen or 'none'}."
                )
            mode = chosen[0]
        if mode in ("mean_tokens", "cls_token", "max_tokens"):
            mode = mode.split("_")[0]
        if mode not in ("mean", "max", "cls"):
            raise ValueError(
                f"{os.path.join(folder, pooling_dir, 'config.json')}: pooling mode "
                f"{mode!r} is not supported (use mean, max or cls)."
            )
        settings["pooling"] = mode
    st_config = _read_json(folder, "sentence_bert_config.json") or {}
    max_len = st_config.get("max_seq_length")
    if max_len is None:
        tok_config = _read_json(folder, "tokenizer_config.json") or {}
        model_max = tok_config.get("model_max_length")
        if isinstance(model_max, int) and model_max < 100_000:
            max_len = model_max
    settings["max_seq_length"] = max_len
    return settings


def load_safetensors(folder):
    """All tensors of `model.safetensors`, keys stripped of a model prefix."""
    from safetensors.numpy import load_file

    path = os.path.join(folder, "model.safetensors")
    if not os.path.isfile(path):
        if os.path.isfile(os.path.join(folder, "pytorch_model.bin")):
            raise ValueError(
                f"{folder} holds only `pytorch_model.bin`; save it as "
                "`model.safetensors` (sentence-transformers does this by default)."
            )
        raise FileNotFoundError(f"No `model.safetensors` in {folder}.")
    tensors = {}
    for key, value in load_file(path).items():
        for prefix in KEY_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        tensors[key] = value
    return tensors


def _tokenizer_from_folder(folder, model_type):
    tok_config = _read_json(folder, "tokenizer_config.json") or {}
    if model_type in BERT_TYPES:
        lowercase = bool(tok_config.get("do_lower_case", True))
        strip_accents = tok_config.get("strip_accents")
        if strip_accents is None:
            strip_accents = lowercase
        return LowercasingBertTokenizer(
            vocabulary=os.path.join(folder, "vocab.txt"),
            lowercase=lowercase,
            strip_accents=bool(strip_accents),
        )
    return keras_hub.models.RobertaTokenizer(
        vocabulary=os.path.join(folder, "vocab.json"),
        merges=os.path.join(folder, "merges.txt"),
    )


def _backbone_from_config(config, dtype=None):
    model_type = config["model_type"]
    offset = ROBERTA_POSITION_OFFSET if model_type in ROBERTA_TYPES else 0
    activation = config.get("hidden_act", "gelu")
    if activation not in ("gelu", "relu"):
        raise ValueError(f"hidden_act={activation!r} is not supported.")
    epsilon = config.get("layer_norm_eps", 1e-12)
    kwargs = dict(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        dropout=config.get("hidden_dropout_prob", 0.1),
        max_sequence_length=config["max_position_embeddings"] - offset,
        dtype=dtype,
    )
    if model_type in ROBERTA_TYPES and activation == "gelu" and epsilon == 1e-5:
        # KerasHub's own RobertaBackbone is exact for this configuration.
        return keras_hub.models.RobertaBackbone(**kwargs), offset
    return (
        BertLayoutBackbone(activation=activation, layer_norm_epsilon=epsilon, **kwargs),
        offset,
    )


def port_weights(backbone, tensors, position_offset, source="model.safetensors"):
    """Assign Hugging Face BERT/RoBERTa tensors to a RobertaBackbone layout."""

    def get(key):
        if key not in tensors:
            raise KeyError(f"{source}: missing tensor {key!r}.")
        return tensors[key]

    positions = get("embeddings.position_embeddings.weight")[position_offset:]
    positions = positions[: backbone.max_sequence_length]
    if "embeddings.token_type_embeddings.weight" in tensors:
        positions = positions + get("embeddings.token_type_embeddings.weight")[0]
    backbone.token_embedding.embeddings.assign(get("embeddings.word_embeddings.weight"))
    backbone.embeddings.position_embedding.position_embeddings.assign(positions)
    backbone.embeddings_layer_norm.gamma.assign(get("embeddings.LayerNorm.weight"))
    backbone.embeddings_layer_norm.beta.assign(get("embeddings.LayerNorm.bias"))
    for i, layer in enumerate(backbone.transformer_layers):
        p = f"encoder.layer.{i}."
        attention = layer._self_attention_layer
        for name, dense in (
            ("query", attention.query_dense),
            ("key", attention.key_dense),
            ("value", attention.value_dense),
        ):
            kernel = get(p + f"attention.self.{name}.weight").T
            dense.kernel.assign(kernel.reshape(dense.kernel.shape))
            dense.bias.assign(get(p + f"attention.self.{name}.bias").reshape(dense.bias.shape))
        out = attention.output_dense
        out.kernel.assign(get(p + "attention.output.dense.weight").T.reshape(out.kernel.shape))
        out.bias.assign(get(p + "attention.output.dense.bias"))
        layer._self_attention_layer_norm.gamma.assign(get(p + "attention.output.LayerNorm.weight"))
        layer._self_attention_layer_norm.beta.assign(get(p + "attention.output.LayerNorm.bias"))
        layer._feedforward_intermediate_dense.kernel.assign(get(p + "intermediate.dense.weight").T)
        layer._feedforward_intermediate_dense.bias.assign(get(p + "intermediate.dense.bias"))
        layer._feedforward_output_dense.kernel.assign(get(p + "output.dense.weight").T)
        layer._feedforward_output_dense.bias.assign(get(p + "output.dense.bias"))
        layer._feedforward_layer_norm.gamma.assign(get(p + "output.LayerNorm.weight"))
        layer._feedforward_layer_norm.beta.assign(get(p + "output.LayerNorm.bias"))


def load_transformers_folder(folder, dtype=None):
    """Build a backbone + tokenizer from a local HF / sentence-transformers folder.

    Returns:
        `(backbone, tokenizer, settings)` where `settings` is the output of
        `read_sentence_transformers_settings`.
    """
    folder = str(folder)
    config = _read_json(folder, "config.json")
    model_type = config["model_type"]
    if model_type not in BERT_TYPES + ROBERTA_TYPES:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')}: model_type={model_type!r} is not "
            f"supported; supported: {BERT_TYPES + ROBERTA_TYPES}. KerasHub presets of "
            "any text backbone load through `SentenceEncoder.from_preset(name)`."
        )
    backbone, offset = _backbone_from_config(config, dtype=dtype)
    port_weights(backbone, load_safetensors(folder), offset,
                 source=os.path.join(folder, "model.safetensors"))
    tokenizer = _tokenizer_from_folder(folder, model_type)
    settings = read_sentence_transformers_settings(folder)
    if settings["max_seq_length"] is None:
        settings["max_seq_length"] = backbone.max_sequence_length
    settings["max_seq_length"] = min(settings["max_seq_length"], backbone.max_sequence_length)
    return backbone, tokenizer, settings
