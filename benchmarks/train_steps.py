"""Training steps at base size: the regression objective, ours against sentence-transformers, batch by batch.

50 steps (`--steps`) of the regression objective (cosine of the pair, MSE
against STS-B score / 5), batch 16, AdamW lr 2e-5 with 10 % linear warmup
then linear decay, weight decay 0.01, gradient norm clipped at 1.0, on a
BERT-base-shaped encoder (12 layers, 768 wide, random weights:
`--model DIR`, default `/work/scratch/base_shape/bert-base`, as
`peer/make_base_shape.py` writes it; `--model minilm` takes all-MiniLM-L6-v2).
Both sides train on the first steps x 16 pairs of STS-B train in file
order, not shuffled, so that batch i is the same 16 pairs on both sides.

Ours (`--path ordered`, the default) is what `train_objective("regression",
...)` builds, with the batches kept in order (`train_objective` has no
option for that: it always shuffles): `objective_inputs` (labels score / 5),
`build_model` (`RegressionSiamese`), `siamese_dataset(batching="shuffle",
shuffle=False)` (each batch padded to the bucket length of
`defaults.BUCKETS` at or above its longest text, both columns alike),
`paper_optimizer`, `compile`, `fit` under `compute="auto"`
(`mixed_bfloat16` on a CPU with AVX512-BF16 or AMX). `--path
train_objective` calls `train_objective(..., batching="shuffle")` itself on
the same pairs: the same steps, but seeded random batches, so the batch
compositions differ from the peer's. `--jit-compile` (ordered path) passes
`compile(jit_compile=...)`; Keras' default is `"auto"`.

The peer (`peer/st_train_steps.py`, its own process, 2 torch threads; both
sides `--threads N` with that option) runs
sentence-transformers' CosineSimilarityLoss in the plain PyTorch loop of
`peer/st_sts_finetune.py` (AdamW, `get_linear_schedule_with_warmup`,
clipping 1.0) on the same ordered batches, each column padded to its own
longest text, in float32 (sentence-transformers' default on a CPU).

Timing: each step from Keras' `on_train_batch_begin` to
`on_train_batch_end` (the peer: from the tokenisation of its batch to
`zero_grad`). The first `--warmup-steps` (5) steps (tracing, oneDNN
warm-up) are left out: `timed_seconds` is the wall time from the start of
step warmup + 1 to the end of the last step, `steps_per_second` = timed
steps / `timed_seconds` (steady state). `total_seconds` spans all steps.

FLOPs: a training step counts 3 x its forward FLOPs; the forward is
`encode_throughput.FlopModel(encoder.backbone)` summed over both sentences
of the 16 pairs at their padded widths (ours: the bucket width of the batch;
the peer: each column's widths, from its own tokenizer). The GFLOP/s of the
timed steps is set against a bare `tf.matmul` measured in the same run at
the feed-forward shape (16 x median padded width, hidden x intermediate,
`common.matmul_gflops`), in bfloat16 (`fraction_of_bf16_peak`, both
sides) and float32 (`fraction_of_float32_peak`); under `KERAS_BACKEND=jax`
or `torch` there is no bare TensorFlow matmul, so only steps/s (and the
ratio to the peer) are reported. `useful_*` figures count
the peer's widths on both sides (the least padding). Peak memory is `VmHWM`
(`common.peak_rss_mb`) of each process. `other_cpu_cores` (cpu_timing's
`CpuMonitor`) says how busy the rest of the machine was during the timed
steps.

Lines: `kind: "ours"`, `kind: "peer"`, then `kind: "summary"` with
`ratio_steps_per_second_ours_over_peer` and the target (1.5).

    .venv/bin/python benchmarks/train_steps.py [--quick] [--model DIR|minilm]
        [--peer-python /work/peers/st/bin/python] [--no-peer]
"""

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from cpu_timing import CpuMonitor  # noqa: E402

common.silence_tensorflow()

NAME = "train_steps"
TARGET_RATIO = 1.5
BASE_MODEL = "/work/scratch/base_shape/bert-base"
TRAIN_FILE = "data/stsbenchmark/sts-train.csv"
QUICK_STEPS, QUICK_WARMUP = 5, 2
MATMUL_REPEATS = 10


# === FLOP and timing accounting (pure) ===


def step_forward_flops(sequence_flops, widths, batch_size):
    """Forward FLOPs of each step: `batch_size` x the FLOPs of each column's padded width, summed.

    Args:
        sequence_flops: callable width -> FLOPs of one sequence (`FlopModel.sequence`).
        widths: list of `[width of column a, width of column b]`, one per step.
        batch_size: int. Rows of every step.
    """
    return [batch_size * sum(sequence_flops(int(w)) for w in pair) for pair in widths]


def window_timing(bounds, warmup):
    """Timing of the steps after the first `warmup`, from `(start, end)` per step.

    Returns `timed_steps` (1-based first and last), `timed_seconds` (start of
    the first timed step to the end of the last), `steps_per_second`,
    `median_step_seconds`, `total_seconds` (all steps) and each step's seconds.
    """
    if not 0 <= warmup < len(bounds):
        raise ValueError(f"warmup {warmup} leaves no timed step out of {len(bounds)}")
    window = bounds[warmup:]
    seconds = window[-1][1] - window[0][0]
    return {
        "timed_steps": [warmup + 1, len(bounds)],
        "timed_seconds": seconds,
        "steps_per_second": len(window) / seconds,
        "median_step_seconds": statistics.median(end - start for start, end in window),
        "total_seconds": bounds[-1][1] - bounds[0][0],
        "step_seconds": [end - start for start, end in bounds],
    }


def flop_figures(forward_flops, warmup, timed_seconds, peaks, prefix=""):
    """Training GFLOP/s of the timed steps (3 x forward) and its fraction of each peak (`{name: GFLOP/s}`)."""
    gflops = 3.0 * sum(forward_flops[warmup:]) / timed_seconds / 1e9
    figures = {f"{prefix}train_gflops_per_second": gflops}
    for name, peak in peaks.items():
        figures[f"{prefix}fraction_of_{name}_peak"] = gflops / peak
    return figures


def summary_fields(ours, peer):
    """Each side's steps/s, fraction of the bf16 peak, peak RSS and contention, and the ratio against the target."""
    keys = ("steps_per_second", "fraction_of_bf16_peak", "peak_rss_mb", "contended")
    fields = {f"{side}_{k}": line.get(k) for side, line in (("ours", ours), ("peer", peer)) for k in keys}
    ratio = ours["steps_per_second"] / peer["steps_per_second"] if peer.get("steps_per_second") else None
    return dict(
        fields,
        ratio_steps_per_second_ours_over_peer=ratio,
        target_ratio=TARGET_RATIO,
        meets_target=None if ratio is None else bool(ratio >= TARGET_RATIO),
    )


# === Our side ===


def resolve_model(value):
    """`--model`: `"minilm"` -> the MiniLM folder (None after a skip line), else the folder (None if absent)."""
    if value == "minilm":
        return common.model_path(NAME)
    if not (Path(value) / "modules.json").is_file():
        hint = "build it with `benchmarks/encode_peers.py --shape base --base-dir DIR` (peer/make_base_shape.py)"
        common.emit(benchmark=NAME, skipped=f"{value} is not a sentence-transformers folder; {hint}")
        return None
    return Path(value)


def step_clock():
    """A Keras callback: `(start, end)` of every train step, and a `CpuMonitor` over steps `warmup + 1` .. `steps`."""
    import time

    import keras

    class StepClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.bounds, self.warmup, self.steps, self.monitor = [], 0, None, CpuMonitor()

        def on_train_batch_begin(self, batch, logs=None):
            if len(self.bounds) == self.warmup:
                self.monitor.__enter__()
            self.bounds.append([time.perf_counter(), None])

        def on_train_batch_end(self, batch, logs=None):
            self.bounds[-1][1] = time.perf_counter()
            if len(self.bounds) == self.steps:
                self.monitor.__exit__(None, None, None)

    return StepClock()


def batch_widths(dataset):
    """`[[width of sentence_a, width of sentence_b], ...]`: the padded widths of each batch of one pass."""
    return [
        [int(features[f"{role}_token_ids"].shape[1]) for role in ("sentence_a", "sentence_b")]
        for features, _ in dataset
    ]


def train_ours(args, encoder, pairs, clock):
    """Trains the steps; returns `(widths, details)`."""
    from sbert_keras.training.objectives import build_model
    from sbert_keras.training.objectives import objective_inputs
    from sbert_keras.training.objectives import objective_loss
    from sbert_keras.training.pipelines import siamese_dataset
    from sbert_keras.training.schedules import paper_optimizer
    from sbert_keras.training.trainer import seed_everything
    from sbert_keras.training.trainer import train_objective

    shuffled = args.path == "train_objective"
    columns, labels, extra = objective_inputs("regression", pairs)
    seed_everything(args.seed)
    model = build_model("regression", encoder, extra)
    seed_everything(args.seed, model)
    dataset = siamese_dataset(
        columns,
        labels,
        encoder.preprocessor,
        model.active_roles,
        args.batch_size,
        shuffle=shuffled,
        seed=args.seed,
        batching="shuffle",
        objective="regression",
        epochs=1,
    )
    widths = batch_widths(dataset)  # the batches of the pass fit runs: a seeded plan is the same each time
    common_args = dict(epochs=1, batch_size=args.batch_size, learning_rate=2e-5, warmup_fraction=0.1, seed=args.seed)
    if shuffled:
        model, _ = train_objective(
            "regression", encoder, pairs, callbacks=[clock], verbose=0, batching="shuffle", **common_args
        )
    else:
        model.compile(
            optimizer=paper_optimizer(len(widths), 2e-5, 0.1),
            loss=objective_loss("regression"),
            jit_compile=args.jit_compile,
        )
        model.fit(dataset, epochs=1, callbacks=[clock], verbose=0, shuffle=False)
    details = {
        "jit_compile": model.jit_compile,
        "optimizer": type(model.optimizer).__name__,
        "weight_decay": float(model.optimizer.weight_decay or 0.0),
        "global_clipnorm": model.optimizer.global_clipnorm,
        "batch_order": "seeded random (train_objective)" if shuffled else "file order",
    }
    return widths, details


def matmul_peaks(m, k, n):
    """`{"bf16": GFLOP/s, "float32": GFLOP/s}` of a bare `m x k @ k x n` matmul (median of a few)."""
    return {
        name: common.matmul_gflops(m, k, n, dtype, repeats=MATMUL_REPEATS)
        for name, dtype in (("bf16", "bfloat16"), ("float32", "float32"))
    }


def run_peer(args, python, model_dir, train_path):
    """The peer's JSON line, or `{"error": ...}`."""
    settings = {"train": train_path, "model": model_dir, "steps": args.steps, "batch-size": args.batch_size}
    settings.update({"warmup-steps": args.warmup_steps, "seed": args.seed, "threads": args.threads})
    flags = [x for key, value in settings.items() if value is not None for x in (f"--{key}", value)]
    try:
        return common.run_peer("st_train_steps.py", flags, python=python, timeout=3600)[-1]
    except common.PeerError as error:
        return {"error": str(error)}


def parse_args():
    from sbert_keras.utils import defaults

    parser = common.base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=None,
        help=f"sentence-transformers folder or `minilm` (default {BASE_MODEL}; with --quick: minilm)",
    )
    parser.add_argument("--steps", type=int, default=None, help=f"train steps (default 50; {QUICK_STEPS} with --quick)")
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=None,
        help=f"first steps left out of the timing (default 5; {QUICK_WARMUP} with --quick)",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--compute",
        choices=defaults.POLICY_COMPUTES,
        default="auto",
        help="our training precision (`set_compute`, before the encoder is built)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="dropout seed (and batch order with --path train_objective)"
    )
    parser.add_argument("--path", choices=("ordered", "train_objective"), default="ordered")
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "on", "off"),
        default="auto",
        help="`compile(jit_compile=...)` of the ordered path (XLA)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of both sides: TensorFlow's intra- and inter-op threads and the peer's torch threads "
        "(default: TensorFlow's own, all cores; torch 2)",
    )
    parser.add_argument("--no-peer", action="store_true", help="our side only")
    args = parser.parse_args()
    args.model = args.model or ("minilm" if args.quick else BASE_MODEL)
    args.steps = args.steps or (QUICK_STEPS if args.quick else 50)
    args.warmup_steps = args.warmup_steps if args.warmup_steps is not None else (QUICK_WARMUP if args.quick else 5)
    args.jit_compile = {"auto": "auto", "on": True, "off": False}[args.jit_compile]
    if not 0 <= args.warmup_steps < args.steps:
        parser.error("--warmup-steps must be in [0, --steps)")
    return args


def main():
    args = parse_args()
    paths = common.shared_files(NAME, TRAIN_FILE)
    model_dir = resolve_model(args.model)
    if paths is None or model_dir is None:
        return 0

    on_tensorflow = os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow"
    if on_tensorflow:
        import tensorflow as tf

        if args.threads:
            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        common.quiet_tf_python_logs()
    from encode_throughput import FlopModel

    from sbert_keras import SentenceEncoder
    from sbert_keras import set_compute
    from sbert_keras.data import examples
    from sbert_keras.data import readers

    rows = args.steps * args.batch_size
    train = readers.read_sts(paths[0])
    if len(train) < rows:
        sys.exit(f"{paths[0]} holds {len(train)} pairs, fewer than {args.steps} x {args.batch_size}")
    pairs = examples.SentencePairs(train.sentence_a[:rows], train.sentence_b[:rows], train.labels[:rows])
    precision = set_compute(args.compute)
    encoder = SentenceEncoder.from_preset(str(model_dir))
    backbone = encoder.backbone
    flops = FlopModel(backbone)
    clock = step_clock()
    clock.warmup, clock.steps = args.warmup_steps, args.steps
    widths, details = train_ours(args, encoder, pairs, clock)
    if len(clock.bounds) != args.steps:
        sys.exit(f"fit ran {len(clock.bounds)} steps, expected {args.steps}")
    timing = window_timing([tuple(b) for b in clock.bounds], args.warmup_steps)
    ours_rss = common.peak_rss_mb()
    m = args.batch_size * int(statistics.median(w for pair in widths for w in pair))
    # The bare matmul is TensorFlow's; on JAX and PyTorch only steps/s are compared.
    peaks = matmul_peaks(m, backbone.hidden_dim, backbone.intermediate_dim) if on_tensorflow else {}
    forward = step_forward_flops(flops.sequence, widths, args.batch_size)
    config = dict(
        benchmark=NAME,
        quick=args.quick,
        model=str(model_dir),
        layers=backbone.num_layers,
        hidden=backbone.hidden_dim,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        batch_size=args.batch_size,
        pairs=rows,
        timing_note="steps_per_second = timed steps / timed_seconds (steps warmup+1..steps); "
        "total_seconds spans all steps",
        matmul_shape=[m, backbone.hidden_dim, backbone.intermediate_dim],
        matmul_gflops=peaks,
    )
    ours = dict(
        config,
        kind="ours",
        side="sbert_keras",
        backend=os.environ.get("KERAS_BACKEND", "tensorflow"),
        path=args.path,
        precision=precision,
        threads=args.threads,
        **details,
        **timing,
        **flop_figures(forward, args.warmup_steps, timing["timed_seconds"], peaks),
        peak_rss_mb=ours_rss,
        widths=widths,
        **clock.monitor.report(),
    )
    peer = None
    if not args.no_peer:
        python, reason = common.peer_or_reason(args.peer_python)
        peer = run_peer(args, python, model_dir, paths[0]) if python else {"error": reason}
    if peer and "widths" in peer:
        peer_forward = step_forward_flops(flops.sequence, peer["widths"], args.batch_size)
        ours.update(flop_figures(peer_forward, args.warmup_steps, timing["timed_seconds"], peaks, "useful_"))
        peer.update(flop_figures(peer_forward, args.warmup_steps, peer["timed_seconds"], peaks))
        ours["padding_overhead"] = sum(forward[args.warmup_steps :]) / sum(peer_forward[args.warmup_steps :]) - 1
    common.emit(**ours)
    if peer is None:
        return 0
    common.emit(**{**config, **peer, "kind": "peer", "side": "sentence-transformers"})
    common.emit(
        benchmark=NAME,
        kind="summary",
        quick=args.quick,
        model=str(model_dir),
        timed_steps=timing["timed_steps"],
        **summary_fields(ours, peer),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
