"""Hugging Face tokenizer files -> KerasHub tokenizers, with parity.

KerasHub's `BertTokenizer` and `RobertaTokenizer` read `vocab.txt` and
`vocab.json` + `merges.txt`, but sentence-transformers 6 / transformers 5
save only `tokenizer.json`. KerasHub has no reader for that file, and the
`tokenizers` library is an optional dependency, so the vocabulary and merges
are read from it here (a few lines of JSON) and handed to KerasHub's
tokenizers in memory. `LowercasingBertTokenizer` fixes KerasHub's case
folding, which differs from Hugging Face's lowercasing. `MPNetTokenizer` is
the same WordPiece tokenizer with MPNet's special tokens (`<s>`, `</s>`,
`<pad>`, `<mask>`; packed as `<s> text </s>`): KerasHub has no MPNet.
SentencePiece (XLM-R) folders are read by `checkpoints.sentencepiece_model`.

Example:
```python
tokenizer = bert_tokenizer("path/to/all-MiniLM-L6-v2")
tokenizer(["Hello world"])
```
"""

import os

import keras
import keras_hub
import tensorflow as tf

from sbert_keras.checkpoints.added_tokens import with_added_tokens
from sbert_keras.model.bpe_tokenizer import ByteLevelBPETokenizer
from sbert_keras.utils.model_files import VOCABULARY_LIMIT
from sbert_keras.utils.model_files import model_file
from sbert_keras.utils.model_files import read_json as _read_json


class PythonLowercasing:
    """Lowercases like Hugging Face (`str.lower`) before a KerasHub WordPiece tokenizer.

    KerasHub's `lowercase=True` applies Unicode *case folding*, which also
    rewrites letters that lowercasing keeps (German "ß" -> "ss", Greek final
    "ς" -> "σ"), so some words tokenise differently from the checkpoint's
    own tokenizer. This mixin lowercases with `tf.strings.lower` (UTF-8)
    and hands KerasHub an already-lowercased string (`lowercase=False`).
    """

    def tokenize(self, inputs):
        if self.lowercase_like_python:
            inputs = tf.strings.lower(tf.convert_to_tensor(inputs, tf.string), encoding="utf-8")
        return super().tokenize(inputs)

    def get_config(self):
        config = super().get_config()
        config["lowercase"] = self.lowercase_like_python
        return config


@keras.saving.register_keras_serializable(package="sbert_keras")
class LowercasingBertTokenizer(PythonLowercasing, keras_hub.models.BertTokenizer):
    """`BertTokenizer` that lowercases like Hugging Face (`str.lower`), see `PythonLowercasing`.

    Args:
        lowercase: bool. Lowercase the input (the checkpoint's `do_lower_case`).
        **kwargs: passed to `keras_hub.models.BertTokenizer`.
    """

    def __init__(self, vocabulary=None, lowercase=False, **kwargs):
        kwargs.pop("lowercase", None)
        super().__init__(vocabulary=vocabulary, lowercase=False, **kwargs)
        self.lowercase_like_python = lowercase


@keras.saving.register_keras_serializable(package="sbert_keras")
class MPNetTokenizer(PythonLowercasing, keras_hub.tokenizers.WordPieceTokenizer):
    """MPNet's WordPiece tokenizer: `<s>`, `</s>`, `<pad>`, `<mask>`, and its own unknown token.

    Hugging Face's `MPNetTokenizer` is BERT's WordPiece (same normaliser and
    pre-tokenizer) with RoBERTa's special tokens; the unknown token is the
    vocabulary's `[UNK]` in the released checkpoints. Lowercasing follows
    `PythonLowercasing`.

    Args:
        vocabulary: list of str or a `vocab.txt` path.
        lowercase: bool. Lowercase the input.
        oov_token: str. The unknown token (`tokenizer.json`'s `unk_token`).
        **kwargs: passed to `keras_hub.tokenizers.WordPieceTokenizer`.
    """

    def __init__(self, vocabulary=None, lowercase=False, oov_token="[UNK]", **kwargs):
        for token, name in MPNET_SPECIAL_TOKENS:
            self._add_special_token(token, name)
        kwargs.pop("lowercase", None)
        super().__init__(vocabulary=vocabulary, lowercase=False, oov_token=oov_token, **kwargs)
        self.lowercase_like_python = lowercase


MPNET_SPECIAL_TOKENS = (
    ("<s>", "cls_token"),
    ("</s>", "sep_token"),
    ("<pad>", "pad_token"),
    ("<mask>", "mask_token"),
    ("<s>", "start_token"),
    ("</s>", "end_token"),
)


def _field(value, path, field, kinds, expected):
    """`value`, refused unless it is one of `kinds` (bool is not an int)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValueError(f"{path}: `{field}` must be {expected}; found {value!r}.")
    return value


def _tokenizer_model(folder, kind):
    """`tokenizer.json`'s `model` section, checked to be of type `kind`."""
    path = os.path.join(folder, "tokenizer.json")
    model = (_read_json(folder, "tokenizer.json") or {}).get("model")
    if model is None:
        return None
    _field(model, path, "model", dict, f'an object (e.g. {{"type": "{kind}", "vocab": {{...}}}})')
    if model.get("type") != kind:
        raise ValueError(f"{path}: expected a {kind} tokenizer; found model type {model.get('type')!r}.")
    _field(model.get("vocab"), path, "model.vocab", dict, "an object mapping tokens to ids")
    return model


def _vocabulary_list(vocab, path, field="model.vocab"):
    """A `{token: id}` dict as the token list KerasHub takes.

    Ids must be the integers 0..n-1, so that the vocabulary size a tokenizer
    reports is also one more than its largest id.
    """
    for token, index in vocab.items():
        _field(index, path, f"{field}[{token!r}]" if field else f"the id of {token!r}", int, "an integer id")
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError(f"{path}: the ids of `{field or 'the vocabulary'}` are not 0..{len(tokens) - 1} without gaps.")
    return tokens


def _bert_normalizer(folder):
    """The `BertNormalizer` of `tokenizer.json` (also inside a `Sequence`)."""
    path = os.path.join(folder, "tokenizer.json")
    normalizer = (_read_json(folder, "tokenizer.json") or {}).get("normalizer") or {}
    _field(normalizer, path, "normalizer", dict, "an object or null")
    items = _field(normalizer.get("normalizers") or [], path, "normalizer.normalizers", list, "a list")
    for i, item in enumerate([normalizer] + items):
        _field(item, path, f"normalizer.normalizers[{i - 1}]" if i else "normalizer", dict, "an object")
        if item.get("type") == "BertNormalizer":
            for key in ("lowercase", "strip_accents"):
                _field(item.get(key), path, f"normalizer.{key}", (bool, type(None)), "true, false or null")
            return item
    return {}


def _merges(model, path):
    """BPE merges as "a b" strings (older files) or `[a, b]` pairs (newer)."""
    merges = _field(model.get("merges", []), path, "model.merges", list, "a list")
    for i, merge in enumerate(merges):
        pair = isinstance(merge, list) and len(merge) == 2 and all(isinstance(m, str) for m in merge)
        if not (isinstance(merge, str) or pair):
            raise ValueError(f'{path}: `model.merges[{i}]` must be "a b" or ["a", "b"]; found {merge!r}.')
    return [m if isinstance(m, str) else " ".join(m) for m in merges]


def bert_tokenizer(folder, lowercase=None, tokenizer_class=None):
    """The WordPiece tokenizer of a BERT-like folder (`vocab.txt` or `tokenizer.json`).

    Lowercasing and accent stripping follow `tokenizer_config.json`
    (`do_lower_case`, `strip_accents`), else `tokenizer.json`'s
    `BertNormalizer`; `strip_accents` left `null` follows lowercasing.

    Args:
        folder: str. A Hugging Face / sentence-transformers folder.
        lowercase: bool or None. `True` lowercases whatever the tokenizer
            files say (sentence-transformers' own `do_lower_case`).
        tokenizer_class: `LowercasingBertTokenizer` (the default: `[CLS]`,
            `[SEP]`) or `MPNetTokenizer` (`<s>`, `</s>`; its unknown token
            is read from the files).

    Returns:
        a `tokenizer_class` instance.
    """
    tokenizer_class = tokenizer_class or LowercasingBertTokenizer
    vocab_path = model_file(folder, "vocab.txt", limit=VOCABULARY_LIMIT)
    model = _tokenizer_model(folder, "WordPiece") if vocab_path is None else None
    if vocab_path is not None:
        vocabulary = vocab_path
    else:
        if model is None:
            raise FileNotFoundError(f"{folder} has neither `vocab.txt` nor `tokenizer.json`.")
        vocabulary = _vocabulary_list(with_added_tokens(model["vocab"], folder), os.path.join(folder, "tokenizer.json"))
    tok_config = _read_json(folder, "tokenizer_config.json") or {}
    config_path = os.path.join(folder, "tokenizer_config.json")
    for key in ("do_lower_case", "strip_accents"):
        _field(tok_config.get(key), config_path, key, (bool, type(None)), "true, false or null")
    normalizer = _bert_normalizer(folder)
    tokenizer_lowercases = tok_config.get("do_lower_case", normalizer.get("lowercase", True))
    strip_accents = tok_config.get("strip_accents")
    if strip_accents is None:
        strip_accents = normalizer.get("strip_accents")
    if strip_accents is None:
        strip_accents = tokenizer_lowercases
    options = {}
    if tokenizer_class is MPNetTokenizer:
        unknown = (model or _tokenizer_model(folder, "WordPiece") or {}).get("unk_token") or tok_config.get("unk_token")
        unknown = unknown.get("content") if isinstance(unknown, dict) else unknown  # an AddedToken
        options["oov_token"] = _field(unknown or "[UNK]", config_path, "unk_token", str, "a string")
    return tokenizer_class(
        vocabulary=vocabulary,
        lowercase=bool(lowercase or tokenizer_lowercases),
        strip_accents=bool(strip_accents),
        **options,
    )


def _adds_prefix_space(folder):
    """The `add_prefix_space` of `tokenizer.json`'s `ByteLevel` pre-tokenizer (False without one)."""
    pre = (_read_json(folder, "tokenizer.json") or {}).get("pre_tokenizer") or {}
    items = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    for item in items:
        if isinstance(item, dict) and item.get("type") == "ByteLevel":
            return bool(item.get("add_prefix_space", False))
    return False


def roberta_tokenizer(folder):
    """The byte-level BPE tokenizer of a RoBERTa folder, with Hugging Face's ids.

    Args:
        folder: str. A folder with `vocab.json` + `merges.txt`, or
            `tokenizer.json` (merges as "a b" strings or `[a, b]` pairs).

    Returns:
        a `ByteLevelBPETokenizer` (a `keras_hub.models.RobertaTokenizer`).
    """
    vocab_path = model_file(folder, "vocab.json", limit=VOCABULARY_LIMIT)
    merges_path = model_file(folder, "merges.txt", limit=VOCABULARY_LIMIT)
    prefix = _adds_prefix_space(folder)
    if vocab_path is not None and merges_path is not None:
        vocab = _read_json(folder, "vocab.json")
        _vocabulary_list(vocab, vocab_path, field="")
        return ByteLevelBPETokenizer(vocabulary=vocab, merges=merges_path, add_prefix_space=prefix)
    model = _tokenizer_model(folder, "BPE")
    if model is None:
        raise FileNotFoundError(f"{folder} has neither `vocab.json` + `merges.txt` nor `tokenizer.json`.")
    path = os.path.join(folder, "tokenizer.json")
    vocab = with_added_tokens(model["vocab"], folder)
    _vocabulary_list(vocab, path)
    return ByteLevelBPETokenizer(vocabulary=vocab, merges=_merges(model, path), add_prefix_space=prefix)
