"""`save_to_sentence_transformers`: the folder's files, round trips, refusals, atomic writing.

sentence-transformers and transformers themselves load the folders in
`tests/checkpoints/test_st_writer_peer.py` (peer virtualenv); here the folder is checked
without them: its files, `from_preset` reproducing the encoder, and the
written `tokenizer.json` giving the Keras tokenizer's ids (`tokenizers`).
"""

import os
import pathlib

import keras
import keras_hub
import numpy as np
import pytest

from checkpoints.test_presets import HARD_TEXTS
from conftest import WORDS
from conftest import family_fixture
from conftest import large
from conftest import minilm_path
from conftest import read_json
from conftest import shared_path
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras import SentenceEncoderPreprocessor
from sbert_keras.checkpoints import st_writer
from sbert_keras.data import examples
from sbert_keras.training import trainer
from sbert_keras.utils import atomic_io

TEXTS = HARD_TEXTS + ["A man is playing a guitar.", "  two  spaces ", "東京は日本の首都です。", "", "I love this! 😀"]
# Source folder (a family fixture, or the tiny RoBERTa of ../shared) -> the separate vocabulary files the written
# folder holds.
SOURCES = {
    "distilbert-dense": ("vocab.txt",),
    "mpnet": ("vocab.txt",),
    "xlm-roberta": ("sentencepiece.bpe.model",),
    "tiny-roberta": ("vocab.json", "merges.txt"),
}


def source(name):
    """The folder `SOURCES[name]` stands for; the test skips, saying why, where it is missing."""
    if name == "tiny-roberta":
        return shared_path("reference", "tiny-roberta", "model")
    return family_fixture(name, "model")


def vectors(encoder, texts=TEXTS):
    return encoder.encode(texts, show_progress=False, compute="float32")


def fitted(encoder):
    """`encoder` after one short epoch of the contrastive objective (weights moved)."""
    a = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "a woman eats food"] * 2
    b = ["a man plays a guitar", "a cat sleeps", "the dog runs", "a woman is eating"] * 2
    keras.utils.set_random_seed(0)
    trainer.train_objective("contrastive", encoder, examples.Triplets(a, b, None), epochs=1, batch_size=4, verbose=0)
    return encoder


@pytest.mark.parametrize("name", list(SOURCES))
def test_round_trip_of_each_family(tmp_path, name):
    encoder = SentenceEncoder.from_preset(source(name))
    expected = vectors(encoder)
    folder = encoder.save_to_sentence_transformers(tmp_path / "st")
    loaded = SentenceEncoder.from_preset(folder)
    assert type(loaded.backbone) is type(encoder.backbone)
    assert (loaded.pooling, loaded.normalize, loaded.sequence_length) == (
        encoder.pooling,
        encoder.normalize,
        encoder.sequence_length,
    )
    np.testing.assert_allclose(vectors(loaded), expected, atol=1e-5)
    # The separate vocabulary files are written too, and tokenizer.json alone gives the same encoder.
    for vocabulary in SOURCES[name]:
        assert (pathlib.Path(folder) / vocabulary).is_file()
        os.remove(pathlib.Path(folder) / vocabulary)
    np.testing.assert_allclose(vectors(SentenceEncoder.from_preset(folder)), expected, atol=1e-5)


@pytest.mark.large
def test_round_trip_of_minilm(tmp_path):
    encoder = SentenceEncoder.from_preset(minilm_path())
    folder = encoder.save_to_sentence_transformers(tmp_path / "minilm")
    np.testing.assert_allclose(vectors(SentenceEncoder.from_preset(folder)), vectors(encoder), atol=1e-5)


@pytest.mark.parametrize("name", [large("distilbert-dense"), "mpnet"])
def test_round_trip_after_fit(tmp_path, name):
    encoder = SentenceEncoder.from_preset(source(name))
    before = vectors(encoder)
    fitted(encoder)
    after = vectors(encoder)
    assert np.abs(after - before).max() > 1e-4  # the weights moved
    loaded = SentenceEncoder.from_preset(encoder.save_to_sentence_transformers(tmp_path / "st"))
    np.testing.assert_allclose(vectors(loaded), after, atol=1e-5)


def test_the_folder_has_every_module_and_setting(tmp_path):
    encoder = SentenceEncoder.from_preset(source("distilbert-dense"), prompts={"query": "query: "})
    encoder.set_prompts(encoder.prompts, "query")
    folder = pathlib.Path(encoder.save_to_sentence_transformers(tmp_path / "st"))
    modules = read_json(folder / "modules.json")
    assert [(m["path"], m["type"].rsplit(".", 1)[-1]) for m in modules] == [
        ("", "Transformer"),
        ("1_Pooling", "Pooling"),
        ("2_Dense", "Dense"),
    ]
    assert read_json(folder / "1_Pooling" / "config.json")["pooling_mode"] == "mean"
    dense = read_json(folder / "2_Dense" / "config.json")
    assert (dense["in_features"], dense["out_features"], dense["activation_function"]) == (
        32,
        16,
        "torch.nn.modules.activation.Tanh",
    )
    config = read_json(folder / "config.json")
    assert (config["model_type"], config["architectures"], config["dim"], config["n_layers"]) == (
        "distilbert",
        ["DistilBertModel"],
        32,
        2,
    )
    assert read_json(folder / "sentence_bert_config.json")["max_seq_length"] == 128
    st_config = read_json(folder / "config_sentence_transformers.json")
    assert st_config["prompts"]["query"] == "query: " and st_config["default_prompt_name"] == "query"
    assert st_config["similarity_fn_name"] == "cosine"
    assert read_json(folder / "tokenizer_config.json")["tokenizer_class"] == "DistilBertTokenizer"
    card = (folder / "README.md").read_text()
    assert f"Base model: `{source('distilbert-dense')}`" in card and "Dense 32→16 (tanh)" in card
    assert read_json(folder / atomic_io.MARKER)["command"] == "save_to_sentence_transformers"
    loaded = SentenceEncoder.from_preset(folder)
    assert loaded.prompts["query"] == "query: " and loaded.default_prompt_name == "query"


@pytest.mark.parametrize("name", list(SOURCES))
def test_the_written_tokenizer_json_gives_the_keras_ids(tmp_path, name):
    tokenizers = pytest.importorskip("tokenizers")
    encoder = SentenceEncoder.from_preset(source(name))
    folder = encoder.save_to_sentence_transformers(tmp_path / "st")
    written = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    written.no_padding()
    ids, _ = encoder.preprocessor.tokenize(TEXTS)
    assert [e.ids for e in written.encode_batch(TEXTS)] == ids.to_list()


def test_the_model_card_of_a_training_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    encoder = SentenceEncoder.from_preset(source("mpnet"))
    encoder.save(run / "encoder.keras")
    metrics = {
        "objective": "regression",
        "model": "sentence-transformers/all-mpnet-base-v2",
        "train_file": "sts-train.csv",
        "train_examples": 5749,
        "epochs": 4,
        "dev_before": {"spearman_cosine": 0.5},
        "dev_after": {"spearman_cosine": 0.8123456},
    }
    atomic_io.write_json(run / "metrics.json", metrics)
    atomic_io.write_json(run / atomic_io.MARKER, {"command": "train"})
    folder = pathlib.Path(SentenceEncoder.from_preset(run).save_to_sentence_transformers(tmp_path / "st"))
    card = (folder / "README.md").read_text()
    assert "base_model: sentence-transformers/all-mpnet-base-v2" in card
    assert "- Objective: `regression`" in card and "- Training data: `sts-train.csv`" in card
    assert "- Epochs: `4`" in card and "| spearman_cosine | 0.5000 | 0.8123 |" in card


def test_quantized_weights_and_custom_backbones_are_refused(tmp_path):
    encoder = tiny_encoder()
    encoder.quantize("int8")
    with pytest.raises(ValueError, match=r"quantized weights \(.*\): a sentence-transformers folder holds float"):
        encoder.save_to_sentence_transformers(tmp_path / "q")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocab), num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16
    )
    custom = SentenceEncoder(backbone, SentenceEncoderPreprocessor(tokenizer, sequence_length=8))
    with pytest.raises(ValueError, match=r"A BertBackbone with a BertTokenizer has no Hugging Face layout"):
        custom.save_to_sentence_transformers(tmp_path / "custom")
    assert not (tmp_path / "q").exists() and not (tmp_path / "custom").exists()


def test_a_projection_activation_without_a_torch_module_is_refused(tmp_path):
    base = tiny_encoder()
    projection = keras.layers.Dense(4, activation="softplus", dtype="float32", name="projection_0")
    encoder = SentenceEncoder(base.backbone, base.preprocessor, projections=[projection])
    with pytest.raises(ValueError, match=r"Projection 'projection_0' has activation 'softplus'"):
        encoder.save_to_sentence_transformers(tmp_path / "st")


def test_the_folder_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    encoder = tiny_encoder(normalize=True)
    target = tmp_path / "st"
    encoder.save_to_sentence_transformers(target)
    with pytest.raises(ValueError, match="already holds a completed run; pass --overwrite"):
        encoder.save_to_sentence_transformers(target)
    before = sorted(os.listdir(target))

    def broken(folder, files):
        (pathlib.Path(folder) / "config.json").write_text("{}")
        raise OSError("disk unplugged")

    monkeypatch.setattr(st_writer, "write_files", broken)
    with pytest.raises(OSError, match="disk unplugged"):
        encoder.save_to_sentence_transformers(target, overwrite=True)
    assert sorted(os.listdir(target)) == before and not (tmp_path / "st.partial").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"already holds files that are not an sbert_keras result \(e\.g\. 'notes"):
        encoder.save_to_sentence_transformers(tmp_path / "other", overwrite=True)


@pytest.mark.parametrize("kind,model_type", [("bert", "bert"), ("roberta", "roberta")])
def test_the_tiny_test_encoders_round_trip(tmp_path, kind, model_type):
    texts = ["a man is playing guitar", "the dog runs in the park", "a red car"]
    encoder = tiny_encoder(kind=kind, pooling="max", normalize=True)
    folder = encoder.save_to_sentence_transformers(tmp_path / kind)
    assert read_json(pathlib.Path(folder) / "config.json")["model_type"] == model_type
    loaded = SentenceEncoder.from_preset(folder)
    assert loaded.pooling == "max" and loaded.normalize
    np.testing.assert_allclose(vectors(loaded, texts), vectors(encoder, texts), atol=1e-5)
