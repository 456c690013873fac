import keras
import numpy as np
import pytest

from harness import run_model_saving_test
from harness import run_precision_test
from harness import run_serialization_test
from sbert_keras.model.pooling import MaskedPooling


def test_mean_pooling_ignores_padding():
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    out = np.asarray(MaskedPooling("mean")(x, mask))
    np.testing.assert_allclose(out[0], x[0, :2].mean(0), atol=1e-6)
    np.testing.assert_allclose(out[1], x[1, 0], atol=1e-6)


def test_max_pooling_ignores_padding_even_when_padding_is_larger():
    x = np.array([[[1.0, -5.0], [2.0, -3.0], [100.0, 100.0]]], "float32")
    mask = np.array([[1, 1, 0]])
    np.testing.assert_allclose(np.asarray(MaskedPooling("max")(x, mask)), [[2.0, -3.0]])


def test_cls_pooling_takes_first_token():
    x = np.random.rand(2, 4, 3).astype("float32")
    out = np.asarray(MaskedPooling("cls")(x, np.ones((2, 4))))
    np.testing.assert_allclose(out, x[:, 0], atol=1e-6)


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_all_padding_row_is_finite(mode):
    x = np.random.rand(2, 3, 4).astype("float32")
    out = np.asarray(MaskedPooling(mode)(x, np.zeros((2, 3), "int32")))
    assert np.all(np.isfinite(out))


def test_pooling_is_float32_under_mixed_policy():
    x = keras.ops.cast(np.random.rand(1, 3, 4), "float16")
    layer = MaskedPooling("mean")
    assert layer.compute_dtype == "float32"
    assert keras.backend.standardize_dtype(layer(x, np.ones((1, 3))).dtype) == "float32"


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_pooling_is_float32_and_finite_under_every_mixed_policy(mode):
    # Sums that overflow float16 (65504), and an all-padding row.
    x = np.full((2, 3, 4), 60000.0, "float32")
    mask = np.array([[1, 1, 1], [0, 0, 0]])
    run_precision_test(lambda: MaskedPooling(mode), lambda layer: (keras.ops.cast(x, "float16"), mask))


def test_bad_mode_raises():
    with pytest.raises(ValueError, match="mode"):
        MaskedPooling("sum")


def test_config_round_trip():
    layer = MaskedPooling("max", name="p")
    clone = run_serialization_test(layer)
    assert clone.mode == "max" and clone.name == "p"


def test_keras_round_trip_inside_a_model(tmp_path):
    tokens = keras.Input(shape=(None, 4))
    mask = keras.Input(shape=(None,), dtype="int32")
    model = keras.Model([tokens, mask], MaskedPooling("max")(keras.layers.Dense(4)(tokens), mask))
    x = [np.random.rand(2, 3, 4).astype("float32"), np.array([[1, 1, 0], [1, 0, 0]])]
    restored = run_model_saving_test(model, x, tmp_path)
    assert restored.layers[-1].mode == "max"
