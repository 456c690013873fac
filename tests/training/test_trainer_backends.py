"""The whole training run (`train_objective` on raw strings) on Keras' JAX and PyTorch backends.

`backend_training.py` runs objectives of `training.objectives` for 3
steps through `train_objective` (host batches, dev evaluation, step log,
backup) on the tiny RoBERTa encoder without dropout (the backends' dropout
generators differ), in one subprocess per backend. TensorFlow runs the
regression objective first and saves the starting weights; JAX and PyTorch
load them: the same seed gives the same batches, so JAX's per-step losses
equal TensorFlow's within float32 round-off.

`make test` runs one objective of each model and data shape (`CORE`: pairs
with scores, triplets, labelled sentences, NLI labels, the cached
mini-batch step, a teacher's vectors); the others are another loss in
`keras.ops` over one of those models, and run in the large tier.
"""

import os
import pathlib
import sys

import numpy as np
import pytest

import backend_training
from harness import finish_on_backend
from harness import start_on_backend
from sbert_keras.cli.parser import select_backend
from sbert_keras.utils import backends
from sbert_keras.utils import defaults

pytestmark = pytest.mark.backends  # subprocesses of other backends: run apart (`make test`)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "backend_training.py"
OBJECTIVES = (
    "regression",
    "cosent",
    "angle",
    "online-contrastive",
    "triplet",
    "batch-hard",
    "classification",
    "contrastive",
    "cached-contrastive",
    "matryoshka",
    "distill",
)
CORE = ("regression", "triplet", "batch-hard", "classification", "cached-contrastive", "distill")
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("training_run")
    tensorflow = start_on_backend(SCRIPT, "tensorflow", folder, "regression")  # first: it saves the weights
    results = {"tensorflow": finish_on_backend("tensorflow", *tensorflow)}
    for backend in ("jax", "torch"):  # one process at a time: each holds a framework (memory)
        results[backend] = finish_on_backend(backend, *start_on_backend(SCRIPT, backend, folder, *CORE))
    return results


def assert_trained(run, names):
    """Every objective of `names` took its steps with finite losses and moved the weights."""
    for name in names:
        losses = run[f"{name}/losses"]
        assert len(losses) >= 3 and np.all(np.isfinite(losses)), (name, losses)
        assert np.abs(run[f"{name}/after"] - run[f"{name}/before"]).max() > 1e-6, name
        assert "loss" in run[f"{name}/history"], name


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_an_objective_of_each_model_trains_off_tensorflow(runs, backend):
    run = runs[backend]
    assert_trained(run, CORE)
    for name in ("regression", "triplet", "classification"):  # a dev set: its figures in the history
        assert any(key.startswith("dev_") for key in run[f"{name}/history"]), name


@pytest.mark.large
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_other_objectives_train_off_tensorflow(tmp_path, backend):
    others = [name for name in OBJECTIVES if name not in CORE]
    assert_trained(finish_on_backend(backend, *start_on_backend(SCRIPT, backend, tmp_path, *others)), others)


def test_the_two_tiers_run_every_objective():
    table = backend_training.examples()
    assert set(OBJECTIVES) == set(table) and set(CORE) <= set(OBJECTIVES)
    assert {objective for objective, *_ in table.values()} == set(defaults.OBJECTIVES)


def test_jax_regression_steps_equal_tensorflow(runs):
    expected, actual = runs["tensorflow"], runs["jax"]
    np.testing.assert_allclose(actual["regression/losses"], expected["regression/losses"], rtol=0, atol=TOLERANCE)
    # `encode` itself differs by ~1e-5 between TensorFlow's runtime and the host engine, before any step.
    for key in ("regression/before", "regression/after"):
        np.testing.assert_allclose(actual[key], expected[key], rtol=0, atol=1e-4, err_msg=key)


def test_backend_flag_is_refused_once_keras_runs_another(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    with pytest.raises(ValueError, match="already imported with the 'tensorflow' backend"):
        select_backend("jax")
    monkeypatch.setattr(backends, "installed", lambda module: False)
    with pytest.raises(ImportError, match="--backend tensorflow: tensorflow is not installed"):
        select_backend("tensorflow")


def test_multi_worker_needs_tensorflow(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)  # as before Keras is imported
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    with pytest.raises(ValueError, match="multi-worker runs on tf.distribute"):
        select_backend("torch", "multi-worker")
    assert os.environ["KERAS_BACKEND"] == "torch"
