"""What `fit` and `train_objective` receive is checked before anything is traced, in one line naming it."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import sbert_keras as sk
from conftest import tiny_encoder
from sbert_keras.data import examples
from sbert_keras.training import fit_inputs
from sbert_keras.training.fit_checks import LabelRangeError
from sbert_keras.training.objectives import objective_inputs
from sbert_keras.training.pipelines import siamese_dataset

A = ["a man is playing guitar", "the cat sleeps", "a dog runs", "a woman eats food"] * 2
B = ["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 2
Y = np.linspace(0, 1, 8).astype("float32")
ROLES = ("sentence_a", "sentence_b")


def one_line(error):
    assert len(str(error.value).splitlines()) == 1, str(error.value)


@pytest.mark.parametrize(
    "x, error, named",
    [
        (([], []), ValueError, "`x[0] (sentence_a)` holds no texts"),
        ([], ValueError, "`x` holds no texts"),
        ((A,), ValueError, "`x` has 1 text column(s); this model takes 2"),
        ((A, B, A), ValueError, "`x` has 3 text column(s)"),
        (A, ValueError, "`x` has 1 text column(s)"),
        ((A[:-1] + [None], B), ValueError, "`x[0] (sentence_a)[7]` is None"),
        ((A, B[:-1] + [3]), TypeError, "`x[1] (sentence_b)[7]` must be a string"),
    ],
)
def test_text_columns_are_counted_and_checked(x, error, named):
    with pytest.raises(error, match=named.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")) as info:
        fit_inputs.check_text_columns(x, ROLES, "x")
    one_line(info)


def test_good_text_columns_are_named_by_role():
    named = fit_inputs.check_text_columns((A, np.array(B)), ROLES, "x")
    assert list(named) == ["x[0] (sentence_a)", "x[1] (sentence_b)"]
    assert list(fit_inputs.check_text_columns(A, ("anchor",), "x")) == ["x"]  # one list: a one-role model's column


@pytest.mark.parametrize(
    "labels, error, named",
    [
        ([str(v) for v in Y], TypeError, "`y` must hold numbers"),
        ([0.5, None], TypeError, "`y` must hold numbers"),
        (None, TypeError, "`y` is None"),
        (np.stack([Y, Y], 1), ValueError, r"`y` must have shape \(n,\).*received shape \(8, 2\)"),
        (Y[:, None], ValueError, r"received shape \(8, 1\)"),
    ],
)
def test_labels_must_be_numbers_one_per_row(labels, error, named):
    with pytest.raises(error, match=named) as info:
        fit_inputs.check_label_array(labels, "y")
    one_line(info)


def test_good_labels_pass():
    fit_inputs.check_label_array(tf.constant(Y), "y")
    fit_inputs.check_label_array(np.array([0, 1, 2], "int32"), "y")
    fit_inputs.check_label_array(np.zeros((3, 4)), "y", one_per_row=False)  # a teacher's vectors


@pytest.mark.parametrize(
    "records, error, named",
    [
        (examples.SentencePairs(A, B, np.stack([Y, Y], 1)), ValueError, r"`train.labels` must have shape \(n,\)"),
        (examples.SentencePairs(A, B, [str(v) for v in Y]), TypeError, "`train.labels` must hold numbers"),
        (examples.SentencePairs(A, B, None), TypeError, "`train.labels` is None"),
        (examples.SentencePairs(A, B, Y[:5]), ValueError, "`train.labels` has 5 entries and `train.sentence_a` 8"),
        (examples.SentencePairs(A, B[:5], Y), ValueError, "`train.sentence_b` has 5 entries"),
        (examples.SentencePairs("a text", B, Y), TypeError, "`train.sentence_a` must be a list of texts"),
        (examples.SentencePairs(A[:-1] + [None], B, Y), ValueError, r"`train.sentence_a\[7\]` is None"),
    ],
)
def test_train_objective_data_are_checked_naming_the_field(records, error, named):
    with pytest.raises(error, match=named) as info:
        objective_inputs("regression", records)
    one_line(info)


def test_triplets_with_a_short_negative_column_are_named():
    with pytest.raises(ValueError, match="`train.negative` has 3 entries and `train.anchor` 8"):
        objective_inputs("triplet", examples.Triplets(A, B, A[:3]))


@pytest.fixture(scope="module")
def regression():
    model = sk.RegressionSiamese(tiny_encoder())
    model.compile()
    return model


@pytest.mark.parametrize(
    "kwargs, error, named",
    [
        ({"y": np.stack([Y, Y], 1)}, ValueError, r"`y` must have shape \(n,\)"),
        ({"y": [str(v) for v in Y]}, TypeError, "`y` must hold numbers"),
        ({"x": ([], []), "y": np.zeros(0, "float32")}, ValueError, "holds no texts"),
        ({"x": (A,)}, ValueError, "`x` has 1 text column"),
        ({"x": (A[:-1] + [None], B)}, ValueError, r"`x\[0\] \(sentence_a\)\[7\]` is None"),
        # Raw 0-5 STS scores, or NaN, as validation labels: val_loss would mean nothing.
        ({"validation_data": ((A, B), Y * 5)}, LabelRangeError, r"`validation_data\[1\]`.*cosine targets.*1.42857"),
        ({"validation_data": ((A, B), np.full(8, np.nan, "float32"))}, LabelRangeError, "label nan"),
        ({"validation_data": ((A, B[:3]), Y)}, ValueError, r"`validation_data\[0\]\[1\] \(sentence_b\)` has 3"),
    ],
)
def test_fit_refuses_bad_inputs_before_training_naming_the_argument(regression, kwargs, error, named):
    kwargs = {"x": (A, B), "y": Y, **kwargs}
    with pytest.raises(error, match=named) as info:
        regression.fit(kwargs.pop("x"), kwargs.pop("y"), epochs=1, verbose=0, **kwargs)
    one_line(info)
    assert regression.optimizer.iterations.numpy() == 0  # nothing trained


def test_fit_on_a_dataset_warns_nothing_about_shuffle():
    encoder = tiny_encoder()
    model = sk.RegressionSiamese(encoder)
    model.compile()
    dataset = siamese_dataset([A, B], Y, encoder.preprocessor, model.active_roles, batch_size=4, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(dataset, epochs=1, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    assert model.optimizer.iterations.numpy() == 2


def test_fit_on_arrays_shuffles_as_keras_does_without_a_warning():
    encoder = tiny_encoder()
    model = sk.RegressionSiamese(encoder)
    model.compile()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit((A, B), Y, batch_size=4, epochs=2, verbose=0, validation_split=0.25)
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    assert model.optimizer.iterations.numpy() == 4  # 6 training rows in batches of 4, two epochs
    assert len(history.history["val_loss"]) == 2


def test_array_batches_reshuffle_each_epoch_and_split_the_last_rows():
    texts = [f"text {i}" for i in range(64)]
    dataset, validation = fit_inputs.array_batches(
        (texts, texts), np.arange(64.0), batch_size=64, validation_split=0.25
    )
    first, second = ([t.decode() for t in batch[0][0].numpy()] for batch in (next(iter(dataset)), next(iter(dataset))))
    assert sorted(first) == sorted(texts[:48]) and first != second and first != texts[:48]
    assert list(validation[0][0]) == texts[48:] and list(validation[1]) == list(range(48, 64))
    ordered, _ = fit_inputs.array_batches((texts, texts), batch_size=64, shuffle=False)
    assert [t.decode() for t in next(iter(ordered))[0][0].numpy()] == texts
