import re
import warnings

import keras
import numpy as np
import pytest
from scipy import stats

import sbert_keras as sk
from conftest import large
from conftest import tiny_encoder
from sbert_keras.evaluation import evaluators

A = np.array(
    ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "a woman eats food"] * 2
)
B = np.array(["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 2)


class FakeEncoder:
    """Maps each text to a fixed vector and records what it was asked."""

    def __init__(self, vectors):
        self.vectors = {k: np.asarray(v, "float32") for k, v in vectors.items()}
        self.calls = []

    def encode(self, texts, batch_size=32, normalize=None, show_progress=None):
        self.calls.append(list(texts))
        return np.stack([self.vectors[t] for t in texts]).astype("float32")


def unit(degrees):
    r = np.deg2rad(degrees)
    return [np.cos(r), np.sin(r)]


def test_sts_known_ranking_and_pearson_values():
    enc = FakeEncoder({"x": [1, 0], "p0": unit(0), "p30": unit(30), "p60": unit(60), "p90": unit(90)})
    scores = [5.0, 4.0, 2.0, 0.0]
    out = evaluators.sts_evaluation(enc, ["x"] * 4, ["p0", "p30", "p60", "p90"], scores)
    assert set(out) == {
        f"{c}_{m}" for c in ("spearman", "pearson") for m in ("cosine", "euclidean", "manhattan", "dot")
    }
    assert all(isinstance(v, float) for v in out.values())
    # Every similarity falls monotonically with the angle, as the scores do.
    for m in ("cosine", "euclidean", "manhattan", "dot"):
        assert out[f"spearman_{m}"] == pytest.approx(1.0)
    cos = np.cos(np.deg2rad([0, 30, 60, 90]))
    assert out["pearson_cosine"] == pytest.approx(stats.pearsonr(cos, scores)[0], abs=1e-6)
    assert out["pearson_dot"] == pytest.approx(out["pearson_cosine"], abs=1e-6)
    euclid = np.sqrt(2 - 2 * cos)
    assert out["pearson_euclidean"] == pytest.approx(stats.pearsonr(-euclid, scores)[0], abs=1e-6)
    manhattan = (1 - cos) + np.sin(np.deg2rad([0, 30, 60, 90]))
    assert out["pearson_manhattan"] == pytest.approx(stats.pearsonr(-manhattan, scores)[0], abs=1e-6)
    # The scale of the scores does not matter.
    rescaled = evaluators.sts_evaluation(enc, ["x"] * 4, ["p0", "p30", "p60", "p90"], np.array(scores) / 5)
    assert rescaled == pytest.approx(out)
    assert evaluators.PRIMARY_METRIC["sts"] == "spearman_cosine"


def test_sts_every_key_matches_scipy_on_random_vectors():
    rng = np.random.default_rng(0)
    n = 12
    u, v = rng.normal(size=(n, 5)), rng.normal(size=(n, 5))
    scores = rng.uniform(0, 5, n)
    vectors = {f"a{i}": u[i] for i in range(n)} | {f"b{i}": v[i] for i in range(n)}
    enc = FakeEncoder(vectors)
    out = evaluators.sts_evaluation(enc, [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], scores)
    u, v = u.astype("float32").astype("float64"), v.astype("float32").astype("float64")
    sims = {
        "cosine": (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1),
        "euclidean": -np.linalg.norm(u - v, axis=1),
        "manhattan": -np.abs(u - v).sum(1),
        "dot": (u * v).sum(1),
    }
    for m, s in sims.items():
        assert out[f"spearman_{m}"] == pytest.approx(stats.spearmanr(s, scores)[0], abs=1e-9)
        assert out[f"pearson_{m}"] == pytest.approx(stats.pearsonr(s, scores)[0], abs=1e-9)


def test_sts_encodes_each_unique_sentence_once():
    enc = FakeEncoder({t: [i + 1.0, 1.0] for i, t in enumerate("xyzw")})
    evaluators.sts_evaluation(enc, ["x", "x", "y", "z"], ["y", "w", "x", "z"], [1, 2, 3, 4])
    encoded = [t for call in enc.calls for t in call]
    assert sorted(encoded) == ["w", "x", "y", "z"]


def test_sts_zero_vectors_and_constant_scores_give_no_nan():
    enc = FakeEncoder({"zero": [0, 0], "x": [1, 0], "y": [0, 1], "z": [1, 1]})
    out = evaluators.sts_evaluation(enc, ["zero", "zero", "x", "x"], ["x", "zero", "y", "z"], [0, 1, 3, 5])
    assert all(np.isfinite(v) for v in out.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        constant = evaluators.sts_evaluation(enc, ["x", "y", "z"], ["y", "z", "zero"], [2.0, 2.0, 2.0])
        # Constant similarities (identical pairs) are undefined too.
        same = evaluators.sts_evaluation(enc, ["x", "y"], ["x", "y"], [1.0, 2.0])
    assert constant == pytest.approx({k: 0.0 for k in out}, abs=1e-9)
    assert same["spearman_cosine"] == pytest.approx(0.0, abs=1e-9)
    assert same["pearson_euclidean"] == pytest.approx(0.0, abs=1e-9)


def test_sts_rejects_mismatched_lengths():
    enc = FakeEncoder({"x": [1, 0]})
    with pytest.raises(ValueError, match="same length"):
        evaluators.sts_evaluation(enc, ["x", "x"], ["x"], [1.0, 2.0])


def test_triplet_accuracy_known_values():
    vectors = {
        "e1": [1, 0],
        "e2": [2, 0],
        "f1": [0, 1],
        "e3": [3, 0],
        "f2": [0, 2],
        "m1": [-1, 0],
        "g": [1, 1],
        "zero": [0, 0],
    }
    enc = FakeEncoder(vectors)
    # Per triplet (euclid, cosine, manhattan) correct?
    anchors, positives, negatives = zip(
        ("e1", "e2", "f1"),  # 1 < 1.41 | 0 < 1 | 1 < 2   -> yes yes yes
        ("e1", "f1", "e3"),  # 1.41 < 2 | 1 > 0 | 2 = 2   -> yes no  no
        ("e1", "f2", "m1"),  # 2.24 > 2 | 1 < 2 | 3 > 2   -> no  yes no
        ("f1", "f1", "g"),  # 0 < 1    | 0 < .29 | 0 < 1 -> yes yes yes
        ("e1", "e3", "f1"),  # 2 > 1.41 | 0 < 1 | 2 = 2   -> no  yes no
        strict=True,
    )
    out = evaluators.triplet_evaluation(enc, anchors, positives, negatives)
    assert out == pytest.approx(
        {"triplet_accuracy": 0.6, "triplet_accuracy_cosine": 0.8, "triplet_accuracy_manhattan": 0.4}
    )
    assert evaluators.PRIMARY_METRIC["triplet"] == "triplet_accuracy"
    # Zero vectors: finite, and each distinct text encoded once.
    out = evaluators.triplet_evaluation(enc, ["zero", "e1"], ["zero", "e1"], ["e1", "zero"])
    assert all(np.isfinite(v) for v in out.values())
    assert sorted(enc.calls[-1]) == ["e1", "zero"]


def test_transfer_evaluation_separable_and_fold_check():
    rng = np.random.default_rng(0)
    vectors, texts, labels = {}, [], []
    for i in range(20):
        label = i % 2
        vectors[f"t{i}"] = [3.0 if label else -3.0, 0.0] + rng.normal(scale=0.1, size=2)
        texts.append(f"t{i}")
        labels.append(label)
    enc = FakeEncoder(vectors)
    out = evaluators.transfer_evaluation(enc, texts, labels, folds=5)
    assert out == pytest.approx({"transfer_accuracy": 1.0, "transfer_accuracy_std": 0.0}, abs=1e-9)
    with pytest.raises(ValueError, match="smallest class count"):
        evaluators.transfer_evaluation(enc, texts, labels, folds=11)
    with pytest.raises(ValueError, match="2 classes"):
        evaluators.transfer_evaluation(enc, texts, [0] * 20, folds=2)


def test_nli_evaluation_and_confusion_matrix():
    model = sk.ClassificationSiamese(tiny_encoder())
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    out = evaluators.nli_evaluation(model, list(A), list(B), labels, batch_size=4)
    assert set(out) == {"nli_accuracy"} and 0.0 <= out["nli_accuracy"] <= 1.0
    expected = np.mean(model.predict((A, B), verbose=0).argmax(-1) == labels)
    assert out["nli_accuracy"] == pytest.approx(expected)
    matrix = evaluators.nli_confusion_matrix(model, list(A), list(B), labels)
    assert matrix.shape == (3, 3) and matrix.sum() == len(labels)
    assert np.trace(matrix) / len(labels) == pytest.approx(out["nli_accuracy"])
    assert matrix.sum(1).tolist() == [3, 3, 2]


def test_callback_every_n_epochs_and_validation():
    calls = []

    def evaluate():
        calls.append(1)
        return {"score": np.float32(len(calls))}

    callback = evaluators.EvaluationCallback(evaluate, prefix="x_", every_n_epochs=2)
    logs = [{}, {}, {}, {}]
    for epoch, log in enumerate(logs):
        callback.on_epoch_end(epoch, log)
    assert logs == [{}, {"x_score": 1.0}, {}, {"x_score": 2.0}]
    assert callback.results == [{"score": 1.0}, {"score": 2.0}] and callback.epochs == [1, 3]
    with pytest.raises(ValueError):
        evaluators.EvaluationCallback(evaluate, every_n_epochs=0)


@pytest.mark.parametrize("history_first", [False, large(True)])
def test_callback_values_land_in_fit_history(history_first):
    encoder = tiny_encoder()
    model = sk.RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    scores = np.array([0.8, 0.6, 0.9, -0.5] * 2, "float32")
    callback = evaluators.EvaluationCallback.sts(encoder, A[:4], B[:4], scores[:4])
    # With a user `History` listed first, it runs before the callback.
    callbacks = [keras.callbacks.History(), callback] if history_first else [callback]
    history = model.fit((A, B), scores, batch_size=4, epochs=2, verbose=0, callbacks=callbacks)
    values = history.history["dev_spearman_cosine"]
    assert len(values) == 2 and len(history.history["loss"]) == 2
    assert values == [r["spearman_cosine"] for r in callback.results]
    assert len(history.history["dev_pearson_dot"]) == 2
    # The callback measured the shared encoder as it was being trained.
    final = evaluators.sts_evaluation(encoder, A[:4], B[:4], scores[:4])
    assert values[-1] == pytest.approx(final["spearman_cosine"])


def test_callback_constructors():
    enc = FakeEncoder({"e1": [1, 0], "e2": [2, 0], "f1": [0, 1]})
    callback = evaluators.EvaluationCallback.triplets(enc, ["e1"], ["e2"], ["f1"], prefix="val_")
    logs = {}
    callback.on_epoch_end(0, logs)
    assert logs["val_triplet_accuracy"] == 1.0
    model = sk.ClassificationSiamese(tiny_encoder())
    callback = evaluators.EvaluationCallback.nli(model, A[:4], B[:4], [0, 1, 2, 0])
    logs = {}
    callback.on_epoch_end(0, logs)
    assert set(logs) == {"dev_nli_accuracy"}


class ProgressRecorder(FakeEncoder):
    """Records the `show_progress` it is given."""

    def encode(self, texts, batch_size=32, normalize=None, show_progress=None):
        self.progress = show_progress
        return super().encode(texts, batch_size)


class PlainEncoder(FakeEncoder):
    """An encoder whose `encode` takes no `show_progress`."""

    def encode(self, texts, batch_size=32):
        return super().encode(texts, batch_size)


def test_evaluators_encode_without_a_progress_bar():
    vectors = {"x": [1, 0], "p": unit(10), "q": unit(80)}
    recorder = ProgressRecorder(vectors)
    evaluators.sts_evaluation(recorder, ["x", "x"], ["p", "q"], [5.0, 1.0])
    assert recorder.progress is False
    plain = evaluators.sts_evaluation(PlainEncoder(vectors), ["x", "x"], ["p", "q"], [5.0, 1.0])
    assert plain["spearman_cosine"] == pytest.approx(1.0)


def test_a_verbose_callback_prints_one_line_of_its_primary_figure(capsys):
    enc = FakeEncoder({"x": [1, 0], "p": unit(10), "q": unit(80)})
    callback = evaluators.EvaluationCallback.sts(enc, ["x", "x"], ["p", "q"], [5.0, 1.0], verbose=1)
    callback.set_params({"epochs": 3})
    callback.on_epoch_end(1, {})
    assert re.fullmatch(r"Epoch 2/3 dev \(\d+\.\ds\) - dev_spearman_cosine: 1\.0000\n", capsys.readouterr().out)
    quiet = evaluators.EvaluationCallback(lambda: {"a": 0.5, "b": 0.25}, prefix="val_")
    quiet.on_epoch_end(0, {})
    assert capsys.readouterr().out == ""
    every = evaluators.EvaluationCallback(lambda: {"a": 0.5, "b": 0.25}, prefix="val_", verbose=1)
    every.on_epoch_end(0, {})  # no primary figure, no `epochs` known: all figures
    assert re.fullmatch(r"Epoch 1 val \(\d+\.\ds\) - val_a: 0\.5000 - val_b: 0\.2500\n", capsys.readouterr().out)
