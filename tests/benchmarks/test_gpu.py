"""benchmarks/gpu.py: the host side (model folder, token ids, records) and its `--smoke` run on JAX's CPU.

The smoke run is the GPU benchmark's code at tiny sizes (2 layers x 32, a
few steps, 256 texts) in a subprocess with `KERAS_BACKEND=jax`: every
measurement of the GPU run must be there, finite, and its float32 check
(CPU against CPU here) exact. sentence-transformers is not installed in
the test venv, so the smoke run covers the sbert_keras half and says so.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sbert_keras
from conftest import ROOT
from conftest import SHARED
from conftest import minilm_path

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu  # noqa: E402
import gpu_data  # noqa: E402

pytestmark = pytest.mark.backends  # subprocesses of other backends: run apart (`make test`)

STS_TRAIN = SHARED / "data" / "stsbenchmark" / "sts-train.csv"
RATES = {"train": ("steps_per_s", "samples_per_s"), "forward_ids": ("texts_per_s",), "encode": ("texts_per_s",)}


def test_the_loss_summary_compares_the_first_and_last_steps():
    summary = gpu_data.loss_summary([0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1, 0.05])
    assert summary["loss_first"] == pytest.approx(0.45) and summary["loss_last"] == pytest.approx(0.075)
    assert summary["loss_falls"] and summary["loss_finite"] and summary["steps"] == 8
    assert not gpu_data.loss_summary([0.5, float("nan"), 0.1, 0.1])["loss_finite"]
    assert gpu_data.loss_summary([])["steps"] == 0 and not gpu_data.loss_summary([])["loss_falls"]
    assert gpu_data.one_line("\x1b[1mAttempt\x1b[0m to\n\n  convert") == "Attempt to convert"


def test_the_vector_check_measures_difference_and_angle():
    reference = np.array([[1.0, 0.0], [0.0, 2.0]])
    check = gpu_data.vector_check(reference, reference + [[0.0, 0.1], [0.0, 0.0]])
    assert check["max_abs_diff"] == pytest.approx(0.1) and check["max_abs_reference"] == 2.0
    assert check["min_cosine"] == pytest.approx(1 / math.sqrt(1.01))


def test_the_timed_window_leaves_out_the_warmup_steps():
    values, start, ends = gpu_data.timed_loop([1, 2, 3], lambda step: step * 10)
    assert values == [10, 20, 30] and len(ends) == 3 and start <= ends[0] <= ends[1] <= ends[2]
    figures = gpu_data.window(0.0, [5.0, 6.0, 6.5, 7.5], warmup=1, batch_size=16)
    assert figures["timed_steps"] == 3 and figures["steps_per_s"] == pytest.approx(3 / 2.5)
    assert figures["samples_per_s"] == pytest.approx(48 / 2.5) and figures["median_step_s"] == pytest.approx(1.0)
    assert figures["warmup_s"] == 5.0
    assert math.isnan(gpu_data.window(0.0, [5.0], warmup=1, batch_size=16)["steps_per_s"])


def test_a_silent_part_is_stopped_at_its_time_and_a_failing_one_names_its_error(tmp_path):
    records = gpu.Records(tmp_path / "results.jsonl")
    code = (
        "import json, time; print(json.dumps({'benchmark': 'gpu', 'measurement': 'one'}), flush=True); time.sleep(60)"
    )
    with open(tmp_path / "log.txt", "w") as log:
        status = gpu.run_child([sys.executable, "-c", code], dict(os.environ), 2.0, log, records)
    assert status.startswith("stopped after 2 s")
    assert [r["measurement"] for r in records] == ["one"]
    assert json.loads((tmp_path / "results.jsonl").read_text())["measurement"] == "one"
    with open(tmp_path / "log.txt", "w") as log:
        status = gpu.run_child(
            [sys.executable, "-c", "import sys; sys.exit('no GPU here')"], dict(os.environ), 60, log, records
        )
    assert status == "exited with code 1: no GPU here"


def test_both_engines_read_the_same_padded_ids(tmp_path):
    if not STS_TRAIN.is_file():
        pytest.skip(f"{STS_TRAIN} is absent")
    sizes = gpu_data.SIZES["smoke"]
    gpu_data.prepare_arrays(sizes, STS_TRAIN, Path(minilm_path()) / "tokenizer.json", tmp_path / "arrays.npz")
    arrays = gpu_data.Arrays(tmp_path / "arrays.npz")
    steps = arrays.train_steps(16)
    assert len(steps) == sizes["warmup_steps"] + sizes["timed_steps"][16]
    a, b, labels = steps[0]
    assert a.shape == b.shape == (16, sizes["train_tokens"]) and a.dtype == np.int32
    assert np.all(a[:, 0] == 101) and 0.0 <= labels.min() and labels.max() <= 1.0  # [CLS] first; score / 5
    batches = arrays.forward_batches()
    assert sum(len(ids) for ids in batches) == len(arrays.texts) == sizes["encode_texts"]
    assert all(ids.shape[1] % gpu_data.BUCKET == 0 for ids in batches)


def test_the_numpy_model_folder_loads_in_sbert_keras(tmp_path):
    sizes = gpu_data.SIZES["smoke"]
    folder = tmp_path / "model"
    assert gpu_data.build_model_folder(sizes, minilm_path(), folder) in ("numpy", "transformers")
    encoder = sbert_keras.SentenceEncoder.from_preset(str(folder))
    assert encoder.backbone.num_layers == sizes["layers"] and encoder.embedding_dim == sizes["hidden"]
    assert encoder.pooling == "mean" and not encoder.normalize


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    if not STS_TRAIN.is_file():
        pytest.skip(f"{STS_TRAIN} is absent")
    out = tmp_path_factory.mktemp("gpu_smoke")
    env = {k: v for k, v in os.environ.items() if k != "SBERT_PEER_PYTHON"}
    env.update(KERAS_BACKEND="jax", PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--smoke", "--out", str(out)]
    command += ["--data", str(STS_TRAIN), "--tokenizer", str(minilm_path())]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    written = [json.loads(line) for line in (out / "gpu_results.jsonl").read_text().splitlines()]
    assert printed == written and (out / "gpu_table.md").is_file()
    return written


def engines_of(records):
    skipped = {r["engine"] for r in records if r.get("measurement") == "skipped"}
    return [engine for engine in gpu_data.ENGINES if engine not in skipped]


def test_the_smoke_run_records_every_measurement_without_error(smoke):
    setup = next(r for r in smoke if r.get("measurement") == "setup")
    assert setup["smoke"] and setup["sizes"]["layers"] == 2
    engines = engines_of(smoke)
    assert "sbert_keras" in engines
    if "sentence_transformers" not in engines:  # the test venv has no sentence-transformers: it says so
        assert any(r.get("measurement") == "skipped" and "sentence_transformers" in r["reason"] for r in smoke)
    by_key = {
        gpu_data.key(r): r for r in smoke if r.get("measurement") in RATES or r.get("measurement") == "float32_check"
    }
    failed = [f"{key}: {record['error']}" for key, record in by_key.items() if record.get("error")]
    missing = [key for key in gpu_data.planned(engines, gpu_data.SIZES["smoke"]) if key not in by_key]
    assert not failed and not missing, f"failed: {failed}; missing: {missing}"


def test_the_smoke_figures_are_finite_and_the_loss_too(smoke):
    for record in smoke:
        measurement = record.get("measurement")
        if measurement not in RATES or record.get("error"):
            continue
        for name in RATES[measurement]:
            assert record[name] is not None and math.isfinite(record[name]) and record[name] > 0, (name, record)
        if measurement == "train":
            if importlib.util.find_spec("tensorflow") is not None:  # sbert_keras' own `fit`, its arrays in tf.data
                assert record["fit_path"] == "fit", record["fit_path"]
            assert record["loss_finite"] and math.isfinite(record["loss_first"]) and math.isfinite(record["loss_last"])
            assert record["timed_steps"] >= 1 and record["sequence_length"] == gpu_data.SIZES["smoke"]["train_tokens"]
        else:
            assert record["finite"] and record["texts"] == gpu_data.SIZES["smoke"]["encode_texts"]


def test_the_smoke_float32_check_is_cpu_against_cpu_and_exact(smoke):
    checks = [r for r in smoke if r.get("measurement") == "float32_check" and not r.get("error")]
    assert {r["engine"] for r in checks} == set(engines_of(smoke))
    for check in checks:
        assert "cpu" in str(check["device"]).lower()
        assert check["max_abs_diff"] <= 1e-5 * max(1.0, check["max_abs_reference"]) and check["min_cosine"] > 0.99999
