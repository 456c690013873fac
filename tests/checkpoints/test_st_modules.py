"""sentence-transformers modules: `modules.json` checks and `Dense` projections."""

import json
import math
import warnings

import numpy as np
import pytest

from conftest import read_json
from sbert_keras import SentenceEncoder
from sbert_keras.checkpoints.st_modules import load_dense_module
from sbert_keras.checkpoints.st_modules import read_prompts
from sbert_keras.checkpoints.st_modules import read_sentence_transformers_settings
from sbert_keras.checkpoints.st_modules import text_preprocessing
from utils.test_model_files import tiny_roberta


def write(folder, name, content):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))


def test_modules_in_an_unsupported_order(tmp_path):
    write(
        tmp_path,
        "modules.json",
        [
            {"path": path, "type": f"sentence_transformers.models.{kind}"}
            for kind, path in [
                ("Transformer", ""),
                ("Pooling", "1_Pooling"),
                ("Normalize", "2_Normalize"),
                ("Dense", "3_Dense"),
            ]
        ],
    )
    with pytest.raises(ValueError, match="order"):
        read_sentence_transformers_settings(str(tmp_path))


def write_dense(folder, weight, bias, activation="torch.nn.modules.activation.Tanh"):
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    write(
        folder,
        "config.json",
        {
            "in_features": weight.shape[1],
            "out_features": weight.shape[0],
            "bias": True,
            "activation_function": activation,
        },
    )
    save_file({"linear.weight": weight, "linear.bias": bias}, str(folder / "model.safetensors"))


@pytest.mark.parametrize(
    "activation, fn",
    [
        ("Tanh", np.tanh),
        ("Identity", lambda x: x),
        ("ReLU", lambda x: np.maximum(x, 0)),
        ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("GELU", lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    ],
)
def test_dense_module_activations(tmp_path, activation, fn):
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(size=(3, 5)).astype("float32"), rng.normal(size=3).astype("float32")
    write_dense(tmp_path, weight, bias, f"torch.nn.modules.activation.{activation}")
    layer = load_dense_module(str(tmp_path), 5, "projection_0")
    x = rng.normal(size=(4, 5)).astype("float32")
    np.testing.assert_allclose(np.asarray(layer(x)), fn(x @ weight.T + bias), atol=1e-5)


def test_dense_module_without_bias(tmp_path):
    from safetensors.numpy import save_file

    weight = np.arange(6, dtype="float32").reshape(2, 3) / 10
    write(
        tmp_path,
        "config.json",
        {
            "in_features": 3,
            "out_features": 2,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
            "module_input_name": "sentence_embedding",
        },
    )
    save_file({"linear.weight": weight}, str(tmp_path / "model.safetensors"))
    layer = load_dense_module(str(tmp_path), 3, "p")
    x = np.ones((1, 3), "float32")
    assert layer.bias is None
    np.testing.assert_allclose(np.asarray(layer(x)), x @ weight.T, atol=1e-6)


def test_dense_module_errors_name_the_file(tmp_path):
    weight, bias = np.ones((3, 5), "float32"), np.zeros(3, "float32")
    write_dense(tmp_path / "a", weight, bias, "torch.nn.modules.activation.Softplus")
    with pytest.raises(ValueError, match=r"Softplus.*supported"):
        load_dense_module(str(tmp_path / "a"), 5, "p")
    write_dense(tmp_path / "b", weight, bias)
    with pytest.raises(ValueError, match=r"linear\.weight has shape \[3, 5\].*receives 4"):
        load_dense_module(str(tmp_path / "b"), 4, "p")
    config = read_json(tmp_path / "b" / "config.json")
    write(tmp_path / "b", "config.json", dict(config, module_input_name="token_embeddings"))
    with pytest.raises(ValueError, match=r"module_input_name='token_embeddings'"):
        load_dense_module(str(tmp_path / "b"), 5, "p")
    write(tmp_path / "b", "config.json", config)
    (tmp_path / "b" / "model.safetensors").rename(tmp_path / "b" / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model\.bin"):
        load_dense_module(str(tmp_path / "b"), 5, "p")


def test_text_preprocessing_lowercase_and_prompts_read_not_warned(tmp_path):
    assert not text_preprocessing(str(tmp_path))
    write(tmp_path, "sentence_bert_config.json", {"max_seq_length": 64, "do_lower_case": True})
    assert text_preprocessing(str(tmp_path))
    # A default prompt is no longer warned about: the encoder applies it (tests/model/test_prompts.py).
    write(
        tmp_path, "config_sentence_transformers.json", {"prompts": {"query": "query: "}, "default_prompt_name": "query"}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert text_preprocessing(str(tmp_path))
    assert read_prompts(str(tmp_path)) == ({"query": "query: "}, "query")


def test_a_declared_pooling_module_without_its_config_is_refused(tmp_path):
    # It used to load as mean pooling; the module may be CLS or max pooling.
    folder = tiny_roberta(tmp_path)
    (folder / "1_Pooling" / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"modules\.json declares a Pooling module in '1_Pooling'") as e:
        SentenceEncoder.from_preset(folder)
    assert str(folder / "1_Pooling" / "config.json") in str(e.value)
    # A plain Hugging Face folder (no modules.json) declares no pooling and still defaults to mean.
    (folder / "modules.json").unlink()
    assert read_sentence_transformers_settings(str(folder))["pooling"] is None


@pytest.mark.parametrize("path", ["../2_Dense", "/tmp/2_Dense", 3])
def test_module_paths_must_stay_inside_the_folder(tmp_path, path):
    modules = [
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"path": path, "type": "sentence_transformers.models.Dense"},
    ]
    write(tmp_path / "model", "modules.json", modules)
    write(tmp_path / "model", "1_Pooling/config.json", {"pooling_mode": "cls"})
    with pytest.raises(ValueError, match=r"modules\.json: module 3"):
        read_sentence_transformers_settings(str(tmp_path / "model"))
