"""Hugging Face tokenizer files -> KerasHub tokenizers, with parity.

KerasHub's `BertTokenizer` and `RobertaTokenizer` read `vocab.txt` and
`vocab.json` + `merges.txt`, but sentence-transformers 6 / transformers 5
save only `tokenizer.json`. KerasHub has no reader for that file, so the
vocabulary, merges and normaliser options are read from it here (a few
lines of JSON) and handed to KerasHub's tokenizers in memory; the models
run in the TensorFlow graph, without the `tokenizers` library.
`tokenizer.json` is what sentence-transformers tokenises with, so it wins
over a `vocab.txt` beside it that holds another vocabulary (with a
warning). `LowercasingBertTokenizer` and `MPNetTokenizer` tokenise as
Hugging Face's `tokenizers` does (`model.wordpiece`); `MPNetTokenizer` is
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
import warnings

import keras
import keras_hub

from sbert_keras.checkpoints.added_tokens import with_added_tokens
from sbert_keras.model.bpe_tokenizer import ByteLevelBPETokenizer
from sbert_keras.model.wordpiece import HuggingFaceWordPiece
from sbert_keras.utils import defaults
from sbert_keras.utils.model_files import VOCABULARY_LIMIT
from sbert_keras.utils.model_files import model_file
from sbert_keras.utils.model_files import read_json as _read_json


@keras.saving.register_keras_serializable(package="sbert_keras")
class LowercasingBertTokenizer(HuggingFaceWordPiece, keras_hub.models.BertTokenizer):
    """`BertTokenizer` that tokenises as Hugging Face's `tokenizers` (`model.wordpiece.HuggingFaceWordPiece`).

    Args:
        vocabulary: list of str or a `vocab.txt` path.
        lowercase: bool. Lowercase the input (the checkpoint's `do_lower_case`).
        clean_text: bool. Delete control characters, white space to spaces.
        handle_chinese_chars: bool. Put spaces around CJK characters.
        max_input_chars_per_word: int. Longer words are the unknown token.
        **kwargs: passed to `keras_hub.models.BertTokenizer` (`strip_accents`, ...).
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=False,
        clean_text=True,
        handle_chinese_chars=True,
        max_input_chars_per_word=defaults.MAX_INPUT_CHARS_PER_WORD,
        **kwargs,
    ):
        self.set_normalizer_options(clean_text, handle_chinese_chars, max_input_chars_per_word)
        super().__init__(vocabulary=vocabulary, lowercase=lowercase, **kwargs)


@keras.saving.register_keras_serializable(package="sbert_keras")
class MPNetTokenizer(HuggingFaceWordPiece, keras_hub.tokenizers.WordPieceTokenizer):
    """MPNet's WordPiece tokenizer: `<s>`, `</s>`, `<pad>`, `<mask>`, and its own unknown token.

    Hugging Face's `MPNetTokenizer` is BERT's WordPiece (same normaliser and
    pre-tokenizer) with RoBERTa's special tokens; the unknown token is the
    vocabulary's `[UNK]` in the released checkpoints. It tokenises as
    `tokenizers` does (`model.wordpiece.HuggingFaceWordPiece`).

    Args:
        vocabulary: list of str or a `vocab.txt` path.
        lowercase: bool. Lowercase the input.
        oov_token: str. The unknown token (`tokenizer.json`'s `unk_token`).
        clean_text: bool. Delete control characters, white space to spaces.
        handle_chinese_chars: bool. Put spaces around CJK characters.
        max_input_chars_per_word: int. Longer words are the unknown token.
        **kwargs: passed to `keras_hub.tokenizers.WordPieceTokenizer`.
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=False,
        oov_token="[UNK]",
        clean_text=True,
        handle_chinese_chars=True,
        max_input_chars_per_word=defaults.MAX_INPUT_CHARS_PER_WORD,
        **kwargs,
    ):
        for token, name in MPNET_SPECIAL_TOKENS:
            self._add_special_token(token, name)
        self.set_normalizer_options(clean_text, handle_chinese_chars, max_input_chars_per_word)
        super().__init__(vocabulary=vocabulary, lowercase=lowercase, oov_token=oov_token, **kwargs)


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


def read_vocab_txt(path):
    """The tokens of a `vocab.txt`, one per line (trailing white space dropped, as KerasHub and `tokenizers` do).

    Raises:
        ValueError: a token appears twice; names the file, both lines and the token.
    """
    with open(path, encoding="utf-8") as file:
        tokens = [line.rstrip() for line in file]
    first_line = {}
    for number, token in enumerate(tokens, 1):
        if token in first_line:
            raise ValueError(
                f"{path}:{number}: duplicate token {token!r} (first on line {first_line[token]}); "
                "each token of a vocabulary must be unique."
            )
        first_line[token] = number
    return tokens


def wordpiece_vocabulary(folder):
    """`(tokens, tokenizer.json's WordPiece model or None)` of a BERT-like folder.

    `tokenizer.json` is the source of truth (sentence-transformers tokenises
    with it); a `vocab.txt` beside it that holds other tokens is named in a
    warning and not used. Without `tokenizer.json`, `vocab.txt` is read.
    """
    json_path = os.path.join(folder, "tokenizer.json")
    vocab_path = model_file(folder, "vocab.txt", limit=VOCABULARY_LIMIT)
    model = _tokenizer_model(folder, "WordPiece")
    if model is None:
        if vocab_path is None:
            raise FileNotFoundError(f"{folder} has neither `vocab.txt` nor `tokenizer.json`.")
        return read_vocab_txt(vocab_path), None
    # The added tokens the model's vocabulary lacks (an ST-saved MPNet keeps `<s>` there) get their file ids.
    tokens = _vocabulary_list(with_added_tokens(model["vocab"], folder), json_path)
    if vocab_path is not None:
        with open(vocab_path, encoding="utf-8") as file:
            text_tokens = [line.rstrip() for line in file]
        if text_tokens != tokens:
            where = next((i for i, pair in enumerate(zip(text_tokens, tokens)) if pair[0] != pair[1]), None)
            detail = (
                f"line {where + 1} is {text_tokens[where]!r}, id {where} is {tokens[where]!r}"
                if where is not None
                else f"{len(text_tokens)} tokens against {len(tokens)}"
            )
            warnings.warn(
                f"{vocab_path} and {json_path} hold different vocabularies ({detail}); using {json_path}, "
                "which is what sentence-transformers tokenises with.",
                stacklevel=2,
            )
    return tokens, model


def _normalizer_options(folder, normalizer, model, tok_config):
    """`clean_text`, `handle_chinese_chars` and `max_input_chars_per_word` of the tokenizer files."""
    path = os.path.join(folder, "tokenizer.json")
    options = {}
    for key, source in (("clean_text", normalizer), ("handle_chinese_chars", normalizer)):
        options[key] = _field(source.get(key, True), path, f"normalizer.{key}", bool, "true or false")
    chinese = tok_config.get("tokenize_chinese_chars")
    if chinese is not None:
        config_path = os.path.join(folder, "tokenizer_config.json")
        options["handle_chinese_chars"] = _field(chinese, config_path, "tokenize_chinese_chars", bool, "a bool")
    longest = (model or {}).get("max_input_chars_per_word", defaults.MAX_INPUT_CHARS_PER_WORD)
    options["max_input_chars_per_word"] = _field(longest, path, "model.max_input_chars_per_word", int, "an int")
    prefix = (model or {}).get("continuing_subword_prefix", "##")
    options["suffix_indicator"] = _field(prefix, path, "model.continuing_subword_prefix", str, "a string")
    return options


def bert_tokenizer(folder, lowercase=None, tokenizer_class=None):
    """The WordPiece tokenizer of a BERT-like folder (`tokenizer.json` or `vocab.txt`).

    Lowercasing and accent stripping follow `tokenizer_config.json`
    (`do_lower_case`, `strip_accents`), else `tokenizer.json`'s
    `BertNormalizer`; `strip_accents` left `null` follows lowercasing.
    `clean_text`, `handle_chinese_chars` (or `tokenize_chinese_chars`),
    `max_input_chars_per_word` and the subword prefix come from the same
    files.

    Args:
        folder: str. A Hugging Face / sentence-transformers folder.
        lowercase: bool or None. `True` lowercases whatever the tokenizer
            files say (sentence-transformers' own `do_lower_case`).
        tokenizer_class: `LowercasingBertTokenizer` (the default: `[CLS]`,
            `[SEP]`) or `MPNetTokenizer` (`<s>`, `</s>`; its unknown token
            is read from the files).

    Returns:
        a `tokenizer_class` instance.

    Raises:
        ValueError: a malformed file (named with the field), or a token
            twice in `vocab.txt` (named with its lines).
    """
    tokenizer_class = tokenizer_class or LowercasingBertTokenizer
    vocabulary, model = wordpiece_vocabulary(folder)
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
    options = _normalizer_options(folder, normalizer, model, tok_config)
    if tokenizer_class is MPNetTokenizer:
        unknown = (model or {}).get("unk_token") or tok_config.get("unk_token")
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
