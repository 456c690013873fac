"""Raw strings -> the integer inputs of a sentence encoder (tf.data side, or the host).

`check_texts` and `check_sequence_length` validate what KerasHub's
tokenizers and packers accept silently (bytes that are not UTF-8, lone
surrogates, a length that leaves no room for a token) with messages that
name the item or the argument. On TensorFlow the preprocessor tokenises
inside the graph (`tf.data`, the SavedModel); on JAX and PyTorch it
tokenises on the host with `tokenizers` (`model.host_tokenizer`), with the
same ids: `host_token_ids`, `host_inputs` and `pad_rows`. `is_raw_text`
and `is_single_text` say which inputs of `predict`, `__call__` and
`encode` are text (and one text).
"""

import numbers

import keras
import keras_hub
import numpy as np

from sbert_keras.compat import tensorflow as compat_tf
from sbert_keras.model.added_tokens import tokenize_with_added_tokens
from sbert_keras.model.host_tokenizer import HostTokenizing
from sbert_keras.model.host_tokenizer import pad_rows  # noqa: F401 (public here too)
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


def _text_items(texts, what):
    """`texts` as a list of items: a string (or a 0-d array or tensor) is one item; checks the rank."""
    if isinstance(texts, (str, bytes)):
        return [texts]
    if backends.is_tf_tensor(texts, ragged=True) and not backends.is_tf_tensor(texts):
        raise TypeError(
            f"`{what}` is a ragged tensor of shape {texts.shape}: `{what}[0]` is a list of strings, not a "
            "string. Pass a 1-D sequence of strings (one text per item)."
        )
    kind = "array"
    if backends.is_tf_tensor(texts):
        texts, kind = texts.numpy(), "tensor"  # a scalar string tensor gives bytes
        if isinstance(texts, bytes):
            return [texts]
    if isinstance(texts, np.ndarray):
        if texts.ndim == 0:
            return [texts.item()]
        if texts.ndim > 1:
            raise TypeError(
                f"`{what}` must be 1-D (one string per item); received a {texts.ndim}-D {kind} of shape "
                f"{texts.shape}: `{what}[0]` is an array of {texts.shape[1]} items, not a string."
            )
        return texts.tolist()
    if hasattr(texts, "tolist"):  # e.g. a pandas Series
        texts = texts.tolist()
    if not isinstance(texts, (list, tuple)):
        raise TypeError(
            f"`{what}` must be a string or a list of strings. Received an object of type {type(texts).__name__}."
        )
    return texts


def check_texts(texts, what="texts"):
    """Validate a string or a sequence of strings; return a list of `str`.

    The one check of raw text input (`encode`, `predict`, `encoder(texts)`,
    the training datasets). A string, a list or tuple of strings, a 1-D numpy
    array of `str`/`bytes` or a 1-D string tensor; a scalar array or tensor
    counts as one string. Bytes are decoded as UTF-8.

    Args:
        texts: the input to check.
        what: str. How messages name the argument (`"texts"`).

    Raises:
        ValueError: an element is `None`, bytes that are not UTF-8, or a
            string with a lone surrogate (its position is named).
        TypeError: an element is not a string (its position and type named),
            `texts` is 2-D or ragged, or it is not a string nor a sequence.
    """
    texts = _text_items(texts, what)
    clean = []
    for i, text in enumerate(texts):
        if text is None:
            raise ValueError(f"`{what}[{i}]` is None; every item must be a string.")
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"`{what}[{i}]` is bytes that are not valid UTF-8 (byte "
                    f"0x{text[error.start]:02x} at offset {error.start}); decode it "
                    "with its encoding first, e.g. `text.decode('latin-1')`."
                ) from None
        if not isinstance(text, str):
            nested = (
                f" `{what}` must be 1-D: one string per item." if isinstance(text, (list, tuple, np.ndarray)) else ""
            )
            raise TypeError(f"`{what}[{i}]` must be a string. Received {type(text).__name__}: {text!r:.60}.{nested}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate, e.g. "\ud800"
            raise ValueError(
                f"`{what}[{i}]` holds a lone surrogate {text[error.start]!r} at position "
                f"{error.start}, which is not valid Unicode text (was it decoded with "
                "errors='surrogateescape' or from broken UTF-16?)."
            ) from None
        clean.append(text)
    return clean


# The packed layout `[start] ids [end]` needs room for one token.
MIN_SEQUENCE_LENGTH = 3


def check_sequence_length(sequence_length, max_sequence_length=None):
    """Raises unless `sequence_length` fits `[start] token [end]` and the backbone.

    Args:
        sequence_length: the preprocessor's padded length.
        max_sequence_length: int or None. The backbone's number of position
            embeddings; `None` when it has no such limit.

    Raises:
        TypeError: not an integer (`bool`, float, string, `None`).
        ValueError: below 3, or above `max_sequence_length`.

    Example:
    ```python
    check_sequence_length(256, max_sequence_length=512)  # passes
    ```
    """
    if isinstance(sequence_length, bool) or not isinstance(sequence_length, numbers.Integral):
        raise TypeError(f"`sequence_length` must be an integer >= {MIN_SEQUENCE_LENGTH}. Received {sequence_length!r}.")
    if sequence_length < MIN_SEQUENCE_LENGTH:
        raise ValueError(
            f"`sequence_length` must be >= {MIN_SEQUENCE_LENGTH} (start token, at least one "
            f"token, end token). Received {sequence_length}."
        )
    if max_sequence_length is not None and sequence_length > max_sequence_length:
        raise ValueError(
            f"`sequence_length` {sequence_length} is above the backbone's "
            f"`max_sequence_length` {max_sequence_length} (its number of position "
            "embeddings); texts that long could not be encoded."
        )


@keras.saving.register_keras_serializable(package="sbert_keras")
class SentenceEncoderPreprocessor(HostTokenizing, keras_hub.models.TextEmbedderPreprocessor):
    """Tokenises single sentences and packs them as `[start] ids [end] pad...`.

    It outputs the dictionary a `SentenceEncoder` takes: `token_ids` and
    `padding_mask` (and all-zero `segment_ids` when the backbone asks for
    them). Any KerasHub tokenizer with start, end and pad tokens works
    (`BertTokenizer`, `RobertaTokenizer`, ...). On TensorFlow it runs inside
    `tf.data`, so `encoder.predict(["a", "b"])` and `encoder.fit(strings, ...)`
    take raw text; on JAX and PyTorch it tokenises on the host
    (`host_token_ids`, `host_inputs`; `model.host_tokenizer`).

    Args:
        tokenizer: a `keras_hub.tokenizers.Tokenizer`.
        sequence_length: int. The padded length, >= 3; longer texts are
            truncated (the end token is kept).
        include_segment_ids: bool. Also output `segment_ids` (zeros).
        added_tokens: list of dicts (`content`, `id`, `lstrip`, `rstrip`),
            or None. Strings that get their own id wherever a text holds
            them (`tokenizer.json`'s `added_tokens`; see `model.added_tokens`).

    Example:
    ```python
    preprocessor = SentenceEncoderPreprocessor(tokenizer, sequence_length=32)
    preprocessor(["The quick brown fox.", "Call me Ishmael."])
    ```
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=256,
        include_segment_ids=False,
        added_tokens=None,
        **kwargs,
    ):
        super().__init__(tokenizer=tokenizer, sequence_length=sequence_length, **kwargs)
        self.include_segment_ids = include_segment_ids
        self.added_tokens = [dict(t) for t in added_tokens or ()]
        self.build(None)

    def build(self, input_shape=None):
        """Marks it and its tokenizer built (no state waits for a shape; `ragged_token_ids` packs, not a packer).

        Called by `__init__`: Keras' JAX `predict_on_batch` runs a model holding an unbuilt layer eagerly first.
        """
        if not self.tokenizer.built:
            self.tokenizer.build(None)
        super(keras_hub.models.TextEmbedderPreprocessor, self).build(input_shape)

    @property
    def sequence_length(self):
        """int. The padded length; every assignment (`__init__` too) is checked.

        Once a `SentenceEncoder` holds this preprocessor, it sets
        `position_limit` to its backbone's number of position embeddings, and
        a longer length is refused when assigned (not at the next `encode`).
        """
        return super().sequence_length

    @sequence_length.setter
    def sequence_length(self, value):
        check_sequence_length(value, getattr(self, "position_limit", None))
        keras_hub.models.TextEmbedderPreprocessor.sequence_length.fset(self, int(value))
        self._tokenize_fn = None  # traced with the old length; callers key their own traces by it

    def format_features(self, token_ids):
        """Padded token ids -> the model-input dict (mask = not padding)."""
        token_ids = tf.cast(token_ids, "int32")
        inputs = {"token_ids": token_ids, "padding_mask": tf.cast(token_ids != self.tokenizer.pad_token_id, "int32")}
        if self.include_segment_ids:
            inputs["segment_ids"] = tf.zeros_like(token_ids)
        return inputs

    def token_ids(self, texts):
        """Graph-safe: strings `(n,)` -> their token ids, ragged, added tokens split out.

        A tokenizer with a `cut_texts` method (`ByteLevelBPETokenizer`) first
        cuts each piece of text to what its kept tokens can depend on.
        """
        cut = getattr(self.tokenizer, "cut_texts", None)
        budget = self.sequence_length - 2
        cut_texts = (lambda texts: cut(texts, budget)[0]) if cut is not None else None
        texts = tf.convert_to_tensor(texts, tf.string)
        scalar = texts.shape.rank == 0
        ids = tokenize_with_added_tokens(self.tokenizer, tf.reshape(texts, [-1]), self.added_tokens, cut_texts)
        return ids[0] if scalar else ids

    def call(self, x, y=None, sample_weight=None):
        """Strings -> the model-input dict (the `TextEmbedderPreprocessor` call, packed by `ragged_token_ids`).

        Outside TensorFlow (JAX, PyTorch) strings are tokenised on the host
        and padded to `sequence_length` (numpy arrays), as KerasHub does.
        """
        x = x if isinstance(x, tuple) else (x,)
        if len(x) != 1:
            raise ValueError(f"SentenceEncoderPreprocessor takes one segment of texts; received {len(x)}.")
        if not backends.uses_tensorflow() and not backends.is_tf_tensor(x[0], ragged=True):
            inputs = self.host_inputs(check_texts(x[0], "x"), self.sequence_length)
            return keras.utils.pack_x_y_sample_weight(inputs, y, sample_weight)
        texts = tf.convert_to_tensor(x[0], tf.string)
        ids, _ = self.ragged_token_ids(tf.reshape(texts, [-1]))
        token_ids = ids.to_tensor(self.tokenizer.pad_token_id, shape=[None, self.sequence_length])
        inputs = self.format_features(token_ids[0] if texts.shape.rank == 0 else token_ids)
        return keras.utils.pack_x_y_sample_weight(inputs, y, sample_weight)

    def ragged_token_ids(self, texts):
        """Graph-safe: strings -> `[start] ids [end]` as a RaggedTensor.

        Texts longer than `sequence_length` are cut (the end token is kept).

        Returns:
            `(ids, truncated)`: ragged ids `(n, None)` and a bool `(n,)`
            telling which texts were cut.
        """
        ids = self.token_ids(texts)
        budget = self.sequence_length - 2
        truncated = ids.row_lengths() > budget
        ids = ids[:, :budget]
        n = tf.shape(truncated)[0]
        start = tf.fill([n, 1], tf.cast(self.tokenizer.start_token_id, ids.dtype))
        end = tf.fill([n, 1], tf.cast(self.tokenizer.end_token_id, ids.dtype))
        return tf.concat([start, ids, end], axis=1), truncated

    def dynamic_inputs(self, texts):
        """Graph-safe: strings -> model inputs padded to the longest text."""
        ids, _ = self.ragged_token_ids(texts)
        return self.format_features(ids.to_tensor(self.tokenizer.pad_token_id))

    def tokenize(self, texts):
        """Eager helper for `encode`: `(ragged ids, number truncated)` (outside TensorFlow `host_token_ids`' rows)."""
        if not backends.uses_tensorflow():
            rows, truncated = self.host_token_ids(check_texts(texts))
            return rows, int(truncated.sum())
        ids, truncated = self.traced_ragged_token_ids()(tf.constant(texts, dtype=tf.string))
        return ids, int(tf.reduce_sum(tf.cast(truncated, "int32")))

    def traced_ragged_token_ids(self):
        """The tokenising graphs' one trace of `ragged_token_ids` per length (no AutoGraph; traced, ids stay ragged)."""
        if getattr(self, "_tokenize_fn", None) is None:
            spec = [tf.TensorSpec([None], tf.string)]
            self._tokenize_fn = compat_tf.traced_once(
                tf.function(self.ragged_token_ids, input_signature=spec, autograph=False)
            )
        return self._tokenize_fn

    def get_config(self):
        config = super().get_config()
        config.update({"include_segment_ids": self.include_segment_ids, "added_tokens": self.added_tokens})
        return config


def holds_strings(x):
    """Whether the array, tensor or `KerasTensor` `x` has a string (or numpy object) dtype."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype.kind in "USO"
    if dtype is None or not backends.tensorflow_loaded():
        return dtype in ("string", "str")  # a KerasTensor's dtype name; no TensorFlow string tensors exist
    return tf.as_dtype(dtype) == tf.string


def is_raw_text(x):
    """Whether `predict` / `__call__` hand `x` to `encode` (whose `check_texts` accepts or refuses it).

    Strings, lists and tuples (empty ones too) and string arrays or eager
    string tensors of any rank are text: `check_texts` encodes them or names
    the bad item. Token ids (a dict, numeric arrays or tensors, or a list of
    them), datasets and symbolic tensors keep the Keras path.
    """
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (list, tuple)):
        return not x or not all(isinstance(t, dict) or (hasattr(t, "dtype") and not holds_strings(t)) for t in x)
    if isinstance(x, np.ndarray):
        return holds_strings(x)
    if backends.is_tf_tensor(x, ragged=True):  # eager only: a symbolic tensor keeps the Keras path
        return holds_strings(x) and tf.executing_eagerly()
    return False


def is_single_text(x):
    """Whether `x` is one text: a string, or a 0-d string array or tensor (`encode` returns one vector)."""
    if isinstance(x, (str, bytes)):
        return True
    return (isinstance(x, np.ndarray) or backends.is_tf_tensor(x)) and len(x.shape) == 0 and holds_strings(x)
