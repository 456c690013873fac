"""Cached inference weights follow every way Keras writes the encoder's weights.

Each case warms every inference path first (so each holds its cached, fused
or converted weights), then changes only part of the weights (one embedding
row, or a fine-tune of the token embedding alone), then checks every path
against the Keras graph of the encoder as it is now.
"""

import gc
import warnings

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import sbert_keras as sk
from conftest import minilm_path
from conftest import tiny_encoder
from sbert_keras.runtime import weight_writes

TEXTS = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "red car"]
ROW = 10  # "dog" in the toy WordPiece vocabulary (checked by `test_the_edited_row_is_dog`)


def tiny(seed=1):
    """A tiny encoder whose token table has 4,000 rows: a partial update touches few of its elements."""
    return tiny_encoder(seed=seed, table_rows=4000)


def keras_graph(encoder, texts):
    """The functional model's output: reads the Keras variables as they are now."""
    return np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(texts), verbose=0))


def paths(encoder):
    """Every inference path that may cache weights: `name -> vectors of TEXTS`."""
    return {
        "encode float32": lambda: encoder.encode(TEXTS, compute="float32"),
        "single query float32": lambda: encoder.encode(TEXTS[0], compute="float32")[None],
        "encode auto": lambda: encoder.encode(TEXTS),
        "single query auto": lambda: encoder.encode(TEXTS[0])[None],
        "predict": lambda: encoder.predict(TEXTS, verbose=0),
        "encode int8": lambda: encoder.encode(TEXTS, compute="int8"),
        "single query int8": lambda: encoder.encode(TEXTS[0], compute="int8")[None],
    }


def cosines(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def assert_paths_follow(encoder, warmed, write, before):
    """Each path gives the Keras graph's vectors now (float32: to 1e-5); a low-precision path is
    at least closer to them than to the vectors from `before` the write, wherever the write moved them."""
    expected = keras_graph(encoder, TEXTS)
    moved = cosines(expected, before) < 0.999
    for name, run in warmed.items():
        got = np.asarray(run())
        want, old = expected[: len(got)], before[: len(got)]
        if "float32" in name:
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{write}: {name}")
        else:  # bf16 / int8 (a hidden size of 8 quantizes coarsely)
            new_cos, old_cos = cosines(got, want), cosines(got, old)
            assert new_cos.min() > 0.9, (write, name, new_cos)
            stale = moved[: len(got)] & (old_cos >= new_cos)
            assert not stale.any(), (write, name, "closer to the old weights' vectors", new_cos, old_cos)


def warm(encoder):
    warmed = paths(encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in warmed.values():
            run()
    return warmed


def freeze_all_but_token_embedding(encoder):
    for layer in encoder.backbone.layers:
        layer.trainable = False
    encoder.backbone.embeddings.trainable = True
    encoder.backbone.embeddings.position_embedding.trainable = False


def fit_partial(encoder, method="fit"):
    freeze_all_but_token_embedding(encoder)
    model = sk.RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    a, b = np.array(TEXTS[:2]), np.array(TEXTS[2:])
    labels = np.array([0.9, 0.1], "float32")
    if method == "fit":
        model.fit((a, b), labels, epochs=2, batch_size=2, verbose=0)
    else:
        for _ in range(2):
            model.train_on_batch((a, b), labels)


def custom_loop(encoder, compiled):
    variable = encoder.backbone.token_embedding.embeddings
    optimizer = keras.optimizers.SGD(0.5)

    def step():
        with tf.GradientTape() as tape:
            rows = tf.gather(variable.value, [ROW, ROW + 1])
            loss = tf.reduce_sum(rows * tf.linspace(-1.0, 1.0, rows.shape[-1]))  # not a uniform shift (LayerNorm)
        optimizer.apply([tape.gradient(loss, variable.value)], [variable])

    step = tf.function(step) if compiled else step
    for _ in range(2):
        step()


def edit_row(encoder):
    table = encoder.backbone.token_embedding.embeddings
    values = table.numpy()
    values[ROW] = -values[ROW]  # same magnitudes: int8 scales stay as they were
    table.assign(values)


def set_weights(encoder):
    weights = encoder.get_weights()
    index = next(i for i, v in enumerate(encoder.weights) if v is encoder.backbone.token_embedding.embeddings)
    weights[index][ROW] = weights[index][ROW][::-1]
    encoder.set_weights(weights)


def trainable_changed(encoder):
    for layer in encoder.backbone.layers:
        layer.trainable = True
    model = sk.RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    model.fit((np.array(TEXTS[:2]), np.array(TEXTS[2:])), np.array([0.5, 0.5], "float32"), verbose=0)
    encoder.encode(TEXTS, compute="float32")
    encoder.encode(TEXTS[0], compute="float32")
    fit_partial(encoder)


def load_weights(encoder, tmp_path):
    edited = tiny()
    edited.set_weights(encoder.get_weights())
    edit_row(edited)
    path = str(tmp_path / "edited.weights.h5")
    edited.save_weights(path)
    # Keras' own `load_weights`, not the encoder's override that marks every copy stale.
    keras.Model.load_weights(encoder, path)


def write_in_own_graph(encoder):
    table = encoder.backbone.token_embedding.embeddings

    @tf.function
    def scale_row(factor):
        table.assign(tf.tensor_scatter_nd_update(table.value, [[ROW]], [table.value[ROW] * factor]))

    scale_row(tf.constant(-4.0))
    return scale_row


# In turn on one encoder: each write must reach every path, whatever came before it.
WRITES = {
    "assign one row": edit_row,
    "set_weights": set_weights,
    "load_weights": load_weights,
    "optimizer.apply, eager": lambda e: custom_loop(e, compiled=False),
    "optimizer.apply, in a tf.function": lambda e: custom_loop(e, compiled=True),
    "train_on_batch, token embedding only": lambda e: fit_partial(e, "train_on_batch"),
    "fit, token embedding only": fit_partial,
    "a changed trainable set": trainable_changed,
}


@pytest.mark.large
def test_every_path_follows_each_partial_write(tmp_path):
    encoder = tiny()
    warmed = warm(encoder)
    for name, write in WRITES.items():
        before = keras_graph(encoder, TEXTS)
        write(encoder, tmp_path) if name == "load_weights" else write(encoder)
        assert np.abs(keras_graph(encoder, TEXTS) - before).max() > 1e-4, f"{name}: the write changed nothing"
        assert_paths_follow(encoder, warmed, name, before)


def test_a_write_inside_a_graph_of_its_own_is_seen():
    encoder = tiny()
    warmed = {k: v for k, v in paths(encoder).items() if "float32" in k}
    for run in warmed.values():
        run()
    before = keras_graph(encoder, TEXTS)
    scale_row = write_in_own_graph(encoder)
    assert_paths_follow(encoder, warmed, "first call", before)
    before = keras_graph(encoder, TEXTS)
    scale_row(tf.constant(2.0))  # the same graph again: no Python runs
    assert_paths_follow(encoder, warmed, "second call", before)


def test_export_serves_the_weights_after_a_partial_fit(tmp_path):
    encoder = tiny()
    warm(encoder)
    sk.export_saved_model(encoder, str(tmp_path / "before"), compute="float32")
    fit_partial(encoder)
    sk.export_saved_model(encoder, str(tmp_path / "after"), compute="float32")
    served = tf.saved_model.load(str(tmp_path / "after")).signatures["serving_default"]
    (vectors,) = served(text=tf.constant(TEXTS)).values()
    np.testing.assert_allclose(vectors.numpy(), keras_graph(encoder, TEXTS), atol=1e-5)


def test_evaluation_callback_sees_each_epochs_weights():
    encoder = tiny()
    freeze_all_but_token_embedding(encoder)
    a, b = TEXTS[:2] * 2, TEXTS[2:] * 2
    scores = np.array([0.9, 0.1, 0.3, 0.7], "float32")
    callback = sk.EvaluationCallback.sts(encoder, a, b, scores)
    model = sk.RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit((np.array(a), np.array(b)), scores, epochs=3, batch_size=2, verbose=0, callbacks=[callback])
    # A fresh encoder with the trained weights has no cache to go stale.
    fresh = tiny()
    fresh.set_weights(encoder.get_weights())
    final = sk.sts_evaluation(fresh, a, b, scores)
    logged = history.history["dev_pearson_cosine"]
    assert logged[-1] == pytest.approx(final["pearson_cosine"], abs=1e-5)
    assert np.abs(keras_graph(encoder, TEXTS) - keras_graph(tiny(), TEXTS)).max() > 1e-4, "training changed nothing"


def test_the_edited_row_is_dog():
    assert tiny().preprocessor.tokenizer.token_to_id("dog") == ROW


def test_write_watch_is_exact_and_quiet():
    variable = keras.Variable(np.zeros((4, 3), "float32"))
    watch = weight_writes.WriteWatch([variable])
    assert not watch.written()
    variable.assign(np.ones((4, 3), "float32"))
    assert watch.written()
    watch.mark()
    assert not watch.written()
    other = keras.Variable(np.zeros(2, "float32"))
    keras.optimizers.SGD(0.1).apply([tf.ones(2)], [other])  # trains another variable only
    gc.collect()
    assert not watch.written()


def test_steps_of_an_optimizer_that_is_gone_are_not_lost():
    variable = keras.Variable(np.zeros((4, 3), "float32"))
    watch = weight_writes.WriteWatch([variable])

    def train_with_a_new_optimizer():
        optimizer = keras.optimizers.SGD(0.1)
        tf.function(lambda: optimizer.apply([tf.ones((4, 3))], [variable]))()

    train_with_a_new_optimizer()  # the optimizer, with its `iterations`, is gone afterwards
    gc.collect()
    assert watch.written()


def test_sequence_length_changed_after_first_use():
    encoder = tiny()
    long_text = "a man is playing guitar in the park"
    warm(encoder)
    encoder.encode(long_text, compute="float32")
    encoder.preprocessor.sequence_length = 4
    for precision in ("float32", "auto", "int8"):
        with pytest.warns(UserWarning, match="longer than 4 tokens"):
            single = encoder.encode(long_text, compute=precision)
        assert encoder.last_num_truncated == 1
        with pytest.warns(UserWarning, match="longer than 4 tokens"):
            batch = encoder.encode([long_text, "a dog"], compute=precision)
        assert encoder.last_num_truncated == 1
        expected = keras_graph(encoder, [long_text])[0]  # the functional model cuts at 4 too
        tolerance = 1e-5 if precision == "float32" else 0.05 * np.abs(expected).max()
        np.testing.assert_allclose(single, expected, atol=tolerance)
        np.testing.assert_allclose(batch[0], expected, atol=tolerance)


@pytest.mark.large
def test_minilm_edited_guitar_row():
    """The reported case: one edited row of all-MiniLM-L6-v2's table ("guitar")."""
    encoder = sk.SentenceEncoder.from_preset(str(minilm_path()))
    probe = ["I play the guitar every evening.", "A dog runs in the park."]
    encoder.encode(probe, compute="float32")
    encoder.encode(probe[0], compute="float32")
    table = encoder.backbone.token_embedding.embeddings
    values = table.numpy()
    values[2858] *= -5
    table.assign(values)
    expected = keras_graph(encoder, probe)
    np.testing.assert_allclose(encoder.encode(probe, compute="float32"), expected, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(probe[0], compute="float32"), expected[0], atol=1e-5)
