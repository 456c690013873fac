import keras
import numpy as np
import pytest
import tensorflow as tf

from harness import run_precision_test
from harness import run_serialization_test
from sbert_keras.model.similarity import CosineSimilarity
from sbert_keras.model.similarity import PairFeatures
from sbert_keras.model.similarity import SimilarityMatrix
from sbert_keras.model.similarity import TripletDistances
from sbert_keras.model.similarity import distance


def test_cosine_is_row_wise_not_a_batch_matrix():
    # The keras-io example computed matmul(u, vᵀ): a (B, B) matrix.
    u = np.random.rand(5, 4).astype("float32")
    v = np.random.rand(5, 4).astype("float32")
    out = np.asarray(CosineSimilarity()(u, v))
    assert out.shape == (5,)
    expected = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "cosine"])
def test_distances_match_numpy(metric):
    a, p, n = (np.random.rand(3, 4).astype("float32") for _ in range(3))
    out = np.asarray(TripletDistances(metric)(a, p, n))
    ref = {
        "euclidean": lambda x, y: np.linalg.norm(x - y, axis=1),
        "manhattan": lambda x, y: np.abs(x - y).sum(1),
        "cosine": lambda x, y: 1 - (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1),
    }[metric]
    np.testing.assert_allclose(out, np.stack([ref(a, p), ref(a, n)], 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "cosine"])
def test_gradient_is_finite_for_identical_and_zero_vectors(metric):
    a = tf.Variable(np.zeros((2, 4), "float32"))
    with tf.GradientTape() as tape:
        d = distance(a, tf.zeros((2, 4)), metric)
    grad = tape.gradient(d, a)
    assert np.all(np.isfinite(d.numpy())) and np.all(np.isfinite(grad.numpy()))


def test_similarity_matrix_with_hard_negatives():
    a, p, n = (np.random.rand(3, 4).astype("float32") for _ in range(3))
    out = np.asarray(SimilarityMatrix()(a, p, n))
    assert out.shape == (3, 6)
    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    cn = np.concatenate([p, n]) / np.linalg.norm(np.concatenate([p, n]), axis=1, keepdims=True)
    np.testing.assert_allclose(out, an @ cn.T, rtol=1e-5)


def test_pair_features_modes():
    u = np.array([[1.0, 2.0]], "float32")
    v = np.array([[3.0, 1.0]], "float32")
    out = np.asarray(PairFeatures(("u", "v", "|u-v|", "u*v"))(u, v))
    np.testing.assert_allclose(out, [[1, 2, 3, 1, 2, 1, 3, 2]])
    with pytest.raises(ValueError, match="concatenation"):
        PairFeatures(("u", "u+v"))


LAYERS = {
    "cosine": (lambda: CosineSimilarity(name="cos"), 2),
    "triplet": (lambda: TripletDistances("manhattan", name="dist"), 3),
    "matrix": (lambda: SimilarityMatrix(name="matrix"), 3),
    "pair_features": (lambda: PairFeatures(("|u-v|", "u*v"), name="features"), 2),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layers_serialize_with_their_arguments(name):
    make, _ = LAYERS[name]
    layer = make()
    clone = run_serialization_test(layer)
    assert clone.name == layer.name
    assert getattr(clone, "metric", None) == getattr(layer, "metric", None)
    assert getattr(clone, "concatenation", None) == getattr(layer, "concatenation", None)


@pytest.mark.parametrize("name", LAYERS)
def test_layers_are_float32_and_finite_under_mixed_policies(name):
    # float16 inputs whose squares overflow float16, and an all-zero pair.
    make, arity = LAYERS[name]
    x = np.array([[300.0, -300.0], [0.0, 0.0], [1.0, 2.0]], "float32")
    inputs = tuple(keras.ops.cast(x if i == 0 else x[::-1] * (i % 2 * 2 - 1), "float16") for i in range(arity))
    run_precision_test(make, inputs)
