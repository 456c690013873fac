"""What dropout costs a training step on a GPU (JAX): the regression objective with each kind of dropout off.

The train measurement of `benchmarks/gpu.py` (a BERT-base-shaped encoder with
seeded random weights, the regression objective on the same STS-B batches,
every batch padded to 64 tokens, AdamW 2e-5; `gpu_keras.train`), once per
variant, each in its own process:

- `base`: the encoder as built (dropout 0.1 on the embeddings, on the
  attention weights and on each sublayer's output);
- `no_attention`: the attention weights' dropout off (Keras'
  `MultiHeadAttention` then computes attention with `dot_product_attention`);
- `no_hidden`: the embeddings' and sublayer outputs' dropout off, the
  attention weights' kept;
- `none`: every dropout off.

A variant sets the `rate` of the loaded model's `Dropout` layers (and the
`MultiHeadAttention` layers' own rate where the attention's dropout is off)
before the first step traces; nothing of Keras is changed. It prints one JSON
line per variant and batch size: median seconds a step, samples/s, the
warm-up (compilation) seconds, first and last loss, peak GPU memory.
`--quick` runs the tiny sizes on the CPU (bfloat16: XLA's CPU has no float16
attention), to check the code paths.

    make gpu-carry                          # here; then, on the GPU machine, with gpu_carry/ carried:
    PYTHONUNBUFFERED=1 python3 benchmarks/experiments/gpu_dropout.py [--variants base,none] [--batch-sizes 128]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import gpu  # noqa: E402
import gpu_data  # noqa: E402

VARIANTS = ("base", "no_attention", "no_hidden", "none")
KEPT = ("median_step_s", "steps_per_s", "samples_per_s", "warmup_s", "loss_first", "loss_last", "loss_finite")


def set_dropout(encoder, variant):
    """Turns off the dropout `variant` names on `encoder`'s layers; returns the `(attention?, rate)` pairs left."""
    import keras

    layers = list(encoder._flatten_layers(include_self=False, recursive=True))
    attention = [layer for layer in layers if isinstance(layer, keras.layers.MultiHeadAttention)]
    inner = {id(getattr(layer, "_dropout_layer", None)) for layer in attention}
    off = {"base": (), "no_attention": (True,), "no_hidden": (False,), "none": (True, False)}[variant]
    for layer in layers:
        if isinstance(layer, keras.layers.Dropout) and (id(layer) in inner) in off:
            layer.rate = 0.0
    if True in off:
        for layer in attention:
            layer._dropout = 0.0
    return sorted({(id(layer) in inner, layer.rate) for layer in layers if isinstance(layer, keras.layers.Dropout)})


def child(args):
    """One variant at one batch size, in this process (`KERAS_BACKEND=jax`)."""
    import gpu_keras

    load = gpu_keras.load_encoder
    rates = []

    def load_encoder(model_dir, precision):
        encoder = load(model_dir, precision)
        rates.extend(set_dropout(encoder, args.variant))
        return encoder

    gpu_keras.load_encoder = load_encoder  # this script's own reference, read by `gpu_keras.train`
    sizes = gpu_data.SIZES[args.sizes]
    run = types.SimpleNamespace(model=str(Path(args.work, "model")), compute=args.compute, warmup=sizes["warmup_steps"])
    figures = gpu_keras.train(run, gpu_data.Arrays(Path(args.work, "arrays.npz")), args.batch_size, None)
    record = {"variant": args.variant, "precision": args.compute, "batch_size": args.batch_size}
    record.update({k: figures.get(k) for k in KEPT}, peak_memory_mib=figures.get("peak_memory_mib"))
    record["dropout_rates"] = [{"attention": a, "rate": r} for a, r in rates]
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--batch-sizes", default=None, help="comma-separated (default: 128; --quick: 16)")
    parser.add_argument("--precision", default=None, help="float16 (default) or bfloat16 (--quick's default)")
    parser.add_argument("--carry", default=str(gpu.CARRY))
    parser.add_argument("--data", default=None)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds for one variant's process")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", default=None)
    parser.add_argument("--variant", default=None)
    parser.add_argument("--sizes", default="full")
    parser.add_argument("--compute", default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    if args.child:
        return child(args)
    sizes_name = "smoke" if args.quick else "full"
    precision = args.precision or ("bfloat16" if args.quick else "float16")
    batch_sizes = [int(b) for b in (args.batch_sizes or ("16" if args.quick else "128")).split(",")]
    work = Path(tempfile.mkdtemp(prefix="sbert_dropout_"))
    paths = gpu.install_wheels(args.carry, Path(tempfile.gettempdir()) / "gpu_site")
    tokenizer = Path(args.tokenizer or Path(args.carry, "tokenizer"))
    gpu_data.build_model_folder(gpu_data.SIZES[sizes_name], tokenizer, work / "model")
    data = args.data or Path(args.carry, "sts-train.csv")
    gpu_data.prepare_arrays(gpu_data.SIZES[sizes_name], data, tokenizer / "tokenizer.json", work / "arrays.npz")
    env = gpu.child_env(paths, args.quick, False)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env["PYTHONPATH"]])
    for batch_size in batch_sizes:
        for variant in args.variants.split(","):
            command = [sys.executable, __file__, "--child", "--work", str(work), "--variant", variant]
            command += ["--sizes", sizes_name, "--compute", precision, "--batch-size", str(batch_size)]
            start = time.time()
            try:
                done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
                lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                error = None if lines else gpu_data.one_line(done.stderr)[-400:]
            except subprocess.TimeoutExpired:
                lines, error = [], f"timed out after {args.timeout:.0f} s"
            for line in lines:
                print(line, flush=True)
            if error:
                print(json.dumps({"variant": variant, "batch_size": batch_size, "error": error}), flush=True)
            print(f"{variant} at batch {batch_size}: {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
