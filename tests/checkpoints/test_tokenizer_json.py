"""`tokenizer.json` -> KerasHub tokenizers (the folder-level parity is in test_presets)."""

import json

import pytest

from checkpoints.test_presets import copy_folder
from conftest import minilm_path
from harness import error_lines
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.checkpoints.tokenizer_json import roberta_tokenizer
from sbert_keras.cli.parser import main


def write(folder, name, content):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(content))


def test_bert_tokenizer_json_normalizer_settings(tmp_path):
    # No tokenizer_config.json: lowercasing comes from tokenizer.json's BertNormalizer.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Straße", "straße", "cafe", "café"]
    normalizer = {
        "type": "Sequence",
        "normalizers": [{"type": "BertNormalizer", "lowercase": False, "strip_accents": None}],
    }
    write(
        tmp_path,
        "tokenizer.json",
        {"normalizer": normalizer, "model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(vocab)}}},
    )
    tokenizer = bert_tokenizer(str(tmp_path))
    assert list(tokenizer.tokenize(["Straße café"])[0]) == [5, 8]
    normalizer["normalizers"][0].update(lowercase=True)
    write(
        tmp_path,
        "tokenizer.json",
        {"normalizer": normalizer, "model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(vocab)}}},
    )
    assert list(bert_tokenizer(str(tmp_path)).tokenize(["Straße café"])[0]) == [6, 7]


def test_tokenizer_json_of_the_wrong_kind_names_the_file(tmp_path):
    write(tmp_path, "tokenizer.json", {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})
    with pytest.raises(ValueError, match=r"tokenizer\.json: expected a WordPiece"):
        bert_tokenizer(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"neither `vocab\.json` \+ `merges\.txt` nor"):
        roberta_tokenizer(str(tmp_path / "empty"))


def test_bert_tokenizer_forced_lowercase(tmp_path):
    # sentence-transformers' own do_lower_case lowercases even a cased tokenizer.
    # Accents stay: the cased tokenizer's strip_accents follows its own lowercase=False.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Héllo", "héllo", "hello"]
    write(tmp_path, "tokenizer_config.json", {"do_lower_case": False})
    write(tmp_path, "tokenizer.json", {"model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(vocab)}}})
    assert list(bert_tokenizer(str(tmp_path)).tokenize(["Héllo"])[0]) == [5]
    assert list(bert_tokenizer(str(tmp_path), lowercase=True).tokenize(["Héllo"])[0]) == [6]


WORDPIECE = {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 1, "hello": 2}}
BAD_ID = r"`model\.vocab\['\[UNK\]'\]` must be an integer id"
MALFORMED = [
    ({"model": "WordPiece"}, r"`model` must be an object"),
    ({"model": {**WORDPIECE, "vocab": {"[PAD]": 0, "[UNK]": None}}}, BAD_ID),
    ({"model": {**WORDPIECE, "vocab": {"[PAD]": 0, "[UNK]": True}}}, BAD_ID),
    ({"model": {**WORDPIECE, "vocab": [["[PAD]", 0]]}}, r"`model\.vocab` must be an object mapping tokens to ids"),
    ({"model": WORDPIECE, "normalizer": "BertNormalizer"}, r"`normalizer` must be an object or null"),
    ({"model": WORDPIECE, "normalizer": {"type": "Sequence", "normalizers": "x"}}, r"`normalizer\.normalizers`"),
    ({"model": WORDPIECE, "normalizer": {"type": "BertNormalizer", "lowercase": "yes"}}, r"`normalizer\.lowercase`"),
]


@pytest.mark.parametrize("content,message", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_wordpiece_tokenizer_json_names_the_file_and_field(tmp_path, content, message):
    write(tmp_path, "tokenizer.json", content)
    with pytest.raises(ValueError, match=r"tokenizer\.json: " + message):
        bert_tokenizer(str(tmp_path))


def test_malformed_bpe_merges_and_tokenizer_config_are_named(tmp_path):
    bpe = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}
    write(tmp_path, "tokenizer.json", {"model": {**bpe, "merges": [["a", 1]]}})
    with pytest.raises(ValueError, match=r"tokenizer\.json: `model\.merges\[0\]` must be"):
        roberta_tokenizer(str(tmp_path))
    write(tmp_path, "tokenizer.json", {"model": {**bpe, "merges": "a b"}})
    with pytest.raises(ValueError, match=r"tokenizer\.json: `model\.merges` must be a list"):
        roberta_tokenizer(str(tmp_path))
    write(tmp_path, "tokenizer.json", {"model": WORDPIECE})
    write(tmp_path, "tokenizer_config.json", {"do_lower_case": "false"})
    with pytest.raises(ValueError, match=r"tokenizer_config\.json: `do_lower_case` must be true, false or null"):
        bert_tokenizer(str(tmp_path))


@pytest.mark.parametrize("model", ["WordPiece", {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": None}}])
def test_malformed_tokenizer_json_is_one_line_in_the_cli(tmp_path, capsys, model):
    folder = copy_folder(minilm_path(), tmp_path / "minilm", drop=("vocab.txt",))
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"] = model
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (tmp_path / "lines.txt").write_text("hello\n")
    args = ["encode", "--model", folder, "--input", tmp_path / "lines.txt", "--output", tmp_path / "out"]
    code = main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(error_lines(err)) == 1
    assert f"{folder / 'tokenizer.json'}: `model" in err
