"""Byte-level BPE (RoBERTa) and SentencePiece (XLM-R) token ids against Hugging Face's `tokenizers`.

Differential: the seeded fuzz corpus (`tokenizer_fuzz.py`), the reference
texts and the STS-B dev sentences go through the preprocessor and through
`tokenizers` with the same folder, truncated alike (start and end tokens
kept). Long words and long runs check that cutting a text before tokenising
keeps the ids that are kept, and that the cost stays linear.
"""

import csv
import json
import os
import random
import time

import pytest
import tensorflow as tf

import sbert_keras
from conftest import family_fixture
from conftest import shared_path
from sbert_keras.model.bpe_pretokenizer import pretokenize
from sbert_keras.model.bpe_tokenizer import ByteLevelBPETokenizer
from sbert_keras.model.bpe_tokenizer import byte_characters
from tokenizer_fuzz import fuzz_corpus

tokenizers = pytest.importorskip("tokenizers")

BYTE_OF_CHARACTER = {c: b for b, c in enumerate(byte_characters())}
LONG_TEXTS = [
    "x" * 20_000,
    "ab" * 50_000,
    "".join(chr(97 + (i * 7919) % 26) for i in range(100_000)),
    "Straße" * 3_000 + " and then normal words follow here.",
    "z" * 30_000 + " The weather is nice today.",
    "word " * 5_000,
    "\n\n  \t" * 3_000 + "x",
]


def _oracle(folder):
    hf = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    return hf


def _expected(hf, texts, length):
    out = []
    for ids in (e.ids for e in hf.encode_batch(texts)):
        out.append(ids if len(ids) <= length else ids[: length - 1] + ids[-1:])
    return out


_PREPROCESSORS = {}


def _mismatches(folder, texts):
    if folder not in _PREPROCESSORS:
        _PREPROCESSORS[folder] = sbert_keras.SentenceEncoder.from_preset(folder).preprocessor
    preprocessor = _PREPROCESSORS[folder]
    ours, _ = preprocessor.tokenize(texts)
    expected = _expected(_oracle(folder), texts, preprocessor.sequence_length)
    return [(t[:60], e[:12], o[:12]) for t, e, o in zip(texts, expected, ours.to_list()) if e != o]


def _roberta():
    return str(shared_path("reference", "tiny-roberta", "model"))


def _sts_sentences():
    path = shared_path("data", "stsbenchmark", "sts-dev.csv")
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [cell for row in rows for cell in row[5:7] if len(row) >= 7]


def _reference_texts():
    with open(shared_path("reference", "tiny-roberta", "texts.json"), encoding="utf-8") as f:
        return json.load(f)


def test_roberta_ids_equal_tokenizers():
    """The fuzz corpus, the reference texts and STS-B dev, plus long words and runs cut before tokenising."""
    assert _mismatches(_roberta(), fuzz_corpus() + _reference_texts() + _sts_sentences() + LONG_TEXTS) == []


def test_xlm_roberta_ids_equal_tokenizers():
    folder = str(family_fixture("xlm-roberta", "model"))
    texts = fuzz_corpus() + ["is\x85nice", "a\u2028b\u3000c\x0bd", "before <mask> and </s> after"]
    assert _mismatches(folder, texts) == []


def test_xlm_roberta_ids_equal_tokenizers_on_sts_texts():
    assert _mismatches(str(family_fixture("xlm-roberta", "model")), _sts_sentences()) == []


def test_bpe_cost_is_linear_in_the_text():
    _mismatches(_roberta(), ["warm up"])
    preprocessor = _PREPROCESSORS[_roberta()]
    start = time.perf_counter()
    ids, truncated = preprocessor.tokenize(["".join(chr(97 + (i * 7919) % 26) for i in range(100_000))])
    assert time.perf_counter() - start < 5.0
    assert truncated == 1 and int(ids.row_lengths()[0]) == preprocessor.sequence_length


def test_pretokenizer_splits_as_bytelevel_at_every_space_and_class():
    """Every Unicode space, letter and digit class, and runs of spaces, as `ByteLevel` splits them."""
    spaces = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
    others = ["\u200b", "\ufeff", "\x01", "६", "ĴA", "'s", "'S", "½", "Ⅻ", "𝔘", "日"]
    texts = [f"a{s}{t}b" for s in spaces for t in ("", " ", "  ", s)]
    texts += [f"x{o} {o}y  {o}" for o in others] + ["  lead", "trail  ", "a  'll", " 's", "it's 'tis"]
    split = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ours = pretokenize(tf.constant(texts)).to_list()
    for text, words in zip(texts, ours):
        expected = [_byte_level(w) for w, _ in split.pre_tokenize_str(text)]
        assert words == expected, repr(text)


def _byte_level(word):
    """A `ByteLevel` word (one character per byte) as the bytes it stands for."""
    return bytes(BYTE_OF_CHARACTER[c] for c in word)


def test_unicode_16_letters_and_digits_split_as_tokenizers():
    """RE2's tables predate Unicode 16: its new letters and digits are listed; a seeded sample of all code points."""
    rng = random.Random(0)
    points = [0x1C89, 0xA7CB, 0x105C0, 0x13460, 0x2EBF0, 0x10D40, 0x1CCF0, 0x1E5F1]
    points += [c for c in rng.sample(range(1, 0x110000), 1_500) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"x{chr(c)}y {chr(c)}7{chr(c)}{chr(c)} {chr(c)}'s" for c in points]
    split = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ours = pretokenize(tf.constant(texts)).to_list()
    assert [t for t, o in zip(texts, ours) if o != [_byte_level(w) for w, _ in split.pre_tokenize_str(t)]] == []


def test_bytes_missing_from_the_vocabulary_are_dropped_as_tokenizers_drops_them():
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6, "Ġ": 7, "Ġa": 8, "<mask>": 9}
    merges = ["a b", "Ġ a"]
    ours = ByteLevelBPETokenizer(vocabulary=vocab, merges=merges)
    oracle = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[tuple(m.split()) for m in merges]))
    oracle.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    texts = ["aéb", " éa", "a?b ab a", "zzz", "xa b", "a\x00b"]
    assert ours(tf.constant(texts)).to_list() == [oracle.encode(t).ids for t in texts]
    assert ours(tf.constant(texts)).to_list()[0] == [6]  # "a" and "b" merge across the dropped "é"


def test_a_merge_ranked_before_the_merges_of_its_parts_is_refused():
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 6, "c": 7, "ab": 8, "abc": 9}
    with pytest.raises(ValueError, match="'ab c' \\(rank 0\\) ranks before merge rank 1, which builds 'ab'"):
        ByteLevelBPETokenizer(vocabulary=vocab, merges=["ab c", "a b"])
