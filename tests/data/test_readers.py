"""Tests for sbert_keras.data.readers: tiny files under tmp_path, plus ../shared data."""

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbert_keras.data import examples
from sbert_keras.data import readers
from sbert_keras.data.readers import DataFormatError

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def shared_file(*parts):
    if not SHARED.exists():
        pytest.skip(f"../shared is absent ({SHARED}): the real-data tests need the shared data files.")
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent from ../shared.")
    return path


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def sts_line(score="3.800", a="A man plays.", b="A man is playing.", extra=()):
    return "\t".join(["main-captions", "MSRvid", "2012test", "0001", score, a, b, *extra]) + "\n"


def nli_line(label, s1="A dog runs.", s2="An animal moves."):
    return json.dumps({"gold_label": label, "sentence1": s1, "sentence2": s2, "pairID": "x"}) + "\n"


def assert_error(excinfo, path, line_number):
    message = str(excinfo.value)
    assert path.name in message
    assert f"line {line_number}:" in message
    assert excinfo.value.line_number == line_number
    assert isinstance(excinfo.value, ValueError)


# Module hygiene.


def test_module_imports_without_keras_or_tensorflow():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('d', {readers.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "bad = [m for m in ('keras', 'tensorflow', 'tensorflow_datasets') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# STS score scaling.


def test_scale_sts_score_known_values():
    assert examples.STS_SCORE_MAX == 5.0
    assert examples.scale_sts_score(0.0, mapping="keras-io") == pytest.approx(-1.0, abs=1e-12)
    assert examples.scale_sts_score(2.5, mapping="keras-io") == pytest.approx(0.0, abs=1e-12)
    assert examples.scale_sts_score(5.0, mapping="keras-io") == pytest.approx(1.0, abs=1e-12)
    assert examples.scale_sts_score(0.0) == pytest.approx(0.0, abs=1e-12)
    assert examples.scale_sts_score(4.0) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="mapping"):
        examples.scale_sts_score(1.0, mapping="percent")
    assert isinstance(examples.scale_sts_score(3), float)
    scaled = examples.scale_sts_score(np.array([0.0, 1.25, 5.0]), mapping="keras-io")
    np.testing.assert_allclose(scaled, [-1.0, -0.5, 1.0])
    assert scaled.dtype == np.float32


def test_scale_unscale_round_trip():
    scores = np.linspace(0.0, 5.0, 21, dtype="float32")
    for mapping in examples.STS_MAPPINGS:
        back = examples.unscale_sts_score(examples.scale_sts_score(scores, mapping), mapping)
        np.testing.assert_allclose(back, scores, atol=1e-6)
        assert examples.unscale_sts_score(examples.scale_sts_score(3.8, mapping), mapping) == pytest.approx(3.8)
    assert examples.unscale_sts_score(np.array([0.0, 1.0])).dtype == np.float32
    assert examples.unscale_sts_score(-1.0, mapping="keras-io") == pytest.approx(0.0, abs=1e-12)


# read_sts.


def test_read_sts_seven_and_nine_fields(tmp_path):
    path = write(
        tmp_path / "sts-dev.csv",
        sts_line("5.000", 'He said "hi"', "He said 'hi'")
        + "\n"
        + sts_line("0.5", "Ça va.", "Not at all.", extra=("src-a", "src-b")),
    )
    pairs = readers.read_sts(path)
    assert len(pairs) == 2
    assert pairs.sentence_a == ['He said "hi"', "Ça va."]
    assert pairs.sentence_b == ["He said 'hi'", "Not at all."]
    assert pairs.labels.dtype == np.float32
    np.testing.assert_allclose(pairs.labels, [5.0, 0.5])
    assert pairs.as_tuple() == (pairs.sentence_a, pairs.sentence_b)


@pytest.mark.parametrize(
    "bad_line, reason",
    [
        ("a\tb\tc\td\t3.0\n", "expected 7 or 9 tab-separated fields, found 5"),
        (sts_line(extra=("only-one",)), "found 8"),
        (sts_line(score="high"), "'high' is not a number"),
        (sts_line(score="5.5"), "outside [0, 5]"),
        (sts_line(score="-0.1"), "outside [0, 5]"),
        (sts_line(score="nan"), "outside [0, 5]"),
        ("   \n", "found 1"),
    ],
)
def test_read_sts_malformed_line(tmp_path, bad_line, reason):
    path = write(tmp_path / "sts-dev.csv", sts_line() + "\n" + sts_line() + bad_line + sts_line())
    with pytest.raises(DataFormatError, match="expected|number|outside") as excinfo:
        readers.read_sts(path)
    assert_error(excinfo, path, 4)
    assert reason in str(excinfo.value)


def test_read_sts_error_message_format(tmp_path):
    path = write(tmp_path / "sts-dev.csv", sts_line() * 11 + "a\tb\tc\td\t1\n")
    with pytest.raises(DataFormatError) as excinfo:
        readers.read_sts(path)
    assert str(excinfo.value) == f"{path}, line 12: expected 7 or 9 tab-separated fields, found 5"


# load_tfds_stsb.


def test_load_tfds_stsb_test_split_raises_before_importing_tfds(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # Any import would fail.
    with pytest.raises(ValueError, match="no labels.*validation"):
        readers.load_tfds_stsb("test")
    with pytest.raises(ValueError, match="no labels"):
        readers.load_tfds_stsb("test[:10]")
    with pytest.raises(ValueError, match="Unknown STS-B split"):
        readers.load_tfds_stsb("dev")


def test_load_tfds_stsb_without_tfds_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(ImportError, match="pip install tensorflow-datasets"):
        readers.load_tfds_stsb("validation")


# read_nli.


def test_read_nli_maps_labels_and_skips_unlabeled(tmp_path, caplog):
    path = write(
        tmp_path / "snli.jsonl",
        nli_line("entailment", s2="e")
        + nli_line("-", s2="u1")
        + nli_line("neutral", s2="n")
        + "\n"
        + nli_line("contradiction", s2="c")
        + nli_line("-", s2="u2"),
    )
    with caplog.at_level(logging.INFO, logger="sbert_keras.data.readers"):
        pairs = readers.read_nli(path)
    assert len(pairs) == 3
    assert pairs.num_skipped == 2
    assert pairs.sentence_b == ["e", "n", "c"]
    assert pairs.sentence_a == ["A dog runs."] * 3
    assert pairs.labels.dtype == np.int32
    np.testing.assert_array_equal(pairs.labels, [0, 1, 2])
    assert "skipped 2" in caplog.text

    kept = readers.read_nli(path, skip_unlabeled=False)
    assert kept.num_skipped == 0
    np.testing.assert_array_equal(kept.labels, [0, -1, 1, 2, -1])


def test_read_nli_limit(tmp_path):
    path = write(tmp_path / "snli.jsonl", nli_line("-") + "".join(nli_line(label) for label in examples.NLI_LABELS * 3))
    pairs = readers.read_nli(path, limit=4)
    assert len(pairs) == 4
    np.testing.assert_array_equal(pairs.labels, [0, 1, 2, 0])
    assert pairs.num_skipped == 1
    assert len(readers.read_nli(path, limit=0)) == 0
    with pytest.raises(ValueError, match="limit"):
        readers.read_nli(path, limit=-1)


@pytest.mark.parametrize(
    "bad_line, reason",
    [
        ('{"gold_label": "entailment", "sentence1": "a"\n', "invalid JSON"),
        ('["entailment", "a", "b"]\n', "expected a JSON object"),
        ('{"gold_label": "entailment", "sentence1": "a"}\n', "missing key 'sentence2'"),
        ('{"sentence1": "a", "sentence2": "b"}\n', "missing key 'gold_label'"),
        ('{"gold_label": "entailment", "sentence1": null, "sentence2": "b"}\n', "not a string"),
        (nli_line("contradicts"), "unknown gold_label 'contradicts'"),
    ],
)
def test_read_nli_malformed_line(tmp_path, bad_line, reason):
    path = write(tmp_path / "multinli_dev.jsonl", nli_line("entailment") + nli_line("-") + bad_line)
    with pytest.raises(DataFormatError) as excinfo:
        readers.read_nli(path)
    assert_error(excinfo, path, 3)
    assert reason in str(excinfo.value)


# read_triplets_csv.


def test_read_triplets_csv_wikipedia_header_and_quoting(tmp_path):
    path = write(
        tmp_path / "train.csv",
        'Sentence1,Sentence2,Sentence3,Section1\na1,p1,n1,History\n"a, 2","p ""2""","n\n2",Plot\n\na3,p3,n3,x\n',
    )
    triplets = readers.read_triplets_csv(path)
    assert len(triplets) == 3
    assert triplets.anchor == ["a1", "a, 2", "a3"]
    assert triplets.positive == ["p1", 'p "2"', "p3"]
    assert triplets.negative == ["n1", "n\n2", "n3"]
    assert triplets.as_tuple() == (triplets.anchor, triplets.positive, triplets.negative)


def test_read_triplets_csv_anchor_header_any_order_and_case(tmp_path):
    path = write(tmp_path / "t.csv", "id, Negative ,ANCHOR,Positive\n7,n,a,p\n")
    triplets = readers.read_triplets_csv(path)
    assert (triplets.anchor, triplets.positive, triplets.negative) == (["a"], ["p"], ["n"])


@pytest.mark.parametrize("header", ["question,answer,other\n", "anchor,positive\n", ""])
def test_read_triplets_csv_bad_header(tmp_path, header):
    path = write(tmp_path / "bad.csv", header + ("a,p,n\n" if header else ""))
    with pytest.raises(DataFormatError) as excinfo:
        readers.read_triplets_csv(path)
    assert_error(excinfo, path, 1)


@pytest.mark.parametrize(
    "bad_row, reason",
    [
        ("a,p\n", "expected at least 3 fields, found 2"),
        ("a,,n\n", "empty positive"),
        ("a,p, \n", "empty negative"),
    ],
)
def test_read_triplets_csv_bad_row(tmp_path, bad_row, reason):
    # The quoted field spans lines 2-3, so the bad row starts on line 4.
    path = write(tmp_path / "wiki.csv", 'anchor,positive,negative\n"a\nb",p,n\n' + bad_row)
    with pytest.raises(DataFormatError) as excinfo:
        readers.read_triplets_csv(path)
    assert_error(excinfo, path, 4)
    assert reason in str(excinfo.value)


# nli_to_triplets / nli_to_pairs.


def make_nli():
    rows = [
        ("P1", "e1", "entailment"),
        ("P1", "c1", "contradiction"),
        ("P2", "e3", "entailment"),  # No contradiction for P2: dropped.
        ("P1", "n1", "neutral"),
        ("P1", "e2", "entailment"),
        ("P3", "c3", "contradiction"),
        ("P1", "e4", "entailment"),
        ("P1", "c2", "contradiction"),
        ("P3", "e5", "entailment"),
        ("P4", "c4", "contradiction"),  # No entailment for P4: dropped.
    ]
    labels = np.array([examples.NLI_LABELS.index(r[2]) for r in rows], dtype="int32")
    return examples.NLIPairs([r[0] for r in rows], [r[1] for r in rows], labels, num_skipped=0)


def test_nli_to_triplets_known_output():
    triplets = examples.nli_to_triplets(make_nli())
    assert list(zip(triplets.anchor, triplets.positive, triplets.negative)) == [
        ("P1", "e1", "c1"),
        ("P1", "e2", "c2"),
        ("P1", "e4", "c1"),
        ("P3", "e5", "c3"),
    ]


def test_nli_to_triplets_seed_shuffles_deterministically():
    plain = examples.nli_to_triplets(make_nli())
    expected = set(zip(plain.anchor, plain.positive, plain.negative))
    first = examples.nli_to_triplets(make_nli(), seed=3)
    again = examples.nli_to_triplets(make_nli(), seed=3)
    assert first == again
    assert set(zip(first.anchor, first.positive, first.negative)) == expected
    assert len(first) == 4


def test_nli_to_pairs():
    pairs = examples.nli_to_pairs(make_nli())
    assert pairs.negative is None
    assert pairs.as_tuple() == (["P1", "P2", "P1", "P1", "P3"], ["e1", "e3", "e2", "e4", "e5"])
    assert len(pairs) == 5


# The real files in ../shared.


def test_real_sts_benchmark_files():
    dev = readers.read_sts(shared_file("data", "stsbenchmark", "sts-dev.csv"))
    train = readers.read_sts(shared_file("data", "stsbenchmark", "sts-train.csv"))
    assert len(dev) == 1500
    assert len(train) == 5749
    for split in (dev, train):
        assert split.labels.min() >= 0.0 and split.labels.max() <= 5.0
        assert all(split.sentence_a) and all(split.sentence_b)
    assert dev.sentence_a[0] == "A man with a hard hat is dancing."
    assert dev.labels[0] == pytest.approx(5.0)


def test_real_snli_test_file():
    path = shared_file("data", "snli", "snli_1.0_test.jsonl")
    pairs = readers.read_nli(path)
    assert len(pairs) + pairs.num_skipped == 10000
    assert pairs.num_skipped > 0
    assert set(np.unique(pairs.labels)) == {0, 1, 2}
    triplets = examples.nli_to_triplets(pairs)
    assert 0 < len(triplets) <= int(np.sum(pairs.labels == 0))


# Text encodings: every reader names the file and line.


def _readers():
    header = "anchor,positive,negative\n"
    return {
        "sts": (readers.read_sts, sts_line(), sts_line(b="Un café.")),
        "nli": (
            readers.read_nli,
            nli_line("entailment"),
            '{"gold_label": "neutral", "sentence1": "A dog.", "sentence2": "Un café."}\n',
        ),
        "triplets": (readers.read_triplets_csv, header, "a,p,café\n"),
    }


@pytest.mark.parametrize("reader", ["sts", "nli", "triplets"])
def test_latin1_file_names_file_and_line(tmp_path, reader):
    read, first, bad = _readers()[reader]
    path = tmp_path / "latin1.txt"
    path.write_bytes((first + first + bad).encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"byte 0xe9 at column \d+ is not valid UTF-8") as excinfo:
        read(path)
    assert_error(excinfo, path, 3)


@pytest.mark.parametrize("reader", ["sts", "nli", "triplets"])
@pytest.mark.parametrize("encoding, reason", [("utf-16", "UTF-16 or UTF-32"), ("utf-16-le", "NUL bytes")])
def test_utf16_file_names_file_and_line(tmp_path, reader, encoding, reason):
    read, first, bad = _readers()[reader]
    path = tmp_path / "utf16.txt"
    path.write_bytes((first + bad).encode(encoding))
    with pytest.raises(DataFormatError, match=reason) as excinfo:
        read(path)
    assert_error(excinfo, path, 1)


def test_utf8_bom_and_crlf_line_ends_are_read(tmp_path):
    path = tmp_path / "sts.csv"
    text = "\ufeff" + sts_line() + sts_line(b="Un café.")
    path.write_bytes(text.replace("\n", "\r\n").encode())
    pairs = readers.read_sts(path)
    assert pairs.sentence_b == ["A man is playing.", "Un café."]
    np.testing.assert_allclose(pairs.labels, [3.8, 3.8], atol=1e-6)


def test_iter_text_lines_keeps_empty_lines_on_request(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes("\ufeffone\n\r\ntwo\r\n".encode("utf-8"))
    assert list(readers.iter_text_lines(path)) == [(1, "one"), (3, "two")]
    assert list(readers.iter_text_lines(path, skip_empty=False)) == [(1, "one"), (2, ""), (3, "two")]
    assert [line for _, line in readers.iter_text_lines(path, keep_ends=True)] == ["one\n", "two\r\n"]


def test_encoding_error_column_counts_characters(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes("ok\nnaïve \xe9".encode().replace(b"\xc3\xa9", b"\xe9"))
    with pytest.raises(DataFormatError, match="line 2: byte 0xe9 at column 7 ") as excinfo:
        list(readers.iter_text_lines(path))
    assert_error(excinfo, path, 2)
