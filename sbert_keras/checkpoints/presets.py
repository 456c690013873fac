"""`SentenceEncoder.from_preset`'s loaders, and the Hugging Face converter.

`load_preset` (the body of `from_preset`) sends a preset to one loader: a
`.keras` file or a finished `sbert-keras train` folder (`keras_files`); a
KerasHub preset folder written by `encoder.save_to_preset` (its `task.json`,
read by `compat.keras_hub.load_saved_task`); a Hugging Face /
sentence-transformers folder (converted here); any other KerasHub preset
(KerasHub's `Backbone.from_preset` and `Tokenizer.from_preset`).

Why not KerasHub's converters: keras-hub 0.32's `BertTextEmbedder` and
`convert_bert.load_task_config` load a BERT sentence-transformers folder,
but silently turn most pooling modes into mean pooling, ignore `Dense` and
other modules, pool and normalise in the compute dtype, build the tanh-GELU
`BertBackbone` (parity within 1e-5 fails) and miss tokenizer settings;
KerasHub's RoBERTa converter reads only `roberta.`-prefixed keys.
docs/loading.md ("Why not KerasHub's converters") lists each gap.

So this module converts such folders itself, without touching KerasHub
internals (the block sublayers it fills are read through
`compat.keras_hub.block_parts`):

- the vocabulary (and BPE merges) come from `vocab.txt` /
  `vocab.json` + `merges.txt`, or else from `tokenizer.json`, and are handed
  to KerasHub's tokenizers in memory;
- BERT-family folders load into `BertLayoutBackbone` (exact GELU); RoBERTa
  folders with RoBERTa's exact configuration into KerasHub's own
  `RobertaBackbone`;
- any of the key prefixes `bert.`, `roberta.`, `model.` is accepted, or none;
- the token-type embedding row 0 (added to every token, since a sentence
  encoder only sees segment 0) is folded into the position embeddings.

KerasHub's hub download errors (a long `ConnectionError`) become one
`PresetUnavailableError`. The `modules.json` pipeline (pooling, `Dense`,
normalisation) is read by `sbert_keras.checkpoints.st_modules`.
"""

import os

import keras
import keras_hub
from safetensors.numpy import load_file

from sbert_keras.checkpoints.keras_files import CorruptModelError  # noqa: F401 (public here too)
from sbert_keras.checkpoints.keras_files import load_keras_encoder
from sbert_keras.checkpoints.keras_files import load_keras_file  # noqa: F401 (public here too)
from sbert_keras.checkpoints.st_modules import load_dense_modules
from sbert_keras.checkpoints.st_modules import read_prompts
from sbert_keras.checkpoints.st_modules import read_sentence_transformers_settings  # noqa: F401 (public here too)
from sbert_keras.checkpoints.st_modules import text_preprocessing
from sbert_keras.checkpoints.tokenizer_json import LowercasingBertTokenizer  # noqa: F401 (public here too)
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.checkpoints.tokenizer_json import roberta_tokenizer
from sbert_keras.compat.keras_hub import block_parts
from sbert_keras.compat.keras_hub import load_saved_task
from sbert_keras.model.backbone import BertLayoutBackbone
from sbert_keras.model.backbone_config import backbone_arguments
from sbert_keras.model.backbone_config import check_preset_folder
from sbert_keras.model.backbone_config import check_vocabulary_fits
from sbert_keras.model.backbone_config import safetensors_path
from sbert_keras.model.backbone_config import strip_prefix
from sbert_keras.model.backbone_config import weight_shapes
from sbert_keras.model.precision import policy_for
from sbert_keras.model.preprocessor import SentenceEncoderPreprocessor
from sbert_keras.model.preprocessor import check_sequence_length
from sbert_keras.utils.model_files import read_json as _read_json

BERT_TYPES = ("bert",)
ROBERTA_TYPES = ("roberta",)
SENTENCEPIECE_TYPES = ("xlm-roberta", "camembert")
# Position rows that RoBERTa reserves before the first real position.
ROBERTA_POSITION_OFFSET = 2


def is_transformers_folder(path):
    """True when `path` is a local folder with a Hugging Face `config.json`."""
    if not os.path.isdir(str(path)):
        return False
    config = _read_json(str(path), "config.json")
    return bool(config) and "model_type" in config


def load_safetensors(folder):
    """All tensors of `model.safetensors`, keys stripped of a model prefix."""
    return {strip_prefix(key): value for key, value in load_file(safetensors_path(folder)).items()}


def _check_not_sentencepiece(folder, model_type):
    tokenizer = (_read_json(folder, "tokenizer.json") or {}).get("model")
    tokenizer = tokenizer if isinstance(tokenizer, dict) else {}  # its reader names a malformed one
    if (
        model_type in SENTENCEPIECE_TYPES
        or tokenizer.get("type") == "Unigram"
        or os.path.isfile(os.path.join(folder, "sentencepiece.bpe.model"))
    ):
        raise ValueError(
            f"XLM-R / sentencepiece folders are not supported yet: {folder} "
            f"(model_type={model_type!r}). Supported: {BERT_TYPES + ROBERTA_TYPES} "
            "with a WordPiece or byte-level BPE tokenizer."
        )


def _checked_arguments(folder, config, load_weights):
    """The backbone's arguments, its position offset and activation, all checked.

    With `load_weights`, the sizes are compared with the shapes in the
    `model.safetensors` header (no tensor is read yet).
    """
    source = os.path.join(folder, "config.json")
    offset = ROBERTA_POSITION_OFFSET if config["model_type"] in ROBERTA_TYPES else 0
    activation = config.get("hidden_act", "gelu")
    if activation not in ("gelu", "relu"):
        raise ValueError(f"{source}: hidden_act={activation!r} is not supported.")
    weights = safetensors_path(folder) if load_weights else None
    shapes = weight_shapes(weights) if load_weights else None
    return backbone_arguments(config, source, offset, shapes, weights), offset, activation


def _vocabulary_source(folder, model_type):
    """The file the tokenizer's vocabulary came from (as `hf_tokenizer` picks it)."""
    own = ("vocab.txt",) if model_type in BERT_TYPES else ("vocab.json", "merges.txt")
    if all(os.path.isfile(os.path.join(folder, name)) for name in own):
        return os.path.join(folder, own[0])
    return os.path.join(folder, "tokenizer.json")


def _build_backbone(model_type, arguments, activation, dtype=None):
    kwargs = dict(arguments)
    epsilon = kwargs.pop("layer_norm_epsilon")
    if model_type in ROBERTA_TYPES and activation == "gelu" and epsilon == 1e-5:
        # KerasHub's own RobertaBackbone is exact for this configuration.
        return keras_hub.models.RobertaBackbone(**kwargs, dtype=dtype)
    return BertLayoutBackbone(activation=activation, layer_norm_epsilon=epsilon, dtype=dtype, **kwargs)


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
        parts = block_parts(layer)  # KerasHub's private sublayers, through the one adapter
        for name, dense in (("query", parts.query), ("key", parts.key), ("value", parts.value)):
            kernel = get(p + f"attention.self.{name}.weight").T
            dense.kernel.assign(kernel.reshape(dense.kernel.shape))
            dense.bias.assign(get(p + f"attention.self.{name}.bias").reshape(dense.bias.shape))
        out = parts.attention_output
        out.kernel.assign(get(p + "attention.output.dense.weight").T.reshape(out.kernel.shape))
        out.bias.assign(get(p + "attention.output.dense.bias"))
        parts.attention_norm.gamma.assign(get(p + "attention.output.LayerNorm.weight"))
        parts.attention_norm.beta.assign(get(p + "attention.output.LayerNorm.bias"))
        parts.intermediate.kernel.assign(get(p + "intermediate.dense.weight").T)
        parts.intermediate.bias.assign(get(p + "intermediate.dense.bias"))
        parts.output.kernel.assign(get(p + "output.dense.weight").T)
        parts.output.bias.assign(get(p + "output.dense.bias"))
        parts.feedforward_norm.gamma.assign(get(p + "output.LayerNorm.weight"))
        parts.feedforward_norm.beta.assign(get(p + "output.LayerNorm.bias"))


def load_transformers_folder(folder, dtype=None, load_weights=True):
    """Build a backbone + tokenizer from a local HF / sentence-transformers folder.

    `config.json` (against the `model.safetensors` header, see
    `model_config.check_backbone_arguments`), the tokenizer (its vocabulary
    must fit the embedding table) and `modules.json` are checked before
    anything is built or the weights are read, so a bad folder fails fast.

    Args:
        folder: str. A folder with `config.json` (`model_type` BERT or
            RoBERTa), `model.safetensors`, and `vocab.txt`, `vocab.json` +
            `merges.txt` or `tokenizer.json`.
        dtype: dtype policy of the backbone, or `None`.
        load_weights: bool. `False` keeps the backbone's and the `Dense`
            modules' fresh random weights (`model.safetensors` is not read).

    Returns:
        `(backbone, tokenizer, settings)` where `settings` is the output of
        `read_sentence_transformers_settings` plus `projections`, the folder's
        `Dense` modules as Keras layers, and `prompts` / `default_prompt_name`
        (`st_modules.read_prompts`).

    Raises:
        ValueError: an unsupported model type, tokenizer or module; the
            message names it and the folder.
    """
    folder = str(folder)
    config = _read_json(folder, "config.json")
    model_type = config["model_type"]
    _check_not_sentencepiece(folder, model_type)
    if model_type not in BERT_TYPES + ROBERTA_TYPES:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')}: model_type={model_type!r} is not "
            f"supported; supported: {BERT_TYPES + ROBERTA_TYPES}. KerasHub presets of "
            "any text backbone load through `SentenceEncoder.from_preset(name)`."
        )
    settings = read_sentence_transformers_settings(folder)
    settings["prompts"], settings["default_prompt_name"] = read_prompts(folder)
    lowercase = text_preprocessing(folder)
    if model_type in BERT_TYPES:
        tokenizer = bert_tokenizer(folder, lowercase=lowercase)
    elif lowercase:
        raise ValueError(
            f"{os.path.join(folder, 'sentence_bert_config.json')}: do_lower_case=true is "
            f"supported for BERT folders only, not for model_type={model_type!r}."
        )
    else:
        tokenizer = roberta_tokenizer(folder)
    arguments, offset, activation = _checked_arguments(folder, config, load_weights)
    table = "model.safetensors: embeddings.word_embeddings.weight" if load_weights else "config.json: vocab_size"
    check_vocabulary_fits(
        tokenizer.vocabulary_size(),
        arguments["vocabulary_size"],
        _vocabulary_source(folder, model_type),
        os.path.join(folder, table),
    )
    backbone = _build_backbone(model_type, arguments, activation, dtype=dtype)
    projections = load_dense_modules(folder, backbone.hidden_dim)
    if load_weights:
        port_weights(backbone, load_safetensors(folder), offset, source=os.path.join(folder, "model.safetensors"))
    else:  # the same layers, freshly initialised
        projections = [keras.layers.Dense.from_config(layer.get_config()) for layer in projections]
    settings["projections"] = projections
    if settings["max_seq_length"] is None:
        settings["max_seq_length"] = backbone.max_sequence_length
    settings["max_seq_length"] = min(settings["max_seq_length"], backbone.max_sequence_length)
    return backbone, tokenizer, settings


class PresetUnavailableError(OSError):
    """A preset name that must be downloaded, and the download failed."""


def load_keras_hub_preset(preset, dtype=None, load_weights=True):
    """A KerasHub preset's backbone and tokenizer, with one clear download error.

    Args:
        preset: str. A KerasHub preset name or handle, or a local preset folder.
        dtype: dtype policy of the backbone, or `None`.
        load_weights: bool. `False` keeps the backbone's random weights.

    Raises:
        PresetUnavailableError: the preset is not local and could not be
            downloaded (no network, or the hub refused).
    """
    try:
        backbone = keras_hub.models.Backbone.from_preset(preset, dtype=dtype, load_weights=load_weights)
        tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(preset)
    except (OSError, ValueError) as e:
        offline = isinstance(e, OSError) and not isinstance(e, (FileNotFoundError, PermissionError))
        # KerasHub reports a Hugging Face handle it could not reach as "no config.json".
        unreachable = "://" in preset and "has no config.json" in str(e)
        if os.path.exists(preset) or not (offline or unreachable):
            raise
        raise PresetUnavailableError(
            f"Preset {preset!r} could not be downloaded ({type(e).__name__}): it must be "
            "downloaded from its model hub, which needs network access. Offline, pass a "
            "local folder (sentence-transformers or KerasHub preset) or a `.keras` file."
        ) from e
    return backbone, tokenizer


def load_preset(
    cls, preset, load_weights=True, pooling=None, normalize=None, sequence_length=None, dtype=None, **kwargs
):
    """The body of `SentenceEncoder.from_preset`: picks the loader for `preset`.

    Args: as `SentenceEncoder.from_preset`, plus `cls`, the encoder class.

    Returns:
        An instance of `cls`.
    """
    preset = os.fspath(preset)
    if not isinstance(load_weights, bool):
        raise TypeError(f"`load_weights` must be True or False. Received {load_weights!r}.")
    policy = None if dtype is None else policy_for(dtype, "dtype")
    run_encoder = os.path.join(preset, "encoder.keras")
    if os.path.isdir(preset) and os.path.isfile(run_encoder) and not is_transformers_folder(preset):
        preset = run_encoder  # the output folder of `sbert-keras train`
    if preset.endswith(".keras"):
        if not load_weights:
            raise ValueError(
                f"`load_weights=False` cannot apply to {preset}: a `.keras` file is one trained model. "
                "Pass the preset or folder it was built from instead."
            )
        if pooling is not None or normalize is not None or dtype is not None or kwargs:
            raise ValueError(
                f"Only `sequence_length` can be changed when loading {preset}; "
                "`encode` takes `normalize=` and `precision=` per call."
            )
        return load_keras_encoder(preset, cls, sequence_length)[0]
    overrides = {k: v for k, v in (("pooling", pooling), ("normalize", normalize)) if v is not None}
    if os.path.isdir(preset) and not is_transformers_folder(preset):
        check_preset_folder(preset)
        encoder = load_saved_task(cls, preset, load_weights, dtype=policy, **overrides, **kwargs)
        if encoder is not None:  # a folder written by `encoder.save_to_preset`
            if sequence_length is not None:
                check_sequence_length(sequence_length, getattr(encoder.backbone, "max_sequence_length", None))
                encoder.preprocessor.sequence_length = sequence_length
            return encoder
    if is_transformers_folder(preset):
        backbone, tokenizer, settings = load_transformers_folder(preset, dtype=policy, load_weights=load_weights)
    else:
        if os.sep in preset and "://" not in preset and not os.path.exists(preset):
            raise FileNotFoundError(f"No such preset folder or file: {preset}")
        backbone, tokenizer = load_keras_hub_preset(preset, dtype=policy, load_weights=load_weights)
        settings = {"max_seq_length": getattr(backbone, "max_sequence_length", 512)}
    # Prompts given to `from_preset` win over the folder's, name by name (as in sentence-transformers).
    kwargs["prompts"] = {**settings.get("prompts", {}), **(kwargs.get("prompts") or {})}
    kwargs.setdefault("default_prompt_name", settings.get("default_prompt_name"))
    preprocessor = SentenceEncoderPreprocessor(
        tokenizer,
        sequence_length=settings["max_seq_length"] if sequence_length is None else sequence_length,
        include_segment_ids="segment_ids" in backbone.input,
    )
    return cls(
        backbone=backbone,
        preprocessor=preprocessor,
        pooling=pooling or settings.get("pooling") or "mean",
        normalize=bool(settings.get("normalize")) if normalize is None else normalize,
        projections=settings.get("projections"),
        **kwargs,
    )
