"""`SentenceEncoder`: preprocessor -> backbone -> masked pooling -> L2 norm."""

import types

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from sbert_keras.checkpoints import load_preset
from sbert_keras.defaults import DEFAULT_PRESET
from sbert_keras.defaults import ENCODE_BATCH_SIZE
from sbert_keras.inference import InferenceEngine
from sbert_keras.layers import MaskedPooling
from sbert_keras.preprocessor import check_sequence_length


def restore_compile(model, config):
    """`compile_from_config` for models whose `compile` is overridden.

    Keras skips (with a warning) restoring the compile state of such models;
    this deserialises it, compiles and builds the optimizer so its saved
    variables load.
    """
    model.compile(**keras.saving.deserialize_keras_object(config))
    if model.built:
        model.optimizer.build(model.trainable_variables)


@keras.saving.register_keras_serializable(package="sbert_keras")
class SentenceEncoder(keras_hub.models.TextEmbedder):
    """The one sentence encoder: raw text in, one float32 vector per text out.

    A functional Keras model: the backbone's token embeddings go through
    `MaskedPooling` (float32), optional float32 `Dense` projections (the
    `Dense` modules of a sentence-transformers folder, as in LaBSE) and,
    optionally, a float32 L2 normalisation.
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

    Example:
    ```python
    encoder = SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2")
    vectors = encoder.encode(["A man is playing a guitar.", "Someone plays."])
    ```
    """

    def __init__(self, backbone, preprocessor=None, pooling="mean", normalize=False, projections=None, **kwargs):
        if preprocessor is not None:  # a length the position embeddings cannot take fails here
            check_sequence_length(preprocessor.sequence_length, getattr(backbone, "max_sequence_length", None))
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.pooling_layer = MaskedPooling(pooling, name="pooling")
        self.projections = [
            keras.layers.deserialize(layer) if isinstance(layer, dict) else layer for layer in projections or []
        ]
        for layer in self.projections:
            if not isinstance(layer, keras.layers.Dense) or layer.dtype_policy.compute_dtype != "float32":
                raise ValueError(
                    "`projections` must be float32 `keras.layers.Dense` layers. "
                    f"Received {layer!r} ({getattr(layer, 'dtype_policy', None)})."
                )
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
        self.last_num_truncated = 0
        # Caches kept out of Keras' attribute tracking: the precision copies'
        # variables must not become this model's weights.
        self._inference_cache = types.SimpleNamespace(functions={}, copies={})

    def compile_from_config(self, config):
        restore_compile(self, config)

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

    def project(self, pooled):
        """Applies the `projections` (float32 `Dense` layers) to pooled vectors.

        The identity when there are none. The fast inference path calls it
        after pooling, so `encode` and the Keras graph agree.

        Args:
            pooled: float tensor `(batch, hidden)` (symbolic or eager).

        Returns:
            float32 tensor `(batch, embedding_dim)`.
        """
        for layer in self.projections:
            pooled = layer(pooled)
        return pooled

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
        is done by `sbert_keras.checkpoints.load_preset`.

        Args:
            preset: str or path. A KerasHub preset name (`"roberta_base_en"`,
                the default; downloaded by KerasHub); a local KerasHub preset
                folder, including one written by `encoder.save_to_preset`
                (its `task.json` restores pooling, normalisation and
                projections); a local Hugging Face / sentence-transformers
                folder (`config.json` with `model_type`; BERT or RoBERTa;
                vocabulary from `vocab.txt`, `vocab.json` + `merges.txt` or
                `tokenizer.json`; pooling, `Dense` projections, normalisation
                and maximum length follow its `modules.json`, `1_Pooling/`,
                `2_Dense/` and `sentence_bert_config.json`); a `.keras` file
                holding a `SentenceEncoder` or a siamese model (its encoder is
                returned); or the output folder of `sbert-keras train` (its
                `encoder.keras`; refused if the run did not finish).
            load_weights: bool. `False` builds the same architecture with
                freshly initialised weights (not for a `.keras` file).
            **kwargs: overrides: `pooling` (`"mean"`, `"max"`, `"cls"`),
                `normalize` (bool), `sequence_length` (int, maximum tokens
                per text), `dtype` (a precision of
                `defaults.POLICY_PRECISIONS`: `"float32"`, `"bfloat16"`,
                `"float16"`, `"auto"`; the backbone runs under its Keras
                policy, e.g. `"mixed_bfloat16"`, a name still accepted with a
                `DeprecationWarning`), or any `SentenceEncoder` argument
                (e.g. `name`). For a `.keras` file only `sequence_length`.

        Raises:
            FileNotFoundError: a local path that does not exist.
            CorruptModelError: a truncated, damaged or non-`.keras` file.
            PresetUnavailableError: a preset name that could not be
                downloaded (e.g. no network).
            ValueError: an unsupported model type, tokenizer (XLM-R /
                sentencepiece) or `modules.json` module, named with its
                folder; `load_weights=False` for a `.keras` file; a bad
                `dtype`.

        Example:
        ```python
        encoder = SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2", pooling="cls")
        encoder.save_to_preset("my_encoder")
        same = SentenceEncoder.from_preset("my_encoder")
        ```
        """
        return load_preset(cls, preset, load_weights=load_weights, **kwargs)

    # === Inference ===

    @property
    def engine(self):
        """This encoder's `sbert_keras.inference.InferenceEngine` (created on first use)."""
        cache = self._inference_cache
        if getattr(cache, "engine", None) is None:
            cache.engine = InferenceEngine(self)
        return cache.engine

    def load_weights(self, *args, **kwargs):
        result = super().load_weights(*args, **kwargs)
        self.engine.invalidate()
        return result

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras' `Model.quantize` (e.g. `"int8"`), then a fresh inference engine.

        The preprocessor's layers are skipped: they hold no weights, and Keras
        refuses to quantize an unbuilt tokenizer layer. `filters` as in Keras.
        """
        skip = set()
        if self.preprocessor is not None:
            skip = {id(layer) for layer in self.preprocessor._flatten_layers()}
        if filters is None or callable(filters):
            user_filter = filters

            def filters(layer):
                return id(layer) not in skip and (user_filter is None or user_filter(layer))

        super().quantize(mode, config=config, filters=filters, **kwargs)
        self._inference_cache.engine = None

    def encode(self, texts, batch_size=ENCODE_BATCH_SIZE, normalize=None, show_progress=None, precision="auto"):
        """Embeds texts with smart batching; returns float32 `(n, dim)`.

        Texts are tokenised once, sorted by token length, batched and padded
        only to each batch's longest text, run through one traced function
        with dynamic shapes (RoBERTa/BERT-layout backbones use the fused,
        self-checked graph of `sbert_keras.fused`), and put back in their
        original order. Texts longer than `sequence_length` are truncated;
        their count is warned about and kept in `self.last_num_truncated`.

        Args:
            texts: a string or a list of strings. A single string returns a
                `(dim,)` vector.
            batch_size: int. Texts per forward pass.
            normalize: bool or None. `True` L2-normalises, `False` returns the
                pooled vectors unnormalised, `None` keeps the model's setting.
            show_progress: bool or None. Show a progress bar; `None` shows it
                for more than 8 batches.
            precision: str. `"auto"` (default: bfloat16 matmuls on CPUs with
                AVX512-BF16/AMX, float16 on a GPU, else float32; always the
                fastest that passes the self-check), `"float32"` (exact,
                whatever the training policy), `"bfloat16"` or `"float16"`
                (low-precision matmuls, float32 elsewhere).

        Raises:
            ValueError / TypeError: an item is `None` or not a string; the
                message names its position.

        Example:
        ```python
        encoder.encode(["A man is playing a guitar."], precision="float32").shape  # (1, dim)
        ```
        """
        return self.engine.encode(
            texts, batch_size=batch_size, normalize=normalize, show_progress=show_progress, precision=precision
        )

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        """Keras `predict`; raw strings go through `encode`'s engine.

        A list or array of strings (or a string tensor) returns what
        `encode(x, batch_size=batch_size or 32)` returns with the model's
        `normalize` setting: length-sorted batches, each padded to its
        longest text. A dict of token-id tensors runs Keras' `predict` on
        the functional graph (no preprocessor); a `tf.data.Dataset` runs
        KerasHub's `Task.predict`.
        """
        if is_raw_text(x):
            show_progress = None if verbose == "auto" else bool(verbose)
            return self.encode(x, batch_size=batch_size or 32, show_progress=show_progress)
        if isinstance(x, dict):  # already token ids: skip the preprocessor
            return keras.Model.predict(
                self, x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks, **kwargs
            )
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks, **kwargs)

    def __call__(self, *args, **kwargs):
        """Calls the model; raw strings are encoded by the engine (a float32 tensor)."""
        if args and is_raw_text(args[0]) and not isinstance(args[0], (str, bytes)):
            return tf.constant(self.encode(args[0], show_progress=False))
        return super().__call__(*args, **kwargs)


def is_raw_text(x):
    """Whether `x` is a list/array/tensor of strings (not token ids)."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (list, tuple)):
        return bool(x) and all(isinstance(t, (str, bytes)) for t in x)
    if isinstance(x, np.ndarray):
        return x.ndim == 1 and (
            x.dtype.kind in "US" or (x.dtype.kind == "O" and len(x) > 0 and isinstance(x[0], (str, bytes)))
        )
    if isinstance(x, tf.Tensor):  # eager only: a symbolic tensor keeps the Keras path
        return x.dtype == tf.string and tf.executing_eagerly()
    return False
