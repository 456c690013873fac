"""Checkpoint loading: settings parsing, and exact parity with sentence-transformers."""

import json
import os
import pathlib
import re
import shutil
import socket
import time
import warnings

import keras
import keras_hub
import numpy as np
import pytest

from checkpoints.test_st_modules import write_dense
from conftest import minilm_path
from conftest import read_json
from conftest import shared_path
from conftest import tiny_encoder
from sbert_keras import RegressionSiamese
from sbert_keras import SentenceEncoder
from sbert_keras.checkpoints.presets import CorruptModelError
from sbert_keras.checkpoints.presets import PresetUnavailableError
from sbert_keras.checkpoints.presets import read_sentence_transformers_settings
from sbert_keras.cli.commands import load_encoder
from sbert_keras.model.backbone_config import strip_prefix
from sbert_keras.runtime import fused_support
from sbert_keras.utils import atomic_io


def write(folder, name, content):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content) if not isinstance(content, str) else content)


def test_settings_old_pooling_format(tmp_path):
    write(
        tmp_path,
        "modules.json",
        [
            {"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    write(
        tmp_path,
        "1_Pooling/config.json",
        {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True},
    )
    write(tmp_path, "sentence_bert_config.json", {"max_seq_length": 77})
    assert read_sentence_transformers_settings(str(tmp_path)) == {
        "pooling": "max",
        "normalize": True,
        "max_seq_length": 77,
    }


@pytest.mark.parametrize("value", ["abc", 2, 12.5, True])
def test_a_bad_max_seq_length_names_the_file(tmp_path, value):
    write(tmp_path, "sentence_bert_config.json", {"max_seq_length": value})
    with pytest.raises(ValueError, match=r"sentence_bert_config\.json: max_seq_length=.* must be a whole number >= 3"):
        read_sentence_transformers_settings(str(tmp_path))


def test_settings_new_pooling_format_and_tokenizer_max_length(tmp_path):
    write(
        tmp_path,
        "modules.json",
        [
            {"path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
        ],
    )
    write(tmp_path, "1_Pooling/config.json", {"pooling_mode": "cls"})
    write(tmp_path, "tokenizer_config.json", {"model_max_length": 128})
    assert read_sentence_transformers_settings(str(tmp_path)) == {
        "pooling": "cls",
        "normalize": False,
        "max_seq_length": 128,
    }


def test_unsupported_pooling_names_the_file(tmp_path):
    write(tmp_path, "1_Pooling/config.json", {"pooling_mode_mean_sqrt_len_tokens": True})
    with pytest.raises(ValueError, match=r"1_Pooling.config\.json"):
        read_sentence_transformers_settings(str(tmp_path))


def test_broken_json_names_file_and_line(tmp_path):
    write(tmp_path, "modules.json", '[\n{"path": ""\n')
    with pytest.raises(ValueError, match=r"modules\.json, line \d"):
        read_sentence_transformers_settings(str(tmp_path))


def check_parity(folder, reference):
    texts = read_json(reference / "texts.json")
    expected = np.load(reference / "embeddings.npy")
    encoder = SentenceEncoder.from_preset(folder)
    with pytest.warns(UserWarning, match="truncated"):
        got = encoder.encode(texts, batch_size=32, show_progress=False, compute="float32")
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5
    # bf16 matmuls (float32 elsewhere) stay within cosine 0.999 of the reference.
    with pytest.warns(UserWarning, match="truncated"):
        low = encoder.encode(texts, batch_size=32, show_progress=False, compute="bfloat16")
    cosine = (low * expected).sum(1) / np.linalg.norm(low, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosine.min() >= 0.999
    return encoder


def test_minilm_parity_with_sentence_transformers():
    encoder = check_parity(minilm_path(), shared_path("reference", "all-minilm-l6-v2"))
    assert encoder.pooling == "mean" and encoder.normalize and encoder.sequence_length == 256


def test_tiny_roberta_parity_with_sentence_transformers():
    folder = shared_path("reference", "tiny-roberta", "model")
    encoder = check_parity(folder, shared_path("reference", "tiny-roberta"))
    # RoBERTa folders load into KerasHub's own RobertaBackbone.
    assert isinstance(encoder.backbone, keras_hub.models.RobertaBackbone)
    assert encoder.sequence_length == 128


HARD_TEXTS = [
    "A greek-speaking slave (δούλος) would call his master κύριος (vocative: κύριε).",
    "Die Straße ist groß.",
    "Résumé of the naïve café owner in Zürich.",
    "İstanbul ŞEHİR",
    "ﬁne ligature",
]


def test_bert_token_ids_match_the_checkpoint_tokenizer():
    # KerasHub's lowercase=True case-folds ("ß" -> "ss", "ς" -> "σ", "ﬁ" -> "fi");
    # Hugging Face lowercases. The checkpoint's own tokenizer.json is the reference.
    tokenizers = pytest.importorskip("tokenizers")
    folder = minilm_path()
    reference = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    reference.no_padding()
    encoder = SentenceEncoder.from_preset(folder)
    ids, _ = encoder.preprocessor.tokenize(HARD_TEXTS)
    assert ids.to_list() == [reference.encode(t).ids for t in HARD_TEXTS]


def test_lowercasing_tokenizer_serializes():
    from sbert_keras.checkpoints.presets import LowercasingBertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "straße", "groß"]
    tokenizer = LowercasingBertTokenizer(vocabulary=vocab, lowercase=True, strip_accents=True)
    clone = keras.layers.deserialize(keras.layers.serialize(tokenizer))
    assert type(clone) is LowercasingBertTokenizer and clone.lowercase_like_python
    assert list(tokenizer.tokenize(["Straße GROß"])[0]) == [5, 6]


# === Folders saved by sentence-transformers 6 / transformers 5 ===


def copy_folder(source, target, drop=()):
    """Copies an ST folder (the large weights file is hard-linked when it can be).

    A symbolic link would lead outside the folder, which the loaders refuse.
    """
    target.mkdir(parents=True, exist_ok=True)
    for item in pathlib.Path(source).iterdir():
        if item.name in drop:
            continue
        if item.is_dir():
            shutil.copytree(item, target / item.name)
        elif item.name == "model.safetensors":
            try:
                os.link(item, target / item.name)
            except OSError:  # another file system
                shutil.copy(item, target / item.name)
        else:
            shutil.copy(item, target / item.name)
    return target


def encode_parity(folder, reference, count=None):
    texts = read_json(reference / "texts.json")
    expected = np.load(reference / "embeddings.npy")
    if count:
        texts, expected = texts[:count], expected[:count]
    encoder = SentenceEncoder.from_preset(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the one truncated text
        got = encoder.encode(texts, batch_size=32, show_progress=False, compute="float32")
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5
    return encoder


def test_bert_folder_with_only_tokenizer_json(tmp_path):
    # transformers 5 layout: no vocab.txt, and lowercasing only in tokenizer.json.
    tokenizers = pytest.importorskip("tokenizers")
    folder = copy_folder(minilm_path(), tmp_path / "st6", drop=("vocab.txt",))
    config = read_json(folder / "tokenizer_config.json")
    for key in ("do_lower_case", "strip_accents"):
        config.pop(key)
    write(folder, "tokenizer_config.json", config)
    encoder = encode_parity(folder, shared_path("reference", "all-minilm-l6-v2"))
    reference = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    reference.no_padding()
    ids, _ = encoder.preprocessor.tokenize(HARD_TEXTS)
    assert ids.to_list() == [reference.encode(t).ids for t in HARD_TEXTS]


@pytest.mark.parametrize("merges_as", ["pairs", "strings"])
def test_roberta_folder_with_only_tokenizer_json(tmp_path, merges_as):
    source = shared_path("reference", "tiny-roberta", "model")
    folder = copy_folder(source, tmp_path / "st6", drop=("vocab.json", "merges.txt"))
    tokenizer = read_json(folder / "tokenizer.json")
    merges = tokenizer["model"]["merges"]
    # Newer tokenizer.json files store [a, b] pairs, older ones "a b" strings.
    tokenizer["model"]["merges"] = (
        [list(m.split(" ")) if isinstance(m, str) else m for m in merges]
        if merges_as == "pairs"
        else [m if isinstance(m, str) else " ".join(m) for m in merges]
    )
    write(folder, "tokenizer.json", tokenizer)
    encode_parity(folder, shared_path("reference", "tiny-roberta"))


def fake_folder(tmp_path, model_type="bert", modules=None, tokenizer_model=None):
    write(tmp_path, "config.json", {"model_type": model_type})
    if modules is not None:
        write(tmp_path, "modules.json", [{"path": p, "type": t} for t, p in modules])
    if tokenizer_model is not None:
        write(tmp_path, "tokenizer.json", {"model": tokenizer_model})
    return tmp_path


def test_an_unsupported_model_type_is_a_clear_error(tmp_path):
    folder = fake_folder(tmp_path, "camembert", tokenizer_model={"type": "Unigram", "vocab": [["<s>", 0.0]]})
    with pytest.raises(ValueError, match=r"model_type='camembert' is not supported; supported: bert, ") as e:
        SentenceEncoder.from_preset(folder)
    assert str(folder / "config.json") in str(e.value) and "xlm-roberta" in str(e.value)


def test_a_unigram_tokenizer_json_not_laid_out_as_xlm_roberta_is_a_clear_error(tmp_path):
    folder = fake_folder(tmp_path, "xlm-roberta", tokenizer_model={"type": "Unigram", "vocab": [["<s>", 0.0]]})
    with pytest.raises(ValueError, match=r"tokenizer\.json: the vocabulary is not laid out as XLM-RoBERTa's"):
        SentenceEncoder.from_preset(folder)


@pytest.mark.parametrize(
    "module_type",
    [
        "sentence_transformers.models.CNN",
        "sentence_transformers.models.WordWeights",
        "sentence_transformers.base.modules.router.Router",
    ],
)
def test_unknown_module_is_named_with_its_folder(tmp_path, module_type):
    folder = fake_folder(
        tmp_path,
        modules=[
            ("sentence_transformers.models.Transformer", ""),
            ("sentence_transformers.models.Pooling", "1_Pooling"),
            (module_type, "2_Other"),
        ],
    )
    with pytest.raises(ValueError, match=re.escape(module_type)) as e:
        SentenceEncoder.from_preset(folder)
    assert "2_Other" in str(e.value) and str(folder) in str(e.value)


def test_dense_module_parity(tmp_path):
    # all-MiniLM-L6-v2 + a random 384 -> 64 tanh projection, as ST saves it in 2_Dense/.
    texts = read_json(shared_path("reference", "all-minilm-l6-v2", "texts.json"))[:40]
    plain = SentenceEncoder.from_preset(minilm_path())
    pooled = plain.encode(texts, normalize=False, show_progress=False, compute="float32")
    rng = np.random.default_rng(0)
    weight = rng.normal(scale=0.1, size=(64, 384)).astype("float32")
    bias = rng.normal(scale=0.1, size=64).astype("float32")
    folder = copy_folder(minilm_path(), tmp_path / "dense")
    write_dense(folder / "2_Dense", weight, bias)
    write(
        folder,
        "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    expected = np.tanh(pooled.astype("float64") @ weight.T + bias)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    encoder = SentenceEncoder.from_preset(folder)
    assert encoder.embedding_dim == 64 and encoder.normalize
    got = encoder.encode(texts, show_progress=False, compute="float32")
    assert np.abs(got - expected).max() <= 1e-5
    # predict (precision "auto": bf16 matmuls on a bf16 CPU) has the projection too.
    predicted = encoder.predict(texts[:4], verbose=0)
    assert (predicted * expected[:4]).sum(axis=1).min() >= 0.999
    # And the float32 Keras graph (what fit trains) matches to 1e-5.
    keras_graph = keras_hub.models.TextEmbedder.predict(encoder, np.array(texts[:4]), verbose=0)
    assert np.abs(keras_graph - expected[:4]).max() <= 1e-5


# === .keras files and preset names ===


def projected_encoder():
    base = tiny_encoder()
    projection = keras.layers.Dense(4, activation="tanh", dtype="float32", name="projection_0")
    return SentenceEncoder(base.backbone, base.preprocessor, normalize=True, projections=[projection])


def test_from_preset_accepts_a_keras_file_with_projections(tmp_path):
    encoder = projected_encoder()
    texts = ["a man is playing guitar", "the dog runs in the park"]
    expected = encoder.encode(texts, show_progress=False)
    encoder.save(tmp_path / "encoder.keras")
    loaded = SentenceEncoder.from_preset(tmp_path / "encoder.keras", sequence_length=8)
    assert loaded.embedding_dim == 4 and loaded.sequence_length == 8
    assert len(loaded.projections) == 1
    np.testing.assert_allclose(loaded.encode(texts, show_progress=False), expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"Only `sequence_length` can be changed .*encoder\.keras"):
        SentenceEncoder.from_preset(tmp_path / "encoder.keras", normalize=False)


def test_from_preset_keras_file_of_another_model(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.save(tmp_path / "other.keras")
    with pytest.raises(ValueError, match=r"other\.keras holds a Sequential"):
        SentenceEncoder.from_preset(tmp_path / "other.keras")


@pytest.fixture(scope="module")
def saved_keras(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "encoder.keras"
    tiny_encoder().save(path)
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "flipped", "text"])
def test_corrupt_keras_file_is_reported_as_corrupt(tmp_path, saved_keras, damage):
    data = bytearray(saved_keras)
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped":
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    else:
        data = b"not a model\n"
    path = tmp_path / "model.keras"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptModelError, match=r"model\.keras is corrupt"):
        SentenceEncoder.from_preset(path)


def test_missing_keras_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothere\.keras"):
        SentenceEncoder.from_preset(tmp_path / "nothere.keras")
    with pytest.raises(FileNotFoundError, match=r"no_such_folder"):
        SentenceEncoder.from_preset(tmp_path / "no_such_folder")


def test_preset_without_network_is_one_clear_error(monkeypatch):
    import requests

    def offline(*args, **kwargs):
        raise requests.exceptions.ConnectionError("Max retries exceeded (Name or service not known)")

    monkeypatch.setattr(keras_hub.models.Backbone, "from_preset", offline)
    with pytest.raises(PresetUnavailableError, match=r"'roberta_base_en'.*must be downloaded.*Offline") as e:
        SentenceEncoder.from_preset("roberta_base_en")
    assert isinstance(e.value, OSError)


def test_preset_without_network_real_hub_call():
    try:
        socket.getaddrinfo("api.kaggle.com", 443)
        pytest.skip("the network is up: this test checks the offline error")
    except OSError:
        pass
    start = time.perf_counter()
    with pytest.raises(PresetUnavailableError, match="roberta_base_en"):
        SentenceEncoder.from_preset("roberta_base_en")
    assert time.perf_counter() - start < 30


def test_projections_in_the_keras_graph_path(monkeypatch):
    # Backbones without the fused graph run the Keras graph; it projects too.
    encoder = projected_encoder()
    texts = ["a man is playing guitar", "the dog runs in the park", "red car"]
    fused = encoder.encode(texts, show_progress=False, compute="float32")
    monkeypatch.setattr(fused_support, "unsupported_reason", lambda encoder: "disabled by the test")
    fresh = projected_encoder()
    np.testing.assert_allclose(fresh.encode(texts, show_progress=False), fused, atol=1e-6)
    np.testing.assert_allclose(fresh.predict(texts, verbose=0), fused, atol=1e-6)


def test_siamese_keras_file_gives_its_encoder(tmp_path):
    model = RegressionSiamese(projected_encoder())
    model.save(tmp_path / "model.keras")
    encoder = SentenceEncoder.from_preset(tmp_path / "model.keras")
    assert isinstance(encoder, SentenceEncoder) and encoder.embedding_dim == 4
    encoder, siamese = load_encoder(str(tmp_path / "model.keras"))
    assert isinstance(siamese, RegressionSiamese) and siamese.encoder is encoder


def test_roberta_folder_with_st_lowercasing_is_a_clear_error(tmp_path):
    folder = fake_folder(tmp_path, "roberta")
    write(folder, "sentence_bert_config.json", {"do_lower_case": True})
    with pytest.raises(ValueError, match=r"sentence_bert_config\.json: do_lower_case=true"):
        SentenceEncoder.from_preset(folder)


def test_from_preset_loads_a_complete_run_folder_and_refuses_an_incomplete_one(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    encoder = tiny_encoder(normalize=True)
    encoder.save(run / "encoder.keras")
    SentenceEncoder.from_preset(run / "encoder.keras")  # a lone save is not a run
    atomic_io.write_json(run / "metrics.json", {})  # a run's files, no completion marker
    with pytest.raises(atomic_io.IncompleteOutputError, match="complete.json"):
        SentenceEncoder.from_preset(run)
    with pytest.raises(atomic_io.IncompleteOutputError):
        SentenceEncoder.from_preset(run / "encoder.keras")
    atomic_io.write_json(run / atomic_io.MARKER, {"command": "train"})
    loaded = SentenceEncoder.from_preset(run)
    np.testing.assert_allclose(
        loaded.encode(["a man"], compute="float32"), encoder.encode(["a man"], compute="float32"), atol=1e-6
    )


# === The from_preset contract: load_weights, **kwargs, save_to_preset ===

PRESET_TEXTS = ["a man is playing guitar", "the dog runs in the park", "a cat"]


def same_encoder(loaded, expected, texts=PRESET_TEXTS, atol=1e-5):
    assert type(loaded) is SentenceEncoder
    assert loaded.pooling == expected.pooling and loaded.normalize == expected.normalize
    assert [p.get_config() | {"name": None} for p in loaded.projections] == [
        p.get_config() | {"name": None} for p in expected.projections
    ]
    assert loaded.sequence_length == expected.sequence_length
    np.testing.assert_allclose(
        loaded.encode(texts, show_progress=False), expected.encode(texts, show_progress=False), atol=atol
    )


def test_save_to_preset_round_trip_of_the_tiny_encoder(tmp_path):
    encoder = projected_encoder()
    encoder.save_to_preset(tmp_path / "preset")
    assert (tmp_path / "preset" / "task.json").is_file()
    same_encoder(SentenceEncoder.from_preset(tmp_path / "preset"), encoder)


def test_the_task_config_written_by_save_to_preset_is_honoured(tmp_path):
    encoder = tiny_encoder(pooling="max", normalize=True)
    encoder.save_to_preset(tmp_path / "preset")
    assert read_json(tmp_path / "preset" / "task.json")["config"]["pooling"] == "max"
    loaded = SentenceEncoder.from_preset(tmp_path / "preset")
    assert loaded.pooling == "max" and loaded.normalize
    same_encoder(loaded, encoder)
    # kwargs override the saved task config, as in KerasHub's Task.from_preset.
    cls = SentenceEncoder.from_preset(tmp_path / "preset", pooling="cls", normalize=False, sequence_length=8)
    assert (cls.pooling, cls.normalize, cls.sequence_length) == ("cls", False, 8)
    reference = SentenceEncoder(encoder.backbone, encoder.preprocessor, pooling="cls")
    np.testing.assert_allclose(
        cls.encode(PRESET_TEXTS[:2], show_progress=False),
        reference.encode(PRESET_TEXTS[:2], show_progress=False),
        atol=1e-5,
    )


@pytest.mark.large
def test_save_to_preset_round_trip_of_minilm(tmp_path):
    encoder = SentenceEncoder.from_preset(minilm_path())
    encoder.save_to_preset(tmp_path / "minilm")
    loaded = SentenceEncoder.from_preset(tmp_path / "minilm")
    assert loaded.pooling == "mean" and loaded.normalize and loaded.sequence_length == 256
    same_encoder(loaded, encoder, texts=HARD_TEXTS + PRESET_TEXTS)


def without_names(config):
    """A config without its `name` keys (Keras numbers them per process)."""
    if isinstance(config, dict):
        return {k: without_names(v) for k, v in config.items() if k != "name"}
    if isinstance(config, (list, tuple)):
        return [without_names(v) for v in config]
    return config


def weights_differ(a, b):
    return any(not np.allclose(x, y) for x, y in zip(a.backbone.get_weights(), b.backbone.get_weights()))


def test_load_weights_false_builds_the_architecture_with_fresh_weights(tmp_path):
    encoder = projected_encoder()
    encoder.save_to_preset(tmp_path / "preset")
    fresh = SentenceEncoder.from_preset(tmp_path / "preset", load_weights=False)
    assert fresh.get_config()["projections"][0]["config"]["units"] == 4 and fresh.normalize
    assert [w.shape for w in fresh.weights] == [w.shape for w in encoder.weights]
    assert weights_differ(fresh, encoder)
    encoder.save(tmp_path / "encoder.keras")
    with pytest.raises(ValueError, match=r"`load_weights=False` cannot apply to .*encoder\.keras"):
        SentenceEncoder.from_preset(tmp_path / "encoder.keras", load_weights=False)
    with pytest.raises(TypeError, match="`load_weights` must be True or False"):
        SentenceEncoder.from_preset(tmp_path / "preset", load_weights="no")


def test_load_weights_false_for_a_sentence_transformers_folder():
    loaded = SentenceEncoder.from_preset(minilm_path())
    fresh = SentenceEncoder.from_preset(minilm_path(), load_weights=False)
    assert without_names(fresh.get_config()) == without_names(loaded.get_config())
    assert weights_differ(fresh, loaded)


def test_from_preset_dtype_takes_the_precision_vocabulary():
    encoder = SentenceEncoder.from_preset(minilm_path(), dtype="bfloat16")
    assert encoder.backbone.dtype_policy.name == "mixed_bfloat16"
    with pytest.warns(DeprecationWarning, match="use `dtype='bfloat16'`"):
        old = SentenceEncoder.from_preset(minilm_path(), dtype="mixed_bfloat16")
    assert old.backbone.dtype_policy.name == "mixed_bfloat16"
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        SentenceEncoder.from_preset(minilm_path(), dtype="int8")


def test_save_to_preset_with_a_mixed_policy_round_trips(tmp_path):
    encoder = tiny_encoder(dtype="mixed_bfloat16")
    encoder.save_to_preset(tmp_path / "preset")
    loaded = SentenceEncoder.from_preset(tmp_path / "preset", dtype="bfloat16")
    assert loaded.backbone.dtype_policy.name == "mixed_bfloat16"
    np.testing.assert_allclose(
        loaded.encode(PRESET_TEXTS, compute="float32"), encoder.encode(PRESET_TEXTS, compute="float32"), atol=1e-5
    )


def test_a_moved_preset_loader_name_fails_naming_it(tmp_path, monkeypatch):
    from keras_hub.src.utils import preset_utils

    tiny_encoder().save_to_preset(tmp_path / "preset")
    monkeypatch.delattr(preset_utils, "get_preset_loader")
    with pytest.raises(AttributeError, match=r"preset_utils\.get_preset_loader is missing .*compat/keras_hub\.py"):
        SentenceEncoder.from_preset(tmp_path / "preset")


def test_legacy_layer_norm_names_read_as_weight_and_bias():
    # Older BERT checkpoints (and BERT saved by some transformers 5 releases) name LayerNorm tensors gamma/beta.
    assert strip_prefix("bert.embeddings.LayerNorm.gamma") == "embeddings.LayerNorm.weight"
    assert strip_prefix("encoder.layer.0.output.LayerNorm.beta") == "encoder.layer.0.output.LayerNorm.bias"
    assert strip_prefix("encoder.layer.0.attention.self.query.weight") == "encoder.layer.0.attention.self.query.weight"
    assert strip_prefix("pooler.gamma") == "pooler.gamma"  # only LayerNorm tensors are renamed


@pytest.mark.parametrize(
    "keyword, message",
    [
        ("pooling_mode", r"'pooling_mode' \(sentence-transformers' name; here it is `pooling`\)"),
        ("max_seq_length", r"'max_seq_length' \(sentence-transformers' name; here it is `sequence_length`\)"),
        ("polling", r"unexpected keyword argument 'polling'; it accepts load_weights, pooling, normalize"),
    ],
)
def test_from_preset_refuses_a_keyword_it_would_not_honour(tmp_path, keyword, message):
    tiny_encoder().save(tmp_path / "encoder.keras")
    for preset in (tmp_path / "encoder.keras", "no_such_preset_en"):  # refused before anything loads
        with pytest.raises(TypeError, match=message):
            SentenceEncoder.from_preset(preset, **{keyword: "cls"})
