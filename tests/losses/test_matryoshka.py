import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from harness import MIXED_POLICIES
from harness import assert_float32_and_finite
from harness import dtype_policy
from harness import run_model_saving_test
from harness import run_precision_test
from harness import run_serialization_test
from sbert_keras import AnglELoss
from sbert_keras import BatchHardTripletLoss
from sbert_keras import ClassificationSiamese
from sbert_keras import ContrastiveSiamese
from sbert_keras import CoSENTLoss
from sbert_keras import InBatchNegativesLoss
from sbert_keras import MatryoshkaLoss
from sbert_keras import MSEDistillationLoss
from sbert_keras import RegressionSiamese
from sbert_keras import TripletSiamese
from sbert_keras.losses.matryoshka import MatryoshkaPrefixes

A = np.array(["a man is playing guitar", "a dog runs", "the cat sleeps", "a red car"])
B = np.array(["a man plays piano", "a dog runs fast", "a car is fast", "a blue car"])
SCORES = np.array([0.6, 0.9, 0.1, 0.4], "float32")


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def cosines(u, v, dim):
    return np.sum(unit(u[:, :dim]) * unit(v[:, :dim]), axis=-1)


# === The loss on embeddings (dims given) ===


def test_loss_with_the_full_dim_equals_the_wrapped_loss():
    rng = np.random.default_rng(0)
    embeddings = unit(rng.normal(size=(8, 6))).astype("float32")
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    inner = BatchHardTripletLoss(margin=0.5)
    np.testing.assert_allclose(
        float(MatryoshkaLoss(inner, dims=(6,))(labels, embeddings)), float(inner(labels, embeddings)), rtol=1e-5
    )


def test_loss_with_two_dims_is_the_hand_computed_weighted_sum():
    student = np.array([[3.0, 4.0]], "float32")
    teacher = np.array([[0.5, 1.0]], "float32")
    # dim 2: student -> (0.6, 0.8), MSE to (0.5, 1) = (0.01 + 0.04) / 2 = 0.025.
    # dim 1: student -> (1,), teacher cut to (0.5,): 0.25, weighted 0.5.
    loss = MatryoshkaLoss(MSEDistillationLoss(), dims=(2, 1), weights=(1.0, 0.5))
    np.testing.assert_allclose(float(loss(teacher, student)), 0.025 + 0.5 * 0.25, rtol=1e-5)


def test_loss_on_pair_embeddings_truncates_each_embedding():
    rng = np.random.default_rng(1)
    pairs = rng.normal(size=(6, 2, 8)).astype("float32")
    scores = np.arange(6.0)
    expected = sum(float(AnglELoss()(scores, unit(pairs[..., :d]).astype("float32"))) for d in (8, 4))
    np.testing.assert_allclose(float(MatryoshkaLoss(AnglELoss(), dims=(8, 4))(scores, pairs)), expected, rtol=1e-5)


def test_loss_rejects_bad_arguments():
    with pytest.raises(ValueError, match="positive ints"):
        MatryoshkaLoss(CoSENTLoss(), dims=(8, 0))
    with pytest.raises(ValueError, match="one entry per dim"):
        MatryoshkaLoss(CoSENTLoss(), dims=(8, 4), weights=(1.0,))
    with pytest.raises(ValueError, match="exceed the embedding dimension 4"):
        MatryoshkaLoss(MSEDistillationLoss(), dims=(8,))(np.zeros((2, 4)), np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match="one entry per Matryoshka output"):
        MatryoshkaLoss("mse", weights=(1.0,))(np.zeros(2), np.ones((2, 3), "float32"))


def test_loss_and_layer_round_trip_their_config():
    loss = MatryoshkaLoss(CoSENTLoss(scale=7.0), dims=(8, 4), weights=(1.0, 0.5))
    revived = run_serialization_test(loss)
    assert isinstance(revived.loss, CoSENTLoss) and revived.loss.scale == 7.0
    assert revived.dims == (8, 4) and revived.weights == (1.0, 0.5)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.get_config() == loss.get_config()
    assert run_serialization_test(MatryoshkaPrefixes((8, 4))).dims == (8, 4)


@pytest.mark.parametrize("policy", MIXED_POLICIES)
def test_loss_is_float32_under_mixed_policies(policy):
    with dtype_policy(policy) as active:
        pairs = keras.ops.cast(np.random.default_rng(2).normal(size=(4, 2, 8)) * 300, active.compute_dtype)
        value = MatryoshkaLoss(AnglELoss(), dims=(8, 4))(np.arange(4.0), pairs)
        assert_float32_and_finite(value, f"MatryoshkaLoss under {policy}")


# === On the siamese model (matryoshka_dims) ===


def test_regression_siamese_outputs_one_cosine_per_prefix():
    encoder = tiny_encoder()
    model = RegressionSiamese(encoder, matryoshka_dims=(8, 4))
    u, v = encoder.encode(list(A)), encoder.encode(list(B))
    outputs = model.predict((A, B), verbose=0)
    assert outputs.shape == (4, 2)
    np.testing.assert_allclose(outputs[:, 0], cosines(u, v, 8), atol=1e-5)
    np.testing.assert_allclose(outputs[:, 1], cosines(u, v, 4), atol=1e-5)
    # compile() wraps the objective's loss; the value is the sum over prefixes.
    assert isinstance(model.loss, MatryoshkaLoss) and isinstance(model.loss.loss, keras.losses.MeanSquaredError)
    expected = np.mean((cosines(u, v, 8) - SCORES) ** 2) + np.mean((cosines(u, v, 4) - SCORES) ** 2)
    np.testing.assert_allclose(float(model.loss(SCORES, outputs)), expected, rtol=1e-4)


def test_full_dim_only_equals_the_plain_objective():
    encoder = tiny_encoder()
    plain, nested = RegressionSiamese(encoder), RegressionSiamese(encoder, matryoshka_dims=(8,))
    np.testing.assert_allclose(nested.predict((A, B), verbose=0)[:, 0], plain.predict((A, B), verbose=0), atol=1e-6)
    nested.compile(loss=CoSENTLoss())
    expected = float(CoSENTLoss()(SCORES, plain.predict((A, B), verbose=0)))
    np.testing.assert_allclose(float(nested.loss(SCORES, nested.predict((A, B), verbose=0))), expected, rtol=1e-5)


def test_triplet_contrastive_and_classification_heads_take_prefixes():
    encoder = tiny_encoder(normalize=True)  # the full-dim prefix is the (already unit) embedding
    triplet = TripletSiamese(encoder, matryoshka_dims=(8, 4))
    texts = (A, B, B[::-1])
    np.testing.assert_allclose(
        triplet.predict(texts, verbose=0)[:, 0], TripletSiamese(encoder).predict(texts, verbose=0), atol=1e-5
    )
    contrastive = ContrastiveSiamese(encoder, matryoshka_dims=(8, 4))
    similarities = contrastive.predict((A, B), verbose=0)
    assert similarities.shape == (4, 2, 4)
    inner = InBatchNegativesLoss()
    expected = sum(float(inner(None, similarities[:, i])) for i in range(2))
    np.testing.assert_allclose(float(contrastive.loss(None, similarities)), expected, rtol=1e-5)
    classifier = ClassificationSiamese(encoder, matryoshka_dims=(8, 4, 2))  # zero-padded: one Dense for all
    assert classifier.predict((A, B), verbose=0).shape == (4, 3, 3)


def test_matryoshka_siamese_trains_and_round_trips_a_keras_file(tmp_path):
    model = RegressionSiamese(tiny_encoder(), matryoshka_dims=(8, 4))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=CoSENTLoss())
    history = model.fit((A, B), SCORES, batch_size=4, epochs=5, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    restored = run_model_saving_test(model, (A, B), tmp_path, method="predict")
    assert restored.matryoshka_dims == (8, 4)
    assert isinstance(restored.loss, MatryoshkaLoss) and isinstance(restored.loss.loss, CoSENTLoss)


def test_angle_on_pair_embeddings_with_matryoshka_loss(tmp_path):
    model = RegressionSiamese(tiny_encoder(), pair_output="embeddings")
    assert isinstance(model.loss, AnglELoss)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=MatryoshkaLoss(AnglELoss(), dims=(8, 4)))
    history = model.fit((A, B), SCORES, batch_size=4, epochs=3, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert model.predict((A, B), verbose=0).shape == (4, 2, 8)
    restored = run_model_saving_test(model, (A, B), tmp_path, method="predict")
    assert restored.pair_output == "embeddings" and restored.loss.dims == (8, 4)
    with pytest.raises(ValueError, match="takes no `matryoshka_dims`"):
        RegressionSiamese(tiny_encoder(), pair_output="embeddings", matryoshka_dims=(8, 4))


@pytest.mark.parametrize("policy", MIXED_POLICIES)
def test_matryoshka_siamese_has_finite_float32_loss_and_gradients(policy):
    def features(model):
        texts = tf.constant(["a man is playing guitar", ""])
        x, _ = model.preprocessor((texts, texts), y=tf.zeros(2))  # identical pairs, one empty text
        return x

    losses = run_precision_test(
        lambda: RegressionSiamese(tiny_encoder(), matryoshka_dims=(8, 4)),
        features,
        y=tf.constant([1.0, 0.0]),
        loss=MatryoshkaLoss(CoSENTLoss()),
        policies=(policy,),
    )
    assert set(losses) == {policy}
