"""The single-query path: one short text through the XLA-compiled float32 fused graph."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from conftest import ROOT
from conftest import tiny_encoder
from sbert_keras.runtime import fused_support
from sbert_keras.runtime.routes import xla_query

SHORT = "a man is playing guitar"
XLA = xla_query.XlaQueryRoute.name


def test_one_short_text_takes_the_compiled_graph_and_matches_float32():
    encoder = tiny_encoder(normalize=True)
    batch = encoder.encode([SHORT, "a dog"], compute="float32")
    for precision in ("float32", "bfloat16", "auto"):
        single = encoder.encode([SHORT], compute=precision)
        np.testing.assert_allclose(single[0], batch[0], atol=1e-5)  # float32 even when batches run bfloat16
    assert encoder.engine.verdicts.get(XLA, "float32") is True
    assert ("xla", "float32") in encoder.engine.graphs.functions


def test_long_or_several_texts_take_the_usual_graph():
    encoder = tiny_encoder(sequence_length=64)
    encoder.encode([SHORT, SHORT], compute="float32")
    assert encoder.engine.verdicts.get(XLA, "float32") is None  # never asked: no single short text yet
    long_text = "the cat " * 40
    assert int(encoder.preprocessor.tokenize([long_text])[0].row_lengths()[0]) > xla_query.MAX_TOKENS
    alone = encoder.encode([long_text], compute="float32")
    np.testing.assert_allclose(alone[0], encoder.encode([long_text, SHORT], compute="float32")[0], atol=1e-5)


def test_follows_changed_weights():
    encoder = tiny_encoder()
    before = encoder.encode([SHORT], compute="bfloat16")
    kernel = fused_support.block_sublayers(encoder.backbone.transformer_layers[-1]).intermediate.kernel
    kernel.assign_add(np.random.default_rng(0).normal(size=kernel.shape).astype("float32"))
    after = encoder.encode([SHORT], compute="bfloat16")
    reference = encoder.encode([SHORT, "a dog"], compute="float32")[0]
    assert np.abs(after[0] - before[0]).max() > 1e-3
    np.testing.assert_allclose(after[0], reference, atol=1e-5)


def test_a_wrong_compiled_graph_warns_and_is_not_used(monkeypatch):
    encoder = tiny_encoder()
    reference = encoder.encode([SHORT, "a dog"], compute="float32")[0]
    compiled = xla_query.XlaQueryRoute.compiled

    def corrupted(self):
        run = compiled(self)
        return lambda token_ids, mask: run(token_ids, mask) + 0.5

    monkeypatch.setattr(xla_query.XlaQueryRoute, "compiled", corrupted)
    with pytest.warns(UserWarning, match="single-query graph .* diverges"):
        out = encoder.encode([SHORT], compute="float32")
    assert encoder.engine.verdicts.get(XLA, "float32") is False
    np.testing.assert_allclose(out[0], reference, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder.encode([SHORT], compute="float32")  # warned once


def test_pad_to_bucket_is_bounded_by_the_model_length():
    ids = np.ones((1, 5), "int32")
    padded, mask = xla_query.pad_to_bucket(ids, ids, 0, max_length=12)
    assert padded.shape == (1, 12) and int(mask.numpy().sum()) == 5
    padded, _ = xla_query.pad_to_bucket(np.ones((1, 17), "int32"), np.ones((1, 17), "int32"), 0, max_length=512)
    assert padded.shape == (1, 32)
    assert not bool(xla_query.fits(np.ones((2, 3), "int32"), 512))
    assert not bool(xla_query.fits(np.ones((1, 33), "int32"), 512))


# In a fresh process (XLA reads XLA_FLAGS once): how many programs XLA compiled after the check, and after a query.
COMPILES = """
import pathlib, sys
sys.path.insert(0, "tests")
import conftest
from sbert_keras.runtime import route_choice
route_choice.race = lambda runner, rival, queries=None, batch=None: True
dump = pathlib.Path(sys.argv[1])
encoder = conftest.tiny_encoder()
assert encoder.engine.check("float32", "xla")
checked = len(list(dump.glob("*before_optimizations.txt")))
encoder.encode(["a man is playing guitar"])
print(checked, len(list(dump.glob("*before_optimizations.txt"))))
"""


def test_the_first_query_reuses_the_programs_the_check_compiled(tmp_path):
    # An eager call and a call from a graph do not share XLA's programs: a check that called the
    # compiled graph eagerly left the first query to compile each bucket again.
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={tmp_path}", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", COMPILES, str(tmp_path)], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    checked, queried = map(int, result.stdout.split()[-2:])
    assert checked >= 1 and queried == checked
