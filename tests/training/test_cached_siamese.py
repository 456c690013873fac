import keras
import numpy as np
import pytest
import tensorflow as tf

import sbert_keras as sk
from conftest import tiny_encoder
from harness import dtype_policy
from harness import run_model_saving_test
from harness import run_serialization_test
from sbert_keras.model.backbone import BertLayoutBackbone
from sbert_keras.training.cached_siamese import CachedContrastiveSiamese

A = np.array(
    [
        "a man is playing guitar",
        "a woman eats food",
        "the dog runs in the park",
        "a cat sleeps on the sofa",
        "a red car is fast",
        "the blue sky",
        "a man eats",
        "a dog plays ball",
        "the cat runs",
        "a woman is playing piano",
        "a slow car",
        "food in the kitchen",
    ]
)
B = np.roll(A, 3)
C = np.roll(A, 7)
RELATIVE = 1e-5


def tokens(model, *columns):
    """The tokenised batch `{f"{role}_{name}": tensor}`, as `fit` feeds `train_step`."""
    return model.preprocessor.tokenize_columns(tuple(tf.constant(c) for c in columns))


def uncached_gradients(model, x):
    """`ContrastiveSiamese`'s gradients: one tape over the whole batch."""
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=None, y_pred=model(x, training=True))
    return loss, model.trainable_weights, tape.gradient(loss, model.trainable_weights)


def assert_close_norm(actual, expected, names, relative=RELATIVE):
    """Each pair: `‖a - e‖ <= relative · max(‖e‖, floor)`, floor = 1e-6 of the norm of all `expected`.

    The floor stands for float round-off on what is zero in exact arithmetic
    (an attention key bias: the softmax ignores it; its gradient is ~1e-12).
    """
    actual = [np.asarray(a, "float64") for a in actual]
    expected = [np.asarray(e, "float64") for e in expected]
    floor = 1e-6 * np.sqrt(sum(np.sum(e**2) for e in expected))
    for name, a, e in zip(names, actual, expected, strict=True):
        error = np.linalg.norm(a - e) / max(np.linalg.norm(e), floor)
        assert error <= relative, f"{name}: relative error {error:.2e}"


def assert_same_gradients(actual, expected, weights, relative=RELATIVE):
    """Every weight's gradient agrees within `relative` (see `assert_close_norm`)."""
    dense = [[tf.convert_to_tensor(g) for g in grads] for grads in (actual, expected)]
    assert_close_norm(*dense, [w.path for w in weights], relative)


def assert_same_step(model, weights, start, optimizer_variables, reference_variables, relative=RELATIVE, skip=()):
    """Same weight updates (`w - start`) and same optimizer state, each within `relative`.

    `skip`: weight paths left out (with their optimizer slots).
    """
    keep = [i for i, w in enumerate(weights) if w.path not in skip]
    assert_close_norm(
        [model.trainable_weights[i].numpy() - start[i] for i in keep],
        [weights[i].numpy() - start[i] for i in keep],
        [weights[i].path for i in keep],
        relative,
    )
    slots = [i for i, v in enumerate(reference_variables) if not any(p.replace("/", "_") in v.path for p in skip)]
    assert_close_norm(
        [optimizer_variables[i].numpy() for i in slots],
        [reference_variables[i].numpy() for i in slots],
        [reference_variables[i].path for i in slots],
        relative,
    )


@pytest.mark.parametrize(("mini_batch_size", "graph"), [(4, False), (5, True)])
def test_gradients_equal_the_uncached_loss(mini_batch_size, graph):
    encoder = tiny_encoder()
    reference = sk.ContrastiveSiamese(encoder)
    model = CachedContrastiveSiamese(encoder, mini_batch_size=mini_batch_size)
    assert model.encoder is reference.encoder
    x = tokens(model, A, B)
    expected_loss, weights, expected = uncached_gradients(reference, x)
    step = tf.function(model.cached_gradients) if graph else model.cached_gradients
    loss, y_pred, gradients = step(x)
    assert [w.path for w in model.trainable_weights] == [w.path for w in weights]
    np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-6)
    np.testing.assert_allclose(y_pred, reference(x), atol=1e-6)
    assert_same_gradients(gradients, expected, weights)


@pytest.mark.parametrize("symmetric", [False, True])
def test_hard_negatives_symmetric_and_matryoshka_gradients(symmetric):
    encoder = tiny_encoder()
    kwargs = {"hard_negatives": True, "matryoshka_dims": (8, 4)}
    reference = sk.ContrastiveSiamese(encoder, **kwargs)
    model = CachedContrastiveSiamese(encoder, mini_batch_size=5, symmetric=symmetric, **kwargs)
    loss_class = sk.SymmetricInBatchNegativesLoss if symmetric else sk.InBatchNegativesLoss
    assert isinstance(model.loss.loss, loss_class)  # inside MatryoshkaLoss
    reference.compile(loss=model.loss)
    x = tokens(model, A, B, C)
    expected_loss, weights, expected = uncached_gradients(reference, x)
    loss, _, gradients = model.cached_gradients(x)
    np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-6)
    assert_same_gradients(gradients, expected, weights)


def dropout_encoder(rate=0.3):
    """`tiny_encoder()` with dropout: its backbone rebuilt with `dropout=rate`, same weights."""
    base = tiny_encoder()
    backbone = BertLayoutBackbone.from_config({**base.backbone.get_config(), "dropout": rate})
    backbone.set_weights(base.backbone.get_weights())
    return sk.SentenceEncoder(backbone, base.preprocessor, pooling="mean")


def test_dropout_masks_are_replayed_in_the_second_pass():
    encoder = dropout_encoder()
    model = CachedContrastiveSiamese(encoder, mini_batch_size=5)
    x = tokens(model, A, B)
    state = encoder.non_trainable_variables
    assert state, "the dropout layers own seed states"
    start = [v.numpy() for v in state]
    loss, _, gradients = model.cached_gradients(x)
    after = [v.numpy() for v in state]
    assert any(not np.array_equal(s, a) for s, a in zip(start, after, strict=True)), "dropout drew no masks"

    # Reference: the same mini-batch passes (roles, then rows, in order) from
    # the same seeds, but under one tape through the whole batch's loss.
    def reference_gradients():
        for v, s in zip(state, start, strict=True):
            v.assign(s)
        with tf.GradientTape() as tape:
            embeddings = {}
            for role in model.active_roles:
                features = {n: x[f"{role}_{n}"] for n in encoder.input}
                parts = [{n: t[i : i + 5] for n, t in features.items()} for i in range(0, len(A), 5)]
                embeddings[role] = tf.concat([encoder(p, training=True) for p in parts], axis=0)
            ref_loss = model.compute_loss(x=x, y=None, y_pred=model.head(embeddings))
        return ref_loss, tape.gradient(ref_loss, model.trainable_weights)

    ref_loss, expected = reference_gradients()
    np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-6)
    assert_same_gradients(gradients, expected, model.trainable_weights)
    for v, a in zip(state, after, strict=True):  # seeds end where pass 1 left them
        np.testing.assert_array_equal(v.numpy(), a)
    # Without the replay, pass 3 draws other masks: the step refuses to apply
    # gradients of another function.
    eval_loss = model.compute_loss(x=x, y=None, y_pred=model(x, training=False))
    assert abs(float(eval_loss) - float(loss)) > 1e-4
    model._restore_state = lambda state, saved: None
    with pytest.raises(tf.errors.InvalidArgumentError, match="second pass over the 'anchor' mini-batches"):
        model.cached_gradients(x)


def test_one_fit_step_updates_weights_as_the_uncached_model():
    # SGD with momentum: the uncached model's sparse embedding gradient
    # (`IndexedSlices`) and the cached dense one give the same update and state.
    reference = sk.ContrastiveSiamese(tiny_encoder(seed=0))
    model = CachedContrastiveSiamese(tiny_encoder(seed=0), mini_batch_size=5)
    start = [w.numpy() for w in reference.trainable_weights]
    for w, s in zip(model.trainable_weights, start, strict=True):
        np.testing.assert_array_equal(w.numpy(), s)
    histories = []
    for m in (reference, model):
        m.compile(optimizer=keras.optimizers.SGD(0.5, momentum=0.9))
        histories.append(m.fit((A, B), batch_size=len(A), epochs=1, shuffle=False, verbose=0).history)
    np.testing.assert_allclose(histories[1]["loss"], histories[0]["loss"], rtol=1e-6)
    assert_same_step(
        model, reference.trainable_weights, start, model.optimizer.variables, reference.optimizer.variables
    )


def test_adam_step_is_the_dense_gradient_step():
    """Adam sees the dense gradient (as in PyTorch), whose second moment of a
    repeated token is the square of its summed gradient. (Keras' Adam on the
    uncached model's `IndexedSlices` sums the squares of each occurrence's
    gradient instead, so its token-embedding update differs.)"""
    reference = sk.ContrastiveSiamese(tiny_encoder(seed=0))
    model = CachedContrastiveSiamese(tiny_encoder(seed=0), mini_batch_size=5)
    x = tokens(model, A, B)
    _, weights, gradients = uncached_gradients(reference, x)
    start = [w.numpy() for w in weights]
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.apply_gradients([(tf.convert_to_tensor(g), w) for g, w in zip(gradients, weights, strict=True)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit((A, B), batch_size=len(A), epochs=1, shuffle=False, verbose=0)
    # Adam divides by `|g| + 1e-7`: a gradient that is zero in exact arithmetic
    # (an attention key bias, ~1e-12 of round-off) makes a step of round-off.
    total = np.sqrt(sum(float(tf.reduce_sum(tf.square(tf.convert_to_tensor(g)))) for g in gradients))
    zero = {w.path for w, g in zip(weights, gradients, strict=True) if float(tf.norm(g)) < 1e-6 * total}
    assert zero == {w.path for w in weights if w.path.endswith("key/bias")}
    for path in zero:
        index = [w.path for w in weights].index(path)
        assert np.abs(model.trainable_weights[index].numpy() - start[index]).max() < 1e-3 * 1e-3
    # Second moments square the gradient: twice its relative error.
    assert_same_step(
        model, weights, start, model.optimizer.variables, optimizer.variables, relative=2 * RELATIVE, skip=zero
    )


def test_mixed_float16_uses_the_loss_scale():
    with dtype_policy("mixed_float16"):
        reference = sk.ContrastiveSiamese(tiny_encoder())
        model = CachedContrastiveSiamese(tiny_encoder(), mini_batch_size=5)
        # A small initial scale: Keras' default 2**15 overflows float16 on the
        # first steps (which the optimizer then skips, halving the scale).
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=2.0**4)
        model.compile(optimizer=optimizer)
        x = tokens(model, A, B)
        loss, _, gradients = model.cached_gradients(x)
        _, weights, expected = uncached_gradients(reference, x)
        assert np.isfinite(float(loss))
        assert_same_gradients([g / 2.0**4 for g in gradients], expected, weights, relative=5e-2)
        before = [w.numpy() for w in model.trainable_weights]
        history = model.fit((A, B), batch_size=len(A), epochs=1, verbose=0).history
        assert np.isfinite(history["loss"][0])
        changed = [not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights, strict=True)]
        assert sum(changed) > len(changed) // 2
    with dtype_policy("mixed_float16"):  # Keras' default loss scale: a skipped step is not an error
        model = CachedContrastiveSiamese(tiny_encoder(), mini_batch_size=5)
        model.compile()
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert np.isfinite(model.fit((A, B), batch_size=len(A), epochs=1, verbose=0).history["loss"][0])


def test_config_and_keras_round_trip(tmp_path):
    encoder = tiny_encoder()
    model = CachedContrastiveSiamese(encoder, mini_batch_size=3, symmetric=True, hard_negatives=True, scale=10.0)
    revived = run_serialization_test(model)
    assert (revived.mini_batch_size, revived.symmetric, revived.scale) == (3, True, 10.0)
    assert revived.active_roles == ("anchor", "positive", "negative")
    model.compile()
    assert isinstance(model.loss, sk.SymmetricInBatchNegativesLoss) and model.loss.scale == 10.0
    model.fit((A, B, C), batch_size=len(A), epochs=1, verbose=0)
    restored = run_model_saving_test(model, (A, B, C), tmp_path, method="predict")
    assert restored.mini_batch_size == 3 and restored.symmetric
    assert restored.jit_compile is False
    history = restored.fit((A, B, C), batch_size=len(A), epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0])


def test_rejects_bad_mini_batch_size_and_xla():
    encoder = tiny_encoder()
    for bad in (0, -1, 2.5, True, "4"):
        with pytest.raises(ValueError, match="mini_batch_size"):
            CachedContrastiveSiamese(encoder, mini_batch_size=bad)
    model = CachedContrastiveSiamese(encoder, mini_batch_size=100)  # larger than the batch: one pass
    with pytest.raises(ValueError, match="jit_compile"):
        model.compile(jit_compile=True)
    model.compile()
    assert model.jit_compile is False
    assert np.isfinite(model.fit((A, B), batch_size=len(A), epochs=1, verbose=0).history["loss"][0])
