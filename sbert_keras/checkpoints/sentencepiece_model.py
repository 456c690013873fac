"""SentencePiece model files: read, built from `tokenizer.json`, and the XLM-R tokenizer.

KerasHub's `XLMRobertaTokenizer` runs a SentencePiece model (a serialized
`ModelProto`, XLM-R's `sentencepiece.bpe.model`) through TensorFlow Text, and
maps its ids to fairseq's (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, every
piece one up, `<mask>` last), which is also Hugging Face's numbering.
sentencepiece-transformers 6 / transformers 5 folders hold only
`tokenizer.json`: a Unigram model with the same pieces and scores, the
normaliser's precompiled character map, and a Metaspace pre-tokenizer. This
module rebuilds the SentencePiece model from those, so both kinds of
folders tokenise through the same KerasHub tokenizer, with the token ids
of the checkpoint's own tokenizer (checked on the fixtures' 310 texts).

Why a hand-written protobuf codec: the `sentencepiece` package ships
`sentencepiece_model_pb2`, but its generated code refuses the protobuf
runtime TensorFlow pins ("gencode 7.36 runtime 6.33"). The few fields used
here (pieces, scores, types, the normaliser spec, the model type) are
encoded with the protobuf wire format directly, and read by
`model.sentencepiece_proto`.

Example:
```python
tokenizer = xlm_roberta_tokenizer("path/to/paraphrase-multilingual-MiniLM-L12-v2")
model = parse_model(tokenizer.proto)  # pieces, normaliser, trainer settings
```
"""

import base64
import os
import struct

from sbert_keras.model.sentencepiece_proto import CONTROL
from sbert_keras.model.sentencepiece_proto import FAIRSEQ_PREFIX
from sbert_keras.model.sentencepiece_proto import NORMAL
from sbert_keras.model.sentencepiece_proto import UNIGRAM
from sbert_keras.model.sentencepiece_proto import UNKNOWN
from sbert_keras.model.sentencepiece_proto import parse_model
from sbert_keras.model.sentencepiece_tokenizer import SpaceSplittingXLMRobertaTokenizer
from sbert_keras.utils.model_files import VOCABULARY_LIMIT
from sbert_keras.utils.model_files import model_file
from sbert_keras.utils.model_files import read_json

# Hugging Face's (fairseq's) ids of XLM-R's special tokens, before the pieces.
XLM_R_PREFIX = FAIRSEQ_PREFIX
# Normalisers of a `tokenizer.json` that the SentencePiece model reproduces.
KNOWN_NORMALIZERS = ("Precompiled", "Replace", "Strip")


def _varint(value):
    value &= (1 << 64) - 1  # negative int32 fields take ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, wire_type, payload):
    key = _varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _piece(piece, score, kind):
    """One serialized `SentencePiece` message."""
    return _field(1, 2, piece.encode("utf-8")) + _field(2, 5, struct.pack("<f", score)) + _field(3, 0, _varint(kind))


def build_model(pieces, precompiled_charsmap=b"", add_dummy_prefix=True, remove_extra_whitespaces=True):
    """A serialized Unigram `ModelProto` (piece 0 `<unk>`, 1 `<s>`, 2 `</s>`).

    Args:
        pieces: list of `(piece, score, type)`.
        precompiled_charsmap: bytes. The normaliser's character map (empty: none).
        add_dummy_prefix: bool. Prepend "▁" to the text (Metaspace's prefix).
        remove_extra_whitespaces: bool. Strip and collapse whitespace.
    """
    body = b"".join(_field(1, 2, _piece(piece, score, kind)) for piece, score, kind in pieces)
    trainer = _field(3, 0, _varint(UNIGRAM)) + _field(4, 0, _varint(len(pieces)))
    trainer += b"".join(_field(n, 0, _varint(v)) for n, v in ((40, 0), (41, 1), (42, 2), (43, -1)))
    normalizer = _field(1, 2, b"nmt_nfkc" if precompiled_charsmap else b"identity")
    if precompiled_charsmap:
        normalizer += _field(2, 2, precompiled_charsmap)
    normalizer += b"".join(
        _field(n, 0, _varint(int(v))) for n, v in ((3, add_dummy_prefix), (4, remove_extra_whitespaces), (5, True))
    )
    return body + _field(2, 2, trainer) + _field(3, 2, normalizer)


def _normalizer_charsmap(tokenizer, path):
    """The precompiled character map of `tokenizer.json`'s normaliser (b"" for none)."""
    normalizer = tokenizer.get("normalizer") or {}
    items = normalizer.get("normalizers", [normalizer]) if normalizer.get("type") == "Sequence" else [normalizer]
    charsmap = b""
    for item in items:
        if not item:
            continue
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in KNOWN_NORMALIZERS:
            raise ValueError(
                f"{path}: normalizer {kind!r} is not supported in a Unigram tokenizer; "
                f"supported: {', '.join(KNOWN_NORMALIZERS)} (what sentencepiece's own normaliser does)."
            )
        if kind == "Precompiled":
            charsmap = base64.b64decode(item.get("precompiled_charsmap") or "")
    return charsmap


def _adds_prefix(tokenizer):
    """Whether the Metaspace pre-tokenizer prepends "▁" (SentencePiece's `add_dummy_prefix`)."""
    pre = tokenizer.get("pre_tokenizer") or {}
    items = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    for item in items:
        if isinstance(item, dict) and item.get("type") == "Metaspace":
            return item.get("prepend_scheme", "always") != "never" and item.get("add_prefix_space", True)
    return True


def model_from_tokenizer_json(folder):
    """The SentencePiece model of XLM-R's Unigram `tokenizer.json`, as bytes.

    Raises:
        ValueError: not a Unigram model, a vocabulary not laid out as XLM-R's
            (`<s> <pad> </s> <unk>` first, `<mask>` last), byte fallback, or a
            normaliser SentencePiece does not have; the file is named.
    """
    path = os.path.join(folder, "tokenizer.json")
    tokenizer = read_json(folder, "tokenizer.json") or {}
    model = tokenizer.get("model") if isinstance(tokenizer.get("model"), dict) else {}
    if model.get("type") != "Unigram":
        raise ValueError(f"{path}: expected a Unigram tokenizer; found model type {model.get('type')!r}.")
    if model.get("byte_fallback"):
        raise ValueError(f"{path}: a Unigram model with byte_fallback=true is not supported.")
    vocab = model.get("vocab")
    good = isinstance(vocab, list) and all(
        isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], (int, float)) for v in vocab
    )
    if not good or not vocab:
        raise ValueError(f"{path}: `model.vocab` must be a non-empty list of [piece, score] pairs.")
    prefix = tuple(v[0] for v in vocab[:4])
    if len(vocab) < 6 or prefix != XLM_R_PREFIX or vocab[-1][0] != "<mask>" or model.get("unk_id") != 3:
        raise ValueError(
            f"{path}: the vocabulary is not laid out as XLM-RoBERTa's ({', '.join(XLM_R_PREFIX)} first, "
            f"<mask> last, unk_id 3, pieces between); found {list(prefix)} ... {vocab[-1][0]!r} "
            f"({len(vocab)} entries), unk_id {model.get('unk_id')!r}."
        )
    pieces = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
    pieces += [(piece, float(score), NORMAL) for piece, score in vocab[4:-1]]
    return build_model(pieces, _normalizer_charsmap(tokenizer, path), _adds_prefix(tokenizer))


def check_xlm_roberta_model(proto, source):
    """Refuses a SentencePiece model KerasHub's `XLMRobertaTokenizer` would misread; names `source`."""
    try:
        model = parse_model(proto)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from e
    if model["model_type"] != UNIGRAM or model["byte_fallback"]:
        raise ValueError(f"{source}: only Unigram SentencePiece models without byte fallback are supported.")
    first = [(p, kind) for p, _, kind in model["pieces"][:3]]
    if first != [("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL)]:
        raise ValueError(f"{source}: the first pieces must be <unk>, <s>, </s> (XLM-R's); found {first}.")
    return model


def xlm_roberta_tokenizer(folder):
    """XLM-R's tokenizer from `sentencepiece.bpe.model`, else from `tokenizer.json`.

    Returns:
        a `SpaceSplittingXLMRobertaTokenizer` (a `keras_hub.models.XLMRobertaTokenizer`).
    """
    path = model_file(folder, "sentencepiece.bpe.model", limit=VOCABULARY_LIMIT)
    if path is not None:
        with open(path, "rb") as f:
            proto = f.read()
        source = path
    elif model_file(folder, "tokenizer.json", limit=VOCABULARY_LIMIT) is not None:
        proto, source = model_from_tokenizer_json(folder), os.path.join(folder, "tokenizer.json")
    else:
        raise FileNotFoundError(f"{folder} has neither `sentencepiece.bpe.model` nor `tokenizer.json`.")
    check_xlm_roberta_model(proto, source)
    return SpaceSplittingXLMRobertaTokenizer(proto=proto)
