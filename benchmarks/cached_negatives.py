"""Cached in-batch negatives (GradCache): peak memory and time per step vs plain batches.

Trains all-MiniLM-L6-v2 with in-batch negatives on SNLI (premise,
entailment) pairs (`nli_to_pairs(read_nli(train))`) for a few steps in
each configuration, each in a fresh subprocess so that its peak RSS is its
own:

- `cached`: `CachedContrastiveSiamese`, batch 512, mini-batch 32;
- `plain`: `ContrastiveSiamese`, batch 64 (the batch that fits without
  caching) and batch 512 (the same batch without caching; skipped with
  `--no-plain-large`, reported as failed if the process dies).

Each configuration prints one JSON line: its peak RSS (`ru_maxrss` of the
child, and `VmHWM`), the RSS after the model is built (before `fit`), and
seconds/step (`steady_seconds_per_step` leaves out the first, traced step).
A last line gives the ratios to `plain` batch 64. Adam(2e-5), no warmup (the
loss values are not the point here; `recipes.py --recipe d` measures
quality).

    .venv/bin/python benchmarks/cached_negatives.py [--quick] [--steps N] [--compute ...]
"""

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.silence_tensorflow()

NAME = "cached_negatives"
TRAIN = "data/snli/snli_1.0_train_subset.jsonl"
# (kind, batch size, mini-batch size)
FULL_CONFIGS = (("cached", 512, 32), ("plain", 64, None), ("plain", 512, None))
QUICK_CONFIGS = (("cached", 16, 4),)  # one process: the smoke run stays under a minute
FULL_STEPS, QUICK_STEPS = 3, 2


def parse_args():
    parser = common.base_parser(__doc__.splitlines()[0])
    common.add_training_args(parser, "SNLI lines read (default: enough for the steps)")
    parser.add_argument("--steps", type=int, default=None, help=f"steps per configuration ({FULL_STEPS})")
    parser.add_argument("--no-plain-large", action="store_true", help="skip plain batch 512")
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        default=12.0,
        help="cap of each child's data segment (RLIMIT_DATA, 12 GiB): a configuration "
        "that needs more fails alone instead of pushing the machine out of memory",
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "BATCH", "MINI_BATCH"), help=argparse.SUPPRESS)
    return parser.parse_args()


def run_child(args, model_dir, train_path):
    """One configuration, in this (fresh) process: prints its JSON line."""
    kind, batch_size, mini_batch = args.child[0], int(args.child[1]), args.child[2]
    cap = int(args.max_memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    import keras
    import tensorflow as tf

    common.quiet_tf_python_logs()
    from sbert_keras import CachedContrastiveSiamese
    from sbert_keras import ContrastiveSiamese
    from sbert_keras import SentenceEncoder
    from sbert_keras import set_compute
    from sbert_keras.data import examples
    from sbert_keras.data import readers

    steps = args.steps
    needed = batch_size * steps
    pairs = examples.nli_to_pairs(readers.read_nli(train_path, limit=args.limit or 4 * needed))
    if len(pairs) < needed:
        common.emit(benchmark=NAME, kind=kind, skipped=f"{len(pairs)} entailment pairs < {needed} needed")
        return
    policy = set_compute(args.compute)
    keras.utils.set_random_seed(args.seed)
    encoder = SentenceEncoder.from_preset(str(model_dir))
    if kind == "cached":
        model = CachedContrastiveSiamese(encoder, mini_batch_size=int(mini_batch))
    else:
        model = ContrastiveSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(2e-5))
    columns = (tf.constant(pairs.anchor[:needed]), tf.constant(pairs.positive[:needed]))
    dataset = tf.data.Dataset.from_tensor_slices((columns,)).batch(batch_size, drop_remainder=True)
    rss_before_fit = common.current_rss_mb()
    timer = common.fit_timer()
    history = model.fit(dataset, epochs=1, callbacks=[timer], verbose=0)
    common.emit(
        benchmark=NAME,
        kind=kind,
        batch_size=batch_size,
        mini_batch_size=None if kind == "plain" else int(mini_batch),
        policy=policy,
        quick=args.quick,
        max_memory_gb=args.max_memory_gb,
        ru_maxrss_mb=common.ru_maxrss_mb(),
        peak_rss_mb=common.peak_rss_mb(),
        rss_before_fit_mb=rss_before_fit,
        **timer.summary(),
        final_logs=common.last_history(history),
    )


def run_config(args, kind, batch_size, mini_batch):
    """Runs one configuration in a subprocess; returns its JSON object."""
    command = [sys.executable, __file__, "--child", kind, str(batch_size), str(mini_batch)]
    command += ["--steps", str(args.steps), "--compute", args.compute, "--seed", str(args.seed)]
    command += ["--max-memory-gb", str(args.max_memory_gb)]
    command += ["--limit", str(args.limit)] if args.limit else []
    command += ["--quick"] if args.quick else []
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        return {
            "benchmark": NAME,
            "kind": kind,
            "batch_size": batch_size,
            "failed": result.returncode,
            "max_memory_gb": args.max_memory_gb,
            "error": tail,
        }
    return lines[-1]


def main():
    args = parse_args()
    paths = common.shared_files(NAME, TRAIN)
    model_dir = common.model_path(NAME)
    if paths is None or model_dir is None:
        return 0
    args.steps = args.steps or (QUICK_STEPS if args.quick else FULL_STEPS)
    if args.child:
        run_child(args, model_dir, paths[0])
        return 0
    configs = QUICK_CONFIGS if args.quick else FULL_CONFIGS
    if args.no_plain_large:
        configs = [c for c in configs if not (c[0] == "plain" and c[1] > 64)]
    results = []
    for kind, batch_size, mini_batch in configs:
        results.append(run_config(args, kind, batch_size, mini_batch))
        print(json.dumps(results[-1]), flush=True)
    base = next((r for r in results if r.get("kind") == "plain" and "peak_rss_mb" in r), None)
    if base is not None:
        common.emit(
            benchmark=NAME,
            summary=True,
            baseline=f"plain batch {base['batch_size']}",
            peak_rss_ratio_to_baseline={
                f"{r['kind']} {r['batch_size']}": r["peak_rss_mb"] / base["peak_rss_mb"]
                for r in results
                if "peak_rss_mb" in r
            },
            seconds_per_step_ratio_to_baseline={
                f"{r['kind']} {r['batch_size']}": r["seconds_per_step"] / base["seconds_per_step"]
                for r in results
                if "seconds_per_step" in r
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
