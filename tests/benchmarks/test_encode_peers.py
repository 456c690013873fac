"""The peer benchmark's own logic: contention measurement, best-of timing and rounds, scoring.

No peer and no model is run: `/proc/stat` and the clocks are replaced by
fixed sequences, and the scored embeddings are small arrays.
"""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cpu_timing  # noqa: E402
import encode_peers  # noqa: E402
import encode_peers_report  # noqa: E402


def fake_clocks(monkeypatch, ticks, own, wall):
    """`/proc/stat` busy ticks, own CPU seconds and wall seconds at enter, then at exit."""
    ticks, own, wall = iter(ticks), iter(own), iter(wall)
    monkeypatch.setattr(cpu_timing, "_cpu_ticks", lambda: next(ticks))
    monkeypatch.setattr(cpu_timing, "_own_cpu_seconds", lambda: next(own))
    monkeypatch.setattr(cpu_timing.time, "perf_counter", lambda: next(wall))


@pytest.mark.parametrize(
    "ticks, own, wall, other, contended",
    [
        # 1 s of wall time, the machine busy for 3 CPU-seconds, 1 of them ours.
        ((300, 0), (0.0, 1.0), (0.0, 1.0), 2.0, True),
        # Ours used 2 cores for 2 s; others 0.05 core on average.
        ((410, 0), (0.0, 4.0), (10.0, 12.0), 0.05, False),
        # Nobody else busy, but the hypervisor stole half a core.
        ((100, 50), (0.0, 1.0), (0.0, 1.0), 0.0, True),
    ],
)
def test_monitor_reports_other_processes(monkeypatch, ticks, own, wall, other, contended):
    fake_clocks(monkeypatch, [(0, 0), (0, 0), ticks], list(own), list(wall))
    monitor = cpu_timing.CpuMonitor(threshold=0.1)
    monitor.tick = 100
    with monitor:
        pass
    report = monitor.report()
    assert report["other_cpu_cores"] == pytest.approx(other, abs=1e-6)
    assert report["contended"] is contended


def test_timed_passes_keeps_the_best_and_stops_when_slow(monkeypatch):
    calls = []

    def run(texts):
        calls.append(len(texts))
        return np.zeros((len(texts), 2))

    # Start and end of each timed pass: 3 s, 1 s, 2 s.
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])
    monkeypatch.setattr(cpu_timing.time, "perf_counter", lambda: next(clock))
    out, timing = cpu_timing.timed_passes(run, ["a"] * 10, 3, _NullMonitor(), warmup_texts=4)
    assert calls == [4, 10, 10, 10]
    assert timing["passes_run"] == 3
    assert timing["seconds"] == pytest.approx(1.0)
    assert timing["texts_per_second"] == pytest.approx(10.0)
    assert out.shape == (10, 2)

    clock = iter([0.0, 5.0])
    slow = cpu_timing.timed_passes(run, ["a"] * 3, 3, _NullMonitor(), slow_seconds=4.0)[1]
    assert slow["passes_run"] == 1


class _NullMonitor:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_rounds_keep_each_variants_fastest_round_that_ran():
    def line(engine, variant, round_number, rate=None):
        outcome = {"texts_per_second": rate} if rate else {"error": f"failed in round {round_number}"}
        return {"engine": engine, "variant": variant, "round": round_number, **outcome}

    runs = []
    for number, (peer, ours, never) in enumerate([(400.0, None, None), (480.0, 600.0, None), (450.0, None, None)], 1):
        runs += [
            line("sentence-transformers", "openvino_int8_static", number, peer),
            line("sbert_keras", "encode_int8", number, ours),
            line("sbert_keras", "encode_bfloat16", number, never),
        ]
    kept = encode_peers.fastest_rounds(runs)
    assert [(r["variant"], r["round"]) for r in kept] == [
        ("openvino_int8_static", 2),
        ("encode_int8", 2),
        ("encode_bfloat16", 1),  # never ran: its first error stands
    ]
    assert [r["rounds_texts_per_second"] for r in kept] == [[400.0, 480.0, 450.0], [None, 600.0, None], [None] * 3]
    assert kept[2]["error"] == "failed in round 1"


def test_request_batches_keep_request_order():
    assert cpu_timing.request_batches(list("abcde"), 2) == [["a", "b"], ["c", "d"], ["e"]]


def _result(tmp_path, engine, variant, embeddings, texts_per_second):
    path = tmp_path / f"{engine}_{variant}.npy"
    np.save(path, embeddings.astype("float32"))
    return {
        "engine": engine,
        "variant": variant,
        "embeddings": str(path),
        "texts_per_second": texts_per_second,
        "seconds": 1.0,
    }


def test_score_classes_and_ratios(tmp_path):
    rng = np.random.default_rng(0)
    pairs = 40
    reference = rng.normal(size=(2 * pairs, 16))
    gold = np.sum(reference[:pairs] * reference[pairs:], 1)  # a gold the reference ranks well
    noisy = reference + 0.5 * rng.normal(size=reference.shape)
    results = [
        _result(tmp_path, "sentence-transformers", "torch", reference, 100.0),
        _result(tmp_path, "sentence-transformers", "onnx_int8", noisy, 300.0),
        _result(tmp_path, "sbert_keras", "encode_float32", reference * 1.000001, 240.0),
        {"engine": "fastembed", "variant": "fp32", "skipped": "no --onnx-python"},
    ]
    scored = encode_peers_report.score(results, gold)
    torch, int8, ours = results[:3]
    assert scored["reference"] == "sentence-transformers torch"
    assert torch["min_cos"] == pytest.approx(1.0, abs=1e-6)
    assert ours["classes"][0] == "float"
    assert int8["min_cos"] < 0.99 and "float" not in int8["classes"]
    # The float class's best peer is torch (100/s): ours is 2.4x it.
    assert ours["ratio_to_best_peer"]["float"] == pytest.approx(2.4)
    summary = encode_peers_report.summary(results)
    assert summary["float_class"]["variant"] == "encode_float32"
    assert ours["precision"] == "float32" and int8["precision"] == "int8"
    assert summary["int8_class_int8_paths_only"]["variant"] is None  # no int8 path of ours
    assert summary["skipped"] == ["fastembed fp32: no --onnx-python"]
    table = encode_peers_report.markdown_table(results).splitlines()
    assert len(table) == 2 + 3  # header, rule, the three timed rows
    assert "| sbert_keras | encode_float32 | 240 |" in table[-1]


def test_emulated_avx2_flags_drop_what_an_avx2_cpu_lacks(monkeypatch):
    monkeypatch.setattr(cpu_timing, "open", lambda *a, **k: io.StringIO(CPUINFO), raising=False)
    monkeypatch.delenv(cpu_timing.EMULATE_AVX2_ENV, raising=False)
    assert cpu_timing.cpu_flags() == set(CPUINFO.split(":")[1].split())
    monkeypatch.setenv(cpu_timing.EMULATE_AVX2_ENV, "1")
    assert cpu_timing.cpu_flags() == {"fpu", "avx", "avx2", "fma"}
    assert cpu_timing.AVX2_CAPS["ONEDNN_MAX_CPU_ISA"] == "AVX2"


CPUINFO = "flags\t\t: fpu avx avx2 fma avx512f avx512_bf16 avx512_vnni avx_vnni amx_int8\n"


def test_saved_models_and_predict_take_the_precision_their_engine_reported(tmp_path):
    rng = np.random.default_rng(1)
    pairs = 20
    reference = rng.normal(size=(2 * pairs, 8))
    gold = np.sum(reference[:pairs] * reference[pairs:], 1)
    served = _result(tmp_path, "sbert_keras", "serve_default", reference, 200.0)
    predict = _result(tmp_path, "sbert_keras", "predict", reference, 210.0)
    predict["engine_plan"] = ["fused", "bfloat16"]
    results = [
        _result(tmp_path, "sentence-transformers", "torch", reference, 100.0),
        {"engine": "sbert_keras", "variant": "export_default", "engine_plan": ["fused", "bfloat16"]},
        served,
        predict,
        _result(tmp_path, "sbert_keras", "encode_float32", reference, 150.0),
    ]
    encode_peers_report.score(results, gold)
    assert served["precision"] == predict["precision"] == "bfloat16"
    # Only float32 paths count against the 1e-5 float32 gate.
    assert set(encode_peers_report.summary(results)["float32_max_abs_diff"]) == {"encode_float32"}


def test_peak_is_the_fastest_matmul_of_the_precision_measured():
    shape = "448x384x1536"
    peaks = {"int8_448x384x1536": 60.0, "xnnpack_int8_448x384x1536": 750.0, "bfloat16_448x384x1536": 250.0}
    assert encode_peers_report.matmul_peak(peaks, "int8", shape) == 750.0
    assert encode_peers_report.matmul_peak(peaks, "bfloat16", shape) == 250.0
    assert encode_peers_report.matmul_peak({"int8_448x384x1536": 60.0}, "int8", shape) == 60.0
    assert encode_peers_report.matmul_peak(peaks, "float32", shape) is None
    # float32 on an AVX2-only CPU: XNNPACK's matmul where it is the faster one.
    assert encode_peers_report.matmul_peak({**peaks, "float32_448x384x1536": 90.0}, "float32", shape) == 90.0
    both = {"float32_448x384x1536": 90.0, "xnnpack_float32_448x384x1536": 130.0}
    assert encode_peers_report.matmul_peak(both, "float32", shape) == 130.0
    assert encode_peers_report.matmul_peak(peaks, "bfloat16", "448x768x3072") is None
    # bf16 with the weights oneDNN keeps, where the fused graph uses them.
    kept = {**peaks, "onednn_bfloat16_448x384x1536": 400.0}
    assert encode_peers_report.matmul_peak(kept, "bfloat16", shape) == 400.0


def test_peak_fraction_uses_the_feed_forward_shape_of_the_model(tmp_path):
    embeddings = np.eye(4)
    results = [
        dict(_result(tmp_path, "sbert_keras", "encode_bfloat16", embeddings, 100.0), seconds=2.0),
        {
            "engine": "sbert_keras",
            "variant": "flops",
            "useful_gflop": 800.0,
            "ffn_shape": "448x768x3072",
            "matmul_gflops": {"bfloat16_448x768x3072": 800.0, "bfloat16_448x384x1536": 400.0},
        },
    ]
    encode_peers_report.add_gflops(results)
    assert results[0]["useful_gflops_per_second"] == pytest.approx(400.0)
    assert results[0]["fraction_of_matmul_peak"] == pytest.approx(0.5)
    assert results[0]["matmul_peak"] == {"shape": "448x768x3072", "gflops_per_second": 800.0}


def test_speed_only_scoring_classes_int8_by_precision(tmp_path):
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(6, 8))
    noisy = reference + rng.normal(scale=0.3, size=reference.shape)
    results = [
        _result(tmp_path, "sentence-transformers", "torch", reference, 50.0),
        _result(tmp_path, "sentence-transformers", "openvino_int8_static", noisy, 100.0),
        _result(tmp_path, "sbert_keras", "encode_int8", noisy, 150.0),
        _result(tmp_path, "sbert_keras", "encode_float32", reference, 80.0),
    ]
    scored = encode_peers_report.score(results, None)
    assert scored["spearman_fp32"] is None
    assert all("spearman" not in r for r in results)
    assert results[2]["classes"] == ["int8"] and results[2]["meets_int8_gate"]
    assert results[2]["ratio_to_best_peer"] == {"int8": pytest.approx(1.5)}
    assert results[3]["ratio_to_best_peer"]["float"] == pytest.approx(80.0 / 50.0)
