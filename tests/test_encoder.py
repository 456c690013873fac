import inspect
import os
import threading
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras.compat.keras import flatten_layers

TEXTS = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog", "the red car is fast"]


def test_encode_returns_float32_and_matches_predict(encoder):
    out = encoder.encode(TEXTS)
    assert out.dtype == np.float32 and out.shape == (4, 8)
    predicted = encoder.predict(np.array(TEXTS), verbose=0)
    np.testing.assert_allclose(out, predicted, atol=1e-6)


def test_single_string_gives_one_vector(encoder):
    assert encoder.encode("a cat").shape == (8,)


def test_order_is_restored_and_batch_size_does_not_matter(encoder):
    texts = [" ".join(["a"] * n) + " cat" for n in (1, 9, 3, 0, 7, 2, 5)]
    one = encoder.encode(texts, batch_size=1)
    many = encoder.encode(texts, batch_size=64)
    np.testing.assert_allclose(one, many, atol=1e-6)
    exact = encoder.encode(texts, batch_size=1, compute="float32")
    for i, text in enumerate(texts):
        # One short text runs the XLA-compiled float32 graph (`runtime/routes/xla_query.py`),
        # whatever precision the batches run in (auto: bf16 on some CPUs).
        np.testing.assert_allclose(encoder.encode([text])[0], exact[i], atol=1e-5)


def test_normalize_option():
    encoder = tiny_encoder(normalize=False)
    out = encoder.encode(TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    normalized = tiny_encoder(normalize=True)
    np.testing.assert_allclose(np.linalg.norm(normalized.encode(TEXTS), axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_edge_case_texts_are_finite(pooling):
    encoder = tiny_encoder(pooling=pooling, normalize=True)
    texts = ["", " ", " ".join(["word"] * 10_000), "I love this! 😀🎉", "東京は日本の首都です。", "Résumé"]
    with pytest.warns(UserWarning, match="truncated"):
        out = encoder.encode(texts)
    assert np.all(np.isfinite(out))
    assert encoder.last_num_truncated >= 1  # at least the 10,000-word text


def test_truncation_is_reported_not_silent(encoder):
    encoder.encode(["a cat"])
    assert encoder.last_num_truncated == 0
    with pytest.warns(UserWarning, match="1 of 2 texts"):
        encoder.encode(["a cat", "a " * 50])
    assert encoder.last_num_truncated == 1


@pytest.mark.parametrize(
    "bad, error, position",
    [
        (["ok", None], ValueError, r"texts\[1\]"),
        (["ok", "fine", 3], TypeError, r"texts\[2\]"),
        ([b"ok", ["nested"]], TypeError, r"texts\[1\]"),
        (42, TypeError, "string or a list"),
    ],
)
def test_bad_input_names_its_position(encoder, bad, error, position):
    with pytest.raises(error, match=position):
        encoder.encode(bad)


def test_empty_list(encoder):
    assert encoder.encode([]).shape == (0, 8)


def test_keras_round_trip(tmp_path):
    encoder = tiny_encoder(pooling="max", normalize=True)
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = keras.saving.load_model(path)
    # Its optimizer never took a step: it stays unbuilt, and Keras has no saved variables to skip.
    assert [str(w.message) for w in caught] == []
    # What the compile config adds sits inside the serialized optimizer: `compile(**config)` of an
    # earlier version (Keras' own `compile_from_config`) takes every top-level key as an argument.
    config = encoder.get_compile_config()
    assert set(config) <= set(inspect.signature(keras.Model.compile).parameters)
    assert config["optimizer"]["optimizer_built"] is False
    assert isinstance(restored, SentenceEncoder) and not restored.optimizer.built
    assert restored.pooling == "max" and restored.normalize
    np.testing.assert_allclose(restored.encode(TEXTS), encoder.encode(TEXTS), atol=1e-6)


def test_every_layer_is_built_before_any_text_is_tokenised(tmp_path):
    # Keras' JAX trainer runs a model with an unbuilt layer eagerly before each `predict_on_batch`.
    encoder = tiny_encoder()
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    for model in (encoder, keras.saving.load_model(path)):
        assert [layer.name for layer in flatten_layers(model) if not layer.built] == []


def test_normalize_false_returns_raw_pooled_vectors():
    encoder = tiny_encoder(normalize=True)
    raw = encoder.encode(TEXTS, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), encoder.encode(TEXTS), atol=1e-6)


def test_precision_float32_is_exact_under_a_mixed_policy():
    reference = tiny_encoder().encode(TEXTS, compute="float32")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = tiny_encoder()
    finally:
        keras.config.set_dtype_policy(previous)
    assert mixed.backbone.compute_dtype == "bfloat16"
    num_weights = len(mixed.weights)
    np.testing.assert_allclose(mixed.encode(TEXTS, compute="float32"), reference, atol=1e-6)
    # The float32 copy is a cache, not part of the model (nor of its training).
    assert len(mixed.weights) == num_weights
    low = mixed.encode(TEXTS, compute="bfloat16")
    cos = (low * reference).sum(1) / np.linalg.norm(low, axis=1) / np.linalg.norm(reference, axis=1)
    assert cos.min() > 0.99


def test_predict_and_call_on_raw_strings_go_through_the_engine():
    encoder = tiny_encoder(normalize=True)
    expected = encoder.encode(TEXTS)
    for texts in (TEXTS, np.array(TEXTS), np.array(TEXTS, dtype=object), tf.constant(TEXTS)):
        np.testing.assert_allclose(encoder.predict(texts, verbose=0), expected, atol=1e-6)
    np.testing.assert_allclose(encoder(TEXTS).numpy(), expected, atol=1e-6)
    # Token ids keep the Keras path (fixed-length padding, same vectors).
    inputs = encoder.preprocessor(tf.constant(TEXTS))
    keras_out = encoder.predict(inputs, verbose=0)
    np.testing.assert_allclose(keras_out, encoder.encode(TEXTS, compute="float32"), atol=1e-6)
    np.testing.assert_allclose(encoder(inputs).numpy(), keras_out, atol=1e-6)


def test_predict_uses_length_sorted_batches(monkeypatch):
    encoder = tiny_encoder()
    widths = []
    grouped = encoder.engine.grouped("float32")  # two batches a call, each padded to its own longest text

    def recording(*token_ids_and_masks):
        widths.extend(ids.shape[1] for ids in token_ids_and_masks[::2] if ids.size)
        return grouped(*token_ids_and_masks)

    monkeypatch.setattr(encoder.engine, "grouped", lambda compute: recording)
    encoder.predict(["a", "a man is playing guitar", "a dog"], batch_size=1, verbose=0)
    assert sorted(widths) == [3, 4, 7]  # each text padded only to its own length


def _ragged(texts, encoder):
    return encoder.preprocessor.tokenize(texts)[0]


def test_batches_run_concurrently_in_input_order(encoder):
    # Two calls must be in flight together: each waits for the other at the barrier.
    from sbert_keras.runtime import batching

    texts = [" ".join(["a"] * n) + " cat" for n in (1, 9, 3, 0, 7, 2, 5, 4)]
    ids = _ragged(texts, encoder)
    run = encoder.engine.runner("float32")
    barrier = threading.Barrier(2, timeout=30)

    def meeting_run(token_ids, mask):
        barrier.wait()
        return run(token_ids, mask)

    out = np.zeros((len(texts), 8), "float32")
    batching.run_batches(meeting_run, ids, 1, 2, out, concurrency=2)
    serial = np.zeros_like(out)
    batching.run_batches(run, ids, 1, 2, serial, concurrency=1)
    np.testing.assert_allclose(out, serial, atol=1e-6)
    expected = encoder.encode(texts, compute="float32", normalize=False)
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_a_failing_batch_raises_its_error(encoder):
    from sbert_keras.runtime import batching

    texts = ["a", "a b", "a b c", "a b c d", "a b c d e", "a b c d e f"]
    ids = _ragged(texts, encoder)
    run = encoder.engine.runner("float32")
    calls = []

    def failing_run(token_ids, mask):
        calls.append(token_ids.shape)
        if len(calls) == 2:
            raise tf.errors.ResourceExhaustedError(None, None, "out of memory in batch 2")
        return run(token_ids, mask)

    out = np.zeros((len(texts), 8), "float32")
    with pytest.raises(tf.errors.ResourceExhaustedError, match="batch 2"):
        batching.run_batches(failing_run, ids, 1, 1, out, concurrency=2)
    assert len(calls) <= 3  # the loop stops submitting once the failure is collected


# === Bad input: clear errors ===


@pytest.mark.parametrize(
    "bad, message",
    [
        (["ok", b"caf\xe9"], r"`texts\[1\]` is bytes that are not valid UTF-8 \(byte 0xe9"),
        (["ok", "fine", "a\ud800b"], r"`texts\[2\]` holds a lone surrogate '\\ud800' at position 1"),
        ("\udcff", r"`texts\[0\]` holds a lone surrogate"),
    ],
)
def test_undecodable_text_names_the_item(encoder, bad, message):
    with pytest.raises(ValueError, match=message):
        encoder.encode(bad)


@pytest.mark.parametrize(
    "batch_size, error", [(2.5, TypeError), ("8", TypeError), (None, TypeError), (0, ValueError), (-1, ValueError)]
)
def test_batch_size_must_be_a_positive_integer(encoder, batch_size, error):
    with pytest.raises(error, match="`batch_size` must be an integer >= 1"):
        encoder.encode(TEXTS, batch_size=batch_size)


def test_numpy_integer_batch_size(encoder):
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=np.int64(3)), encoder.encode(TEXTS), atol=1e-6)


@pytest.mark.parametrize(
    "length, error",
    [(0, ValueError), (1, ValueError), (-1, ValueError), (2, ValueError), (2.5, TypeError), (None, TypeError)],
)
def test_preprocessor_sequence_length_is_checked(encoder, length, error):
    from sbert_keras import SentenceEncoderPreprocessor

    with pytest.raises(error, match="`sequence_length` must be"):
        SentenceEncoderPreprocessor(encoder.preprocessor.tokenizer, sequence_length=length)
    with pytest.raises(error, match="`sequence_length` must be"):
        encoder.preprocessor.sequence_length = length
    assert encoder.sequence_length == 12


def test_sequence_length_above_the_backbone_maximum_is_rejected(encoder):
    from sbert_keras import SentenceEncoderPreprocessor

    long = SentenceEncoderPreprocessor(encoder.preprocessor.tokenizer, sequence_length=24)
    with pytest.raises(ValueError, match="`sequence_length` 24 is above the backbone's `max_sequence_length` 12"):
        SentenceEncoder(encoder.backbone, long)
    short = SentenceEncoderPreprocessor(encoder.preprocessor.tokenizer, sequence_length=3)
    held = SentenceEncoder(encoder.backbone, short)
    assert held.encode(["a"]).shape == (1, 8)
    # Set later, on the encoder's preprocessor: refused when assigned, not by a traceback at `encode`.
    with pytest.raises(ValueError, match="`sequence_length` 13 is above the backbone's `max_sequence_length` 12"):
        held.preprocessor.sequence_length = 13
    held.preprocessor.sequence_length = 12
    assert held.sequence_length == 12 and held.encode(["a man"]).shape == (1, 8)


def test_from_preset_sequence_length_is_validated_not_replaced():
    from conftest import minilm_path

    path = minilm_path()
    with pytest.raises(ValueError, match="`sequence_length` must be >= 3"):
        SentenceEncoder.from_preset(path, sequence_length=0)  # was silently 256
    with pytest.raises(ValueError, match="`sequence_length` 1024 is above the backbone's `max_sequence_length` 512"):
        SentenceEncoder.from_preset(path, sequence_length=1024)


# === Raw text: one check behind encode, predict and encoder(...) ===

ENTRY_POINTS = {
    "encode": lambda encoder, x: encoder.encode(x),
    "predict": lambda encoder, x: encoder.predict(x, verbose=0),
    "call": lambda encoder, x: np.asarray(encoder(x)),
}


def test_a_scalar_string_array_or_tensor_is_one_text_everywhere(encoder):
    expected = encoder.encode("a cat")
    for name, run in ENTRY_POINTS.items():
        for single in ("a cat", b"a cat", np.array("a cat"), np.array(b"a cat"), tf.constant("a cat")):
            got = run(encoder, single)
            assert got.shape == (8,), (name, single)
            np.testing.assert_allclose(got, expected, atol=1e-6)


def test_empty_input_gives_no_vectors_everywhere(encoder):
    for name, run in ENTRY_POINTS.items():
        for empty in ([], (), np.array([], dtype=str), tf.constant([], tf.string)):
            got = run(encoder, empty)
            assert got.shape == (0, 8) and got.dtype == np.float32, (name, empty)


def test_text_arrays_and_tensors_agree_everywhere(encoder):
    expected = encoder.encode(TEXTS)
    for name, run in ENTRY_POINTS.items():
        for texts in (tuple(TEXTS), np.array(TEXTS), np.array([t.encode() for t in TEXTS]), tf.constant(TEXTS)):
            np.testing.assert_allclose(run(encoder, texts), expected, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (["a", None], ValueError, r"`texts\[1\]` is None"),
        (np.array(["a", None], dtype=object), ValueError, r"`texts\[1\]` is None"),
        (["a", 3], TypeError, r"`texts\[1\]` must be a string. Received int"),
        ([1, 2], TypeError, r"`texts\[0\]` must be a string. Received int"),
        ([["a", "b"]], TypeError, r"`texts\[0\]` must be a string. Received list.*`texts` must be 1-D"),
        (np.array([["a", "b"]]), TypeError, r"must be 1-D .* 2-D array of shape \(1, 2\): `texts\[0\]` is an array"),
        (tf.constant([["a", "b"]]), TypeError, r"must be 1-D .* 2-D tensor of shape \(1, 2\)"),
        (tf.ragged.constant([["a"], ["b", "c"]]), TypeError, r"ragged tensor .*`texts\[0\]` is a list of strings"),
        ([b"ok", b"caf\xe9"], ValueError, r"`texts\[1\]` is bytes that are not valid UTF-8"),
        (np.array([b"ok", b"caf\xe9"]), ValueError, r"`texts\[1\]` is bytes that are not valid UTF-8"),
        (tf.constant([b"ok", b"caf\xe9"]), ValueError, r"`texts\[1\]` is bytes that are not valid UTF-8"),
    ],
)
def test_bad_text_is_the_same_clear_error_everywhere(encoder, bad, error, message):
    for run in ENTRY_POINTS.values():
        with pytest.raises(error, match=message):
            run(encoder, bad)
