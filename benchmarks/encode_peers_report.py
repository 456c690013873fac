"""Scores and summarises the variants of `encode_peers.py` (no timing, no model).

From each variant's saved embeddings: the minimum per-sentence cosine and max
abs difference to sentence-transformers fp32, STS-B dev Spearman
(`scipy.stats.spearmanr` of the pair cosines against gold), the accuracy
classes of the issue (float: min cos >= 0.999; int8: Spearman within 0.003
of fp32, and min cos >= 0.99 for ours), the ratio to the best peer of each
class, useful GFLOP/s against the bare matmul of the same precision, the
summary of the targets and the markdown table of benchmarks/RESULTS.md.
"""

import numpy as np
from scipy.stats import spearmanr

FLOAT_MIN_COS = 0.999
INT8_MIN_COS = 0.99
INT8_SPEARMAN_GAP = 0.003
TARGETS = {
    "float_class_ratio": 1.2,
    "int8_class_ratio": 1.2,
    "single_query_median_ratio": 0.8,
    "saved_model_latency_ratio": 1.0,
    "saved_model_request_throughput_ratio": 1.5,
    "float32_max_abs_diff": 1e-5,
}
PRECISION = {
    "torch": "float32",
    "onnx_fp32": "float32",
    "onnx_o3": "float32",
    "onnx_int8": "int8",
    "openvino_fp32": "float32",
    "openvino_bf16": "bfloat16",
    "openvino_int8_static": "int8",
    "fp32": "float32",
    "int8": "int8",
    "encode_float32": "float32",
    "encode_bfloat16": "bfloat16",
    "encode_int8": "int8",
    "keras_int8": "int8",
    "serve_float32": "float32",
    "serve_bfloat16": "bfloat16",
    "serve_int8": "int8",
    "serve_keras_int8": "int8",
}


def cosine_rows(a, b):
    a, b = a.astype("float64"), b.astype("float64")
    return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30)


def score(results, gold):
    """Adds min cos / max abs diff to the reference, Spearman, classes and ratios to each result.

    `gold` None (the random-weight base shapes, speed only): no Spearman, and
    the int8 class holds the int8 paths, whose accuracy gates are MiniLM's.
    """
    timed = [r for r in results if "embeddings" in r]
    exported = {
        r["variant"][len("export_") :]: r.get("engine_plan") for r in results if r["variant"].startswith("export_")
    }
    for r in timed:  # a SavedModel runs the plan its export reported
        if r["variant"].startswith("serve_") and "engine_plan" not in r:
            r["engine_plan"] = exported.get(r["variant"][len("serve_") :])
    reference = next((r for r in timed if r["variant"] == "torch"), None)
    reference = reference or next((r for r in timed if r["variant"] == "encode_float32"), None)
    if reference is None:
        return None
    ref = np.load(reference["embeddings"])
    for r in timed:
        r["precision"] = precision_of(r)
        emb = np.load(r["embeddings"])
        r["min_cos"] = float(cosine_rows(emb, ref).min())
        r["max_abs_diff"] = float(np.abs(emb - ref).max())
        if gold is not None:
            n = len(gold)
            r["spearman"] = float(spearmanr(cosine_rows(emb[:n], emb[n:]), gold).statistic)
    fp32 = reference.get("spearman")
    for r in timed:
        if gold is None:  # random weights: int8 is classed by what it runs, its accuracy is MiniLM's to judge
            int8 = r["precision"] == "int8"
        else:
            r["spearman_gap"] = r["spearman"] - fp32
            int8 = abs(r["spearman_gap"]) <= INT8_SPEARMAN_GAP
        r["classes"] = [c for c, ok in (("float", r["min_cos"] >= FLOAT_MIN_COS), ("int8", int8)) if ok]
        r["meets_int8_gate"] = bool("int8" in r["classes"] and (gold is None or r["min_cos"] >= INT8_MIN_COS))
    best = {}
    for r in timed:
        if r["engine"] != "sbert_keras":
            for c in r["classes"]:
                best[c] = max(best.get(c, 0.0), r["texts_per_second"])
    for r in timed:
        r["ratio_to_best_peer"] = {c: r["texts_per_second"] / best[c] for c in r["classes"] if c in best}
    return {
        "reference": f"{reference['engine']} {reference['variant']}",
        "spearman_fp32": fp32,
        "best_peer_texts_per_second": best,
    }


def precision_of(result):
    """The matmul precision of a variant: by name, else the plan the library reported (`predict`, `serve_default`)."""
    plan = result.get("engine_plan")
    return PRECISION.get(result["variant"]) or (plan[1] if isinstance(plan, list) and len(plan) == 2 else "unknown")


def matmul_peak(peaks, precision, shape):
    """The bare-matmul GFLOP/s of `precision` at `shape`: the fastest matmul of that precision measured
    (TensorFlow's, XNNPACK's where it ran, or oneDNN's with kept weights; TensorFlow's own int8
    `BatchMatMulV3` is Eigen's, far slower)."""
    names = (f"{precision}_{shape}", f"xnnpack_{precision}_{shape}", f"onednn_{precision}_{shape}")
    found = [peaks[k] for k in names if k in peaks]
    return max(found) if found else None


def add_gflops(results):
    flops = next((r for r in results if r["variant"] == "flops" and "useful_gflop" in r), None)
    if flops is None:
        return None
    shape = flops.get("ffn_shape", "448x384x1536")
    for r in results:
        if "texts_per_second" in r:
            r["useful_gflops_per_second"] = flops["useful_gflop"] / r["seconds"]
            peak = matmul_peak(flops["matmul_gflops"], precision_of(r), shape)
            r["matmul_peak"] = {"shape": shape, "gflops_per_second": peak}
            r["fraction_of_matmul_peak"] = r["useful_gflops_per_second"] / peak if peak else None
    return flops


def summary(results):
    by = {(r["engine"] != "sbert_keras", r["variant"]): r for r in results}
    st = by.get((True, "torch"), {})
    ours = [r for r in results if r["engine"] == "sbert_keras" and "ratio_to_best_peer" in r]
    encode = [r for r in ours if r["variant"].startswith("encode_")]

    def best_ratio(rows, cls, gate=lambda r: True):
        ratios = [
            (r["ratio_to_best_peer"][cls], r["variant"]) for r in rows if cls in r["ratio_to_best_peer"] and gate(r)
        ]
        return max(ratios) if ratios else (None, None)

    out = {"targets": TARGETS}
    ratio, variant = best_ratio(ours, "float")
    out["float_class"] = {"best_ratio": ratio, "variant": variant}
    ratio, variant = best_ratio(ours, "int8", lambda r: r["meets_int8_gate"])
    out["int8_class"] = {"best_ratio": ratio, "variant": variant}
    ratio, variant = best_ratio(ours, "int8", lambda r: r["meets_int8_gate"] and precision_of(r) == "int8")
    out["int8_class_int8_paths_only"] = {"best_ratio": ratio, "variant": variant}
    st_latency = st.get("latency", {}).get("median_ms")
    if st_latency:
        out["single_query_median_ratio"] = {
            r["variant"]: r["latency"]["median_ms"] / st_latency for r in encode if "latency" in r
        }
    for r in results:
        if r["variant"].startswith("serve_") and "latency" in r and st_latency:
            out[r["variant"]] = {
                "latency_median_ratio": r["latency"]["median_ms"] / st_latency,
                "request_throughput_ratio": (
                    r["request_order"]["texts_per_second"] / st["request_order"]["texts_per_second"]
                ),
                "max_abs_diff_vs_reference": r.get("max_abs_diff"),
            }
    out["float32_max_abs_diff"] = {r["variant"]: r.get("max_abs_diff") for r in ours if precision_of(r) == "float32"}
    out["contended"] = [r["variant"] for r in results if r.get("contended")]
    out["failed"] = [f"{r['engine']} {r['variant']}: {r['error']}" for r in results if "error" in r]
    out["skipped"] = [f"{r['engine']} {r['variant']}: {r['skipped']}" for r in results if "skipped" in r]
    return out


def gflops_cell(result):
    if "useful_gflops_per_second" not in result:
        return ""
    fraction = result.get("fraction_of_matmul_peak")
    return f"{result['useful_gflops_per_second']:.0f}" + (f" ({fraction:.2f})" if fraction else "")


def markdown_table(results):
    """The results table of benchmarks/RESULTS.md (engine, variant, texts/s, min cos, Spearman, latency, ratios)."""
    rows = [
        "| engine | variant | texts/s | min cos | Spearman | single query median / p90 ms "
        "| ratio to best peer (float / int8) | useful GFLOP/s (fraction of matmul peak) | contended |",
        "|---" * 9 + "|",
    ]
    for r in results:
        if "texts_per_second" not in r:
            continue
        latency = r.get("latency")
        ratios = r.get("ratio_to_best_peer", {})
        rows.append(
            "| {} | {} | {:.0f} | {} | {} | {} | {} | {} | {} |".format(
                r["engine"],
                r["variant"],
                r["texts_per_second"],
                f"{r['min_cos']:.5f}" if "min_cos" in r else "",
                f"{r['spearman']:.5f}" if "spearman" in r else "",
                f"{latency['median_ms']:.1f} / {latency['p90_ms']:.1f}" if latency else "",
                " / ".join(f"{ratios[c]:.2f}" if c in ratios else "-" for c in ("float", "int8")),
                gflops_cell(r),
                "yes" if r.get("contended") else "no",
            )
        )
    return "\n".join(rows)
