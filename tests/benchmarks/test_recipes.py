"""benchmarks/recipes.py: every recipe end to end on the tiny encoder, and its command line."""

import json
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from conftest import ROOT
from conftest import tiny_encoder
from sbert_keras.data import examples

sys.path.insert(0, str(ROOT / "benchmarks"))
import recipes  # noqa: E402

SENTENCES = [
    "a man is playing guitar",
    "a woman is playing piano",
    "the dog runs in the park",
    "a cat sleeps on the sofa",
    "a red car is fast",
    "the man eats food in the kitchen",
    "a blue ball in the sky",
    "the woman runs fast",
]


def tiny_setup(**overrides):
    rng = np.random.default_rng(0)
    a = SENTENCES * 2
    b = SENTENCES[1:] + SENTENCES[:1] + SENTENCES[3:] + SENTENCES[:3]  # no identical pair (no tied cosines)
    scores = rng.uniform(0, 5, len(a)).astype("float32")
    pairs = examples.SentencePairs(a, b, scores)
    triplets = examples.Triplets(SENTENCES, SENTENCES[1:] + SENTENCES[:1], SENTENCES[2:] + SENTENCES[:2])
    settings = dict(
        make_encoder=lambda: tiny_encoder(normalize=True),
        sts_train=pairs,
        sts_dev=pairs,
        triplets=triplets,
        dims=(8, 4, 2),
        snli_batch=4,
        cached_batch=(8, 2),
        stage2_epochs=1,
    )
    settings.update(overrides)
    return recipes.Setup(**settings)


def _finite(value):
    return isinstance(value, float) and np.isfinite(value)


def test_recipe_a_trains_each_objective():
    rows = list(recipes.recipe_a(tiny_setup(), objectives=("cosent",)))  # one fit: the loop is the same for each
    assert [r["objective"] for r in rows] == ["cosent"]
    for row in rows:
        assert row["recipe"] == "a" and row["epochs"] == 1 and row["batch_size"] == 16
        assert _finite(row["dev_spearman"]) and _finite(row["dev_spearman_before"]) and row["seconds"] > 0
        json.dumps(row)


@pytest.mark.large
def test_recipe_b_runs_both_stages_with_the_contradictions_as_hard_negatives():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (row,) = recipes.recipe_b(tiny_setup())
    unused = [str(w.message) for w in caught if "negatives unused" in str(w.message)]
    assert not unused and row["stage1_hard_negatives"] is True
    assert row["snli_triplets"] == len(SENTENCES) and row["stage1_batch_size"] == 4
    assert _finite(row["dev_spearman_after_stage1"]) and _finite(row["dev_spearman"])
    assert row["seconds"] == pytest.approx(row["stage1_seconds"] + row["stage2_seconds"])


@pytest.mark.large
def test_recipe_c_scores_every_dimension():
    plain, matryoshka, summary = recipes.recipe_c(tiny_setup())
    assert (plain["matryoshka"], matryoshka["matryoshka"]) == (False, True)
    for row in (plain, matryoshka):
        assert sorted(row["dev_spearman_by_dim"]) == [2, 4, 8]
        assert row["dev_spearman"] == pytest.approx(row["dev_spearman_by_dim"][8], abs=1e-12)
        assert row["retention_by_dim"][8] == pytest.approx(1.0, abs=1e-9)
    assert summary["dim"] == 4 and summary["retention_matryoshka"] == matryoshka["retention_by_dim"][4]


def test_truncated_scores_match_manual_truncation():
    """The per-dim score is the cosine of the first `dim` components, re-normalised."""
    encoder = tiny_encoder(normalize=True)
    setup = tiny_setup()
    dev = setup.sts_dev
    _, by_dim = recipes.dev_spearman(encoder, dev, (8, 4))
    u = np.asarray(encoder.encode(dev.sentence_a))[:, :4]
    v = np.asarray(encoder.encode(dev.sentence_b))[:, :4]
    cos = np.sum(u * v, -1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))
    assert by_dim[4] == pytest.approx(stats.spearmanr(cos, dev.labels).statistic, abs=1e-6)


@pytest.mark.large
def test_recipe_d_cached_configuration():
    """The cached run (batch 8, mini-batch 2) on the same triplets; the plain one is b's first stage."""
    row = recipes.train_in_batch(tiny_setup(), "cached")
    assert row["kind"] == "cached" and row["batch_size"] == 8 and row["mini_batch_size"] == 2
    assert row["steps"] == 1 and row["snli_triplets"] == len(SENTENCES)
    assert _finite(row["dev_spearman"]) and row["peak_rss_mb"] > 0


def test_command_line():
    args = recipes.parse_args(["--recipe", "d", "--quick", "--dev-limit", "50"])
    assert (args.recipe, args.quick, args.stage2_epochs, args.compute) == ("d", True, 1, "auto")
    child = recipes.child_argv(args)
    assert child[:4] == ["--compute", "auto", "--seed", "0"] and "--dev-limit" in child and child[-1] == "--quick"
    with pytest.raises(SystemExit):
        recipes.parse_args(["--recipe", "e"])
