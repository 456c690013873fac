"""Every objective trains on Keras' JAX and PyTorch backends with TensorFlow's numbers.

`backend_objectives.py` trains each objective for 3 SGD steps (AdamW with the
paper's warmup and clipping for one) on fixed token-id batches from one tiny
RoBERTa encoder without dropout, in one subprocess per backend (the backend
is per process). TensorFlow runs first and saves each model's starting
weights; JAX and PyTorch load them, so every per-step loss, the final
vectors, `predict` and `evaluate` must agree within float32 round-off.
PyTorch runs the objectives named in `TORCH_OBJECTIVES`.
"""

import pathlib

import numpy as np
import pytest

from conftest import family_fixture
from harness import finish_on_backend
from harness import start_on_backend

pytestmark = pytest.mark.backends  # subprocesses of other backends: run apart (`make test`)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "backend_objectives.py"
TORCH_OBJECTIVES = ("regression", "regression_adamw", "triplet", "classification", "in_batch", "cached_in_batch")
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("backends")
    # TensorFlow first: it saves the starting weights the others load.
    results = {"tensorflow": finish_on_backend("tensorflow", *start_on_backend(SCRIPT, "tensorflow", folder))}
    # One process at a time: each holds a framework and its compiled steps (memory, on a 2-core CI machine).
    for backend, args in (("jax", ("--mixed-bfloat16",)), ("torch", TORCH_OBJECTIVES)):
        results[backend] = finish_on_backend(backend, *start_on_backend(SCRIPT, backend, folder, *args))
    return results


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_same_losses_and_vectors_as_tensorflow(runs, backend):
    expected, actual = runs["tensorflow"], runs[backend]
    trained = {key.split("/")[0] for key in actual if key.endswith("/losses") and not key.startswith("bfloat16")}
    wanted = {key.split("/")[0] for key in expected if key.endswith("/losses")}
    assert trained == (wanted if backend == "jax" else set(TORCH_OBJECTIVES))
    compared = [
        key for key in actual if key in expected and key.split("/")[0] not in ("tensorflow_imported", "refused")
    ]
    assert len(compared) >= 2 * len(trained) + 1  # per-step losses and final vectors of each, plain `predict`
    for key in compared:
        np.testing.assert_allclose(actual[key], expected[key], rtol=TOLERANCE, atol=TOLERANCE, err_msg=key)
    for key in trained:  # training moved the weights: the three steps differ
        assert np.ptp(actual[f"{key}/losses"]) > 1e-4, key


@pytest.mark.parametrize("family", ["mpnet", "distilbert-dense", "xlm-roberta"])
def test_the_regression_objective_trains_each_family_fixture_on_jax(runs, family):
    family_fixture(family)  # `backend_objectives.py` leaves out a family that `make fixtures` did not generate
    key = f"regression_{family}/losses"
    assert key in runs["tensorflow"] and key in runs["jax"]


def test_mixed_bfloat16_keeps_losses_float32_on_jax(runs):
    dtypes = {key: value for key, value in runs["jax"].items() if key.startswith("bfloat16/") and "dtypes" in key}
    assert len(dtypes) == 7
    for key, (loss, output) in dtypes.items():
        assert loss == "float32", key
        assert output == "float32", key
        assert np.all(np.isfinite(runs["jax"][key.replace("dtypes", "losses")])), key


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_non_finite_step_is_refused_and_the_weights_kept(runs, backend):
    run = runs[backend]
    assert "batch index 1 " in str(run["refused/message"]) and "not finite" in str(run["refused/message"])
    assert run["refused/finite"] and run["refused/moved"]  # the first step applied, the second refused
