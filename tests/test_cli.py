"""The `sbert-keras` command line, end to end."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import ROOT
from conftest import minilm_path
from conftest import shared_path
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras.cli import main

CORPUS = ["a man is playing guitar", "a man is playing piano", "the cat sleeps on the sofa",
          "the cat sleeps", "a red car is fast", "the blue car is slow"]


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    return json.loads(out.out)


@pytest.fixture
def encoder_file(tmp_path):
    path = tmp_path / "tiny.keras"
    tiny_encoder(normalize=True).save(path)
    return path


def test_encode_search_cluster_export(capsys, tmp_path, encoder_file):
    lines = tmp_path / "corpus.txt"
    lines.write_text("\n".join(CORPUS) + "\n")
    out = run_cli(capsys, "encode", "--model", encoder_file, "--input", lines,
                  "--output", tmp_path / "e.npy")
    assert out["texts"] == 6 and np.load(tmp_path / "e.npy").shape == (6, 8)
    hits = run_cli(capsys, "search", "--model", encoder_file, "--corpus", lines,
                   "--query", "a man is playing guitar", "--top-k", 2)
    assert hits[0]["hits"][0]["text"] == "a man is playing guitar"
    clusters = run_cli(capsys, "cluster", "--model", encoder_file, "--input", lines,
                       "--method", "kmeans", "--num-clusters", 2)
    assert sum(len(c) for c in clusters["clusters"]) == 6
    exported = run_cli(capsys, "export", "--model", encoder_file, "--output", tmp_path / "sm" / "1")
    assert os.path.isfile(tmp_path / "sm" / "1" / "saved_model.pb")
    assert exported["input"] == "text: string[None]"


def test_bad_input_file_is_a_clear_error(capsys, tmp_path, encoder_file):
    bad = tmp_path / "bad.csv"
    bad.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tonly one sentence\n")
    code = main(["evaluate", "--model", str(encoder_file), "--sts", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "bad.csv, line 1" in err


@pytest.mark.slow
def test_train_then_evaluate_real_minilm_and_reload(tmp_path):
    model = minilm_path()
    sts = shared_path("data", "stsbenchmark")
    train = tmp_path / "train.csv"
    dev = tmp_path / "dev.csv"
    train.write_text("".join(open(sts / "sts-train.csv", encoding="utf-8").readlines()[:48]))
    dev.write_text("".join(open(sts / "sts-dev.csv", encoding="utf-8").readlines()[:40]))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    cli = [sys.executable, "-m", "sbert_keras.cli"]
    result = subprocess.run(cli + ["train", "--objective", "regression", "--model", str(model),
                                   "--train", str(train), "--dev", str(dev), "--epochs", "1",
                                   "--batch-size", "16", "--lr", "2e-5", "--output", str(tmp_path / "out"),
                                   "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["train_examples"] == 48
    assert 0 < report["dev_after"]["spearman_cosine"] <= 1
    assert "spearman_cosine" in report["dev_before"]
    metrics = json.load(open(tmp_path / "out" / "metrics.json"))
    assert metrics["dev_after"] == report["dev_after"]
    result = subprocess.run(cli + ["evaluate", "--model", str(tmp_path / "out" / "encoder.keras"),
                                   "--sts", str(dev)], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    evaluated = json.loads(result.stdout)
    assert evaluated["spearman_cosine"] == pytest.approx(report["dev_after"]["spearman_cosine"], abs=1e-6)
    # The fine-tuned encoder reloads with Keras and as a SentenceEncoder.
    reloaded = keras.saving.load_model(tmp_path / "out" / "encoder.keras")
    assert isinstance(reloaded, SentenceEncoder) and reloaded.normalize
    assert reloaded.encode("a test").shape == (384,)
