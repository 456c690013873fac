import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import sbert_keras as sk
from conftest import large
from conftest import tiny_encoder
from harness import run_model_saving_test
from harness import run_serialization_test
from sbert_keras.compat.keras import flatten_layers
from sbert_keras.training import fit_checks
from sbert_keras.training import siamese
from sbert_keras.utils import defaults

A = np.array(
    ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "a woman eats food"] * 2
)
B = np.array(["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 2)
C = np.array(["the sky is blue", "a red car", "a woman is playing piano", "the cat runs"] * 2)


def build(kind, encoder):
    if kind == "regression":
        return sk.RegressionSiamese(encoder), (A, B), np.array([0.8, 0.6, 0.9, -0.5] * 2, "float32")
    if kind == "triplet":
        return sk.TripletSiamese(encoder), (A, B, C), None
    if kind == "classification":
        return sk.ClassificationSiamese(encoder), (A, B), np.array([0, 1, 2, 0] * 2)
    if kind == "contrastive":
        return sk.ContrastiveSiamese(encoder), (A, B), None
    return sk.ContrastiveSiamese(encoder, hard_negatives=True), (A, B, C), None


KINDS = ["regression", "triplet", "classification", "contrastive", "contrastive_hard"]


# `contrastive_hard` covers `contrastive` (the same model, with a hard negative) in every `make test`.
@pytest.mark.parametrize("kind", [k if k != "contrastive" else large(k) for k in KINDS])
def test_fit_step_and_keras_round_trip(kind, tmp_path):
    encoder = tiny_encoder()
    model, x, y = build(kind, encoder)
    assert model.encoder is encoder
    model.compile()
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    restored = run_model_saving_test(model, x, tmp_path, atol=1e-6, method="predict")
    # The encoder inside is the trained one and is reusable on its own.
    np.testing.assert_allclose(restored.encoder.encode(list(A)), encoder.encode(list(A)), atol=1e-6)
    # A restored model keeps training.
    restored.fit(x, y, batch_size=4, epochs=1, verbose=0)


def test_the_first_fit_traces_the_train_step_once():
    # Without a strategy, Keras' TensorFlow `fit` would build the optimizer and the compiled metrics
    # inside the step's first trace, and `tf.function` would trace the step a second time.
    model, x, y = build("classification", tiny_encoder())
    model.compile()
    traces, step = [], model.train_step
    model.train_step = lambda data: traces.append(1) or step(data)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert len(traces) == 1
    assert model.optimizer.built and int(model.optimizer.iterations) == 2


def test_train_on_batch_can_be_the_first_step():
    # Keras hands `train_on_batch`'s step a generator of one batch, which has no `element_spec` to build from.
    model, x, y = build("regression", tiny_encoder())
    model.compile()
    loss = model.train_on_batch(x, y)
    assert np.isfinite(loss) and int(model.optimizer.iterations) == 1
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 3


def test_fit_on_tf_data(encoder):
    model = sk.RegressionSiamese(encoder)
    model.compile()
    ds = tf.data.Dataset.from_tensor_slices(((A, B), np.linspace(-1, 1, 8).astype("float32"))).batch(4)
    model.fit(ds, epochs=1, verbose=0)


def test_weights_are_shared_not_copied(encoder):
    model = sk.TripletSiamese(encoder)
    encoder_weights = {id(v) for v in encoder.weights}
    assert {id(v) for v in model.weights} == encoder_weights
    assert len(model.weights) == len(encoder.weights)


def test_regression_drives_the_loss_down():
    model = sk.RegressionSiamese(tiny_encoder(seed=1))
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    y = np.array([0.9, -0.3, 0.7, -0.8] * 2, "float32")
    # A repeated dataset and `steps_per_epoch`: one iterator for the 30 steps (arrays make one per epoch).
    data = tf.data.Dataset.from_tensors(((A, B), y)).repeat()
    history = model.fit(data, steps_per_epoch=1, epochs=30, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.25 * losses[0]


def test_regression_output_is_one_cosine_per_pair(encoder):
    model = sk.RegressionSiamese(encoder)
    out = model.predict((A, B), verbose=0)
    assert out.shape == (8,)
    u, v = encoder.encode(list(A)), encoder.encode(list(B))
    cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(out, cos, atol=1e-5)


@pytest.mark.parametrize(
    "concatenation", [("u", "v"), ("|u-v|",), ("u*v",), ("|u-v|", "u*v"), ("u", "v", "u*v"), ("u", "v", "|u-v|", "u*v")]
)
def test_classification_concatenation_modes(encoder, concatenation):
    model = sk.ClassificationSiamese(encoder, concatenation=concatenation)
    assert model.classifier.kernel.shape == (8 * len(concatenation), 3)
    assert model.predict((A, B), verbose=0).shape == (8, 3)


def test_triplet_distance_options(encoder):
    for distance in ("euclidean", "cosine", "manhattan"):
        out = sk.TripletSiamese(encoder, distance=distance).predict((A, B, C), verbose=0)
        assert out.shape == (8, 2) and np.all(out >= 0)
    with pytest.raises(ValueError, match="`distance` must be one of .* Received 'chebyshev'"):
        sk.TripletSiamese(encoder, distance="chebyshev")


def test_wrong_number_of_inputs_is_a_clear_error(encoder):
    model = sk.TripletSiamese(encoder)
    with pytest.raises(ValueError, match="Expected 3 text inputs"):
        model.predict((A, B), verbose=0)


@pytest.mark.parametrize("kind", KINDS)
def test_serialization_round_trip(kind):
    model, _, _ = build(kind, tiny_encoder())
    revived = run_serialization_test(model)
    assert revived.active_roles == model.active_roles
    assert revived.get_config()["roles"] == list(model.active_roles)


def test_get_config_chains_to_task(encoder, monkeypatch):
    # Whatever `Task.get_config` adds reaches the siamese config; the
    # backbone/preprocessor entries are replaced by the encoder.
    task_get_config = keras_hub.models.Task.get_config
    monkeypatch.setattr(keras_hub.models.Task, "get_config", lambda self: {**task_get_config(self), "marker": 1})
    config = sk.TripletSiamese(encoder, name="triplets").get_config()
    assert config["marker"] == 1 and config["name"] == "triplets"
    assert "backbone" not in config and "preprocessor" not in config
    assert config["encoder"]["class_name"] == "SentenceEncoder"


HEAD_LAYERS = {
    "regression": ["similarity"],
    "triplet": ["distances"],
    "classification": ["features", "classifier"],
    "contrastive": ["similarities"],
    "contrastive_hard": ["similarities"],
}


@pytest.mark.parametrize("kind", KINDS)
def test_head_only_calls_layers_made_in_init(kind):
    model, _, _ = build(kind, tiny_encoder())
    layers = {name: getattr(model, name) for name in HEAD_LAYERS[kind]}
    count = len(list(model._flatten_layers()))
    embeddings = {role: keras.Input(shape=(8,)) for role in model.active_roles}
    model.head(embeddings)
    assert {name: getattr(model, name) for name in layers} == layers
    assert len(list(model._flatten_layers())) == count


@pytest.mark.parametrize("kind", KINDS)
def test_every_layer_is_built_at_construction(kind):
    # Keras' JAX trainer builds a model with an unbuilt layer by calling it before each `*_on_batch`.
    model, _, _ = build(kind, tiny_encoder())
    assert [layer.name for layer in flatten_layers(model) if not layer.built] == []


def test_defaults_come_from_one_module(encoder):
    assert sk.TripletSiamese(encoder).margin == defaults.TRIPLET_MARGIN
    assert sk.TripletSiamese(encoder).distance == defaults.TRIPLET_DISTANCE
    assert sk.ContrastiveSiamese(encoder).scale == defaults.IN_BATCH_SCALE
    model = sk.RegressionSiamese(encoder)
    model.compile()
    assert float(model.optimizer.learning_rate) == pytest.approx(defaults.PAPER_LEARNING_RATE)
    # The old import path keeps working until every module imports `defaults`.
    assert siamese.PAPER_LEARNING_RATE == defaults.PAPER_LEARNING_RATE


def test_triplet_defaults_follow_the_encoder_normalisation(tmp_path):
    # Unnormalised outputs: the paper's euclidean distance, margin 1.
    plain = sk.TripletSiamese(tiny_encoder())
    assert (plain.distance, plain.margin) == (defaults.TRIPLET_DISTANCE, defaults.TRIPLET_MARGIN)
    # L2-normalised outputs: cosine distance, the smaller cosine margin.
    model = sk.TripletSiamese(tiny_encoder(normalize=True))
    assert model.distance == defaults.TRIPLET_NORMALIZED_DISTANCE == "cosine"
    assert model.margin == pytest.approx(defaults.TRIPLET_COSINE_MARGIN) and model.margin < 1
    assert model.distances.metric == "cosine"
    model.compile()
    assert model.loss.margin == pytest.approx(defaults.TRIPLET_COSINE_MARGIN)
    # The resolved values are in the config and survive a `.keras` round trip.
    config = model.get_config()
    assert (config["distance"], config["margin"]) == ("cosine", defaults.TRIPLET_COSINE_MARGIN)
    model.save(tmp_path / "triplet.keras")
    restored = keras.saving.load_model(tmp_path / "triplet.keras")
    assert (restored.distance, restored.margin) == ("cosine", pytest.approx(defaults.TRIPLET_COSINE_MARGIN))
    assert restored.loss.margin == pytest.approx(defaults.TRIPLET_COSINE_MARGIN)


def test_explicit_triplet_arguments_win_over_the_defaults():
    encoder = tiny_encoder(normalize=True)
    paper = sk.TripletSiamese(encoder, distance="euclidean", margin=1.0)
    assert (paper.distance, paper.margin, paper.distances.metric) == ("euclidean", 1.0, "euclidean")
    assert sk.TripletSiamese(encoder, margin=0.05).margin == pytest.approx(0.05)
    assert sk.TripletSiamese(encoder, margin=0.05).distance == "cosine"
    # A cosine distance chosen by hand gets the cosine margin; euclidean the paper's.
    assert sk.TripletSiamese(tiny_encoder(), distance="cosine").margin == pytest.approx(defaults.TRIPLET_COSINE_MARGIN)
    assert sk.TripletSiamese(encoder, distance="manhattan").margin == defaults.TRIPLET_MARGIN


class WeightsAfterEachBatch(keras.callbacks.Callback):
    """The encoder's weights after every applied batch, by batch index."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder, self.weights = encoder, {}

    def on_train_batch_end(self, batch, logs=None):
        self.weights[batch] = [w.numpy() for w in self.encoder.weights]


def assert_weights(encoder, expected):
    for value, weight in zip(expected, encoder.weights, strict=True):
        np.testing.assert_array_equal(weight.numpy(), value)


def nan_at(index, size=8):
    values = np.ones(size, "float32")
    values[index] = np.nan
    return values


# The check wraps every model's `train_step` alike: one model in every `make test`, the others large.
@pytest.mark.parametrize("kind", ["regression", *[large(k) for k in [*KINDS[1:], "cached"]]])
def test_a_non_finite_loss_stops_fit_naming_the_batch_and_keeps_the_weights(kind):
    # A NaN sample weight in item 4 makes the loss of batch index 2 (batch size 2, in order) NaN,
    # whatever the objective; unchecked, that step turned every weight into NaN.
    encoder = tiny_encoder()
    if kind == "cached":
        model, x, y = sk.CachedContrastiveSiamese(encoder, mini_batch_size=1), (A, B), None
    else:
        model, x, y = build(kind, encoder)
    y = np.zeros(8, "float32") if y is None else y  # Keras drops sample weights given without labels
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    snapshots = WeightsAfterEachBatch(encoder)
    with pytest.raises(sk.NonFiniteLossError, match=r"batch index 2 \(0-based, within the epoch\) of epoch 1"):
        model.fit(
            x, y, sample_weight=nan_at(4), batch_size=2, epochs=2, callbacks=[snapshots], verbose=0, shuffle=False
        )
    assert sorted(snapshots.weights) == [0, 1]
    assert_weights(encoder, snapshots.weights[1])  # batches 0 and 1 applied, batch 2 not
    assert np.all(np.isfinite(encoder.encode(list(A), compute="float32")))


@pytest.mark.parametrize("steps_per_execution", [large(1), 2])
def test_nan_labels_with_a_loss_of_unknown_range_stop_at_their_batch(steps_per_execution):
    encoder = tiny_encoder()
    model = sk.RegressionSiamese(encoder)
    model.compile(loss=lambda y, p: keras.ops.mean((y - p) ** 2), steps_per_execution=steps_per_execution)
    labels = np.linspace(-1, 1, 8).astype("float32") * nan_at(5)
    before = [w.numpy() for w in encoder.weights]
    where = "batch index 2" if steps_per_execution == 1 else "one of batch indices 2-3"
    with pytest.raises(sk.NonFiniteLossError, match=f"{where} .* of epoch 1.*not applied"):
        model.fit((A, B), labels, batch_size=2, verbose=0, shuffle=False)
    assert all(np.all(np.isfinite(w.numpy())) for w in encoder.weights)
    assert not all(np.array_equal(b, w.numpy()) for b, w in zip(before, encoder.weights, strict=True))
    assert np.all(np.isfinite(encoder.encode(list(A), compute="float32")))


def test_the_checks_leave_a_sound_fit_and_its_history_alone():
    model, x, y = build("regression", tiny_encoder())
    model.compile()
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert list(history.history) == ["loss"] and np.all(np.isfinite(history.history["loss"]))


def test_raw_sts_scores_are_refused_naming_the_range_and_the_scaler(encoder):
    model = sk.RegressionSiamese(encoder)
    model.compile()
    before = [w.numpy() for w in encoder.weights]
    scores = np.array([4.2, 0.6, 0.9, 0.5] * 2, "float32")
    message = r"cosine targets in \[-1, 1\]; item 0 \(0-based\) has label 4.2 \(2 such .*data.examples.scale_sts_score"
    with pytest.raises(fit_checks.LabelRangeError, match=message):
        model.fit((A, B), scores, batch_size=4, verbose=0)
    # The same scores in a dataset: refused at the first batch holding one, nothing applied.
    dataset = tf.data.Dataset.from_tensor_slices(((A, B), scores)).batch(4)
    message = r"batch index 0 .* of epoch 1.*cosine targets in \[-1, 1\]; this batch's labels span \[0.5, 4.2\]"
    with pytest.raises(fit_checks.LabelRangeError, match=message + ".*scale_sts_score"):
        model.fit(dataset, verbose=0)
    assert_weights(encoder, before)


@pytest.mark.parametrize("jit_compile", [False, large(True)])
def test_labels_in_a_dataset_are_checked_per_batch(jit_compile):
    encoder = tiny_encoder()
    model = sk.ClassificationSiamese(encoder)
    model.compile(jit_compile=jit_compile)
    snapshots = WeightsAfterEachBatch(encoder)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 3], "int32")
    dataset = tf.data.Dataset.from_tensor_slices(((A, B), labels)).batch(4)
    message = r"batch index 1 .*class ids 0..2 \(integers\); this batch's labels span \[0, 3\]"
    with pytest.raises(fit_checks.LabelRangeError, match=message):
        model.fit(dataset, callbacks=[snapshots], verbose=0)
    assert_weights(encoder, snapshots.weights[0])


@pytest.mark.parametrize(
    "compile_kwargs, labels, message",
    [
        ({}, [0, 1, 2, 3], r"ClassificationSiamese .*class ids 0..2 \(integers\); item 3 \(0-based\) has label 3"),
        ({}, [0, 1, 0.5, 2], r"class ids 0..2 \(integers\); item 2 \(0-based\) has label 0.5"),
        ({"loss": sk.OnlineContrastiveLoss()}, [0, 1, 2, 1], r"labels 0 \(dissimilar\) or 1 .* item 2 .* label 2"),
        ({"loss": sk.CoSENTLoss()}, [0, 1, np.nan, 1], r"finite similarity scores; item 2 .* label nan"),
        ({"loss": "mse"}, [0, 1, 2, 1], r"cosine targets in \[-1, 1\]; item 2 .* label 2"),
    ],
)
def test_labels_outside_the_losss_range_are_refused(encoder, compile_kwargs, labels, message):
    model = sk.ClassificationSiamese(encoder) if not compile_kwargs else sk.RegressionSiamese(encoder)
    model.compile(**compile_kwargs)
    with pytest.raises(fit_checks.LabelRangeError, match=message):
        model.fit((A[:4], B[:4]), np.array(labels, "float32"), batch_size=4, verbose=0)


def test_an_unbatched_dataset_is_a_clear_error_naming_the_argument(encoder):
    model = sk.RegressionSiamese(encoder)
    model.compile()
    single = tf.data.Dataset.from_tensor_slices(((A, B), np.zeros(8, "float32")))
    with pytest.raises(ValueError, match=r"passed as `x` yields single examples.*`dataset.batch\(16\)`"):
        model.fit(single, verbose=0)
    with pytest.raises(ValueError, match=r"passed as `validation_data` yields single examples"):
        model.fit(single.batch(4), validation_data=single, verbose=0)


def test_inputs_of_different_lengths_name_the_arguments_and_both_lengths(encoder):
    model = sk.RegressionSiamese(encoder)
    model.compile()
    with pytest.raises(ValueError, match=r"`x\[0\] \(sentence_a\)` has 8, `x\[1\] \(sentence_b\)` has 8, `y` has 5"):
        model.fit((A, B), np.zeros(5, "float32"), batch_size=4, verbose=0)
    with pytest.raises(ValueError, match=r"`x\[1\] \(sentence_b\)` has 5, `y` has 8"):
        model.fit((A, B[:5]), np.zeros(8, "float32"), batch_size=4, verbose=0)
    with pytest.raises(ValueError, match=r"`sample_weight` has 3 rows"):
        model.fit((A, B), np.zeros(8, "float32"), sample_weight=np.ones(3), batch_size=4, verbose=0)


def test_a_single_text_column_counts_as_one_input():
    model = sk.BatchHardTripletModel(tiny_encoder())
    model.compile()
    fit_checks.check_fit_inputs(model, ["a cat", "a dog"], np.array([0, 1]))
    with pytest.raises(ValueError, match=r"`x` has 2, `y` has 3 rows"):
        fit_checks.check_fit_inputs(model, ["a cat", "a dog"], np.array([0, 1, 1]))
