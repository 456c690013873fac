"""Texts tokenised on the host (`model.host_tokenizer`): the in-graph tokenisers' ids, without TensorFlow.

On JAX and PyTorch the preprocessor tokenises with Hugging Face's
`tokenizers`, built from the Keras tokenizer's state. Its ids must be the
in-graph ones (TensorFlow backend) and those of the folder's
`tokenizer.json`, on every family: all-MiniLM-L6-v2, the tiny RoBERTa, the
MPNet, DistilBERT and XLM-R fixtures, and a BERT vocabulary with every
`BertNormalizer` setting; on the fuzz corpus, and with ../shared the
reference texts and every STS-B dev sentence. A subprocess on JAX, with
TensorFlow, TensorFlow Text and sentencepiece hidden (as where they are not
installed), builds every family's tokenizer and tokenises there.
"""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tokenizers

import sbert_keras
from conftest import ROOT
from conftest import SHARED
from conftest import family_fixture
from conftest import minilm_path
from conftest import tiny_vocabulary
from model.test_wordpiece import SETTINGS
from model.test_wordpiece import built_oracle
from model.test_wordpiece import built_vocabulary  # noqa: F401 (a fixture)
from sbert_keras.checkpoints.tokenizer_json import LowercasingBertTokenizer
from sbert_keras.data import readers
from sbert_keras.model.bpe_tokenizer import ByteLevelBPETokenizer
from sbert_keras.model.host_tokenizer import host_tokenizer
from sbert_keras.model.preprocessor import pad_rows
from tokenizer_fuzz import fuzz_corpus

FOLDERS = {
    "all-MiniLM-L6-v2": lambda: minilm_path(),
    "tiny-roberta": lambda: SHARED / "reference" / "tiny-roberta" / "model",
    "mpnet": lambda: family_fixture("mpnet", "model"),
    "distilbert": lambda: family_fixture("distilbert-dense", "model"),
    "xlm-roberta": lambda: family_fixture("xlm-roberta", "model"),
}


def _folder(name):
    folder = FOLDERS[name]()
    if not os.path.isdir(folder):
        pytest.skip(f"{folder} is absent: ../shared (reference models) is needed.")
    return str(folder)


def _present(name):
    """Whether the folder of `name` is on this machine (the tests of one folder skip without it)."""
    try:
        return bool(_folder(name))
    except pytest.skip.Exception:
        return False


@pytest.fixture(scope="module")
def fuzz():
    return fuzz_corpus()


@pytest.fixture(scope="module")
def corpus(fuzz):
    """The fuzz corpus, plus with ../shared the 310 reference texts and every STS-B dev sentence."""
    texts = list(fuzz)
    for reference in ("all-minilm-l6-v2", "tiny-roberta"):
        path = SHARED / "reference" / reference / "texts.json"
        if path.exists():
            texts += json.loads(path.read_text(encoding="utf-8"))
    dev = SHARED / "data" / "stsbenchmark" / "sts-dev.csv"
    if dev.exists():
        pairs = readers.read_sts(dev)
        texts += list(pairs.sentence_a) + list(pairs.sentence_b)
    return list(dict.fromkeys(texts))  # each text once (STS-B repeats sentences)


_GRAPH = {}


def graph_ids(name, texts):
    """`(preprocessor, in-graph ids of texts)` of a folder, computed once per module (the costly part)."""
    if name not in _GRAPH:
        preprocessor = sbert_keras.SentenceEncoder.from_preset(_folder(name)).preprocessor
        ids, _ = preprocessor.tokenize(texts)
        _GRAPH[name] = preprocessor, ids.to_list()
    return _GRAPH[name]


def expected_ids(folder, texts, length):
    """`tokenizers` on `folder/tokenizer.json`, cut as the preprocessor cuts (start and end tokens kept)."""
    oracle = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    oracle.no_truncation()
    oracle.no_padding()
    ids = [e.ids for e in oracle.encode_batch(texts)]
    return [row if len(row) <= length else row[: length - 1] + row[-1:] for row in ids]


def as_lists(rows):
    assert all(isinstance(row, np.ndarray) and row.dtype == np.int32 and row.ndim == 1 for row in rows)
    return [row.tolist() for row in rows]


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_host_ids_equal_in_graph_ids_and_tokenizer_json(name, corpus):
    preprocessor, graph = graph_ids(name, corpus)
    rows, truncated = preprocessor.host_token_ids(corpus)
    host = as_lists(rows)
    differ = [(text[:40], a[:8], b[:8]) for text, a, b in zip(corpus, host, graph) if a != b]
    assert not differ, f"{len(differ)} of {len(corpus)} texts differ from the in-graph ids, e.g. {differ[:3]}"
    _, cut = preprocessor.ragged_token_ids(tf.constant(corpus[:300]))
    assert truncated.dtype == bool and truncated.shape == (len(corpus),)
    assert truncated[:300].tolist() == cut.numpy().tolist() and truncated.any()
    expected = expected_ids(_folder(name), corpus, preprocessor.sequence_length)
    differ = [(text[:40], a[:8], b[:8]) for text, a, b in zip(corpus, host, expected) if a != b]
    assert not differ, f"{len(differ)} of {len(corpus)} texts differ from tokenizer.json's ids, e.g. {differ[:3]}"


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(k for k, v in o.items() if v) or "none")
def test_every_normalizer_setting_equals_the_in_graph_ids(options, built_vocabulary, fuzz):  # noqa: F811
    longest = 100 if options["clean_text"] else 7
    tokenizer = LowercasingBertTokenizer(vocabulary=built_vocabulary, max_input_chars_per_word=longest, **options)
    preprocessor = sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=48)
    host = as_lists(preprocessor.host_token_ids(fuzz)[0])
    graph = preprocessor.ragged_token_ids(tf.constant(fuzz))[0].to_list()
    assert host == graph
    oracle = built_oracle(built_vocabulary, options, longest)
    assert host == [
        ids if len(ids) <= 48 else ids[:47] + ids[-1:] for ids in (e.ids for e in oracle.encode_batch(fuzz))
    ]


def _bpe_preprocessor(added_tokens):
    vocab, merges = tiny_vocabulary()
    tokenizer = ByteLevelBPETokenizer(vocabulary=vocab, merges=merges)
    return sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=24, added_tokens=added_tokens)


ADDED_TEXTS = [
    "a man <mask> plays",
    "a man<mask>  plays  <x>  guitar",
    "<s>a dog</s> <pad>",
    "<x><x> <mask><mask>",
    "\t<mask>\n<x>\u3000end",
    "no token",
    "",
]


def test_added_tokens_keep_lstrip_rstrip_and_their_ids():
    tokens = [
        {"content": "<s>", "id": 0, "lstrip": False, "rstrip": False},
        {"content": "</s>", "id": 2, "lstrip": False, "rstrip": False},
        {"content": "<mask>", "id": 4, "lstrip": True, "rstrip": False},
        {"content": "<x>", "id": 60, "lstrip": False, "rstrip": True},  # not in the vocabulary
        {"content": "<pad>", "id": 61, "lstrip": False, "rstrip": False},  # in it, at another id
    ]
    preprocessor = _bpe_preprocessor(tokens)
    host = as_lists(preprocessor.host_token_ids(ADDED_TEXTS)[0])
    assert host == preprocessor.ragged_token_ids(tf.constant(ADDED_TEXTS))[0].to_list()
    assert 4 in host[0] and 60 in host[1] and 61 in host[2] and 1 not in host[2]
    _, id_map = host_tokenizer(preprocessor.tokenizer, tokens)
    assert id_map == {1: 61, len(tiny_vocabulary()[0]): 60}  # `tokenizers` numbers <x> after the vocabulary


def test_an_mpnet_folder_with_special_tokens_only_in_added_tokens(tmp_path):
    folder = tmp_path / "mpnet"
    shutil.copytree(family_fixture("mpnet", "model"), folder)
    (folder / "vocab.txt").unlink()
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    added = {t["content"] for t in data["added_tokens"]}
    data["model"]["vocab"] = {k: v for k, v in data["model"]["vocab"].items() if k not in added}
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    preprocessor = sbert_keras.SentenceEncoder.from_preset(str(folder)).preprocessor
    texts = ["before <mask> after", "<s> a </s>", "plain text", "<pad><unk>[UNK]"]
    host = as_lists(preprocessor.host_token_ids(texts)[0])
    assert host == preprocessor.tokenize(texts)[0].to_list()
    assert host == expected_ids(str(folder), texts, preprocessor.sequence_length)


@pytest.mark.parametrize("name", ["mpnet", "xlm-roberta"])
def test_a_keras_file_tokenises_the_same_on_the_host(name, fuzz, tmp_path):
    encoder = sbert_keras.SentenceEncoder.from_preset(_folder(name))
    texts = fuzz[::7]
    before = as_lists(encoder.preprocessor.host_token_ids(texts)[0])  # the cached tokenizer is not saved
    encoder.save(tmp_path / "encoder.keras")
    loaded = keras.saving.load_model(tmp_path / "encoder.keras", compile=False).preprocessor
    assert as_lists(loaded.host_token_ids(texts)[0]) == before


def test_host_inputs_and_pad_rows():
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "plays", "guitar", "."]
    tokenizer = LowercasingBertTokenizer(vocabulary=vocabulary, lowercase=True)
    preprocessor = sbert_keras.SentenceEncoderPreprocessor(tokenizer, sequence_length=6, include_segment_ids=True)
    texts = ["A man plays guitar.", "a", "man man man man man man"]
    inputs = preprocessor.host_inputs(texts)
    graph = preprocessor.dynamic_inputs(tf.constant(texts))
    assert sorted(inputs) == ["padding_mask", "segment_ids", "token_ids"]
    for key, value in inputs.items():
        assert value.dtype == np.int32 and value.tolist() == graph[key].numpy().tolist(), key
    assert inputs["token_ids"].tolist()[1] == [2, 5, 3, 0, 0, 0]
    padded = preprocessor.host_inputs(texts, length=9)
    assert padded["token_ids"].shape == (3, 9) and padded["padding_mask"].sum() == inputs["padding_mask"].sum()
    assert pad_rows([np.array([2, 7, 3]), [2, 3]], pad_id=0).tolist() == [[2, 7, 3], [2, 3, 0]]
    assert pad_rows([], pad_id=0).shape == (0, 0) and pad_rows([], pad_id=0, length=4).shape == (0, 4)
    with pytest.raises(ValueError, match="`length` 2 is shorter than row 0, which has 3 token ids"):
        pad_rows([[2, 7, 3]], pad_id=0, length=2)


def test_the_host_tokenizer_is_cached_and_rebuilt_when_its_state_changes():
    vocab, merges = tiny_vocabulary()
    preprocessor = _bpe_preprocessor([])
    first, _ = preprocessor.host_tokenizer()
    assert preprocessor.host_tokenizer()[0] is first
    preprocessor.sequence_length = 4  # the cut changes, not the tokenizer
    assert preprocessor.host_tokenizer()[0] is first
    rows, truncated = preprocessor.host_token_ids(["a man plays guitar"])
    assert len(rows[0]) == 4 and truncated.tolist() == [True]
    preprocessor.added_tokens = [{"content": "<mask>", "id": 4, "lstrip": True, "rstrip": False}]
    assert preprocessor.host_tokenizer()[0] is not first
    second, _ = preprocessor.host_tokenizer()
    preprocessor.tokenizer.set_vocabulary_and_merges({**vocab, "zz": len(vocab)}, merges)
    assert preprocessor.host_tokenizer()[0] is not second
    assert "_host_cache" not in [v.path for v in preprocessor.variables]


# Run in a subprocess on JAX, with TensorFlow, TensorFlow Text and sentencepiece hidden as if not installed.
_WITHOUT_TENSORFLOW = """
import json, sys
for name in ("tensorflow", "tensorflow_text", "sentencepiece"):
    sys.modules[name] = None
import keras
from sbert_keras.checkpoints.added_tokens import read_added_tokens
from sbert_keras.checkpoints.families.registry import family_for_config
from sbert_keras.checkpoints.st_modules import text_preprocessing
from sbert_keras.model.preprocessor import SentenceEncoderPreprocessor
from sbert_keras.utils.model_files import read_json
job = json.load(open(sys.argv[1], encoding="utf-8"))
out = {"backend": keras.backend.backend(), "rows": {}, "state": {}}
for name, (folder, length) in job["folders"].items():
    family = family_for_config(folder, read_json(folder, "config.json"))
    tokenizer = family.tokenizer(folder, text_preprocessing(folder))
    added = read_added_tokens(folder)
    preprocessor = SentenceEncoderPreprocessor(tokenizer, sequence_length=length, added_tokens=added)
    rows, truncated = preprocessor.host_token_ids(job["texts"])
    out["rows"][name] = [row.tolist() for row in rows]
    called = preprocessor(job["texts"][:3])
    tokenized, count = preprocessor.tokenize(job["texts"])
    out["state"][name] = [
        type(tokenizer).__name__,
        getattr(tokenizer, "_word_pieces", None) is None and getattr(tokenizer, "_tables", None) is None,
        {k: [type(v).__name__, list(v.shape)] for k, v in called.items()},
        count == int(truncated.sum()) and [r.tolist() for r in tokenized] == out["rows"][name],
        tokenizer(job["texts"][:40]),  # the tokenizer alone, on the host too
    ]
out["tensorflow"] = sys.modules.get("tensorflow") is not None
print(json.dumps(out))
"""


def test_every_family_tokenises_on_jax_without_tensorflow(corpus, tmp_path):
    texts = corpus[::10]
    names = [name for name in sorted(FOLDERS) if _present(name)]
    lengths = {name: graph_ids(name, corpus)[0].sequence_length for name in names}
    job = {"texts": texts, "folders": {name: [_folder(name), lengths[name]] for name in names}}
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW, str(tmp_path / "job.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["backend"] == "jax" and not out["tensorflow"]
    for name in names:
        kind, lazy, called, tokenized, direct = out["state"][name]
        assert lazy and tokenized, (name, kind)
        graph = graph_ids(name, corpus)[0].tokenizer(tf.constant(texts[:40]))
        assert direct == (graph.to_list() if hasattr(graph, "to_list") else [list(map(int, r)) for r in graph]), name
        length = lengths[name]
        assert called == {"token_ids": ["ndarray", [3, length]], "padding_mask": ["ndarray", [3, length]]}, name
        assert out["rows"][name] == graph_ids(name, corpus)[1][::10], name
