"""Peer: N timed training steps of sentence-transformers' CosineSimilarityLoss on fixed, ordered batches.

Usage: st_train_steps.py --train sts-train.csv --model DIR [--steps 50] [--batch-size 16]
       [--warmup-steps 5] [--seed 0] [--weight-decay 0.01] [--threads 2]

The training of `st_sts_finetune.py`'s plain PyTorch loop (the one it runs
when `accelerate`, which the Hugging Face Trainer requires, is absent):
CosineSimilarityLoss (MSE of the cosine) on labels score / 5, AdamW (lr
2e-5, betas 0.9/0.999, eps 1e-8, no weight decay on biases and LayerNorm),
`get_linear_schedule_with_warmup` with ceil(10 %) warmup steps, gradient
norm clipped at 1.0, dropout on (`model.train()`). Unlike that script the
batches are not shuffled: batch i is pairs 16 i .. 16 i + 15 of the file,
the batches `train_steps.py` trains ours on. The weight decay defaults to
0.01, the library's (sentence-transformers' legacy `fit` default).

Each step is timed from the tokenisation of its batch (`model.preprocess`,
padded to the batch's longest text in each column, as the Trainer's
collator does) to `optimizer.zero_grad()`. Reported: every step's seconds
and each batch's padded widths `[width of sentence1, width of sentence2]`
(the caller counts the FLOPs with its own model), the timed window (the
steps after `--warmup-steps`), and the peak RSS (`VmHWM`).
"""

import argparse
import math
import statistics
import time

import peer_common
from st_sts_finetune import BATCH_SIZE
from st_sts_finetune import LEARNING_RATE
from st_sts_finetune import WARMUP_FRACTION
from st_sts_finetune import loop_step
from st_sts_finetune import make_loss


def optimizer_groups(model, weight_decay):
    """AdamW parameter groups: decay on weights, none on biases and LayerNorm (as `st_sts_finetune.py`)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        lowered = name.lower()
        plain = "bias" in lowered or "layernorm" in lowered or "layer_norm" in lowered
        (no_decay if plain else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train_steps(model, a, b, labels, steps, batch_size, weight_decay, seed, monitor, warmup):
    """Runs `steps` ordered batches; returns `(widths, bounds)`: padded widths and `(start, end)` per step.

    `monitor` (a `CpuMonitor`) measures the steps after the first `warmup`.
    """
    import torch
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(optimizer_groups(model, weight_decay), lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(WARMUP_FRACTION * steps), steps)
    loss_fn = make_loss("cosine", model)
    model.train()
    widths, bounds = [], []
    for step in range(steps):
        rows = slice(step * batch_size, (step + 1) * batch_size)
        if step == warmup:
            monitor.__enter__()
        start = time.perf_counter()
        features = loop_step(model, loss_fn, optimizer, scheduler, a[rows], b[rows], labels[rows])
        end = time.perf_counter()
        bounds.append((start, end))
        widths.append([int(f["input_ids"].shape[1]) for f in features])
    monitor.__exit__(None, None, None)
    model.eval()
    return widths, bounds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="STS-B sts-train.csv")
    parser.add_argument("--model", default=None, help="sentence-transformers folder")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--warmup-steps", type=int, default=5, help="first steps left out of the timed window")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=peer_common.TORCH_THREADS, help="torch intra-op threads")
    args = parser.parse_args()
    if not 0 <= args.warmup_steps < args.steps:
        parser.error("--warmup-steps must be in [0, --steps)")

    peer_common.setup_torch(args.threads)
    a, b, scores = peer_common.read_sts(args.train, args.steps * args.batch_size)
    if len(a) < args.steps * args.batch_size:
        parser.error(f"{args.train} holds {len(a)} pairs, fewer than {args.steps} x {args.batch_size}")
    labels = [s / 5.0 for s in scores]
    model = peer_common.load_model(args.model)
    monitor = peer_common.CpuMonitor()
    widths, bounds = train_steps(
        model, a, b, labels, args.steps, args.batch_size, args.weight_decay, args.seed, monitor, args.warmup_steps
    )
    window = args.steps - args.warmup_steps
    window_seconds = bounds[-1][1] - bounds[args.warmup_steps][0]
    peer_common.emit(
        peer="sentence-transformers",
        script="st_train_steps",
        mode="torch-loop",
        loss="CosineSimilarityLoss",
        label_scale="score/5",
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=LEARNING_RATE,
        warmup_fraction=WARMUP_FRACTION,
        weight_decay=args.weight_decay,
        max_grad_norm=1.0,
        dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
        max_seq_length=model.max_seq_length,
        timed_steps=[args.warmup_steps + 1, args.steps],
        timed_seconds=window_seconds,
        steps_per_second=window / window_seconds,
        total_seconds=bounds[-1][1] - bounds[0][0],
        median_step_seconds=statistics.median(end - start for start, end in bounds[args.warmup_steps :]),
        step_seconds=[end - start for start, end in bounds],
        widths=widths,
        peak_rss_mb=peer_common.peak_rss_mb(),
        **monitor.report(),
        **peer_common.versions(),
    )


if __name__ == "__main__":
    main()
