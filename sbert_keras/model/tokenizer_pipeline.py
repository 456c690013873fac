"""A Keras tokenizer's Hugging Face pipeline, as the `tokenizer.json` that `tokenizers` reads.

The tokenisers of `wordpiece`, `bpe_tokenizer` and `sentencepiece_tokenizer`
give the ids of Hugging Face's `tokenizers` in TensorFlow ops. Two jobs need
the same pipeline described for `tokenizers` itself: tokenising on the host
outside TensorFlow (`host_tokenizer`) and writing a sentence-transformers
folder (`checkpoints.tokenizer_files`). Both take it from here, built from
the Keras tokenizer's own state (vocabulary, merges, normaliser options,
SentencePiece model), as Hugging Face's converters write it for each
family:

- WordPiece (BERT, DistilBERT, MPNet): `BertNormalizer` (the tokenizer's
  `lowercase`, `strip_accents`, `clean_text`, `handle_chinese_chars`),
  `BertPreTokenizer`, `WordPiece` (unknown token, `##`,
  `max_input_chars_per_word`); MPNet's special tokens and post-processor
  where the start token is `<s>`;
- byte-level BPE (RoBERTa): `ByteLevel(add_prefix_space)` and `BPE` with the
  vocabulary and merges (no unknown token: unknown bytes are dropped);
- XLM-R's Unigram: the SentencePiece model's precompiled character map
  (`Precompiled`), `WhitespaceSplit` then `Metaspace`, and a `Unigram` model
  with fairseq's ids (`<s> <pad> </s> <unk>`, the pieces, `<mask>`), as
  transformers' `XLMRobertaConverter` builds it.

The description is plain JSON, so writing a folder needs neither
`tokenizers` nor `transformers`.

Example:
```python
spec = tokenizer_json(encoder.preprocessor.tokenizer)
spec["model"]["type"]  # "WordPiece"
```
"""

import base64

import keras_hub

from sbert_keras.model.sentencepiece_proto import FAIRSEQ_PREFIX
from sbert_keras.model.sentencepiece_proto import UNIGRAM
from sbert_keras.model.sentencepiece_proto import parse_model
from sbert_keras.utils import defaults

WORDPIECE_DECODER = {"type": "WordPiece", "prefix": "##", "cleanup": True}
METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def added_token(token_id, token, lstrip=False):
    """One entry of `tokenizer.json`'s `added_tokens`: a special token, not normalised."""
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


def _spec(added, normalizer, pre_tokenizer, post_processor, decoder, model):
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


def is_mpnet(tokenizer):
    """Whether a WordPiece tokenizer has MPNet's special tokens (`<s>` ... `</s>`) rather than BERT's."""
    return tokenizer.start_token == "<s>"


def _wordpiece(tokenizer):
    if not tokenizer.split or tokenizer.special_tokens_in_strings:
        raise ValueError(
            f"{type(tokenizer).__name__} with split={tokenizer.split} and "
            f"special_tokens_in_strings={tokenizer.special_tokens_in_strings} has no `tokenizers` equivalent; "
            "use split=True and special_tokens_in_strings=False."
        )
    vocabulary = tokenizer.get_vocabulary()
    ids = {token: i for i, token in enumerate(vocabulary)}
    unknown = tokenizer.oov_token
    cls, sep = (tokenizer.start_token, tokenizer.start_token_id), (tokenizer.end_token, tokenizer.end_token_id)
    if is_mpnet(tokenizer):
        specials = ["<s>", "<pad>", "</s>", unknown, "<mask>"]
        post = {"type": "RobertaProcessing", "sep": list(sep), "cls": list(cls), "trim_offsets": True}
        post["add_prefix_space"] = False
    else:
        specials = ["[PAD]", unknown, "[CLS]", "[SEP]", "[MASK]"]
        post = _template(cls, sep, pair_type_id=1)
    added = sorted(
        (added_token(ids[token], token, lstrip=token == "<mask>") for token in set(specials) if token in ids),
        key=lambda item: item["id"],
    )
    normalizer = {
        "type": "BertNormalizer",
        "clean_text": bool(getattr(tokenizer, "clean_text", True)),
        "handle_chinese_chars": bool(getattr(tokenizer, "handle_chinese_chars", tokenizer.split_on_cjk)),
        "strip_accents": bool(tokenizer.strip_accents),
        "lowercase": bool(tokenizer.lowercase),
    }
    model = {
        "type": "WordPiece",
        "unk_token": unknown,
        "continuing_subword_prefix": tokenizer.suffix_indicator,
        "max_input_chars_per_word": int(
            getattr(tokenizer, "max_input_chars_per_word", defaults.MAX_INPUT_CHARS_PER_WORD)
        ),
        "vocab": ids,
    }
    return _spec(added, normalizer, {"type": "BertPreTokenizer"}, post, WORDPIECE_DECODER, model)


def bpe_merges(tokenizer):
    """A byte-level BPE tokenizer's merges as `"a b"` strings, without `merges.txt`'s `#version` line."""
    return [str(m) for m in tokenizer.merges if not str(m).lstrip().startswith("#version")]


def _byte_level_bpe(tokenizer):
    vocabulary = dict(tokenizer.vocabulary)
    added = [added_token(vocabulary[t], t) for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>") if t in vocabulary]
    prefix = bool(getattr(tokenizer, "add_prefix_space", False))
    post = {
        "type": "RobertaProcessing",
        "sep": ["</s>", tokenizer.end_token_id],
        "cls": ["<s>", tokenizer.start_token_id],
        "trim_offsets": True,
        "add_prefix_space": prefix,
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
        "merges": [m.split(" ") for m in bpe_merges(tokenizer)],
    }
    pre_tokenizer = dict(BYTE_LEVEL, add_prefix_space=prefix)
    decoder = dict(BYTE_LEVEL, add_prefix_space=True)
    return _spec(sorted(added, key=lambda a: a["id"]), None, pre_tokenizer, post, decoder, model)


def _unigram(tokenizer):
    model = parse_model(tokenizer.proto)
    if model["model_type"] != UNIGRAM or model["byte_fallback"]:
        raise ValueError(
            f"{type(tokenizer).__name__}'s SentencePiece model is not a Unigram model without byte fallback "
            "(XLM-R's), the only kind supported."
        )
    vocab = [[token, 0.0] for token in FAIRSEQ_PREFIX]
    vocab += [[piece, score] for piece, score, _ in model["pieces"][3:]] + [["<mask>", 0.0]]
    added = [added_token(i, token) for i, token in enumerate(FAIRSEQ_PREFIX)]
    added.append(added_token(len(vocab) - 1, "<mask>"))
    charsmap = model["precompiled_charsmap"]
    normalizer = (
        {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()} if charsmap else None
    )
    metaspace = dict(METASPACE, prepend_scheme="always" if model["add_dummy_prefix"] else "never")
    pre_tokenizer = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]}
    post = _template(("<s>", 0), ("</s>", 2), pair_type_id=0)
    post["pair"] = post["single"] + [{"SpecialToken": {"id": "</s>", "type_id": 0}}] + post["pair"][3:]
    unigram = {"type": "Unigram", "unk_id": FAIRSEQ_PREFIX.index("<unk>"), "vocab": vocab, "byte_fallback": False}
    return _spec(added, normalizer, pre_tokenizer, post, metaspace, unigram)


def tokenizer_json(tokenizer):
    """The `tokenizer.json` content (a JSON-able dict) that gives `tokenizer`'s ids in `tokenizers`.

    Args:
        tokenizer: a KerasHub WordPiece tokenizer (`LowercasingBertTokenizer`,
            `MPNetTokenizer`, `BertTokenizer`), byte-level BPE
            (`ByteLevelBPETokenizer`, `RobertaTokenizer`) or
            `XLMRobertaTokenizer` (`SpaceSplittingXLMRobertaTokenizer`).

    Returns:
        dict: `added_tokens` (the family's special tokens), `normalizer`,
        `pre_tokenizer`, `post_processor`, `decoder` and `model`.

    Raises:
        TypeError: a tokenizer of another kind.
        ValueError: a tokenizer in a mode `tokenizers` has no equivalent of.

    Example:
    ```python
    tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json(tokenizer)))
    ```
    """
    if isinstance(tokenizer, keras_hub.models.XLMRobertaTokenizer):
        return _unigram(tokenizer)
    if isinstance(tokenizer, keras_hub.models.RobertaTokenizer):
        return _byte_level_bpe(tokenizer)
    if isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer):
        return _wordpiece(tokenizer)
    raise TypeError(
        f"No `tokenizers` pipeline for a {type(tokenizer).__name__}; supported: WordPiece (BERT, DistilBERT, MPNet), "
        "byte-level BPE (RoBERTa) and XLM-R's SentencePiece tokenizers."
    )
