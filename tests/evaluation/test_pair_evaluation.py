import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.evaluation import evaluators
from sbert_keras.evaluation import pair_evaluation


class FakeEncoder:
    """Maps each text to a unit vector at the angle (degrees) after its `@`."""

    def encode(self, texts, batch_size=32):
        angles = np.deg2rad([float(t.split("@")[1]) for t in texts])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype("float32")


def cos(degrees):
    return float(np.cos(np.deg2rad(degrees)))


# Cosines fall with the angle: cos 10 > cos 20 > ... > cos 50.
B = ["p@10", "p@20", "p@30", "p@40", "p@50"]
LABELS = [1, 0, 1, 0, 0]


def test_binary_classification_hand_computed_values():
    out = pair_evaluation.binary_classification_evaluation(FakeEncoder(), ["x@0"] * 5, B, LABELS)
    assert out.pop("primary") == "cosine_ap"
    expected = {
        # Cutting after the 1st or the 3rd pair both classify 4 of 5: the first wins.
        "cosine_accuracy": 0.8,
        "cosine_accuracy_threshold": (cos(10) + cos(20)) / 2,
        # After the 3rd pair: tp 2, fp 1, fn 0.
        "cosine_f1": 0.8,
        "cosine_f1_threshold": (cos(30) + cos(40)) / 2,
        "cosine_precision": 2 / 3,
        "cosine_recall": 1.0,
        "cosine_ap": (1 + 2 / 3) / 2,
        "cosine_mcc": (2 * 2 - 1 * 0) / np.sqrt(3 * 2 * 2 * 3),
    }
    assert set(out) == set(expected)
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, abs=1e-6), key


def test_binary_classification_never_splits_tied_scores():
    out = pair_evaluation.binary_classification_evaluation(
        FakeEncoder(), ["x@0"] * 3, ["p@10", "q@10", "p@40"], [1, 0, 0]
    )
    # Taking the tie (one right, one wrong) is no better than predicting all 0.
    assert out["cosine_accuracy"] == pytest.approx(2 / 3)
    vector = FakeEncoder().encode(["p@10"])[0].astype("float64")
    assert out["cosine_accuracy_threshold"] > vector[0] / np.linalg.norm(vector)  # above the tied score
    assert out["cosine_f1"] == pytest.approx(2 / 3)
    assert out["cosine_f1_threshold"] == pytest.approx((cos(10) + cos(40)) / 2, abs=1e-6)


@pytest.mark.parametrize(
    "a, b, labels, error, match",
    [
        (["x@0"] * 4, B, LABELS, ValueError, "same length"),
        ([], [], [], ValueError, "at least one example"),
        (["x@0"] * 5, B, [1, 0, 2, 0, 0], ValueError, "item 2 is 2"),
        (["x@0"] * 5, B, [1] * 5, ValueError, "only class 1"),
        (["x@0"] * 5, B[:4] + [None], LABELS, TypeError, "`sentences_b` item 4"),
    ],
)
def test_binary_classification_bad_input_is_named(a, b, labels, error, match):
    with pytest.raises(error, match=match):
        pair_evaluation.binary_classification_evaluation(FakeEncoder(), a, b, labels)


# Pairs by angle: (0,1) 15, (1,2) 25, (0,2) 40, (2,3) 60, (1,3) 85, (0,3) 100.
SENTENCES = ["s@0", "s@15", "s@40", "s@100"]


@pytest.mark.parametrize(
    "gold, top_k, expected",
    [
        # Mined (each keeps its best neighbour): (0,1) gold, (1,2), (2,3) gold.
        ([(0, 1), (3, 2)], 1, {"f1": 0.8, "precision": 2 / 3, "recall": 1.0, "t": 60, "ap": (1 + 2 / 3) / 2}),
        # (0,3) is not mined: it counts as missed in the recall and the AP.
        ([(0, 1), (2, 3), (0, 3)], 1, {"f1": 2 / 3, "precision": 2 / 3, "recall": 2 / 3, "t": 60, "ap": 5 / 9}),
        # All six mined: the best F1 (2/3) comes first after (0,1) and again after (2,3).
        ([(0, 1), (2, 3)], 100, {"f1": 2 / 3, "precision": 1.0, "recall": 0.5, "t": (15, 25), "ap": 0.75}),
    ],
)
def test_paraphrase_mining_hand_computed_values(gold, top_k, expected):
    out = pair_evaluation.paraphrase_mining_evaluation(FakeEncoder(), SENTENCES, gold, top_k=top_k)
    assert out.pop("primary") == "average_precision"
    assert set(out) == {"average_precision", "f1", "precision", "recall", "threshold"}
    threshold = np.mean([cos(t) for t in np.atleast_1d(expected["t"])])
    assert out["threshold"] == pytest.approx(threshold, abs=1e-6)
    assert out["average_precision"] == pytest.approx(expected["ap"])
    for key in ("f1", "precision", "recall"):
        assert out[key] == pytest.approx(expected[key]), key


def test_paraphrase_mining_ids_and_nothing_found():
    sentences = {"a": "s@0", "b": "s@15", "c": "s@40", "d": "s@100"}
    out = pair_evaluation.paraphrase_mining_evaluation(FakeEncoder(), sentences, [("b", "a")], top_k=1)
    assert out["average_precision"] == pytest.approx(1.0) and out["recall"] == pytest.approx(1.0)
    out = pair_evaluation.paraphrase_mining_evaluation(FakeEncoder(), sentences, [("a", "d")], top_k=1)
    assert {k: v for k, v in out.items() if k != "primary"} == {
        "average_precision": 0.0,
        "f1": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "threshold": 0.0,
    }


@pytest.mark.parametrize(
    "sentences, gold, match",
    [
        (SENTENCES, [(0, 1), (0, 9)], "item 1 names id 9"),
        (SENTENCES, [(2, 2)], "item 0 pairs id 2 with itself"),
        (SENTENCES, [(0, 1, 2)], "item 0 must be a pair"),
        (SENTENCES, [], "`gold_pairs` is empty"),
        (["s@0"], [(0, 0)], "at least 2 sentences"),
    ],
)
def test_paraphrase_mining_bad_input_is_named(sentences, gold, match):
    with pytest.raises(ValueError, match=match):
        pair_evaluation.paraphrase_mining_evaluation(FakeEncoder(), sentences, gold)


def test_callbacks_and_tiny_encoder():
    encoder = tiny_encoder()
    a = ["a man is playing guitar", "a dog runs", "the cat sleeps", "a red car"]
    b = ["a man plays guitar", "the dog runs in the park", "the sky is blue", "a woman eats food"]
    callback = evaluators.EvaluationCallback.of(
        pair_evaluation.binary_classification_evaluation, encoder, a, b, [1, 1, 0, 0]
    )
    logs = {}
    callback.on_epoch_end(0, logs)
    assert len(logs) == 8 and "dev_primary" not in logs and 0.0 <= logs["dev_cosine_ap"] <= 1.0
    callback = evaluators.EvaluationCallback.of(
        pair_evaluation.paraphrase_mining_evaluation, encoder, a + b, [(0, 4), (1, 5)]
    )
    logs = {}
    callback.on_epoch_end(0, logs)
    assert set(logs) == {f"dev_{k}" for k in ("average_precision", "f1", "precision", "recall", "threshold")}
