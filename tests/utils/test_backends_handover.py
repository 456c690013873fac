"""Train anywhere, serve with TensorFlow: what JAX writes, TensorFlow loads with the same vectors.

A subprocess with `KERAS_BACKEND=jax` (`tests/backend_handover.py`) loads a family fixture, writes a
`.keras` file and a sentence-transformers folder and its vectors; this process (TensorFlow) loads both
and compares, then exports the `.keras` encoder as a SavedModel. The other direction (TensorFlow's
`.keras` on JAX) and the suite without TensorFlow are in `tests/backends/` (`make test-backends`).
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import sbert_keras
from backend_handover import TEXTS
from conftest import ROOT
from conftest import family_fixture
from sbert_keras import SentenceEncoder

pytestmark = pytest.mark.backends  # subprocesses of other backends: run apart (`make test`)

pytest.importorskip("jax")

TOLERANCE = 1e-5


@pytest.fixture(scope="module", params=["mpnet", "distilbert-dense"])
def written_on_jax(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"jax-{request.param}")
    model = family_fixture(request.param, "model")
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    argv = [sys.executable, str(ROOT / "tests" / "backend_handover.py"), str(model), str(out)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"backend": "jax"}
    return out


def encode(encoder):
    return encoder.encode(TEXTS, show_progress=False, compute="float32")


def test_a_keras_file_written_on_jax_loads_on_tensorflow_with_the_same_vectors(written_on_jax, tmp_path):
    assert keras.backend.backend() == "tensorflow"
    encoder = keras.saving.load_model(written_on_jax / "encoder.keras", compile=False)
    assert isinstance(encoder, SentenceEncoder)
    assert np.abs(encode(encoder) - np.load(written_on_jax / "vectors.npy")).max() <= TOLERANCE
    path = sbert_keras.export_saved_model(encoder, tmp_path / "saved_model")
    assert (tmp_path / "saved_model" / "saved_model.pb").is_file() and os.fspath(path)


def test_a_sentence_transformers_folder_written_on_jax_loads_on_tensorflow(written_on_jax):
    encoder = SentenceEncoder.from_preset(written_on_jax / "st")
    assert np.abs(encode(encoder) - np.load(written_on_jax / "vectors.npy")).max() <= TOLERANCE


def test_tensorflow_only_commands_refuse_another_backend_in_one_line(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    argv = [sys.executable, "-m", "sbert_keras.cli", "export", "--model", "m", "--output", "out"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "needs Keras' TensorFlow backend; it is 'jax'" in lines[0]
