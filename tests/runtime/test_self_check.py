"""The self-check's probes, the check of Keras' own `quantize`, the races' table (`sbert_keras.runtime.self_check`)."""

import json
import warnings

import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import fused_support
from sbert_keras.runtime import self_check
from sbert_keras.runtime.kernels import int8_quantization


def test_float_paths_are_probed_with_random_ids_of_several_lengths():
    encoder = tiny_encoder()
    token_ids, mask = self_check.probe_batch(encoder, "float32")
    width = min(max(self_check.PROBE_LENGTHS), encoder.backbone.max_sequence_length)
    assert token_ids.shape == (len(self_check.PROBE_LENGTHS), width)
    assert sorted(set(mask.sum(1).tolist())) == sorted({min(n, width) for n in self_check.PROBE_LENGTHS})
    assert (token_ids[mask == 0] == 0).all()


def test_int8_is_probed_with_the_real_sentences_tokenised():
    encoder = tiny_encoder(sequence_length=24)
    token_ids, mask = self_check.probe_batch(encoder, "int8")
    sentences = int8_quantization.CALIBRATION_SENTENCES
    assert token_ids.shape[0] == mask.shape[0] == len(sentences)
    rows, _ = encoder.preprocessor.tokenize(list(sentences))
    for i, row in enumerate(rows.to_list()):
        assert mask[i].sum() == len(row)
        np.testing.assert_array_equal(token_ids[i, : len(row)], row)
        assert (token_ids[i, len(row) :] == encoder.preprocessor.tokenizer.pad_token_id).all()


def test_quantization_check_warns_when_the_vectors_move_away():
    encoder = tiny_encoder()
    check = self_check.QuantizationCheck(encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check.passes("int8")  # nothing changed
    rng = np.random.default_rng(1)
    for variable in encoder.backbone.transformer_layers[-1].weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    with pytest.warns(UserWarning, match=r"quantize\('int8'\) moved the vectors of '.*' .*min cosine = .* 0\.99"):
        assert not check.passes("int8")


def test_keras_quantize_is_checked_and_warns_about_no_layer_it_skips():
    encoder = tiny_encoder(normalize=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encoder.quantize("int8")
    assert not [w for w in caught if "does not have a `quantize` method" in str(w.message)]
    moved = [w for w in caught if "moved the vectors" in str(w.message)]
    assert isinstance(encoder.quantization_passed, bool) and bool(moved) != encoder.quantization_passed
    parts = fused_support.block_sublayers(encoder.backbone.transformer_layers[0])
    assert parts.intermediate.quantization_mode == "int8"


def timed(measured, won):
    """A race's `measure`: records that it ran, returns `won`."""
    return lambda: measured.append(won) or won


def test_a_race_is_timed_again_a_while_later_where_that_is_cheap_until_two_timings_agree(monkeypatch, tmp_path):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    encoder, measured, name = tiny_encoder(seed=6), [], "a>b:32"
    table = self_check.VerdictTable(encoder)
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (1e9, 1e9))
    assert table.race(name, "bfloat16", timed(measured, True), again=lambda: True)  # too soon to time again
    assert measured == [True] and not table.settled(name, "bfloat16")
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 1e9))
    assert table.race(name, "bfloat16", timed(measured, False), again=lambda: False)  # not cheap now: it stands
    assert measured == [True] and not table.settled(name, "bfloat16")
    assert not table.race(name, "bfloat16", timed(measured, False), again=lambda: True)  # they disagree: lost
    assert measured == [True, False] and not table.settled(name, "bfloat16")
    assert not table.race(name, "bfloat16", timed(measured, True), again=lambda: True)  # the third waits longer
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 0.0))
    assert table.race(name, "bfloat16", timed(measured, True), again=lambda: True)  # the third decides
    assert measured == [True, False, True] and table.settled(name, "bfloat16")
    assert table.race(name, "bfloat16", timed(measured, False), again=lambda: True)  # settled: no fourth
    assert table.get(name, "bfloat16") is True and table.timings(name, "bfloat16") == [True, False, True]
    # A loss is timed again too: two losses settle it, and a loss then a win stand lost until a third.
    for race, results in [("a>b:64", [False, False, True]), ("a>b:48", [False, True, False])]:
        assert [table.race(race, "bfloat16", timed(measured, r), again=lambda: True) for r in results] == [False] * 3
        assert table.settled(race, "bfloat16") and table.get(race, "bfloat16") is False
    assert measured[3:] == [False, False, False, True, False]
    # Without `again`, one timing stands.
    assert not table.race("a>b:one", "bfloat16", timed(measured, False))
    assert not table.race("a>b:one", "bfloat16", timed(measured, True)) and len(measured) == 9
    (stored,) = (tmp_path / "verdicts").iterdir()
    stored = json.loads(stored.read_text())
    assert [stored[f"{self_check.AGAIN * i}{name}/bfloat16"] for i in range(3)] == [True, False, True]

    later = self_check.VerdictTable(encoder)  # a later process: every timing from disk, nothing timed
    assert later.race(name, "bfloat16", timed(measured, False), again=lambda: True)
    assert later.settled(name, "bfloat16") and later.settled("a>b:48", "bfloat16")
    assert not later.race("a>b:48", "bfloat16", timed(measured, True), again=lambda: True)
    assert later.get("a>b:one", "bfloat16") is None and not later.race("a>b:one", "bfloat16", timed(measured, True))
    assert len(measured) == 9 and later.get("a>b:one", "bfloat16") is False


def test_a_race_stored_by_an_earlier_process_is_timed_again_in_a_later_one(monkeypatch, tmp_path):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    encoder, measured = tiny_encoder(seed=7), []
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (1e9, 1e9))
    assert not self_check.VerdictTable(encoder).race("a>b:128", "float32", timed(measured, False), again=lambda: True)
    second = self_check.VerdictTable(encoder)  # too soon after the file was written: the loss stands
    assert not second.race("a>b:128", "float32", timed(measured, True), again=lambda: True) and measured == [False]
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 1e9))  # the file is older than the first wait
    later = self_check.VerdictTable(encoder)
    assert not later.race("a>b:128", "float32", timed(measured, True), again=lambda: True)  # a loss, then a win
    assert measured == [False, True] and not later.settled("a>b:128", "float32")
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 0.0))  # and than the second
    third = self_check.VerdictTable(encoder)  # reads both timings: a third decides
    assert third.race("a>b:128", "float32", timed(measured, True), again=lambda: True)
    assert measured == [False, True, True] and third.settled("a>b:128", "float32")
    fourth = self_check.VerdictTable(encoder)  # reads all three: settled, nothing timed
    assert fourth.race("a>b:128", "float32", timed(measured, False), again=lambda: True) and len(measured) == 3
