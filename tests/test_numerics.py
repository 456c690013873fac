"""No NaN in loss or gradients under mixed precision, for degenerate inputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_encoder
import sbert_keras as sk


@pytest.fixture(params=["mixed_float16", "mixed_bfloat16"])
def policy(request):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(request.param)
    yield request.param
    keras.config.set_dtype_policy(previous)


def loss_and_gradients(model, x, y):
    loss_fn = model.default_loss()
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), grads


def preprocess(model, columns):
    features, _ = model.preprocessor(tuple(tf.constant(c) for c in columns), y=tf.zeros(len(columns[0])))
    return features


CASES = {
    "identical": (["a man is playing guitar", "a cat"], ["a man is playing guitar", "a cat"]),
    "empty": (["", ""], ["", " "]),
}


@pytest.mark.parametrize("case", ["identical", "empty", "all_padding"])
@pytest.mark.parametrize("kind", ["regression", "triplet", "classification", "contrastive"])
def test_no_nan_in_loss_or_gradients(policy, kind, case):
    encoder = tiny_encoder(normalize=kind != "triplet")
    assert encoder.backbone.compute_dtype in ("float16", "bfloat16")
    model = {
        "regression": sk.RegressionSiamese,
        "triplet": sk.TripletSiamese,
        "classification": sk.ClassificationSiamese,
        "contrastive": sk.ContrastiveSiamese,
    }[kind](encoder)
    texts = CASES.get(case, CASES["identical"])
    columns = list(texts) + ([texts[0]] if len(model.active_roles) == 3 else [])
    x = preprocess(model, columns)
    if case == "all_padding":
        x = {k: (tf.zeros_like(v) if k.endswith("padding_mask") else v) for k, v in x.items()}
    y = tf.constant([0, 1]) if kind == "classification" else tf.constant([1.0, 1.0])
    loss, grads = loss_and_gradients(model, x, y)
    assert np.isfinite(loss)
    assert all(grad is not None for grad in grads)  # every weight is trained
    for grad in grads:
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(grad, "float32"))))
    # The output itself is float32 whatever the policy.
    assert keras.backend.standardize_dtype(model(x).dtype) == "float32"
