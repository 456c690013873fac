"""The objective table: online-contrastive, batch-hard and distill train; contrastive's
hard negatives and GradCache are explicit choices; bad data names the file and line."""

import keras
import numpy as np
import pytest

import sbert_keras as sk
from conftest import tiny_encoder
from sbert_keras.data import examples
from sbert_keras.data import readers
from sbert_keras.training import objectives
from sbert_keras.training import trainer
from sbert_keras.training.single_text_models import BatchHardTripletModel
from sbert_keras.training.single_text_models import DistillationModel

A = [f"a man is playing guitar {i}" for i in range(8)]
B = [f"the cat sleeps on the sofa {i}" for i in range(8)]
C = [f"a red car is fast {i}" for i in range(8)]
PAIRS01 = examples.SentencePairs(A, B, np.array([0, 1] * 4, "float32"))
LABELLED = examples.LabelledSentences(A + B, np.array([0] * 8 + [1] * 8, "int32"), ["music", "cats"])


def fit(objective, train, **kwargs):
    encoder = tiny_encoder()
    model, history = trainer.train_objective(objective, encoder, train, epochs=1, batch_size=4, verbose=0, **kwargs)
    assert model.encoder is encoder
    assert np.isfinite(history.history["loss"][0])
    return model


def test_online_contrastive_trains_a_regression_siamese_on_0_1_pairs():
    model = fit("online-contrastive", PAIRS01, dev=examples.SentencePairs(A[:6], B[:6], np.arange(6.0)))
    assert isinstance(model, sk.RegressionSiamese) and model.loss.name == "online_contrastive_loss"


def test_online_contrastive_refuses_other_labels_naming_the_item():
    with pytest.raises(ValueError, match=r"labels 0 \(dissimilar\) or 1 \(similar\); item 2 \(0-based\) has label 0.5"):
        objectives.objective_inputs("online-contrastive", examples.SentencePairs(A[:3], B[:3], np.array([0, 1, 0.5])))
    with pytest.raises(TypeError, match="NLI pairs"):
        objectives.objective_inputs("online-contrastive", examples.NLIPairs(A, B, np.zeros(8, "int32")))


def test_batch_hard_trains_on_labelled_sentences_and_round_trips(tmp_path):
    model = fit("batch-hard", LABELLED)
    assert isinstance(model, BatchHardTripletModel) and model.loss.name == "batch_hard_triplet_loss"
    assert model.active_roles == ("sentence",)
    path = tmp_path / "model.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(reloaded.predict(A[:3], verbose=0), model.predict(A[:3], verbose=0), atol=1e-5)
    with pytest.raises(TypeError, match=r"labelled sentences \(text,label\); received Triplets"):
        objectives.objective_inputs("batch-hard", examples.Triplets(A, B, C))


@pytest.mark.large
def test_batch_hard_with_matryoshka_dims_wraps_the_loss_on_the_embeddings():
    model = fit("batch-hard", LABELLED, matryoshka_dims=(8, 4))
    assert model.loss.name == "matryoshka_loss" and model.loss.dims == (8, 4)
    assert model.loss.loss.name == "batch_hard_triplet_loss"
    assert model.predict(A[:2], verbose=0).shape == (2, 8)  # whole embeddings; the loss truncates
    with pytest.raises(ValueError, match="exceed the embedding dimension 8"):
        BatchHardTripletModel(tiny_encoder(), matryoshka_dims=(16,))


def test_distill_fits_the_students_embeddings_to_the_teachers():
    teacher = tiny_encoder(seed=1)
    sentences = examples.Sentences(A + B)
    targets = teacher.encode(sentences.texts, compute="float32")
    student = tiny_encoder()
    before = float(np.mean((student.encode(sentences.texts, compute="float32") - targets) ** 2))
    model, history = trainer.train_objective(
        "distill", student, sentences, teacher=teacher, epochs=3, batch_size=4, learning_rate=1e-3, verbose=0
    )
    assert isinstance(model, DistillationModel) and model.loss.name == "mean_squared_error"
    after = float(np.mean((student.encode(sentences.texts, compute="float32") - targets) ** 2))
    assert np.all(np.isfinite(history.history["loss"])) and after < before


def test_distill_needs_a_teacher_of_the_students_dimension():
    sentences = examples.Sentences(A)
    with pytest.raises(ValueError, match="distill objective needs a `teacher`"):
        trainer.train_objective("distill", tiny_encoder(), sentences, verbose=0)
    with pytest.raises(ValueError, match="teacher's embeddings have 5 dimensions and the student's 8"):
        trainer.train_objective("distill", tiny_encoder(), sentences, teacher=np.zeros((8, 5)), verbose=0)
    with pytest.raises(ValueError, match=r"shape \(8, dim\), one row per sentence; received shape \(3, 8\)"):
        trainer.train_objective("distill", tiny_encoder(), sentences, teacher=np.zeros((3, 8)), verbose=0)
    with pytest.raises(ValueError, match="`teacher` applies to the distill objective only; objective 'regression'"):
        trainer.train_objective("regression", tiny_encoder(), PAIRS01, teacher=np.zeros((8, 8)), verbose=0)


def test_contrastive_uses_negatives_only_when_asked():
    triplets = examples.Triplets(A, B, C)
    with pytest.warns(UserWarning, match="negatives unused; pass hard_negatives=True"):
        columns, _, extra = objectives.objective_inputs("contrastive", triplets)
    assert len(columns) == 2 and extra == {"hard_negatives": False}
    columns, _, extra = objectives.objective_inputs("contrastive", triplets, hard_negatives=True)
    assert columns == [A, B, C] and extra == {"hard_negatives": True}
    model = fit("contrastive", triplets, hard_negatives=True)
    assert model.hard_negatives and model.active_roles == ("anchor", "positive", "negative")
    with pytest.raises(ValueError, match="needs a third column of negatives"):
        objectives.objective_inputs("contrastive", examples.Triplets(A, B), hard_negatives=True)
    with pytest.raises(ValueError, match="contrastive objective only, not triplet"):
        objectives.objective_inputs("triplet", triplets, hard_negatives=True)


def test_contrastive_on_nli_takes_entailment_pairs_or_triplets():
    nli = examples.NLIPairs(A[:3] * 2, B[:3] + C[:3], np.array([0, 0, 0, 2, 2, 2], "int32"))
    columns, _, _ = objectives.objective_inputs("contrastive", nli)
    assert columns == [A[:3], B[:3]]
    columns, _, _ = objectives.objective_inputs("contrastive", nli, hard_negatives=True)
    assert columns == [A[:3], B[:3], C[:3]]


def test_mini_batch_size_trains_the_cached_model_for_contrastive_only():
    model = fit("contrastive", examples.Triplets(A, B), mini_batch_size=2)
    assert isinstance(model, sk.CachedContrastiveSiamese) and model.mini_batch_size == 2
    with pytest.raises(ValueError, match="`mini_batch_size` .* contrastive objective only, not regression"):
        objectives.build_model("regression", tiny_encoder(), {"mini_batch_size": 2})
    with pytest.raises(ValueError, match="`mini_batch_size` must be an integer >= 1; received 0"):
        objectives.build_model("contrastive", tiny_encoder(), {"mini_batch_size": 0})


def test_readers_of_the_new_formats(tmp_path):
    labelled = tmp_path / "labelled.csv"
    labelled.write_text('Text,Label\n"a cat, asleep",cats\na dog,dogs\nthe cat,cats\n')
    sentences = readers.read_labelled_sentences_csv(labelled)
    assert sentences.texts == ["a cat, asleep", "a dog", "the cat"] and sentences.classes == ["cats", "dogs"]
    np.testing.assert_array_equal(sentences.labels, [0, 1, 0])
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("id,question1,question2,is_duplicate\n1,a,b,1\n2,c,d,0.0\n")
    read = readers.read_labelled_pairs_csv(pairs)
    assert read.sentence_a == ["a", "c"] and read.sentence_b == ["b", "d"]
    np.testing.assert_allclose(read.labels, [1.0, 0.0], atol=0)
    text = tmp_path / "sentences.txt"
    text.write_text("first\n\n  \nsecond\n")
    assert readers.read_sentences(text).texts == ["first", "second"]
    assert examples.unique_sentences(examples.Triplets(["a", "b"], ["b", "c"], ["a", "d"])).texts == [
        "a",
        "b",
        "c",
        "d",
    ]


@pytest.mark.parametrize(
    "reader, content, message",
    [
        (
            "read_labelled_sentences_csv",
            "sentence1,sentence2\nx,y\n",
            r"line 1: header .* lacks the columns text,label",
        ),
        ("read_labelled_sentences_csv", "text,label\nx,a\n,b\n", "line 3: empty text field"),
        ("read_labelled_pairs_csv", "sentence1,sentence2,label\nx,y,1\nx,y,2\n", "line 3: label '2' is not 0 or 1"),
        ("read_labelled_pairs_csv", "sentence1,sentence2,label\nx,y,yes\n", "line 2: label 'yes' is not 0 or 1"),
        (
            "read_labelled_pairs_csv",
            "text,label\nx,1\n",
            "line 1: header .* lacks the columns sentence1,sentence2,label",
        ),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, reader, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(examples.DataFormatError, match=f"bad.csv, {message}"):
        getattr(readers, reader)(path)
