import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from harness import MIXED_POLICIES
from harness import assert_float32_and_finite
from harness import dtype_policy
from harness import run_serialization_test
from sbert_keras import AnglELoss
from sbert_keras import BatchHardTripletLoss
from sbert_keras import CoSENTLoss
from sbert_keras import MSEDistillationLoss
from sbert_keras import OnlineContrastiveLoss
from sbert_keras import RegressionSiamese
from sbert_keras import SymmetricInBatchNegativesLoss
from sbert_keras.losses.pair_scores import angle_similarity
from sbert_keras.losses.triplet import pairwise_distances

ST_PYTHON = pathlib.Path("/work/peers/st/bin/python")
SQRT2 = np.sqrt(2.0)


def value(loss, y_true, y_pred):
    return float(loss(y_true, np.asarray(y_pred, "float32")))


# === Hand-computed values ===


def test_cosent_matches_hand_computed_value():
    # Pairs with label_i < label_j add exp(s·(cos_i − cos_j)): (0,1): 0.2, (0,2): 0.1, (1,2): −0.1.
    expected = np.log(1 + np.exp(20 * 0.2) + np.exp(20 * 0.1) + np.exp(-20 * 0.1))
    got = value(CoSENTLoss(), np.array([0.0, 1.0, 2.0]), [0.5, 0.3, 0.4])
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # Only the order of the labels counts; ties add nothing.
    np.testing.assert_allclose(value(CoSENTLoss(), np.array([0.0, 0.7, 5.0]), [0.5, 0.3, 0.4]), expected, rtol=1e-5)
    np.testing.assert_allclose(value(CoSENTLoss(), np.array([1.0, 1.0]), [0.9, 0.1]), 0.0, atol=1e-6)


def test_angle_similarity_matches_hand_computed_values():
    u = np.array([[1, 0], [1, 0], [1, 0], [2, 0]], "float32")
    v = np.array([[0, 1], [1, 1], [1, -1], [3, 0]], "float32")
    # (1+0i)/(0+1i) = −i; (1, 0) vs (1, ±1)/√2: cos = 1/√2, sin = ∓1/√2; parallel: 1.
    np.testing.assert_allclose(angle_similarity(u, v), [1.0, 0.0, SQRT2, 1.0], atol=1e-6)
    # An odd width is padded with a zero.
    np.testing.assert_allclose(angle_similarity(u[:, :1] * 0 + [[1]], [[1]] * 4), [1.0] * 4, atol=1e-6)


def test_angle_loss_matches_hand_computed_value():
    pairs = np.array([[[1, 0], [1, 1]], [[1, 0], [1, -1]]], "float32")  # angle similarities 0 and √2
    # Gold scores 1 > 0 but similarities 0 < √2: log(1 + e^(20·√2)).
    np.testing.assert_allclose(value(AnglELoss(), np.array([1.0, 0.0]), pairs), np.log1p(np.exp(20 * SQRT2)), 1e-5)
    np.testing.assert_allclose(value(AnglELoss(scale=1.0), np.array([0.0, 1.0]), pairs), np.log1p(np.exp(-SQRT2)), 1e-5)
    with pytest.raises(ValueError, match=r"\(batch, 2, dim\)"):
        AnglELoss()(np.zeros(2), np.zeros((2, 4), "float32"))


def test_symmetric_in_batch_negatives_matches_hand_computed_value():
    sims = np.array([[0.9, 0.1, 0.3, -0.2], [0.4, 0.5, 0.0, 0.8]], "float32")  # 2 anchors x (2 positives + 2 hard)
    s = 20.0 * sims

    def lse(x):
        return np.log(np.sum(np.exp(x - x.max()))) + x.max()

    forward = [lse(s[0]) - s[0, 0], lse(s[1]) - s[1, 1]]
    backward = [lse(s[:, 0]) - s[0, 0], lse(s[:, 1]) - s[1, 1]]  # positives pick among anchors only
    expected = np.mean([(f + b) / 2 for f, b in zip(forward, backward, strict=True)])
    np.testing.assert_allclose(value(SymmetricInBatchNegativesLoss(), None, sims), expected, rtol=1e-5)


def test_batch_hard_triplet_matches_hand_computed_value():
    points = np.array([[0, 0], [1, 0], [3, 0], [7, 0]], "float32")
    labels = np.array([0, 0, 1, 1])
    # Anchor 3: hardest positive 7 (d 4), hardest negative 1 (d 2): 4 − 2 + 1 = 3; the others are ≤ 0.
    np.testing.assert_allclose(value(BatchHardTripletLoss(margin=1.0), labels, points), 3 / 4, rtol=1e-5)
    # Cosine: (1,0), (0,1) class 0; (1,1) class 1. Anchor 0 and 1: 1 − (1 − 1/√2) + m; anchor 2: no positive.
    points = np.array([[1, 0], [0, 1], [1, 1]], "float32")
    m = 0.1
    expected = (2 * (1 - (1 - 1 / SQRT2) + m) + max(0 - (1 - 1 / SQRT2) + m, 0)) / 3
    got = value(BatchHardTripletLoss(margin=m, metric="cosine"), np.array([0, 0, 1]), points)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_pairwise_euclidean_distances_are_exact_and_differentiable_at_zero():
    x = tf.Variable([[1.0, 2.0], [1.0, 2.0], [4.0, 6.0]])
    with tf.GradientTape() as tape:
        d = pairwise_distances(x)
        loss = BatchHardTripletLoss(margin=1.0)(np.array([0, 0, 1]), x)
    np.testing.assert_allclose(d, [[0, 0, 5], [0, 0, 5], [5, 5, 0]], atol=1e-5)
    assert np.all(np.isfinite(tape.gradient(loss, x)))
    with pytest.raises(ValueError, match="metric"):
        BatchHardTripletLoss(metric="manhattan")


def test_online_contrastive_matches_hand_computed_value():
    distances = np.array([0.1, 0.4, 0.3, 0.6], "float32")
    labels = np.array([1.0, 1.0, 0.0, 0.0])
    # Hard positive: 0.4 > min negative 0.3 -> 0.16; hard negative: 0.3 < max positive 0.4 -> (0.5 − 0.3)² = 0.04.
    np.testing.assert_allclose(value(OnlineContrastiveLoss(from_similarity=False), labels, distances), 0.2, 1e-5)
    np.testing.assert_allclose(value(OnlineContrastiveLoss(), labels, 1.0 - distances), 0.2, rtol=1e-5)
    # Only positives: those above their mean count.
    np.testing.assert_allclose(
        value(OnlineContrastiveLoss(from_similarity=False), np.ones(2), [0.1, 0.3]), 0.09, rtol=1e-5
    )


def test_mse_distillation_is_keras_mse_over_every_element():
    teacher = np.array([[1.0, 2.0], [0.0, 0.0]], "float32")
    student = np.zeros((2, 2), "float32")
    np.testing.assert_allclose(value(MSEDistillationLoss(), teacher, student), 5.0 / 4, rtol=1e-6)
    assert MSEDistillationLoss is keras.losses.MeanSquaredError


def test_cosent_and_angle_refuse_sample_weights():
    with pytest.raises(ValueError, match="CoSENTLoss .* no `sample_weight`"):
        CoSENTLoss()(np.zeros(2), np.zeros(2, "float32"), sample_weight=np.ones(2))


# === Serialization ===

LOSSES = [
    CoSENTLoss(scale=7.0),
    AnglELoss(scale=9.0),
    SymmetricInBatchNegativesLoss(scale=11.0),
    BatchHardTripletLoss(margin=0.3, metric="cosine"),
    OnlineContrastiveLoss(margin=0.25, from_similarity=False),
]


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: type(loss).__name__)
def test_losses_round_trip_their_config(loss):
    revived = run_serialization_test(loss)
    assert revived.get_config() == loss.get_config()
    for restored in (
        keras.losses.deserialize(keras.losses.serialize(loss)),
        keras.losses.get(keras.losses.serialize(loss)),
    ):
        assert type(restored) is type(loss)
        assert restored.get_config() == loss.get_config()


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: type(loss).__name__)
def test_losses_survive_a_keras_file(loss, tmp_path):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=loss)
    model.save(tmp_path / "model.keras")
    restored = keras.saving.load_model(tmp_path / "model.keras")
    assert type(restored.loss) is type(loss)
    assert restored.loss.get_config() == loss.get_config()


def test_regression_siamese_trains_with_cosent_and_reloads(tmp_path):
    model = RegressionSiamese(tiny_encoder())
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CoSENTLoss())
    a = np.array(["a man is playing guitar", "a dog runs", "the cat sleeps", "a red car"])
    b = np.array(["a man plays piano", "a dog runs fast", "a car is fast", "a blue car"])
    history = model.fit((a, b), np.array([3.0, 4.5, 0.5, 2.0]), batch_size=4, epochs=5, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(tmp_path / "cosent.keras")
    restored = keras.saving.load_model(tmp_path / "cosent.keras")
    assert isinstance(restored.loss, CoSENTLoss)
    np.testing.assert_allclose(restored.predict((a, b), verbose=0), model.predict((a, b), verbose=0), atol=1e-6)


# === Precision ===


def _inputs(loss, dtype):
    rng = np.random.default_rng(0)
    big = keras.ops.cast(rng.normal(size=(6, 8)) * 3000, dtype)
    if isinstance(loss, AnglELoss):
        return np.arange(6.0), keras.ops.cast(rng.normal(size=(6, 2, 8)) * 3000, dtype)
    if isinstance(loss, CoSENTLoss):
        return np.arange(6.0), keras.ops.cast(rng.uniform(-1, 1, 6), dtype)
    if isinstance(loss, SymmetricInBatchNegativesLoss):
        return None, keras.ops.cast(rng.uniform(-1, 1, (6, 12)), dtype)
    if isinstance(loss, BatchHardTripletLoss):
        return np.array([0, 0, 1, 1, 2, 2]), big
    return np.array([0.0, 1, 0, 1, 1, 0]), keras.ops.cast(rng.uniform(-1, 1, 6), dtype)


@pytest.mark.parametrize("policy", MIXED_POLICIES)
@pytest.mark.parametrize("loss", LOSSES + [BatchHardTripletLoss()], ids=lambda loss: type(loss).__name__)
def test_losses_are_float32_under_mixed_policies(loss, policy):
    with dtype_policy(policy) as active:
        y_true, y_pred = _inputs(loss, active.compute_dtype)
        assert_float32_and_finite(loss(y_true, y_pred), f"{type(loss).__name__} under {policy}")


# === Against sentence-transformers (peer venv) ===

ST_SCRIPT = """
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, torch
from sentence_transformers.sentence_transformer import losses as L
t = {k: torch.tensor(v) for k, v in np.load(sys.argv[1]).items()}
u, v = t["u"], t["v"]
print(json.dumps({
    "cosent": L.CoSENTLoss(None).compute_loss_from_embeddings([u, v], t["scores"]).item(),
    "angle": L.AnglELoss(None).compute_loss_from_embeddings([u, v], t["scores"]).item(),
    "symmetric": L.MultipleNegativesSymmetricRankingLoss(None)
    .compute_loss_from_embeddings([u, v, t["n"]], None)
    .item(),
    "batch_hard": L.BatchHardTripletLoss(None).batch_hard_triplet_loss(t["classes"], u).item(),
    "online": L.OnlineContrastiveLoss(None).compute_loss_from_embeddings([u, v], t["binary"]).item(),
    "mse": L.MSELoss(None).compute_loss_from_embeddings([u], [v]).item(),
}))
"""


@pytest.fixture(scope="module")
def st_reference(tmp_path_factory):
    if not ST_PYTHON.exists():
        pytest.skip(f"no sentence-transformers peer venv at {ST_PYTHON}")
    rng = np.random.default_rng(7)
    data = {
        "u": rng.normal(size=(16, 9)).astype("float32"),  # odd width: AnglE's padding too
        "v": rng.normal(size=(16, 9)).astype("float32"),
        "n": rng.normal(size=(16, 9)).astype("float32"),
        "scores": rng.integers(0, 6, 16).astype("float32"),  # with ties
        "classes": rng.integers(0, 4, 16),
        "binary": rng.integers(0, 2, 16).astype("float32"),
    }
    path = tmp_path_factory.mktemp("st") / "inputs.npz"
    np.savez(path, **data)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [str(ST_PYTHON), "-c", ST_SCRIPT, str(path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return data, json.loads(result.stdout.strip().splitlines()[-1])


def test_losses_match_sentence_transformers(st_reference):
    data, st = st_reference
    u, v, n = data["u"], data["v"], data["n"]
    cosines = np.sum(u * v, 1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    candidates = np.concatenate([v, n])
    matrix = (u / np.linalg.norm(u, axis=1, keepdims=True)) @ (
        candidates / np.linalg.norm(candidates, axis=1, keepdims=True)
    ).T
    ours = {
        "cosent": value(CoSENTLoss(), data["scores"], cosines),
        "angle": value(AnglELoss(), data["scores"], np.stack([u, v], axis=1)),
        "symmetric": value(SymmetricInBatchNegativesLoss(), None, matrix),
        "batch_hard": value(BatchHardTripletLoss(), data["classes"], u),
        "online": value(OnlineContrastiveLoss(), data["binary"], cosines),
        "mse": value(MSEDistillationLoss(), v, u),
    }
    for name, expected in st.items():
        np.testing.assert_allclose(ours[name], expected, rtol=1e-5, err_msg=name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
