"""A/B of the fused graph's LayerNorm: oneDNN's `_MklLayerNorm` vs the composite.

Two encoders of all-MiniLM-L6-v2 in one process: "onednn" is what `encode`
runs (`sbert_keras.runtime.kernels.onednn_layer_norm`: the fused kernel from
`FUSED_LAYER_NORM_MIN_ROWS` rows, the composite below); "composite" is the
same fused graph built while `onednn_layer_norm.layer_norm_available()` is patched to
say no, so every LayerNorm is the eight-kernel composite. Their passes over
the STS-B dev sentences (batch 32) are interleaved, so drift of a shared
machine hits both alike; each pass runs inside a `cpu_timing.CpuMonitor`,
and the report says whether other processes used the CPU meanwhile.

Printed: texts/s of every pass and the best, single-query median/p90 (one
sentence, what the composite branch serves), and the largest difference of
the two encoders' vectors.

    .venv/bin/python benchmarks/experiments/layer_norm_ab.py [--compute bfloat16] [--passes 5] [--quick]
"""

import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import cpu_timing  # noqa: E402

common.silence_tensorflow()

NAME = "layer_norm_ab"
QUERY = "A man is playing a guitar on the street."


def build(model_dir, precision, fused_norm, warmup):
    """A MiniLM `SentenceEncoder` whose fused graph (traced by `warmup`) uses the fused LayerNorm or not."""
    from sbert_keras import SentenceEncoder
    from sbert_keras.runtime.kernels import onednn_layer_norm

    encoder = SentenceEncoder.from_preset(str(model_dir))
    if fused_norm:
        encoder.encode(warmup, compute=precision, show_progress=False)
    else:
        with mock.patch.object(onednn_layer_norm, "layer_norm_available", lambda: False):
            encoder.encode(warmup, compute=precision, show_progress=False)
            encoder.encode([QUERY], compute=precision, show_progress=False)
    return encoder


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--compute", default="bfloat16", help="float32 or bfloat16 (default)")
    parser.add_argument("--passes", type=int, default=5, help="interleaved passes per variant")
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME, lines=100 if args.quick else None)
    if found is None:
        return 0
    texts, model_dir = found
    import numpy as np

    common.quiet_tf_python_logs()
    passes, queries = (1, 20) if args.quick else (args.passes, 300)
    encoders = {name: build(model_dir, args.compute, name == "onednn", texts[:64]) for name in ("composite", "onednn")}
    vectors = {name: e.encode(texts, compute=args.compute, show_progress=False) for name, e in encoders.items()}
    rates = {name: [] for name in encoders}
    monitor = cpu_timing.CpuMonitor()
    for _ in range(passes):
        for name, encoder in encoders.items():

            def run(batch, encoder=encoder):
                return encoder.encode(batch, compute=args.compute, show_progress=False)

            _, timing = cpu_timing.timed_passes(run, texts, 1, monitor, warmup_texts=8)
            rates[name].append(round(timing["texts_per_second"], 1))
    for name, encoder in encoders.items():
        latency = cpu_timing.latency_ms(
            lambda q, encoder=encoder: encoder.encode([q], compute=args.compute), [QUERY] * queries, monitor
        )
        common.emit(
            benchmark=NAME,
            variant=name,
            precision=args.compute,
            texts=len(texts),
            texts_per_second_passes=rates[name],
            texts_per_second_best=max(rates[name]),
            query_median_ms=round(latency["median_ms"], 3),
            query_p90_ms=round(latency["p90_ms"], 3),
        )
    a, b = vectors["composite"], vectors["onednn"]
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    common.emit(
        benchmark=NAME,
        kind="summary",
        speedup_best=round(max(rates["onednn"]) / max(rates["composite"]), 3),
        max_abs_diff=float(np.abs(a - b).max()),
        min_cosine=float(cosine.min()),
        cpu=sorted(cpu_timing.cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16"}),
        **monitor.report(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
