"""Prompts (`encode(prompt=, prompt_name=)`, `encode_query`, `encode_document`) and `truncate_dim`."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import minilm_path
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras import export_saved_model
from sbert_keras.checkpoints.st_modules import read_prompts
from sbert_keras.checkpoints.st_modules import read_sentence_transformers_settings
from sbert_keras.cli import parser
from sbert_keras.model.prompts import check_prompts
from sbert_keras.model.prompts import resolve_prompt

TEXTS = ["a man is playing guitar", "the cat sleeps", "", "a dog runs in the park"]
PROMPTS = {"query": "the sky ", "document": "a ball ", "cls": "red car "}
F32 = {"compute": "float32"}


def prompted(default=None, normalize=True):
    encoder = tiny_encoder(normalize=normalize)
    encoder.set_prompts(PROMPTS, default)
    return encoder


def close(a, b, atol=1e-6):
    np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def test_prompt_is_prepended_and_wins_over_prompt_name():
    encoder = prompted()
    plain = encoder.encode(["red car " + t for t in TEXTS], compute="float32")
    close(encoder.encode(TEXTS, prompt_name="cls", compute="float32"), plain)
    close(encoder.encode(TEXTS, prompt="red car ", prompt_name="query", compute="float32"), plain)
    assert np.abs(encoder.encode(TEXTS, compute="float32") - plain).max() > 1e-3  # a prompt changes vectors
    close(encoder.encode(TEXTS[0], prompt_name="cls", compute="float32"), plain[0])  # one string


def test_default_prompt_applies_unless_overridden():
    encoder = prompted(default="cls")
    plain = encoder.encode(TEXTS, prompt="", compute="float32")
    with_default = encoder.encode(["red car " + t for t in TEXTS], prompt="", compute="float32")
    close(encoder.encode(TEXTS, compute="float32"), with_default)
    close(encoder.encode(TEXTS, prompt="", compute="float32"), plain)
    close(
        encoder.predict(TEXTS), encoder.encode(TEXTS), atol=1e-5
    )  # both "auto" compute  # predict on strings: encode's default too


def test_encode_query_and_encode_document_pick_their_prompts():
    encoder = prompted(default="cls")
    for method, prefix in ((encoder.encode_query, "the sky "), (encoder.encode_document, "a ball ")):
        close(method(TEXTS, **F32), encoder.encode([prefix + t for t in TEXTS], prompt="", **F32))
        close(method(TEXTS, prompt="blue ", **F32), encoder.encode(["blue " + t for t in TEXTS], prompt="", **F32))
    # sentence-transformers 5's document order: "document", then "passage", then "corpus".
    encoder.set_prompts({"corpus": "the ", "passage": "a "}, None)
    close(encoder.encode_document(TEXTS, **F32), encoder.encode(["a " + t for t in TEXTS], **F32))
    # Without a query / document prompt: no prompt, not the default one (sentence-transformers 6).
    encoder.set_prompts({"cls": "red car "}, "cls")
    close(encoder.encode_query(TEXTS, **F32), encoder.encode(TEXTS, prompt="", **F32))
    close(encoder.encode_document(TEXTS, **F32), encoder.encode(TEXTS, prompt="", **F32))


def test_bad_prompts_are_named():
    encoder = prompted()
    with pytest.raises(ValueError, match=r"'nope'.*\['query', 'document', 'cls'\]"):
        encoder.encode(TEXTS, prompt_name="nope")
    with pytest.raises(TypeError, match="`prompt` must be a string"):
        encoder.encode(TEXTS, prompt=3)
    with pytest.raises(ValueError, match="`default_prompt_name` 'x' is not one of the prompts"):
        check_prompts({"query": "q: "}, "x")
    with pytest.raises(TypeError, match="prompt 'query'"):
        check_prompts({"query": 1}, None)
    assert check_prompts({"query": None}, "query") == {"query": ""}
    assert resolve_prompt({}, None) is None
    with pytest.raises(ValueError, match=r"`texts\[1\]` is None"):  # items are checked before the prompt
        encoder.encode(["a", None], prompt="q: ")


def test_truncate_dim_cuts_then_renormalises():
    encoder = prompted(normalize=True)
    raw = encoder.encode(TEXTS, normalize=False, compute="float32")
    cut = encoder.encode(TEXTS, truncate_dim=3, compute="float32")
    assert cut.shape == (len(TEXTS), 3)
    close(cut, raw[:, :3] / np.linalg.norm(raw[:, :3], axis=1, keepdims=True))
    close(np.linalg.norm(cut, axis=1), 1.0)
    close(encoder.encode(TEXTS, truncate_dim=3, normalize=False, compute="float32"), raw[:, :3])
    close(encoder.encode(TEXTS, truncate_dim=8, compute="float32"), encoder.encode(TEXTS, compute="float32"))
    assert encoder.encode(TEXTS[0], truncate_dim=2).shape == (2,)
    # Many texts (the batched path, not the one-call query path) truncate the same way.
    many = TEXTS * 20
    close(encoder.encode(many, batch_size=4, truncate_dim=3, compute="float32")[: len(TEXTS)], cut, atol=1e-5)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (9, ValueError), (2.0, TypeError), (True, TypeError)])
def test_bad_truncate_dim_is_named(bad, error):
    with pytest.raises(error, match="truncate_dim"):
        tiny_encoder().encode(TEXTS, truncate_dim=bad)


def test_prompts_round_trip_through_keras_and_presets(tmp_path):
    encoder = prompted(default="query")
    path = os.path.join(tmp_path, "encoder.keras")
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert restored.prompts == PROMPTS and restored.default_prompt_name == "query"
    close(restored.encode(TEXTS, **F32), encoder.encode(TEXTS, **F32), atol=1e-5)
    encoder.save_to_preset(str(tmp_path / "preset"))
    preset = SentenceEncoder.from_preset(str(tmp_path / "preset"))
    assert preset.prompts == PROMPTS and preset.default_prompt_name == "query"
    assert encoder.get_config()["prompts"] == PROMPTS


def test_read_prompts_from_a_sentence_transformers_config(tmp_path):
    assert read_prompts(str(tmp_path)) == ({}, None)
    config = {"prompts": {"query": "query: ", "document": None}, "default_prompt_name": "query"}
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps(config))
    assert read_prompts(str(tmp_path)) == ({"query": "query: ", "document": ""}, "query")
    config["default_prompt_name"] = "passage"
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config_sentence_transformers\.json.*'passage'"):
        read_prompts(str(tmp_path))


def test_export_prepends_the_prompt_and_truncates_in_the_graph(tmp_path):
    encoder = prompted(default="cls", normalize=True)
    exports = {
        "default": ({}, {}),
        "query_cut": ({"prompt_name": "query", "truncate_dim": 5}, {"prompt": "the sky ", "truncate_dim": 5}),
        "none": ({"prompt": ""}, {"prompt": ""}),
    }
    for name, (options, _) in exports.items():
        export_saved_model(encoder, str(tmp_path / name), compute="float32", batch_size=2, **options)
    for name, (options, encode_options) in exports.items():
        serve = tf.saved_model.load(str(tmp_path / name)).signatures["serving_default"]
        served = serve(text=tf.constant(TEXTS))["embeddings"].numpy()
        close(served, encoder.encode(TEXTS, compute="float32", **encode_options), atol=1e-5)
        marker = json.loads((tmp_path / name / "complete.json").read_text())
        assert marker["prompt"] == encoder.resolve_prompt(**{k: v for k, v in options.items() if "prompt" in k})
        assert marker["truncate_dim"] == options.get("truncate_dim")
    with pytest.raises(ValueError, match="truncate_dim"):
        export_saved_model(encoder, str(tmp_path / "bad"), truncate_dim=100)


def test_minilm_folder_prompts_apply(tmp_path):
    folder = tmp_path / "minilm"
    shutil.copytree(minilm_path(), folder)
    config = {"prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": None}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    encoder = SentenceEncoder.from_preset(str(folder))
    assert encoder.prompts == config["prompts"]
    texts = ["How many people live in Berlin?", "Berlin has 3.5 million inhabitants."]
    options = {"compute": "float32"}
    close(encoder.encode_query(texts, **options), encoder.encode(["query: " + t for t in texts], **options))
    close(encoder.encode_document(texts, **options), encoder.encode(["passage: " + t for t in texts], **options))
    close(encoder.encode(texts, **options), encoder.encode(texts, prompt="", **options))  # no default prompt
    cut = encoder.encode_query(texts, truncate_dim=128, **options)
    full = encoder.encode(["query: " + t for t in texts], **options)
    close(cut, full[:, :128] / np.linalg.norm(full[:, :128], axis=1, keepdims=True))


def run_cli(capsys, *argv):
    code = parser.main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_cli_encode_and_export_take_prompt_flags(capsys, tmp_path):
    encoder = prompted(default="cls")
    model = tmp_path / "tiny.keras"
    encoder.save(model)
    lines = tmp_path / "texts.txt"
    lines.write_text("\n".join(TEXTS[:2]) + "\n")
    base = ["encode", "--model", model, "--input", lines, "--compute", "float32"]
    run_cli(capsys, *base, "--output", tmp_path / "default.npy")
    run_cli(capsys, *base, "--output", tmp_path / "q.npy", "--prompt-name", "query", "--truncate-dim", 4)
    run_cli(capsys, *base, "--output", tmp_path / "p.npy", "--prompt", "blue ")
    close(np.load(tmp_path / "default.npy"), encoder.encode(TEXTS[:2], **F32), atol=1e-5)
    close(np.load(tmp_path / "q.npy"), encoder.encode_query(TEXTS[:2], truncate_dim=4, **F32), atol=1e-5)
    close(np.load(tmp_path / "p.npy"), encoder.encode(TEXTS[:2], prompt="blue ", **F32), atol=1e-5)
    out = run_cli(
        capsys, "export", "--model", model, "--output", tmp_path / "sm", "--prompt-name", "query", "--truncate-dim", 4
    )
    assert out["output"] == "embeddings: float32[None, 4]" and out["prompt"] == "the sky "
    assert (
        parser.main(
            [
                "encode",
                "--model",
                str(model),
                "--input",
                str(lines),
                "--output",
                str(tmp_path / "x.npy"),
                "--prompt-name",
                "nope",
            ]
        )
        == 2
    )
    assert "'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --prompt and --prompt-name together: a usage error
        parser.main([*map(str, base), "--output", "y.npy", "--prompt", "a", "--prompt-name", "query"])


def test_pooling_without_the_prompt_is_warned_about(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    config = {"pooling_mode": "mean", "include_prompt": False}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match=r"1_Pooling.config\.json: include_prompt=false"):
        assert read_sentence_transformers_settings(str(tmp_path))["pooling"] == "mean"
