"""The plot of texts/s per engine per model (`benchmarks/plot_engines.py`), from small JSON lines."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import plot_engines  # noqa: E402


def result(model, engine, variant, speed, **extra):
    return json.dumps(
        {"benchmark": "encode_peers", "kind": "result", "model": model, "engine": engine, "variant": variant}
        | {"texts_per_second": speed}
        | extra
    )


def test_plot_has_a_panel_per_model_and_leaves_out_what_did_not_time(tmp_path):
    run = tmp_path / "run.jsonl"
    lines = [
        '{"benchmark": "encode_peers", "kind": "config"}',
        result("all-mpnet-base-v2", "sentence-transformers", "openvino_bf16", 325.0, min_cos=0.9999),
        result("all-mpnet-base-v2", "sbert_keras", "encode_int8", 550.0, min_cos=0.996),
        result("all-mpnet-base-v2", "sbert_keras", "encode_auto", 300.0, contended=True),
        result("all-mpnet-base-v2", "sbert_keras", "encode_auto", 320.0, precision="bfloat16"),
        result("bert-base", "sbert_keras", "encode_bfloat16", 330.0),
        '{"benchmark": "encode_peers", "kind": "result", "model": "bert-base", "engine": "x", "variant": "y", '
        '"error": "boom"}',
    ]
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    models = plot_engines.read_results([run])
    assert {m: [r["variant"] for r in rows] for m, rows in models.items()} == {
        "all-mpnet-base-v2": ["openvino_bf16", "encode_int8", "encode_auto"],
        "bert-base": ["encode_bfloat16"],
    }
    assert [plot_engines.compute_class(r) for r in models["all-mpnet-base-v2"]] == ["bfloat16", "int8", "bfloat16"]
    out = tmp_path / "engines.svg"
    plot_engines.plot(models, out)
    text = out.read_text(encoding="utf-8")
    assert "all-mpnet-base-v2" in text and "bert-base" in text


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text('{"kind": "config"}\n{"kind": "result", oops\n', encoding="utf-8")
    with pytest.raises(SystemExit, match=r"run\.jsonl:2: not a JSON line"):
        plot_engines.read_results([run])
