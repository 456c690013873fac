"""Cold start: the status line, `warmup`, verdicts and converted models cached across processes, XLA's disk cache."""

import os
import re

import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import self_check

TEXTS = ["a man is playing guitar", "the cat sleeps on the sofa"]


def test_the_first_call_says_what_it_prepares_and_later_calls_are_quiet(capsys):
    encoder = tiny_encoder()
    encoder.encode(TEXTS[0], compute="float32")
    err = capsys.readouterr().err
    assert re.search(r"preparing '\w+' for float32 inference", err) and "ready in" in err
    encoder.encode(TEXTS, compute="float32")
    assert "preparing" not in capsys.readouterr().err
    encoder.encode(TEXTS, compute="bfloat16", show_progress=False)
    assert "preparing" not in capsys.readouterr().err


def test_warmup_does_the_first_use_work_ahead(capsys):
    encoder = tiny_encoder()
    seconds = encoder.warmup("float32")
    assert seconds > 0 and "ready in" in capsys.readouterr().err
    assert encoder.engine.check("float32") is not None and "float32" in encoder.engine.prepared
    assert encoder.engine.verdicts.get("xla", "float32") is not None  # the single-query path was checked
    single = encoder.encode(TEXTS[0], compute="float32")
    assert capsys.readouterr().err == ""
    np.testing.assert_allclose(single, encoder.encode(TEXTS, compute="float32")[0], atol=1e-5)
    assert encoder.warmup("float32", verbose=False) >= 0


def test_verdicts_are_reused_by_a_later_encoder_with_the_same_weights(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    first = tiny_encoder(seed=4)
    expected = first.encode(TEXTS, compute="float32")
    (stored,) = (tmp_path / "verdicts").iterdir()
    assert '"fused/float32": true' in stored.read_text()

    def no_probe(*args, **kwargs):
        raise AssertionError("the self-check ran again")

    monkeypatch.setattr(self_check, "probe_check", no_probe)
    again = tiny_encoder(seed=4)  # a new process would build the same model
    np.testing.assert_allclose(again.encode(TEXTS, compute="float32"), expected, atol=1e-6)
    assert again.engine.plan("float32") == ("fused", "float32")

    other = tiny_encoder(seed=5)  # other weights: another key, so it is checked
    with pytest.raises(AssertionError, match="ran again"):
        other.encode(TEXTS, compute="float32")


def test_the_verdict_key_follows_every_weight_element(monkeypatch):
    monkeypatch.setattr(cold_start, "KEY_SAMPLES", 2)  # a few elements' bits, and the sum of all
    encoder = tiny_encoder(seed=8)
    key = cold_start.model_key(encoder)
    assert cold_start.model_key(tiny_encoder(seed=8)) == key
    variable = max(encoder.weights, key=lambda v: int(np.prod(v.shape)))
    values = variable.numpy()
    values.reshape(-1)[1] += 1e-3  # one element, not a sampled one
    variable.assign(values)
    assert cold_start.model_key(encoder) != key


def test_the_status_line_says_the_work_is_kept_for_later_processes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    tiny_encoder(seed=9).encode(TEXTS[0], compute="float32")
    (doing, done) = capsys.readouterr().err.splitlines()
    assert str(tmp_path) in doing and "later processes" in doing
    assert re.fullmatch(r"sbert_keras: '\w+' ready in \d+\.\d s", done)


def test_a_stored_failure_warns_and_keeps_the_keras_graph(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    encoder = tiny_encoder(seed=6)
    cold_start.VerdictCache(encoder).put("fused", "float32", False)
    with pytest.warns(UserWarning, match="failed its self-check on this machine before"):
        assert encoder.engine.plan("float32") == ("keras", "float32")


def test_an_unusable_cache_is_ignored(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cold_start.CACHE_ENV, str(blocker))
    encoder = tiny_encoder(seed=7)
    assert encoder.encode(TEXTS, compute="float32").shape == (2, 8)


def converter(calls, data=b"flatbuffer"):
    """A `convert` callable that counts its calls in `calls`."""

    def convert():
        calls.append(data)
        return data

    return convert


def test_a_converted_model_is_kept_for_a_later_encoder_with_the_same_weights(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    calls = []
    assert cold_start.converted_model(tiny_encoder(seed=10), "int8", converter(calls)) == b"flatbuffer"
    (stored,) = (tmp_path / "converted").iterdir()
    assert re.fullmatch(r"[0-9a-f]{64}-int8-[0-9a-f]{64}", stored.name)
    assert cold_start.converted_model(tiny_encoder(seed=10), "int8", converter(calls)) == b"flatbuffer"
    assert len(calls) == 1  # read back, not converted
    cold_start.converted_model(tiny_encoder(seed=10), "other kind", converter(calls))
    cold_start.converted_model(tiny_encoder(seed=11), "int8", converter(calls))
    assert len(calls) == 3 and len(list((tmp_path / "converted").iterdir())) == 3


def test_a_cut_short_converted_model_is_converted_again(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    encoder, calls = tiny_encoder(seed=12), []
    cold_start.converted_model(encoder, "int8", converter(calls))
    (stored,) = (tmp_path / "converted").iterdir()
    stored.write_bytes(b"flatbuf")
    assert cold_start.converted_model(encoder, "int8", converter(calls)) == b"flatbuffer"
    assert len(calls) == 2 and stored.read_bytes() == b"flatbuffer"


def test_only_the_most_recently_used_converted_models_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cold_start, "CONVERTED_KEPT", 2)
    encoder, calls = tiny_encoder(seed=13), []
    for kind in ["a", "b", "c"]:
        cold_start.converted_model(encoder, kind, converter(calls, data=kind.encode()))
        for path in (tmp_path / "converted").iterdir():  # older files: older times, whatever the clock's grain
            os.utime(path, (path.stat().st_atime - 10, path.stat().st_mtime - 10))
    kinds = sorted(path.name.split("-")[1] for path in (tmp_path / "converted").iterdir())
    assert kinds == ["b", "c"]


def test_without_a_usable_cache_the_model_is_converted_each_time(tmp_path, monkeypatch):
    encoder, calls = tiny_encoder(seed=14), []
    monkeypatch.setenv(cold_start.CACHE_ENV, "")
    cold_start.converted_model(encoder, "int8", converter(calls))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cold_start.CACHE_ENV, str(blocker))
    assert cold_start.converted_model(encoder, "int8", converter(calls)) == b"flatbuffer"
    cold_start.converted_model(encoder, "int8", converter(calls))
    assert len(calls) == 3


def test_the_xla_cache_is_set_unless_the_user_set_one_or_turned_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    cold_start.enable_xla_cache()
    assert os.environ["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path / 'xla'}"
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_persistent_cache_directory=/mine")
    cold_start.enable_xla_cache()
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_persistent_cache_directory=/mine"
    monkeypatch.setenv(cold_start.CACHE_ENV, "")
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    cold_start.enable_xla_cache()
    assert os.environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=0"
