"""Added tokens written inside texts: split out with their own ids, as Hugging Face's `tokenizers` does.

All families (WordPiece, byte-level BPE, SentencePiece), through `encode`'s
path, the `tf.data` call and a traced function; and an MPNet folder as
sentence-transformers saves it, with the special tokens only in
`added_tokens`.
"""

import json
import os
import shutil
import time

import pytest
import tensorflow as tf

import sbert_keras
from conftest import family_fixture
from sbert_keras.model.added_tokens import tokenize_with_added_tokens
from tokenizer_fuzz import fuzz_corpus

tokenizers = pytest.importorskip("tokenizers")

TEXTS = [
    "before <s> after",
    "x</s>y <mask>  <pad><unk>",
    "[CLS] [SEP] [MASK] [UNK] [PAD]",
    "<s><s></s>",
    "no token here",
    "",
    "nul\x00<mask>\x00",
]


def _oracle_ids(folder, texts, length):
    hf = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    hf.no_truncation()
    out = []
    for ids in (e.ids for e in hf.encode_batch(texts)):
        out.append(ids if len(ids) <= length else ids[: length - 1] + ids[-1:])
    return out


def _check(folder, texts=TEXTS):
    preprocessor = sbert_keras.SentenceEncoder.from_preset(folder).preprocessor
    expected = _oracle_ids(folder, texts, preprocessor.sequence_length)
    ours, _ = preprocessor.tokenize(texts)
    assert ours.to_list() == expected
    features = preprocessor(tf.constant(texts))  # the tf.data / Keras call
    for row, ids in zip(features["token_ids"].numpy().tolist(), expected):
        assert row[: len(ids)] == ids


@pytest.mark.parametrize("name", ["xlm-roberta", "mpnet", "distilbert-dense"])
def test_added_tokens_get_their_ids(name):
    folder = str(family_fixture(name, "model"))
    texts = [t for t in TEXTS if name != "mpnet" or "<unk>" not in t]  # MPNet's unknown token is [UNK]
    preprocessor = sbert_keras.SentenceEncoder.from_preset(folder).preprocessor
    expected = _oracle_ids(folder, texts, preprocessor.sequence_length)
    ours, _ = preprocessor.tokenize(texts)
    # Only the added tokens are compared where the WordPiece normaliser may differ on other text.
    specials = {t["id"] for t in preprocessor.added_tokens}
    for got, want in zip(ours.to_list(), expected):
        assert [i for i in got if i in specials] == [i for i in want if i in specials]


def test_roberta_added_tokens_match_tokenizers():
    folder = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "reference", "tiny-roberta", "model")
    if not os.path.isdir(folder):
        pytest.skip("../shared (reference models) is absent.")
    _check(folder)


def test_splitter_honours_lstrip_and_rstrip_in_a_traced_function():
    def tokenizer(texts):
        return tf.RaggedTensor.from_row_lengths(tf.strings.length(texts), tf.ones_like(tf.strings.length(texts)))

    tokens = [{"content": "<mask>", "id": 99, "lstrip": True, "rstrip": False}]
    tokens += [{"content": "<x>", "id": 98, "lstrip": False, "rstrip": True}]
    fn = tf.function(lambda t: tokenize_with_added_tokens(tokenizer, t, tokens))
    ids = fn(tf.constant(["ab  <mask> cd<x>  e", "<mask>"])).to_list()
    assert ids == [[2, 99, 3, 98, 1], [99]]  # "ab", "  <mask>", " cd", "<x>  ", "e"


def test_mpnet_folder_with_special_tokens_only_in_added_tokens(tmp_path):
    folder = tmp_path / "mpnet"
    shutil.copytree(family_fixture("mpnet", "model"), folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    added = {t["content"] for t in data["added_tokens"]}
    data["model"]["vocab"] = {k: v for k, v in data["model"]["vocab"].items() if k not in added}
    path.write_text(json.dumps(data), encoding="utf-8")
    for name in ("vocab.txt",):
        if (folder / name).exists():
            (folder / name).unlink()
    encoder = sbert_keras.SentenceEncoder.from_preset(str(folder))  # refused before: no <s> in the vocabulary
    texts = ["before <mask> after", "<s> a </s>", "plain text", "<pad><unk>[UNK]"]
    ours, _ = encoder.preprocessor.tokenize(texts)
    # `tokenizers` packs with the post-processor's ids (<s> 0, </s> 2) but numbers the tokens missing from the
    # model's vocabulary after it inside a text; both are reproduced.
    assert ours.to_list() == _oracle_ids(str(folder), texts, encoder.preprocessor.sequence_length)
    assert ours.to_list()[1][:2] == [0, len(data["model"]["vocab"])]
    assert encoder.encode(texts).shape[0] == len(texts)


def test_a_token_matched_on_normalised_text_as_all_mpnet_base_v2_saves_it(tmp_path):
    # all-mpnet-base-v2's tokenizer.json gives `<unk>` normalized=true under its BertNormalizer: `tokenizers`
    # finds it in the lowercased, accent-stripped, cleaned text, so "<UNK>" or "<Ùnk>" is `<unk>` too.
    folder = tmp_path / "mpnet"
    shutil.copytree(family_fixture("mpnet", "model"), folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["normalizer"]["type"] == "BertNormalizer"
    for token in data["added_tokens"]:
        token["normalized"] = token["content"] == "<unk>"
    path.write_text(json.dumps(data), encoding="utf-8")
    texts = ["a <unk> b", "A <UNK> B", "<Unk><unk>", "<ÙNK> x", "<u\u0301nk>", "<un\x00k>", "<un\u200bk>"]
    texts += ["<s><UNK></s>", "<mask><UNK> <pad>", "東京<UNK>語", "plain", "", "<UNK"]
    texts += [text[:40] + " <UNK> " + text[40:] for text in fuzz_corpus()[::25]]
    _check(str(folder), texts)


def test_added_tokens_and_cutting_survive_keras_files_and_the_saved_model(tmp_path):
    folder = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "reference", "tiny-roberta", "model")
    if not os.path.isdir(folder):
        pytest.skip("../shared (reference models) is absent.")
    encoder = sbert_keras.SentenceEncoder.from_preset(folder)
    texts = ["before <mask> after </s>", "z" * 30_000 + " tail", "The weather is nice today."]
    expected = _oracle_ids(folder, texts, encoder.preprocessor.sequence_length)
    encoder.save(tmp_path / "encoder.keras")
    loaded = sbert_keras.SentenceEncoder.from_preset(str(tmp_path / "encoder.keras"))
    assert type(loaded.preprocessor.tokenizer).__name__ == "ByteLevelBPETokenizer"
    assert loaded.preprocessor.tokenize(texts)[0].to_list() == expected
    sbert_keras.export_saved_model(encoder, str(tmp_path / "served"), compute="float32")
    served = tf.saved_model.load(str(tmp_path / "served")).signatures["serving_default"]
    served(text=tf.constant(texts[:1]))
    start = time.perf_counter()
    vectors = served(text=tf.constant(texts))["embeddings"].numpy()
    assert time.perf_counter() - start < 5.0  # a 30,000-letter word is cut before its merges
    assert abs(vectors - encoder.encode(texts, compute="float32")).max() <= 1e-5


def test_lstrip_and_rstrip_match_tokenizers(tmp_path):
    source = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "reference", "tiny-roberta", "model")
    if not os.path.isdir(source):
        pytest.skip("../shared (reference models) is absent.")
    folder = tmp_path / "roberta"
    shutil.copytree(source, folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for token in data["added_tokens"]:
        token["lstrip"] = token["content"] == "<mask>"  # as roberta-base
        token["rstrip"] = token["content"] == "</s>"
    path.write_text(json.dumps(data), encoding="utf-8")
    texts = ["a  <mask> b", "<mask>", "x<mask>  y", "a </s>  b", " \u3000<mask></s>\n<mask>", "a\t</s>\n"]
    preprocessor = sbert_keras.SentenceEncoder.from_preset(str(folder)).preprocessor
    ours, _ = preprocessor.tokenize(texts)
    assert ours.to_list() == _oracle_ids(str(folder), texts, preprocessor.sequence_length)
