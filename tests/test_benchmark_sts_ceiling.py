"""benchmarks/sts_ceiling.py: both modes end to end on the tiny encoder."""

import argparse
import json
import sys

import numpy as np

from conftest import ROOT
from conftest import tiny_encoder
from sbert_keras import data

sys.path.insert(0, str(ROOT / "benchmarks"))
import sts_ceiling  # noqa: E402

from test_benchmark_recipes import SENTENCES  # noqa: E402


def pairs():
    scores = np.random.default_rng(0).uniform(0, 5, len(SENTENCES) * 2).astype("float32")
    return data.SentencePairs(SENTENCES * 2, SENTENCES[1:] + SENTENCES[:1] + SENTENCES[3:] + SENTENCES[:3], scores)


def args(**overrides):
    settings = dict(objective="regression", epochs=2, learning_rate=2e-5, seed=0, batching=None, clip=1.0, runs=2)
    return argparse.Namespace(**{**settings, **overrides})


def test_epochs_mode_scores_every_epoch_with_clipping(monkeypatch):
    from sbert_keras import training

    monkeypatch.setattr(training, "paper_optimizer", training.paper_optimizer)  # restored after the test
    (row,) = sts_ceiling.mode_epochs(args(), tiny_encoder(normalize=True), pairs(), pairs())
    assert len(row["dev_spearman_by_epoch"]) == 2 and len(row["loss_by_epoch"]) == 2
    assert all(np.isfinite(row["dev_spearman_by_epoch"])) and row["clip"] == 1.0
    assert training.paper_optimizer(10, 2e-5, 0.1).global_clipnorm == 1.0
    json.dumps(row)


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
