"""benchmarks/sts_ceiling.py: both modes end to end on the tiny encoder."""

import argparse
import json
import sys

import numpy as np
import pytest

from conftest import ROOT
from conftest import tiny_encoder
from sbert_keras.data import examples

sys.path.insert(0, str(ROOT / "benchmarks"))
import sts_ceiling  # noqa: E402

from benchmarks.test_recipes import SENTENCES  # noqa: E402


def pairs():
    scores = np.random.default_rng(0).uniform(0, 5, len(SENTENCES) * 2).astype("float32")
    return examples.SentencePairs(SENTENCES * 2, SENTENCES[1:] + SENTENCES[:1] + SENTENCES[3:] + SENTENCES[:3], scores)


def args(**overrides):
    settings = dict(objective="regression", epochs=2, learning_rate=2e-5, seed=0, batching=None, clip=1.0, runs=2)
    return argparse.Namespace(**{**settings, **overrides})


def test_epochs_mode_scores_every_epoch_with_clipping():
    (row,) = sts_ceiling.mode_epochs(args(), tiny_encoder(normalize=True), pairs(), pairs())
    assert len(row["dev_spearman_by_epoch"]) == 2 and len(row["loss_by_epoch"]) == 2
    assert all(np.isfinite(row["dev_spearman_by_epoch"])) and row["clip"] == 1.0 and row["optimizer"] == "Adam"
    json.dumps(row)


@pytest.mark.large
def test_soup_mode_averages_runs_then_interpolates():
    encoder = tiny_encoder(normalize=True)
    start = [np.array(w) for w in encoder.get_weights()]
    rows = list(sts_ceiling.mode_soup(args(), encoder, pairs(), pairs()))
    assert [r.get("run_seed") for r in rows[:3]] == [0, 1, None] and rows[2]["soup_of"] == 2
    wise = [r for r in rows if r["mode"] == "wise-ft"]
    assert [r["alpha"] for r in wise] == list(sts_ceiling.WISE_ALPHAS)
    assert all(np.isfinite(r["dev_spearman"]) for r in rows)
    # The last rows set alpha * soup + (1 - alpha) * start: not the start weights.
    assert any(np.abs(a - b).max() > 0 for a, b in zip(encoder.get_weights(), start))


def test_cross_encoder_mode_trains_on_pairs_and_scores_dev():
    encoder = tiny_encoder(normalize=True)
    start = [np.array(w) for w in encoder.get_weights()]
    rows = list(sts_ceiling.mode_cross_encoder(args(epochs=2), encoder, pairs(), pairs()))
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all(np.isfinite(r["dev_spearman"]) and np.isfinite(r["loss"]) for r in rows)
    # The cross-encoder trains the encoder's own backbone.
    assert any(np.abs(a - b).max() > 0 for a, b in zip(encoder.get_weights(), start))
    json.dumps(rows)


def test_pair_batches_join_both_sentences_once():
    encoder = tiny_encoder()
    ((token_ids, mask), labels), *_ = sts_ceiling.pair_batches(
        encoder.preprocessor, ["a cat"], ["a dog sleeps"], np.array([5.0])
    )
    one, _ = encoder.preprocessor.tokenize(["a cat"])
    two, _ = encoder.preprocessor.tokenize(["a dog sleeps"])
    expected = list(one[0].numpy()) + list(two[0].numpy()[1:])  # b's start token dropped
    assert list(token_ids[0]) == expected and mask.sum() == len(expected) and labels[0] == 1.0
