import os

import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.data import examples
from sbert_keras.data import readers
from sbert_keras.training import hard_negatives


class FakeEncoder:
    """Maps each text to a unit vector at the angle (degrees) in its name."""

    def __init__(self):
        self.calls = []

    def encode(self, texts, batch_size=32):
        self.calls.append(list(texts))
        angles = np.deg2rad([float(t.split("@")[1]) for t in texts])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype("float32")


# Two anchors with their positives, and extra corpus texts, on the unit circle.
ANCHORS = ["qa@0", "qb@90"]
POSITIVES = ["pa@10", "pb@100"]
CORPUS = ["n5@5", "n20@20", "n30@30", "n60@60", "far@180"]


def mine(**kwargs):
    kwargs.setdefault("corpus", CORPUS)
    kwargs.setdefault("num_negatives", 2)
    return hard_negatives.mine_hard_negatives(FakeEncoder(), ANCHORS, POSITIVES, **kwargs)


def negatives_of(mined, anchor):
    t = mined.triplets
    return [n for a, n in zip(t.anchor, t.negative) if a == anchor]


@pytest.mark.parametrize(
    "kwargs, expected_qa",
    [
        # The nearest candidates, the positive itself skipped.
        ({}, ["n5@5", "n20@20"]),
        # margin 0: nothing scoring above the positive (n5 is closer than pa).
        ({"margin": 0.0}, ["n20@20", "n30@30"]),
        # cos 20 = 0.940 > cos 10 - 0.1 = 0.885: too close; cos 30 = 0.866 is not.
        ({"margin": 0.1}, ["n30@30", "n60@60"]),
        ({"relative_margin": 0.1}, ["n30@30", "n60@60"]),
        # Ranks counted after the filters: skip the best survivor (n20).
        ({"margin": 0.0, "range_min": 1}, ["n30@30", "n60@60"]),
        ({"max_score": 0.9}, ["n30@30", "n60@60"]),
        # The window ends at rank 2 (n5, n20 are ranks 0, 1).
        ({"range_max": 2}, ["n5@5", "n20@20"]),
        ({"range_min": 1, "range_max": 3}, ["n20@20", "n30@30"]),
    ],
)
def test_known_negatives_from_hand_set_embeddings(kwargs, expected_qa):
    mined = mine(**kwargs)
    assert negatives_of(mined, "qa@0") == expected_qa
    t = mined.triplets
    assert len(mined) == len(t.anchor) == len(t.positive) == len(t.negative) == len(mined.negative_scores)
    angle = {text: float(text.split("@")[1]) for text in ANCHORS + POSITIVES + CORPUS}
    for a, p, n, ps, ns in zip(t.anchor, t.positive, t.negative, mined.positive_scores, mined.negative_scores):
        assert n != p and n != a
        assert ps == pytest.approx(np.cos(np.deg2rad(angle[a] - angle[p])), abs=1e-6)
        assert ns == pytest.approx(np.cos(np.deg2rad(angle[a] - angle[n])), abs=1e-6)


def test_qb_and_min_score_and_short_anchors():
    mined = mine(margin=0.0, min_score=0.6, num_negatives=3)
    # qa keeps n20, n30 (n60 scores 0.5 < 0.6); qb keeps only n60 (cos 30).
    assert negatives_of(mined, "qa@0") == ["n20@20", "n30@30"]
    assert negatives_of(mined, "qb@90") == ["n60@60"]
    assert mined.num_short == 2
    assert np.all(np.diff(mined.negative_scores[:2]) < 0)  # best first


def test_every_positive_of_an_anchor_is_excluded_and_gets_triplets():
    anchors = ["qa@0", "qa@0", "qa@0"]
    positives = ["pa@10", "n5@5", "pa@10"]  # the repeated pair counts once
    mined = hard_negatives.mine_hard_negatives(
        FakeEncoder(), anchors, positives, corpus=CORPUS, num_negatives=2, margin=0.0
    )
    t = mined.triplets
    # The margin is against the lowest positive score (pa, cos 10).
    assert list(zip(t.positive, t.negative)) == [
        ("pa@10", "n20@20"),
        ("pa@10", "n30@30"),
        ("n5@5", "n20@20"),
        ("n5@5", "n30@30"),
    ]


def test_duplicate_texts_and_the_anchor_text_are_never_negatives():
    corpus = ["qa@0", "pa@10", "n20@20", "n20@20", "n30@30"]
    encoder = FakeEncoder()
    mined = hard_negatives.mine_hard_negatives(
        encoder, ["qa@0"], ["pa@10"], corpus=corpus, num_negatives=3, range_max=5
    )
    assert mined.triplets.negative == ["n20@20", "n30@30"]  # qa and pa skipped, n20 once
    assert mined.num_short == 1
    assert encoder.calls[1] == ["pa@10", "qa@0", "n20@20", "n30@30"]  # the corpus, de-duplicated


def test_default_corpus_is_the_positives():
    mined = hard_negatives.mine_hard_negatives(FakeEncoder(), ANCHORS, POSITIVES, num_negatives=1)
    assert mined.triplets.negative == ["pb@100", "pa@10"]


def test_random_sampling_is_seeded_and_stays_in_the_window():
    window = ["n5@5", "n20@20", "n30@30", "n60@60"]
    results = set()
    for seed in range(12):
        mined = mine(sampling_strategy="random", seed=seed, range_max=4)
        chosen = negatives_of(mined, "qa@0")
        assert len(chosen) == 2 and set(chosen) <= set(window)
        assert chosen == sorted(chosen, key=window.index)  # by descending score
        assert negatives_of(mine(sampling_strategy="random", seed=seed, range_max=4), "qa@0") == chosen
        results.add(tuple(chosen))
    assert len(results) > 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"anchors": ["qa@0"]}, ValueError, "differ in length"),
        ({"anchors": [], "positives": []}, ValueError, "`anchors` is empty"),
        ({"positives": ["pa@10", " "]}, ValueError, "`positives` item 1 is empty"),
        ({"corpus": ["n5@5", None]}, TypeError, "`corpus` item 1"),
        ({"anchors": "qa@0"}, TypeError, "not a single string"),
        ({"num_negatives": 3, "range_max": 2}, ValueError, "Cannot mine 3 negatives"),
        ({"range_min": 4, "range_max": 4}, ValueError, "range_min"),
        ({"range_min": -1}, ValueError, "range_min"),
        ({"num_negatives": 0}, ValueError, "num_negatives"),
        ({"sampling_strategy": "best"}, ValueError, "sampling_strategy"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    args = {"anchors": ANCHORS, "positives": POSITIVES, "corpus": CORPUS, **kwargs}
    with pytest.raises(error, match=match):
        hard_negatives.mine_hard_negatives(FakeEncoder(), args.pop("anchors"), args.pop("positives"), **args)


def test_progress_bar(capsys):
    mine(show_progress=True)
    assert "Mining hard negatives" in capsys.readouterr().err
    mine()
    assert "Mining hard negatives" not in capsys.readouterr().err  # one chunk: no bar by default


def test_csv_round_trips_through_the_triplet_reader(tmp_path):
    triplets = examples.Triplets(['a "quoted", text', "line\nbreak"], ["p1", "p2,"], ["n1", 'n"2'])
    path = hard_negatives.write_triplets_csv(tmp_path / "out" / "triplets.csv", triplets)
    assert path == os.path.abspath(tmp_path / "out" / "triplets.csv")
    read = readers.read_triplets_csv(path)
    assert read.as_tuple() == triplets.as_tuple()
    assert os.listdir(tmp_path / "out") == ["triplets.csv"]  # no temporary file left
    with pytest.raises(ValueError, match="already exists"):
        hard_negatives.write_triplets_csv(path, triplets)
    hard_negatives.write_triplets_csv(path, examples.Triplets(["x"], ["y"], ["z"]), overwrite=True)
    assert readers.read_triplets_csv(path).anchor == ["x"]
    with pytest.raises(ValueError, match="no negatives"):
        hard_negatives.write_triplets_csv(tmp_path / "pairs.csv", examples.Triplets(["x"], ["y"]))


AWKWARD_TEXTS = ["bare\rreturn", "crlf\r\nend", "line\nbreak", "tab\there", 'a "quote"', "comma, here", " padded ",
                 "trailing\r", "\u2028 line separator", "é ü 漢字 🙂", '"', "\x0bvertical\x0ctab"]  # fmt: skip


def test_every_text_round_trips_through_the_triplet_writer_and_reader(tmp_path):
    n = len(AWKWARD_TEXTS)
    triplets = examples.Triplets(AWKWARD_TEXTS, AWKWARD_TEXTS[::-1], [AWKWARD_TEXTS[(i + 5) % n] for i in range(n)])
    path = hard_negatives.write_triplets_csv(tmp_path / "t.csv", triplets)
    assert readers.read_triplets_csv(path).as_tuple() == triplets.as_tuple()


@pytest.mark.parametrize(
    "text, message",
    [
        ("nul\0byte", r"triplet 1 \(positive\) holds a NUL character"),
        ("  \t", r"triplet 1 \(positive\) is empty or only whitespace"),
        ("\ud800", r"triplet 1 \(positive\) is not valid Unicode text"),
        (3, r"triplet 1 \(positive\) is int 3, not a str"),
    ],
)
def test_a_text_the_reader_would_refuse_is_refused_before_writing(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        hard_negatives.write_triplets_csv(tmp_path / "t.csv", examples.Triplets(["a", "b"], ["p", text], ["n", "m"]))
    assert not (tmp_path / "t.csv").exists()


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    path = hard_negatives.write_triplets_csv(tmp_path / "t.csv", examples.Triplets(["x"], ["y"], ["z"]))

    def failing():
        yield "a"
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        hard_negatives.write_triplets_csv(path, examples.Triplets(failing(), ["b", "c"], ["d", "e"]), overwrite=True)
    assert readers.read_triplets_csv(path).anchor == ["x"]
    assert os.listdir(tmp_path) == ["t.csv"]


def test_tiny_encoder_end_to_end(tmp_path):
    anchors = ["a man is playing guitar", "a dog runs in the park", "the cat sleeps on the sofa"]
    positives = ["a man plays guitar", "the dog runs", "a cat sleeps"]
    corpus = ["a red car is fast", "a woman eats food", "the sky is blue", "a blue ball", "a man plays guitar"]
    mined = hard_negatives.mine_hard_negatives(
        tiny_encoder(), anchors, positives, corpus=corpus, num_negatives=2, margin=0.0
    )
    assert len(mined) >= 2 and np.all(mined.negative_scores <= mined.positive_scores + 1e-6)
    path = hard_negatives.write_triplets_csv(tmp_path / "mined.csv", mined)
    read = readers.read_triplets_csv(path)
    assert read.as_tuple() == mined.triplets.as_tuple()
    assert all(n not in (a, p) for a, p, n in zip(*read.as_tuple()))


def test_read_pairs_csv(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text('Query,Positive,extra\n"a, dog",the dog,x\n\nq2,p2,y\n')
    pairs = hard_negatives.read_pairs_csv(path)
    assert pairs.as_tuple() == (["a, dog", "q2"], ["the dog", "p2"])
    # A triplet file is read as its (anchor, positive) pairs.
    triplets = hard_negatives.write_triplets_csv(tmp_path / "t.csv", examples.Triplets(["a"], ["p"], ["n"]))
    assert hard_negatives.read_pairs_csv(triplets).as_tuple() == (["a"], ["p"])
    path.write_text("text,label\nx,1\n")
    with pytest.raises(examples.DataFormatError, match="pairs.csv, line 1: header"):
        hard_negatives.read_pairs_csv(path)
    path.write_text("anchor,positive\nx,y\nz,\n")
    with pytest.raises(examples.DataFormatError, match="pairs.csv, line 3: empty positive field"):
        hard_negatives.read_pairs_csv(path)
    path.write_text("anchor,positive\nx,y\n\nz\n")
    with pytest.raises(examples.DataFormatError, match="pairs.csv, line 4: expected at least 2 fields, found 1"):
        hard_negatives.read_pairs_csv(path)
