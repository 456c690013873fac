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

So this module converts such folders itself, through one family per
Hugging Face `model_type` (`checkpoints/families/`), without touching
KerasHub internals (block sublayers are read through
`compat.keras_hub.block_parts`):

- the family reads the tokenizer: WordPiece from `vocab.txt` or
  `tokenizer.json`, byte-level BPE from `vocab.json` + `merges.txt` or
  `tokenizer.json`, SentencePiece from `sentencepiece.bpe.model` or a
  Unigram `tokenizer.json` (`sentencepiece_model`), all handed to KerasHub's
  tokenizers in memory;
- it builds the backbone: `BertLayoutBackbone` for BERT (exact GELU);
  KerasHub's own `RobertaBackbone`, `XLMRobertaBackbone` and
  `DistilBertBackbone` when the configuration is the one they compute
  exactly (else `BertLayoutBackbone`); `MPNetBackbone` for MPNet;
- its weight table (`families.weight_table`) maps every tensor, the same
  table that writes them back (`save_to_sentence_transformers`);
- any of the key prefixes `bert.`, `roberta.`, `distilbert.`, `mpnet.`,
  `model.` is accepted, or none;
- the token-type embedding row 0 (added to every token, since a sentence
  encoder only sees segment 0) is folded into the position embeddings.

The dispatch by what a folder or file holds stays here (`load_preset`).
KerasHub's hub download errors (a long `ConnectionError`) become one
`PresetUnavailableError`. The `modules.json` pipeline (pooling, `Dense`,
normalisation) is read by `sbert_keras.checkpoints.st_modules`.
"""

import os

import keras
import keras_hub
from safetensors.numpy import load_file

from sbert_keras.checkpoints.added_tokens import read_added_tokens
from sbert_keras.checkpoints.families.bert import BertFamily
from sbert_keras.checkpoints.families.bert import RobertaFamily
from sbert_keras.checkpoints.families.registry import family_for_config
from sbert_keras.checkpoints.keras_files import CorruptModelError  # noqa: F401 (public here too)
from sbert_keras.checkpoints.keras_files import load_keras_encoder
from sbert_keras.checkpoints.keras_files import load_keras_file  # noqa: F401 (public here too)
from sbert_keras.checkpoints.st_modules import load_dense_modules
from sbert_keras.checkpoints.st_modules import read_prompts
from sbert_keras.checkpoints.st_modules import read_sentence_transformers_settings  # noqa: F401 (public here too)
from sbert_keras.checkpoints.st_modules import text_preprocessing
from sbert_keras.checkpoints.tokenizer_json import LowercasingBertTokenizer  # noqa: F401 (public here too)
from sbert_keras.compat.keras_hub import load_saved_task
from sbert_keras.model.backbone_config import check_preset_folder
from sbert_keras.model.backbone_config import check_vocabulary_fits
from sbert_keras.model.backbone_config import safetensors_path
from sbert_keras.model.backbone_config import strip_prefix
from sbert_keras.model.precision import policy_for
from sbert_keras.model.preprocessor import SentenceEncoderPreprocessor
from sbert_keras.model.preprocessor import check_sequence_length
from sbert_keras.utils.model_files import read_json as _read_json

BERT_TYPES = BertFamily.model_types
ROBERTA_TYPES = RobertaFamily.model_types
SENTENCEPIECE_TYPES = ("xlm-roberta",)
# Position rows that RoBERTa reserves before the first real position.
ROBERTA_POSITION_OFFSET = RobertaFamily.position_offset


def is_transformers_folder(path):
    """True when `path` is a local folder with a Hugging Face `config.json`."""
    if not os.path.isdir(str(path)):
        return False
    config = _read_json(str(path), "config.json")
    return bool(config) and "model_type" in config


def load_safetensors(folder):
    """All tensors of `model.safetensors`, keys stripped of a model prefix."""
    return {strip_prefix(key): value for key, value in load_file(safetensors_path(folder)).items()}


def port_weights(backbone, tensors, position_offset, source="model.safetensors"):
    """Assign Hugging Face BERT (offset 0) or RoBERTa (offset 2) tensors to a RobertaBackbone layout.

    The weight table of `families.bert` does the work; this keeps the name
    of earlier releases.
    """
    family = RobertaFamily() if position_offset else BertFamily()
    family.assign_weights(backbone, family.arguments_of(backbone), tensors, source)


def load_transformers_folder(folder, dtype=None, load_weights=True):
    """Build a backbone + tokenizer from a local HF / sentence-transformers folder.

    The folder's family (`families.registry.family_for_config`, by
    `model_type`) reads the tokenizer and the backbone's arguments;
    `config.json` (against the `model.safetensors` header), the tokenizer
    (its vocabulary must fit the embedding table) and `modules.json` are
    checked before anything is built or the weights are read, so a bad
    folder fails fast.

    Args:
        folder: str. A folder with `config.json` (`model_type` BERT,
            RoBERTa, DistilBERT, MPNet or XLM-RoBERTa), `model.safetensors`,
            and the tokenizer: `vocab.txt`, `vocab.json` + `merges.txt`,
            `sentencepiece.bpe.model`, or `tokenizer.json` alone.
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
    family = family_for_config(folder, config)
    settings = read_sentence_transformers_settings(folder)
    settings["prompts"], settings["default_prompt_name"] = read_prompts(folder)
    tokenizer = family.tokenizer(folder, text_preprocessing(folder))
    arguments = family.read_arguments(folder, config, load_weights)
    table = "model.safetensors: embeddings.word_embeddings.weight" if load_weights else "config.json: vocab_size"
    check_vocabulary_fits(
        tokenizer.vocabulary_size(),
        arguments["vocabulary_size"],
        family.vocabulary_source(folder),
        os.path.join(folder, table),
    )
    backbone = family.build_backbone(arguments, dtype=dtype)
    projections = load_dense_modules(folder, backbone.hidden_dim)
    if load_weights:
        family.assign_weights(backbone, arguments, load_safetensors(folder), os.path.join(folder, "model.safetensors"))
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


def load_preset(cls, preset, load_weights=True, **kwargs):
    """The body of `SentenceEncoder.from_preset`: picks the loader for `preset`.

    The encoder remembers what it was loaded from (`encoder.loaded_from`, a
    path or preset name), which `save_to_sentence_transformers` records as
    its base model (or the base model of the training run it came from).

    Args: as `SentenceEncoder.from_preset`, plus `cls`, the encoder class.

    Returns:
        An instance of `cls`.
    """
    encoder = _load(cls, os.fspath(preset), load_weights=load_weights, **kwargs)
    encoder.loaded_from = os.fspath(preset)
    return encoder


# The keywords `from_preset` takes besides `preset` and `load_weights`, and
# sentence-transformers' spelling of some of them (named in the error).
PRESET_KEYWORDS = ("pooling", "normalize", "sequence_length", "dtype", "prompts", "default_prompt_name", "name")
OTHER_SPELLINGS = {
    "pooling_mode": "pooling",
    "max_seq_length": "sequence_length",
    "normalize_embeddings": "normalize",
    "torch_dtype": "dtype",
}


def check_preset_keywords(kwargs):
    """Refuses a `from_preset` keyword it would not honour.

    Args:
        kwargs: dict. The keywords given besides `preset` and `load_weights`.

    Raises:
        TypeError: an unknown keyword, named with the accepted ones (and
            ours, for a sentence-transformers spelling).
    """
    for key in kwargs:
        if key not in PRESET_KEYWORDS:
            hint = (
                f" (sentence-transformers' name; here it is `{OTHER_SPELLINGS[key]}`)" if key in OTHER_SPELLINGS else ""
            )
            raise TypeError(
                f"from_preset() got an unexpected keyword argument {key!r}{hint}; "
                f"it accepts load_weights, {', '.join(PRESET_KEYWORDS)}."
            )


def _load(cls, preset, load_weights=True, pooling=None, normalize=None, sequence_length=None, dtype=None, **kwargs):
    """Picks the loader for `preset` (see `load_preset`)."""
    check_preset_keywords(kwargs)
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
                "`encode` takes `normalize=` and `compute=` per call."
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
        added_tokens=read_added_tokens(preset) if is_transformers_folder(preset) else None,
    )
    return cls(
        backbone=backbone,
        preprocessor=preprocessor,
        pooling=pooling or settings.get("pooling") or "mean",
        normalize=bool(settings.get("normalize")) if normalize is None else normalize,
        projections=settings.get("projections"),
        **kwargs,
    )
