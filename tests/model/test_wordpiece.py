"""WordPiece token ids equal to Hugging Face's `tokenizers` (what sentence-transformers runs), on any text.

The differential corpus is `tokenizer_fuzz.fuzz_corpus()` (every Unicode
category, long words, control characters, CJK, emoji), plus, with
../shared, the reference texts of all-MiniLM-L6-v2 and every STS-B dev
sentence. The folders: all-MiniLM-L6-v2 (uncased BERT), the MPNet and
DistilBERT (cased) fixtures, and a BERT vocabulary built here, tokenised
with every `BertNormalizer` setting. Ids are compared after the
preprocessor's truncation (start and end tokens kept).

Texts that write an added token ("before [MASK] after") get the token's
id, as `tokenizers` gives it (the preprocessor splits them out first).
"""

import collections
import itertools
import json
import pathlib
import shutil

import keras
import pytest
import tensorflow as tf
import tokenizers
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import processors

import sbert_keras
from conftest import SHARED
from conftest import family_fixture
from conftest import minilm_path
from sbert_keras.checkpoints.tokenizer_json import LowercasingBertTokenizer
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.data import readers
from sbert_keras.model import unicode_classes
from sbert_keras.model import unicode_derivation
from sbert_keras.model.backbone import BertLayoutBackbone
from tokenizer_fuzz import fuzz_corpus

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def fuzz():
    return fuzz_corpus()


@pytest.fixture(scope="module")
def shared_texts():
    """The reference texts and every STS-B dev sentence, or nothing without ../shared."""
    texts = []
    reference = SHARED / "reference" / "all-minilm-l6-v2" / "texts.json"
    if reference.exists():
        texts += json.loads(reference.read_text(encoding="utf-8"))
    dev = SHARED / "data" / "stsbenchmark" / "sts-dev.csv"
    if dev.exists():
        pairs = readers.read_sts(dev)
        texts += list(pairs.sentence_a) + list(pairs.sentence_b)
    return texts


def truncated(ids, length):
    """`tokenizers`' ids cut as the preprocessor cuts: the first `length - 1`, then the end token."""
    return ids if len(ids) <= length else ids[: length - 1] + ids[-1:]


def mismatches(preprocessor, oracle, texts, graph=True):
    """`(text, ours, theirs)` for each text whose ids differ: in a `tf.function` as `encode` tokenises, or eagerly."""
    if graph:
        ours = preprocessor.tokenize(texts)[0].to_list()
    else:
        ours = preprocessor.ragged_token_ids(tf.constant(texts))[0].to_list()
    length = preprocessor.sequence_length
    found = []
    for text, mine, encoding in zip(texts, ours, oracle.encode_batch(texts)):
        theirs = encoding.ids
        if mine != truncated(theirs, length):
            found.append((text[:60], mine[:16], truncated(theirs, length)[:16]))
    return found


def oracles(folder):
    """`tokenizers` on the folder's `tokenizer.json`, and the contents of its added tokens."""
    spec = json.loads((pathlib.Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))
    added = [token["content"] for token in spec["added_tokens"]]
    oracle = tokenizers.Tokenizer.from_file(str(pathlib.Path(folder) / "tokenizer.json"))
    oracle.no_truncation()
    oracle.no_padding()
    return oracle, added


FOLDERS = {
    "all-MiniLM-L6-v2": lambda: minilm_path(),
    "mpnet": lambda: family_fixture("mpnet", "model"),
    "distilbert": lambda: family_fixture("distilbert-dense", "model"),
}


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_ids_equal_tokenizers_on_the_corpus(name, fuzz, shared_texts):
    folder = FOLDERS[name]()
    preprocessor = sbert_keras.SentenceEncoder.from_preset(str(folder)).preprocessor
    oracle, added = oracles(folder)
    texts = fuzz + shared_texts
    assert len(texts) >= len(fuzz) > 2_000
    found = mismatches(preprocessor, oracle, texts)
    assert not found, f"{len(found)} of {len(texts)} texts differ, e.g. {found[:3]}"
    # The corpus writes added tokens inside texts.
    assert any(token in text for text in fuzz for token in added)


@pytest.fixture(scope="module")
def built_vocabulary(fuzz):
    """A WordPiece vocabulary from the corpus: every character (also as `##` piece) and the frequent words."""
    chars, words = set(), collections.Counter()
    for lowercase, strip_accents in itertools.product((False, True), repeat=2):
        normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
        for text in fuzz:
            for word, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalizer.normalize_str(text)):
                chars.update(word)
                words[word] += len(word) <= 20
    frequent = sorted(word for word, count in words.items() if count >= 3)
    pieces = sorted(chars) + ["##" + c for c in sorted(chars)] + frequent + [w[:3] for w in frequent]
    return list(dict.fromkeys(SPECIALS + pieces))


def built_oracle(vocabulary, options, max_input_chars_per_word):
    oracle = tokenizers.Tokenizer(
        models.WordPiece(
            {t: i for i, t in enumerate(vocabulary)},
            unk_token="[UNK]",
            max_input_chars_per_word=max_input_chars_per_word,
        )
    )
    oracle.normalizer = normalizers.BertNormalizer(**options)
    oracle.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    oracle.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    return oracle


SETTINGS = [
    dict(zip(("lowercase", "strip_accents", "clean_text", "handle_chinese_chars"), flags))
    for flags in itertools.product((True, False), repeat=4)
]


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(k for k, v in o.items() if v) or "none")
def test_every_normalizer_setting_equals_tokenizers(options, built_vocabulary, fuzz):
    longest = 100 if options["clean_text"] else 7  # also a `max_input_chars_per_word` of another value
    tokenizer = LowercasingBertTokenizer(vocabulary=built_vocabulary, max_input_chars_per_word=longest, **options)
    preprocessor = sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=48)
    found = mismatches(preprocessor, built_oracle(built_vocabulary, options, longest), fuzz, graph=False)
    assert not found, f"{len(found)} of {len(fuzz)} texts differ, e.g. {found[:3]}"


def test_eager_calls_tf_data_and_a_saved_model_give_the_same_ids(built_vocabulary, tmp_path):
    texts = ["The weather is\xa0nice today.", "end\x00", "Straße İstanbul ΣΊΣΥΦΟΣ", "日本語", "a" * 101, ""]
    tokenizer = LowercasingBertTokenizer(vocabulary=built_vocabulary, lowercase=True, strip_accents=True)
    expected = [e.ids[1:-1] for e in built_oracle(built_vocabulary, {}, 100).encode_batch(texts)]
    assert tokenizer(texts) == expected  # eagerly: Python lists, as KerasHub's tokenizers give
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(tokenizer)
    assert [row for batch in dataset for row in batch.to_list()] == expected

    module = tf.Module()
    module.tokenize = tf.function(
        lambda t: tokenizer(t).to_tensor(-1), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    graph = module.tokenize.get_concrete_function().graph.as_graph_def()
    assert not {node.op for node in graph.node} & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}
    tf.saved_model.save(module, str(tmp_path / "tokenizer"))
    loaded = tf.saved_model.load(str(tmp_path / "tokenizer"))
    rows = loaded.tokenize(tf.constant(texts)).numpy().tolist()
    assert [[i for i in row if i >= 0] for row in rows] == expected


def test_options_round_trip_through_a_keras_file(built_vocabulary, tmp_path):
    options = {"lowercase": True, "strip_accents": False, "clean_text": False, "handle_chinese_chars": False}
    tokenizer = LowercasingBertTokenizer(vocabulary=built_vocabulary, max_input_chars_per_word=7, **options)
    backbone = BertLayoutBackbone(
        vocabulary_size=len(built_vocabulary),
        num_layers=1,
        num_heads=1,
        hidden_dim=4,
        intermediate_dim=8,
        max_sequence_length=16,
    )
    preprocessor = sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=16)
    sbert_keras.SentenceEncoder(backbone, preprocessor).save(tmp_path / "encoder.keras")
    loaded = keras.saving.load_model(tmp_path / "encoder.keras", compile=False).preprocessor.tokenizer
    assert type(loaded) is LowercasingBertTokenizer
    assert {k: loaded.get_config()[k] for k in options} == options and loaded.max_input_chars_per_word == 7
    texts = ["Ünïcode\x07 ctrl 日本 abcdefgh", "É\u3000x"]
    assert loaded(texts) == tokenizer(texts)


def test_shipped_tables_equal_the_installed_tokenizers():
    derived = unicode_derivation.derive_tables()
    shipped = unicode_classes.tables()
    for name in unicode_classes.RANGE_TABLES:
        assert derived[name] == shipped[name], f"{name}: run `python -m sbert_keras.model.unicode_derivation`"
    assert {**derived["decomposed"], **derived["hangul"]} == shipped["decomposed"]
    assert derived["lowercase"] == shipped["lowercase"]
    # The one mapping of accent stripping then lowercasing is `BertNormalizer`'s, for every code point.
    normalized = unicode_derivation.normalized_per_character({"strip_accents": True, "lowercase": True})
    mapping = unicode_classes.char_map(True, True)
    assert {ord(c): tuple(map(ord, text)) for c, text in normalized.items()} == mapping


def wordpiece_folder(folder, json_vocabulary, text_vocabulary):
    folder.mkdir()
    model = {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {t: i for i, t in enumerate(json_vocabulary)}}
    (folder / "tokenizer.json").write_text(json.dumps({"model": model}), encoding="utf-8")
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in text_vocabulary), encoding="utf-8")
    return folder


def test_tokenizer_json_wins_over_another_vocab_txt_with_one_warning(tmp_path):
    folder = wordpiece_folder(tmp_path / "model", SPECIALS + ["hello", "world"], SPECIALS + ["world", "hello"])
    with pytest.warns(UserWarning) as caught:
        tokenizer = bert_tokenizer(str(folder))
    assert len(caught) == 1
    message = str(caught[0].message)
    assert str(folder / "vocab.txt") in message and str(folder / "tokenizer.json") in message
    assert "line 6 is 'world', id 5 is 'hello'" in message
    assert tokenizer(["hello world"]) == [[5, 6]]


def test_a_duplicate_token_in_vocab_txt_names_the_file_line_and_token(tmp_path):
    folder = wordpiece_folder(tmp_path / "model", SPECIALS, SPECIALS + ["hello", "world", "hello"])
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ValueError) as error:
        bert_tokenizer(str(folder))
    assert str(error.value) == (
        f"{folder / 'vocab.txt'}:8: duplicate token 'hello' (first on line 6); each token of a vocabulary must be "
        "unique."
    )
    shutil.rmtree(folder)


# `get_config` of both classes as earlier releases wrote it (no normaliser options beyond KerasHub's).
EARLIER_CONFIG = {
    "name": "tokenizer",
    "trainable": True,
    "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "int32"}, "registered_name": None},
    "config_file": "tokenizer.json",
    "vocabulary": None,
    "sequence_length": None,
    "lowercase": True,
    "strip_accents": True,
    "split": True,
    "suffix_indicator": "##",
    "oov_token": "[UNK]",
    "special_tokens": None,
    "special_tokens_in_strings": False,
}


@pytest.mark.parametrize("name", ["LowercasingBertTokenizer", "MPNetTokenizer"])
def test_configs_of_earlier_releases_load_and_tokenize_as_tokenizers(name, built_vocabulary):
    saved = {
        "module": "sbert_keras.checkpoints.tokenizer_json",
        "class_name": name,
        "config": EARLIER_CONFIG,
        "registered_name": f"sbert_keras>{name}",
    }
    tokenizer = keras.saving.deserialize_keras_object(saved)
    tokenizer.set_vocabulary(built_vocabulary + ["<s>", "</s>", "<pad>", "<mask>"])
    assert type(tokenizer).__name__ == name and tokenizer.lowercase_like_python
    assert (tokenizer.clean_text, tokenizer.handle_chinese_chars, tokenizer.max_input_chars_per_word) == (
        True,
        True,
        100,
    )
    texts = ["The weather is\xa0nice today.", "zero\u200bwidth Straße"]
    expected = [e.ids[1:-1] for e in built_oracle(built_vocabulary, {}, 100).encode_batch(texts)]
    assert tokenizer(texts) == expected
