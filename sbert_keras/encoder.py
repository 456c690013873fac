"""`SentenceEncoder`: preprocessor -> backbone -> masked pooling -> L2 norm."""

import types

import keras
import keras_hub

from sbert_keras.checkpoints.presets import load_preset
from sbert_keras.checkpoints.st_writer import SentenceTransformersExport
from sbert_keras.encoding import EncodingMixin
from sbert_keras.model.pooling import MaskedPooling
from sbert_keras.model.preprocessor import check_sequence_length
from sbert_keras.model.prompts import PromptsMixin
from sbert_keras.utils.defaults import DEFAULT_PRESET


class CompileStateMixin:
    """Keras' compile config with whether the optimizer was built, so that loading keeps that state.

    A `.keras` file holds the optimizer's variables as they were: two (its
    step and learning rate) before any training step, all of them after.
    Keras' `compile_from_config` builds the optimizer of every built model
    and then warns that it skips the two saved variables of one that never
    took a step (every encoder saved before training, and the encoder inside
    a trained siamese model, has one). Here the serialized optimizer of the
    compile config records `optimizer_built` (beside its `class_name` and
    `config`, where Keras' deserialization, and so earlier versions of this
    package, ignore it), and loading builds the optimizer only when it was
    (files written without it: when the model is built, as before). Keras
    also skips restoring the compile state of a model whose `compile` is
    overridden (the siamese models); this restores it.

    Example:
    ```python
    encoder.save("encoder.keras")  # never trained: its optimizer is unbuilt
    keras.saving.load_model("encoder.keras").optimizer.built  # False, and no warning
    ```
    """

    def get_compile_config(self):
        config = super().get_compile_config()
        if config and isinstance(config.get("optimizer"), dict) and self.optimizer is not None:
            config["optimizer"] = {**config["optimizer"], "optimizer_built": bool(self.optimizer.built)}
        return config

    def compile_from_config(self, config):
        optimizer = config.get("optimizer")
        built = optimizer.get("optimizer_built", True) if isinstance(optimizer, dict) else True
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built and built:
            self.optimizer.build(self.trainable_variables)


def bound_to_positions(preprocessor, backbone):
    """Checks the preprocessor's length against the backbone's position embeddings, now and whenever it is set."""
    if preprocessor is not None:
        check_sequence_length(preprocessor.sequence_length, getattr(backbone, "max_sequence_length", None))
        preprocessor.position_limit = getattr(backbone, "max_sequence_length", None)


def projection_layers(projections):
    """The `projections` argument as float32 `Dense` layers (configs deserialised); checked."""
    layers = [keras.layers.deserialize(layer) if isinstance(layer, dict) else layer for layer in projections or []]
    for layer in layers:
        if not isinstance(layer, keras.layers.Dense) or layer.dtype_policy.compute_dtype != "float32":
            raise ValueError(
                "`projections` must be float32 `keras.layers.Dense` layers. "
                f"Received {layer!r} ({getattr(layer, 'dtype_policy', None)})."
            )
    return layers


@keras.saving.register_keras_serializable(package="sbert_keras")
class SentenceEncoder(
    CompileStateMixin, PromptsMixin, EncodingMixin, SentenceTransformersExport, keras_hub.models.TextEmbedder
):
    """The one sentence encoder: raw text in, one float32 vector per text out.

    A functional Keras model: the backbone's token embeddings go through
    `MaskedPooling` (float32), optional float32 `Dense` projections (the
    `Dense` modules of a sentence-transformers folder, as in LaBSE) and,
    optionally, a float32 L2 normalisation. Inference (`encode`, `predict`
    and `__call__` on raw strings, `quantize`, `project`) comes from
    `sbert_keras.encoding.EncodingMixin`, prompts (`encode_query`,
    `encode_document`) from `sbert_keras.model.prompts.PromptsMixin`, and
    `save_to_sentence_transformers` from `checkpoints.st_writer`.
    Every siamese objective of `sbert_keras` wraps one instance of it, so the
    weights are shared by construction. With a `preprocessor` attached,
    `predict`, `fit` and `evaluate` accept raw strings.

    Args:
        backbone: a KerasHub text backbone taking `token_ids` and
            `padding_mask` (and optionally `segment_ids`).
        preprocessor: a `SentenceEncoderPreprocessor` or `None`.
        pooling: str. `"mean"` (default), `"max"` or `"cls"`.
        normalize: bool. L2-normalise the output.
        projections: list of `keras.layers.Dense` (or their serialised
            configs) applied in order after pooling, before normalisation;
            `None` or `[]` for none. Each runs in float32.
        prompts: dict `name -> prefix` (e.g. `{"query": "query: "}`) that
            `encode(prompt_name=...)` prepends to every text; `None` for none.
        default_prompt_name: str or None. The prompt `encode` uses when given none.

    Example:
    ```python
    encoder = SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2")
    vectors = encoder.encode(["A man is playing a guitar.", "Someone plays."])
    ```
    """

    def __init__(
        self,
        backbone,
        preprocessor=None,
        pooling="mean",
        normalize=False,
        projections=None,
        prompts=None,
        default_prompt_name=None,
        **kwargs,
    ):
        bound_to_positions(preprocessor, backbone)
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.pooling_layer = MaskedPooling(pooling, name="pooling")
        self.projections = projection_layers(projections)
        self.normalization_layer = (
            keras.layers.UnitNormalization(axis=-1, dtype="float32", name="normalize") if normalize else None
        )

        # === Functional Model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in backbone.input}
        sequence = backbone(inputs)
        if isinstance(sequence, dict):
            sequence = sequence["sequence_output"]
        outputs = self.project(self.pooling_layer(sequence, inputs["padding_mask"]))
        if self.normalization_layer is not None:
            outputs = self.normalization_layer(outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.pooling = pooling
        self.normalize = normalize
        self.set_prompts(prompts, default_prompt_name)
        self.last_num_truncated = 0
        # Caches kept out of Keras' attribute tracking: the precision copies'
        # variables must not become this model's weights.
        self._inference_cache = types.SimpleNamespace(functions={}, copies={})
        self._count_weight_writes()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "pooling": self.pooling,
                "normalize": self.normalize,
                "projections": [keras.layers.serialize(layer) for layer in self.projections],
            }
        )
        return config

    @property
    def embedding_dim(self):
        return int(self.output.shape[-1])

    @property
    def sequence_length(self):
        return self.preprocessor.sequence_length

    # === Constructors ===

    @classmethod
    def from_preset(cls, preset=DEFAULT_PRESET, load_weights=True, **kwargs):
        """Builds an encoder from a preset name, a local folder or a `.keras` file.

        The contract of KerasHub's `Task.from_preset(preset, load_weights=True,
        **kwargs)`: keyword arguments override what the preset says. The work
        is done by `sbert_keras.checkpoints.presets.load_preset`.

        Args:
            preset: str or path. A KerasHub preset name (`"roberta_base_en"`,
                the default; downloaded by KerasHub); a local KerasHub preset
                folder, including one written by `encoder.save_to_preset`
                (its `task.json` restores pooling, normalisation,
                projections and prompts); a local Hugging Face / sentence-transformers
                folder (`model_type` BERT, RoBERTa, DistilBERT, XLM-RoBERTa or MPNet;
                vocabulary from `vocab.txt`, `vocab.json` + `merges.txt`,
                `sentencepiece.bpe.model` or `tokenizer.json`; pooling, `Dense` projections, normalisation
                and maximum length follow its `modules.json`, `1_Pooling/`,
                `2_Dense/` and `sentence_bert_config.json`, prompts its
                `config_sentence_transformers.json`); a `.keras` file
                holding a `SentenceEncoder` or a siamese model (its encoder is
                returned); or the output folder of `sbert-keras train` (its
                `encoder.keras`; refused if the run did not finish).
            load_weights: bool. `False` builds the same architecture with
                freshly initialised weights (not for a `.keras` file).
            **kwargs: overrides: `pooling` (`"mean"`, `"max"`, `"cls"`),
                `normalize` (bool), `sequence_length` (int, maximum tokens
                per text), `dtype` (`"float32"`, `"bfloat16"`, `"float16"`
                or `"auto"`), `prompts` (add to a folder's), `default_prompt_name`,
                `name`. For a `.keras` file only `sequence_length`.

        Raises:
            FileNotFoundError: a local path that does not exist.
            CorruptModelError: a truncated, damaged or non-`.keras` file.
            PresetUnavailableError: a preset name that could not be
                downloaded (e.g. no network).
            TypeError: another keyword (e.g. `pooling_mode`), named with the accepted ones.
            ValueError: an unsupported model type, tokenizer or
                `modules.json` module, named with its folder; `load_weights=False` for a `.keras` file; a bad
                `dtype`.

        Example:
        ```python
        encoder = SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2", pooling="cls")
        encoder.save_to_preset("my_encoder")
        same = SentenceEncoder.from_preset("my_encoder")
        ```
        """
        return load_preset(cls, preset, load_weights=load_weights, **kwargs)
