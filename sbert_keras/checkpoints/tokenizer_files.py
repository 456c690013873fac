"""KerasHub tokenizers -> the Hugging Face tokenizer files of a sentence-transformers folder.

The reverse of `tokenizer_json` and `sentencepiece_model`: from the
vocabulary (and merges, or SentencePiece model) a KerasHub tokenizer holds,
write `tokenizer.json` as transformers 5 writes it for the model type, the
separate vocabulary files older readers take (`vocab.txt`; `vocab.json` +
`merges.txt`; `sentencepiece.bpe.model`), and `tokenizer_config.json` (the
tokenizer class, the special tokens, `model_max_length`). Only JSON is
written: neither `tokenizers` nor `transformers` is needed, and the tests
check that both load the files with the token ids of the Keras tokenizer.

Example:
```python
files = tokenizer_files(encoder.preprocessor.tokenizer, "BertTokenizer", max_length=256)
# {"tokenizer.json": {...}, "tokenizer_config.json": {...}, "vocab.txt": "..."}
```
"""

import base64

import keras_hub

from sbert_keras.checkpoints.sentencepiece_model import parse_model
from sbert_keras.checkpoints.tokenizer_json import MPNetTokenizer
from sbert_keras.utils import defaults

WORDPIECE_DECODER = {"type": "WordPiece", "prefix": "##", "cleanup": True}
METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _added(token_id, token, lstrip=False):
    return {
        "id": token_id,
        "content": token,
        "single_word": False,
        "lstrip": lstrip,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def _template(cls, sep, pair_type_id):
    """A `TemplateProcessing` post-processor: `cls $A sep` (pairs: `cls $A sep $B sep`)."""
    special = lambda token: {"SpecialToken": {"id": token[0], "type_id": 0}}  # noqa: E731
    single = [special(cls), {"Sequence": {"id": "A", "type_id": 0}}, special(sep)]
    second = [
        {"Sequence": {"id": "B", "type_id": pair_type_id}},
        {"SpecialToken": {"id": sep[0], "type_id": pair_type_id}},
    ]
    return {
        "type": "TemplateProcessing",
        "single": single,
        "pair": single + second,
        "special_tokens": {token: {"id": token, "ids": [i], "tokens": [token]} for token, i in (cls, sep)},
    }


def _tokenizer_json(added, normalizer, pre_tokenizer, post_processor, decoder, model):
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": decoder,
        "model": model,
    }


def _lowercases(tokenizer):
    return bool(getattr(tokenizer, "lowercase_like_python", tokenizer.lowercase))


def wordpiece_files(tokenizer):
    """`tokenizer.json` and `vocab.txt` of a BERT-like or MPNet WordPiece tokenizer."""
    vocabulary = tokenizer.get_vocabulary()
    ids = {token: i for i, token in enumerate(vocabulary)}
    unknown = tokenizer.oov_token
    cls, sep = (tokenizer.start_token, tokenizer.start_token_id), (tokenizer.end_token, tokenizer.end_token_id)
    if isinstance(tokenizer, MPNetTokenizer):
        specials = ["<s>", "<pad>", "</s>", unknown, "<mask>"]
        post = {"type": "RobertaProcessing", "sep": list(sep), "cls": list(cls), "trim_offsets": True}
        post["add_prefix_space"] = False
    else:
        specials = ["[PAD]", unknown, "[CLS]", "[SEP]", "[MASK]"]
        post = _template(cls, sep, pair_type_id=1)
    added = sorted(
        (_added(ids[token], token, lstrip=token == "<mask>") for token in set(specials) if token in ids),
        key=lambda item: item["id"],
    )
    normalizer = {
        "type": "BertNormalizer",
        "clean_text": bool(getattr(tokenizer, "clean_text", True)),
        "handle_chinese_chars": bool(getattr(tokenizer, "handle_chinese_chars", tokenizer.split_on_cjk)),
        "strip_accents": bool(tokenizer.strip_accents),
        "lowercase": _lowercases(tokenizer),
    }
    model = {
        "type": "WordPiece",
        "unk_token": unknown,
        "continuing_subword_prefix": tokenizer.suffix_indicator,
        "max_input_chars_per_word": getattr(tokenizer, "max_input_chars_per_word", defaults.MAX_INPUT_CHARS_PER_WORD),
        "vocab": ids,
    }
    files = {
        "tokenizer.json": _tokenizer_json(
            added, normalizer, {"type": "BertPreTokenizer"}, post, WORDPIECE_DECODER, model
        )
    }
    files["vocab.txt"] = "".join(token + "\n" for token in vocabulary)
    return files


def bpe_files(tokenizer):
    """`tokenizer.json`, `vocab.json` and `merges.txt` of a byte-level BPE (RoBERTa) tokenizer."""
    vocabulary = dict(tokenizer.vocabulary)
    merges = [m for m in tokenizer.merges if not m.lstrip().startswith("#version")]
    added = [_added(vocabulary[t], t) for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>") if t in vocabulary]
    post = {
        "type": "RobertaProcessing",
        "sep": ["</s>", tokenizer.end_token_id],
        "cls": ["<s>", tokenizer.start_token_id],
        "trim_offsets": True,
        "add_prefix_space": False,
    }
    model = {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": "",
        "end_of_word_suffix": "",
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        "vocab": vocabulary,
        "merges": [m.split(" ") for m in merges],
    }
    decoder = dict(BYTE_LEVEL, add_prefix_space=True)
    files = {
        "tokenizer.json": _tokenizer_json(sorted(added, key=lambda a: a["id"]), None, BYTE_LEVEL, post, decoder, model)
    }
    files["vocab.json"] = vocabulary
    files["merges.txt"] = "#version: 0.2\n" + "".join(m + "\n" for m in merges)
    return files


def unigram_files(tokenizer):
    """`tokenizer.json` and `sentencepiece.bpe.model` of KerasHub's `XLMRobertaTokenizer`."""
    model = parse_model(tokenizer.proto)
    vocab = [[token, 0.0] for token in ("<s>", "<pad>", "</s>", "<unk>")]
    vocab += [[piece, score] for piece, score, _ in model["pieces"][3:]] + [["<mask>", 0.0]]
    added = [_added(i, token) for i, token in enumerate(("<s>", "<pad>", "</s>", "<unk>"))]
    added.append(_added(len(vocab) - 1, "<mask>"))
    charsmap = model["precompiled_charsmap"]
    normalizer = (
        {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()} if charsmap else None
    )
    metaspace = dict(METASPACE, prepend_scheme="always" if model["add_dummy_prefix"] else "never")
    pre_tokenizer = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]}
    post = _template(("<s>", 0), ("</s>", 2), pair_type_id=0)
    post["pair"] = post["single"] + [{"SpecialToken": {"id": "</s>", "type_id": 0}}] + post["pair"][3:]
    unigram = {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": False}
    files = {"tokenizer.json": _tokenizer_json(added, normalizer, pre_tokenizer, post, metaspace, unigram)}
    files["sentencepiece.bpe.model"] = bytes(tokenizer.proto)
    return files


def tokenizer_files(tokenizer, tokenizer_class, max_length):
    """Every tokenizer file of a sentence-transformers folder, by file name.

    Args:
        tokenizer: a KerasHub `BertTokenizer` (or `LowercasingBertTokenizer`),
            `MPNetTokenizer`, `RobertaTokenizer` or `XLMRobertaTokenizer`.
        tokenizer_class: str. transformers' class name for `tokenizer_config.json`.
        max_length: int. `model_max_length` (the encoder's sequence length).

    Returns:
        dict: file name -> a JSON-able object, a string, or bytes.
    """
    if isinstance(tokenizer, keras_hub.models.XLMRobertaTokenizer):
        files = unigram_files(tokenizer)
    elif isinstance(tokenizer, keras_hub.models.RobertaTokenizer):
        files = bpe_files(tokenizer)
    elif isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer):
        files = wordpiece_files(tokenizer)
    else:
        raise ValueError(f"{type(tokenizer).__name__} has no Hugging Face tokenizer files sbert_keras can write.")
    config = {"tokenizer_class": tokenizer_class, "model_max_length": max_length, "backend": "tokenizers"}
    if isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer):
        config.update(do_lower_case=_lowercases(tokenizer), strip_accents=bool(tokenizer.strip_accents))
        config["unk_token"] = tokenizer.oov_token
    special = {"cls_token": tokenizer.start_token, "sep_token": tokenizer.end_token, "pad_token": tokenizer.pad_token}
    if isinstance(tokenizer, (MPNetTokenizer, keras_hub.models.RobertaTokenizer, keras_hub.models.XLMRobertaTokenizer)):
        special.update(bos_token="<s>", eos_token="</s>", mask_token="<mask>")
        special.setdefault("unk_token", "<unk>")
    else:
        special["mask_token"] = "[MASK]"
    config.update({key: value for key, value in special.items() if key not in config})
    files["tokenizer_config.json"] = dict(sorted(config.items()))
    return files
