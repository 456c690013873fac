"""`encoding`: sentence-transformers' habits on `encode`, and `similarity` / `similarity_pairwise`."""

import numpy as np
import pytest
import tensorflow as tf

import sbert_keras
from conftest import tiny_encoder

TEXTS = ["a man plays a guitar", "the dog runs", "a red car", ""]


@pytest.fixture(scope="module")
def encoder():
    return tiny_encoder(normalize=False)


def test_sentence_transformers_aliases_match_our_arguments(encoder):
    ours = encoder.encode(TEXTS, normalize=True, show_progress=False, compute="float32")
    theirs = encoder.encode(TEXTS, normalize_embeddings=True, show_progress_bar=False, compute="float32")
    np.testing.assert_allclose(theirs, ours, atol=1e-6)
    assert np.allclose(np.linalg.norm(theirs[:3], axis=1), 1.0, atol=1e-5)
    raw = encoder.encode(TEXTS, normalize_embeddings=False, compute="float32")
    np.testing.assert_allclose(raw, encoder.encode(TEXTS, normalize=False, compute="float32"), atol=1e-6)


def test_show_progress_bar_draws_the_bar(encoder, capsys):
    encoder.encode(TEXTS * 3, batch_size=1, show_progress_bar=True, compute="float32")
    assert "12/12" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs",
    [{"convert_to_tensor": True}, {"convert_to_numpy": False}, {"convert_to_tensor": True, "convert_to_numpy": True}],
)
def test_convert_to_tensor_returns_a_float32_tensor(encoder, kwargs):
    vectors = encoder.encode(TEXTS, compute="float32", **kwargs)
    assert (
        isinstance(vectors, tf.Tensor) and vectors.dtype == tf.float32 and vectors.shape == (4, encoder.embedding_dim)
    )
    np.testing.assert_allclose(vectors.numpy(), encoder.encode(TEXTS, compute="float32"), atol=1e-6)
    one = encoder.encode("a red car", compute="float32", **kwargs)
    assert isinstance(one, tf.Tensor) and one.shape == (encoder.embedding_dim,)


def test_convert_to_numpy_keeps_numpy(encoder):
    assert isinstance(encoder.encode(TEXTS, convert_to_numpy=True, convert_to_tensor=False), np.ndarray)


def test_unknown_keyword_names_the_accepted_ones(encoder):
    with pytest.raises(TypeError) as error:
        encoder.encode(TEXTS, device="cpu")
    message = str(error.value)
    assert "'device'" in message
    for name in ("batch_size", "normalize", "show_progress", "precision", "compute", "prompt_name", "truncate_dim"):
        assert name in message
    for alias in ("show_progress_bar", "normalize_embeddings", "convert_to_numpy", "convert_to_tensor"):
        assert alias in message


def test_an_alias_that_contradicts_its_name_is_refused(encoder):
    with pytest.raises(ValueError, match="normalize=True and normalize_embeddings=False"):
        encoder.encode(TEXTS, normalize=True, normalize_embeddings=False)
    encoder.encode(TEXTS, normalize=True, normalize_embeddings=True)  # agreeing is fine


def test_aliases_reach_encode_query_and_document(encoder):
    query = encoder.encode_query(TEXTS, normalize_embeddings=True, convert_to_tensor=True)
    assert isinstance(query, tf.Tensor)
    assert np.allclose(np.linalg.norm(query.numpy()[:3], axis=1), 1.0, atol=1e-5)


def test_similarity_is_the_cosine_matrix(encoder):
    a, b = encoder.encode(TEXTS[:2]), encoder.encode(TEXTS)
    scores = encoder.similarity(a, b)
    expected = (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T
    assert scores.shape == (2, 4) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    np.testing.assert_allclose(encoder.similarity(TEXTS[:2], TEXTS), scores, atol=1e-5)  # texts are encoded
    np.testing.assert_allclose(sbert_keras.similarity_matrix(a, b), scores, atol=1e-6)
    assert np.all(np.isfinite(scores))  # the empty text's vector too


def test_similarity_pairwise_is_the_diagonal(encoder):
    a, b = encoder.encode(TEXTS), encoder.encode(TEXTS[::-1])
    np.testing.assert_allclose(encoder.similarity_pairwise(a, b), np.diag(encoder.similarity(a, b)), atol=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        encoder.similarity_pairwise(a, b[:2])


def test_similarity_names_a_bad_input(encoder):
    with pytest.raises(ValueError, match="`b`"):
        encoder.similarity(np.ones((2, 3), "float32"), np.full((2, 3), np.nan, "float32"))
    with pytest.raises(ValueError, match="dimensions differ"):
        encoder.similarity(np.ones((2, 3), "float32"), np.ones((2, 4), "float32"))


def test_similarity_matrix_is_public():
    assert "similarity_matrix" in sbert_keras.__all__
