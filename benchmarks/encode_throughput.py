"""Encode throughput of all-MiniLM-L6-v2 on the 3,000 STS-B dev sentences.

Measures sentences/s of three paths of our library (batch 32):
  (a) `encode(compute="float32")`: smart batching (length-sorted batches, each
      padded to its longest text);
  (b) `encode(compute="bfloat16")`: the same with bf16 matmuls;
  (c) `encoder.predict(np.array(texts), batch_size=32)`: the plain Keras path,
      every text padded to `sequence_length` (256) tokens.
Each path is warmed up with 64 texts, then a full pass is timed. The peer
(sentence-transformers, PyTorch, 2 threads) runs the same texts in its own
process (`peer/st_encode.py`); its embeddings give the float32 parity figure.
Also estimated: the GFLOP/s each path achieves, from the token counts of its
padded batches, against a rough peak of this CPU.

    .venv/bin/python benchmarks/encode_throughput.py [--quick] [--peer-python PATH]
"""

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "encode_throughput"
BATCH_SIZE = 32
WARMUP_TEXTS = 64
FLOAT32_PARITY_TARGET = 1e-5
BF16_COSINE_TARGET = 0.999
FP32_FLOPS_PER_CYCLE = 32


def cpu_peak():
    """`({precision: GFLOP/s}, assumption)`: a rough peak of the CPUs this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mhz, model, flags = None, "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "cpu MHz" and mhz is None:
                    mhz = float(value)
                elif key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    if mhz is None:
        return {}, "no 'cpu MHz' in /proc/cpuinfo: peak unknown"
    peak = cores * mhz / 1000 * FP32_FLOPS_PER_CYCLE
    bf16_factor = 2 if "avx512_bf16" in flags else 1
    assumption = (
        f"{cores} cores (nproc; vCPUs counted as cores, halve if they are SMT siblings) x "
        f"{mhz:.0f} MHz ('cpu MHz' of /proc/cpuinfo, {model}) x {FP32_FLOPS_PER_CYCLE} fp32 "
        "FLOP/cycle (AVX-512 FMA: 2 FMA pipes x 8 fp32 lanes x 2, i.e. Zen 4's double-pumped "
        "256-bit units; a CPU with two full 512-bit FMA units would be 64); bfloat16: x "
        f"{bf16_factor} "
        f"({'AVX512-BF16 VDPBF16PS: 2 bf16 products per fp32 lane' if bf16_factor == 2 else 'no AVX512-BF16'}"
        f"{'; AMX tiles present, not modelled' if 'amx_bf16' in flags else ''})"
    )
    return {"float32": peak, "bfloat16": peak * bf16_factor}, assumption


class FlopModel:
    """FLOPs of a BERT encoder forward pass.

    Per sequence padded to width W: 2 x (parameters of the transformer
    layers) x W for the dense matmuls, plus 4 x L x W^2 x H for the
    attention scores and the weighted sum (embeddings, layer norms, softmax
    and pooling are neglected).
    """

    def __init__(self, backbone):
        self.layer_params = sum(int(w.numpy().size) for w in backbone.weights if w.path.startswith("transformer_layer"))
        self.num_layers = backbone.num_layers
        self.hidden = backbone.hidden_dim

    def sequence(self, width):
        return 2.0 * self.layer_params * width + 4.0 * self.num_layers * width**2 * self.hidden

    def batches(self, widths_and_sizes):
        return sum(size * self.sequence(width) for width, size in widths_and_sizes)


def padded_batches(order, lengths, batch_size):
    """`(width, size)` of batches taken in `order`, each padded to its longest text.

    `encode` orders by token length (stable); sentence-transformers by characters.
    """
    return [
        (int(lengths[order[s : s + batch_size]].max()), len(order[s : s + batch_size]))
        for s in range(0, len(order), batch_size)
    ]


def main():
    parser = common.base_parser(__doc__.splitlines()[0])
    args = parser.parse_args()
    found = common.sts_dev_texts_and_model(NAME, lines=100 if args.quick else None)
    if found is None:
        return 0
    texts, model_dir = found

    import numpy as np

    common.quiet_tf_python_logs()
    from sbert_keras import SentenceEncoder

    with common.Timer() as load:
        encoder = SentenceEncoder.from_preset(str(model_dir))
    ids, num_truncated = encoder.preprocessor.tokenize(texts)
    lengths = ids.row_lengths().numpy()
    seq_len = encoder.sequence_length
    flops = FlopModel(encoder.backbone)
    useful = float(sum(flops.sequence(int(n)) for n in lengths))
    peak, assumption = cpu_peak()
    common.emit(
        benchmark=NAME,
        kind="config",
        quick=args.quick,
        texts=len(texts),
        batch_size=BATCH_SIZE,
        sequence_length=seq_len,
        tokens=int(lengths.sum()),
        mean_tokens=float(lengths.mean()),
        max_tokens=int(lengths.max()),
        num_truncated=num_truncated,
        load_seconds=load.seconds,
        transformer_layer_params=flops.layer_params,
        peak_gflops=peak,
        peak_assumption=assumption,
    )

    def report(path, seconds, executed_flops, precision="float32", **extra):
        fields = dict(
            benchmark=NAME,
            kind="path",
            path=path,
            texts=len(texts),
            seconds=seconds,
            sentences_per_second=len(texts) / seconds,
            executed_gflop=executed_flops / 1e9,
            gflops_per_second=executed_flops / seconds / 1e9,
            useful_gflops_per_second=useful / seconds / 1e9,
            peak_gflops=peak.get(precision),
            fraction_of_peak=(executed_flops / seconds / 1e9 / peak[precision]) if peak else None,
            **extra,
        )
        common.emit(**fields)
        return fields

    results, embeddings = {}, {}
    for precision in ("float32", "bfloat16"):
        encoder.encode(texts[:WARMUP_TEXTS], batch_size=BATCH_SIZE, show_progress=False, compute=precision)
        with common.Timer() as timer:
            embeddings[precision] = encoder.encode(texts, batch_size=BATCH_SIZE, show_progress=False, compute=precision)
        results[precision] = report(
            f"encode_{precision}",
            timer.seconds,
            flops.batches(padded_batches(np.argsort(-lengths, kind="stable"), lengths, BATCH_SIZE)),
            precision=precision,
            padding="smart batching: length-sorted, each batch padded to its longest text",
        )

    array = np.array(texts)
    encoder.predict(array[:WARMUP_TEXTS], batch_size=BATCH_SIZE, verbose=0)
    with common.Timer() as timer:
        embeddings["fixed"] = np.asarray(encoder.predict(array, batch_size=BATCH_SIZE, verbose=0))
    results["fixed"] = report(
        "predict_fixed_length",
        timer.seconds,
        len(texts) * flops.sequence(seq_len),
        padding=f"every text padded to {seq_len} tokens (Keras predict on raw strings)",
        max_abs_diff_vs_encode_float32=float(np.abs(embeddings["fixed"] - embeddings["float32"]).max()),
    )

    f32, bf16 = embeddings["float32"].astype("float64"), embeddings["bfloat16"].astype("float64")
    cosine = np.sum(f32 * bf16, 1) / (np.linalg.norm(f32, axis=1) * np.linalg.norm(bf16, axis=1))
    summary = dict(
        benchmark=NAME,
        kind="summary",
        quick=args.quick,
        texts=len(texts),
        ours_sentences_per_second={k: v["sentences_per_second"] for k, v in results.items()},
        smart_batching_speedup_vs_fixed=(
            results["float32"]["sentences_per_second"] / results["fixed"]["sentences_per_second"]
        ),
        bf16_min_cosine_vs_float32=float(cosine.min()),
        bf16_cosine_target=BF16_COSINE_TARGET,
        bf16_meets_target=bool(cosine.min() >= BF16_COSINE_TARGET),
        peak_gflops=peak,
        peak_assumption=assumption,
    )

    python, reason = common.peer_or_reason(args.peer_python)
    if python is None:
        summary["peer"] = reason
    else:
        with tempfile.TemporaryDirectory() as tmp:
            texts_file, out_file = Path(tmp) / "texts.json", Path(tmp) / "peer.npy"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            try:
                peer = common.run_peer(
                    "st_encode.py",
                    [
                        "--texts",
                        texts_file,
                        "--out",
                        out_file,
                        "--batch-size",
                        BATCH_SIZE,
                        "--model",
                        model_dir,
                    ],
                    python=python,
                )[-1]
                peer_embeddings = np.load(out_file)
            except common.PeerError as error:
                summary.update(peer="failed", peer_error=str(error))
                peer = None
        if peer is not None:
            peer_flops = flops.batches(padded_batches(np.argsort([-len(t) for t in texts]), lengths, BATCH_SIZE))
            peer_sps = peer["sentences_per_second"]
            max_diff = float(np.abs(embeddings["float32"] - peer_embeddings).max())
            summary.update(
                peer=dict(
                    peer,
                    gflops_per_second=peer_flops / peer["seconds"] / 1e9,
                    useful_gflops_per_second=useful / peer["seconds"] / 1e9,
                ),
                ratio_ours_over_peer={k: v["sentences_per_second"] / peer_sps for k, v in results.items()},
                float32_max_abs_diff_vs_peer=max_diff,
                float32_parity_target=FLOAT32_PARITY_TARGET,
                float32_meets_target=bool(max_diff <= FLOAT32_PARITY_TARGET),
            )
    common.emit(**summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
