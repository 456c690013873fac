"""SentencePiece model files (a serialized `ModelProto`) read with the protobuf wire format.

Why a hand-written reader: the `sentencepiece` package ships
`sentencepiece_model_pb2`, but its generated code refuses the protobuf
runtime TensorFlow pins ("gencode 7.36 runtime 6.33"), and a JAX or PyTorch
install may have neither `sentencepiece` nor TensorFlow Text. The few fields
a tokenizer needs (pieces, scores, types, the normaliser spec, the model
type) are decoded from the wire format directly;
`checkpoints.sentencepiece_model` writes them.

Example:
```python
model = parse_model(proto_bytes("sentencepiece.bpe.model"))
model["pieces"][:3]  # [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
```
"""

import base64
import binascii
import struct

# `SentencePiece.Type` values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1
# XLM-R's (fairseq's) ids of its special tokens, before the SentencePiece pieces (`<mask>` comes last).
FAIRSEQ_PREFIX = ("<s>", "<pad>", "</s>", "<unk>")
# KerasHub's heuristic: a longer string of base64 characters is a serialized model, not a path.
BASE64_MIN_LENGTH = 2048


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


def proto_bytes(proto):
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
