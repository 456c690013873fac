"""XLM-R's SentencePiece tokenizer, splitting words at every Unicode space as Hugging Face does.

Hugging Face's XLM-R tokenizer normalises with the model's character map,
then splits words at every character of Unicode's White_Space property
(`WhitespaceSplit`) before `Metaspace`. SentencePiece itself (KerasHub's
`XLMRobertaTokenizer`, through TensorFlow Text) splits only at the spaces
its character map makes, so a space the map keeps (U+0085, "next line")
joins two words into one unknown piece. `SpaceSplittingXLMRobertaTokenizer`
turns every such space into " " first (all of White_Space but U+000B,
which the map deletes).

KerasHub reads a model's pieces with the `sentencepiece` package when
TensorFlow Text is absent; without either (a JAX or PyTorch install), the
tokenizer reads them with `parse_model` below, a reader of the few protobuf
fields used (`checkpoints.sentencepiece_model` writes them), so it can still
be built, saved and tokenise on the host (`model.host_tokenizer`).

Example:
```python
tokenizer = SpaceSplittingXLMRobertaTokenizer(proto=proto)
tokenizer(["is\\x85nice"])  # the ids of "is nice"
```
"""

import base64
import binascii
import struct

import keras
import keras_hub

from sbert_keras.utils.backends import tensorflow as tf

# `SentencePiece.Type` values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1
# XLM-R's (fairseq's) ids of its special tokens, before the SentencePiece pieces.
FAIRSEQ_PREFIX = ("<s>", "<pad>", "</s>", "<unk>")
# KerasHub's heuristic: a longer string of base64 characters is a serialized model, not a path.
BASE64_MIN_LENGTH = 2048
# White_Space less U+000B, which XLM-R's character map deletes.
SPACES = r"\t\n\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"


def _read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data):
    """`[(field number, value)]` of one message: ints, bytes, or raw 4/8-byte payloads."""
    pos, found = 0, []
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(data, pos)
        elif wire_type == 2:
            length, pos = _read_varint(data, pos)
            value, pos = bytes(data[pos : pos + length]), pos + length
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, pos = bytes(data[pos : pos + size]), pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        if pos > len(data):
            raise ValueError("truncated protobuf message")
        found.append((number, value))
    return found


def parse_model(proto):
    """The parts of a serialized SentencePiece `ModelProto` that a tokenizer needs.

    Returns:
        dict: `pieces` (list of `(piece, score, type)`), `model_type`,
        `byte_fallback`, `precompiled_charsmap` (bytes), `add_dummy_prefix`,
        `remove_extra_whitespaces`.

    Raises:
        ValueError: bytes that are not a readable model.
    """
    model = {"pieces": [], "model_type": UNIGRAM, "byte_fallback": False, "precompiled_charsmap": b""}
    model.update(add_dummy_prefix=True, remove_extra_whitespaces=True)
    try:
        for number, value in _fields(proto):
            if number == 1:
                piece = {1: b"", 2: struct.pack("<f", 0.0), 3: NORMAL} | dict(_fields(value))
                model["pieces"].append((piece[1].decode("utf-8"), struct.unpack("<f", piece[2])[0], piece[3]))
            elif number == 2:
                trainer = dict(_fields(value))
                model["model_type"] = trainer.get(3, UNIGRAM)
                model["byte_fallback"] = bool(trainer.get(35, 0))
            elif number == 3:
                spec = dict(_fields(value))
                model["precompiled_charsmap"] = spec.get(2, b"")
                model["add_dummy_prefix"] = bool(spec.get(3, 1))
                model["remove_extra_whitespaces"] = bool(spec.get(4, 1))
    except (IndexError, ValueError, UnicodeDecodeError, struct.error) as e:
        raise ValueError(f"not a readable SentencePiece model ({e})") from e
    if not model["pieces"]:
        raise ValueError("not a readable SentencePiece model (no pieces)")
    return model


def _proto_bytes(proto):
    """The model's bytes from bytes, a base64 string (a saved config) or a file path (as KerasHub reads them)."""
    if isinstance(proto, bytes):
        return proto
    if len(proto) > BASE64_MIN_LENGTH:
        try:
            return base64.b64decode(proto, validate=True)
        except binascii.Error:
            pass
    with open(proto, "rb") as file:
        return file.read()


@keras.saving.register_keras_serializable(package="sbert_keras")
class SpaceSplittingXLMRobertaTokenizer(keras_hub.models.XLMRobertaTokenizer):
    """`XLMRobertaTokenizer` that treats every Unicode space as " ", as Hugging Face's does.

    Args:
        proto: bytes or str. The SentencePiece model (bytes or a file path).
        **kwargs: passed to `keras_hub.models.XLMRobertaTokenizer`.

    Example:
    ```python
    tokenizer = SpaceSplittingXLMRobertaTokenizer(proto="sentencepiece.bpe.model")
    tokenizer.token_to_id("<mask>")
    ```
    """

    def set_proto(self, proto):
        """Sets the SentencePiece model; without `sentencepiece` and TensorFlow Text, reads its pieces itself."""
        self._fairseq_vocabulary = None
        try:
            super().set_proto(proto)
            return
        except ImportError:  # KerasHub found neither TensorFlow Text nor sentencepiece
            pass
        self.proto = _proto_bytes(proto)
        pieces = [piece for piece, _, _ in parse_model(self.proto)["pieces"]]
        self._fairseq_vocabulary = [*FAIRSEQ_PREFIX, *pieces[3:], "<mask>"]
        self._fairseq_ids = {token: i for i, token in enumerate(self._fairseq_vocabulary)}
        self.mask_token_id = len(self._fairseq_vocabulary) - 1

    def vocabulary_size(self):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().vocabulary_size()
        return len(self._fairseq_vocabulary)

    def get_vocabulary(self):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().get_vocabulary()
        return list(self._fairseq_vocabulary)

    def id_to_token(self, id):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().id_to_token(id)
        if not 0 <= int(id) < len(self._fairseq_vocabulary):
            raise ValueError(f"`id` must be in range [0, {len(self._fairseq_vocabulary) - 1}]. Received: {id}")
        return self._fairseq_vocabulary[int(id)]

    def token_to_id(self, token):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().token_to_id(token)
        if isinstance(token, bytes):
            token = token.decode("utf-8")
        return self._fairseq_ids.get(token, self.unk_token_id)

    def tokenize(self, inputs):
        """Strings -> ids, every White_Space character read as " "."""
        inputs = tf.strings.regex_replace(tf.convert_to_tensor(inputs, tf.string), f"[{SPACES}]", " ")
        return super().tokenize(inputs)
