"""`sbert-keras export --format sentence-transformers`, as a user runs it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from conftest import family_fixture
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras.cli.parser import main
from sbert_keras.utils import atomic_io

TEXTS = ["a man is playing guitar", "the dog runs in the park"]


def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err.strip().splitlines()[-1])


def test_export_a_folder_in_a_subprocess(tmp_path):
    output = tmp_path / "st"
    model = family_fixture("mpnet", "model")
    args = ["export", "--model", model, "--output", output, "--format", "sentence-transformers"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-m", "sbert_keras.cli", *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["model_type"] == "mpnet" and summary["dim"] == 64 and summary["max_seq_length"] == 128
    assert {"config.json", "model.safetensors", "modules.json", "2_Normalize", "README.md"} <= set(summary["files"])
    expected = SentenceEncoder.from_preset(model).encode(TEXTS, compute="float32")
    got = SentenceEncoder.from_preset(output).encode(TEXTS, compute="float32")
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_export_of_a_keras_file_and_of_a_training_run(capsys, tmp_path):
    encoder = tiny_encoder(normalize=True)
    encoder.save(tmp_path / "tiny.keras")
    code, summary = run(
        capsys,
        "export",
        "--model",
        tmp_path / "tiny.keras",
        "--output",
        tmp_path / "a",
        "--format",
        "sentence-transformers",
    )
    assert code == 0 and summary["model_type"] == "bert"
    assert f"Base model: `{tmp_path / 'tiny.keras'}`" in (tmp_path / "a" / "README.md").read_text()
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    encoder.save(run_folder / "encoder.keras")
    atomic_io.write_json(
        run_folder / "metrics.json", {"objective": "contrastive", "model": "roberta_base_en", "epochs": 1}
    )
    atomic_io.write_json(run_folder / atomic_io.MARKER, {"command": "train"})
    code, _ = run(
        capsys, "export", "--model", run_folder, "--output", tmp_path / "b", "--format", "sentence-transformers"
    )
    card = (tmp_path / "b" / "README.md").read_text()
    assert code == 0 and "Base model: `roberta_base_en`" in card and "- Objective: `contrastive`" in card


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--quantize", "int8"], "--quantize does not apply to --format sentence-transformers"),
        (["--truncate-dim", "4"], "--truncate-dim does not apply"),
        (["--prompt", "query: "], "--prompt does not apply"),
    ],
)
def test_flags_a_folder_cannot_hold_are_refused(capsys, tmp_path, flags, message):
    tiny_encoder().save(tmp_path / "tiny.keras")
    args = [
        "export",
        "--model",
        tmp_path / "tiny.keras",
        "--output",
        tmp_path / "st",
        "--format",
        "sentence-transformers",
    ]
    code, error = run(capsys, *args, *flags)
    assert code == 2 and message in error and not (tmp_path / "st").exists()


def test_an_earlier_export_is_replaced_only_with_overwrite(capsys, tmp_path):
    tiny_encoder().save(tmp_path / "tiny.keras")
    args = [
        "export",
        "--model",
        tmp_path / "tiny.keras",
        "--output",
        tmp_path / "st",
        "--format",
        "sentence-transformers",
    ]
    assert run(capsys, *args)[0] == 0
    code, error = run(capsys, *args)
    assert code == 2 and "already holds a completed run; pass --overwrite" in error
    assert run(capsys, *args, "--overwrite")[0] == 0
