"""sbert_keras on Keras' JAX and PyTorch backends, in an environment without TensorFlow.

Each backend runs `backend_run.py` in a fresh process (Keras' backend is chosen once per process):
the MiniLM package, the tiny RoBERTa of ../shared and the family fixtures encode within 1e-5 of
sentence-transformers' embeddings; `train_objective("regression")` runs a few steps on raw strings and its
encoder is written as a sentence-transformers folder; TensorFlow is never imported. That the
TensorFlow side loads such a folder with the same vectors is checked by the main suite
(`tests/utils/test_backends_handover.py`), where TensorFlow is installed.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BACKENDS = ("jax", "torch")
TOLERANCE = 1e-5
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is not None,
    reason="the suite without TensorFlow runs in .venv-backends (make test-backends)",
)


@pytest.fixture(scope="module", params=BACKENDS)
def run(request, tmp_path_factory):
    """The JSON report of `backend_run.py` under one backend, and its output folder."""
    out = tmp_path_factory.mktemp(request.param)
    env = dict(os.environ, KERAS_BACKEND=request.param, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(HERE / "backend_run.py"), str(out)], env=env, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == request.param
    return report, out


def test_tensorflow_is_not_installed():
    with pytest.raises(ImportError):
        import tensorflow  # noqa: F401


@pytest.mark.parametrize("name", ["minilm", "tiny-roberta", "mpnet", "distilbert-dense", "xlm-roberta"])
def test_encode_matches_sentence_transformers(run, name):
    parity = run[0]["parity"]
    result = parity.get(name) or parity.get("all") or {"skipped": "not run"}
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert "error" not in result, result.get("traceback", result.get("error"))
    assert result["max_abs_diff"] <= TOLERANCE


@pytest.mark.parametrize("name", ["encoder.keras", "encoder_cls.keras", "regression_siamese.keras"])
def test_keras_files_written_by_tensorflow_load_with_the_same_vectors(run, name):
    result = run[0]["keras_files"][name]
    assert "error" not in result, result.get("traceback")
    assert result["max_abs_diff"] <= 5e-5  # the tolerance of tests/project/test_saved_models.py for `encode`


def test_loaded_encoders_have_every_layer_built(run):
    """An unbuilt layer (a preprocessor that never ran) makes JAX's `predict_on_batch` run the model eagerly."""
    loaded = {**run[0]["parity"], **run[0]["keras_files"]}
    checked = {name: result["unbuilt"] for name, result in loaded.items() if "unbuilt" in result}
    assert checked and all(names == [] for names in checked.values()), checked


def test_training_runs_and_writes_a_sentence_transformers_folder(run):
    report, out = run
    assert not report["tensorflow_imported"]
    training = report["training"]
    if "skipped" in training:
        pytest.skip(training["skipped"])
    assert "error" not in training, training.get("traceback")
    assert all(np.isfinite(training["losses"])) and training["weights_changed"]
    folder = pathlib.Path(training["folder"])
    for name in ("config.json", "model.safetensors", "modules.json", "tokenizer.json", "1_Pooling/config.json"):
        assert (folder / name).is_file(), name
    assert np.load(out / "trained-vectors.npy").shape == (8, 64)


def test_fit_evaluate_and_predict_take_raw_strings(run):
    result = run[0]["fit_on_text"]
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert "error" not in result, result.get("traceback")
    assert len(result["losses"]) == 2 and all(np.isfinite(result["losses"] + result["val_losses"]))
    assert np.isfinite(result["evaluate"]) and result["predict_shape"] == [result["pairs"]]


@pytest.mark.parametrize(
    "argv, feature",
    [
        (["export", "--model", "m", "--output", "out"], "sbert-keras export --format saved-model"),
        (["embed-corpus", "--model", "m", "--input", "in.txt", "--output", "out"], "embed-corpus"),
    ],
)
def test_tensorflow_only_commands_say_so_in_one_line(tmp_path, argv, feature):
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "sbert_keras.cli", *argv], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and feature in lines[0] and 'pip install "sbert_keras[tensorflow]"' in lines[0], lines
